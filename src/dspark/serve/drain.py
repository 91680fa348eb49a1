"""Graceful shutdown: SIGTERM / SIGINT drain the server instead of cutting it.

The first signal (or `should_exit` from another thread) starts the drain: every request that arrives from then on
is answered 503 with an OpenAI error body and `Retry-After` (`DrainGate`), the listening socket closes (new
connections are refused), idle keep-alive connections close, and the requests in flight may finish for up to
`drain_timeout` seconds. Whatever is still running then is cut through the app's `on_cut` (the scheduler's
`close`): a stream ends with a `data: {"error": ...}` event and `data: [DONE]`, a non-streaming request gets a
503 JSON error body. A second signal during the drain cuts at once. Unlike uvicorn's own handling, the signal is
not re-raised after the shutdown: `DrainingServer.exit_status` is 0 after a drain (whether or not it had to cut)
and 130 after a second signal. No routes and no generation here.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import uvicorn

from dspark.serve.errors import APIError, error_body
from dspark.serve.model_source import ServeSetupError

log = logging.getLogger("dspark.serve")

DEFAULT_DRAIN_TIMEOUT = 30.0  # seconds in-flight requests may run on after the first signal
CUT_GRACE = 5.0  # seconds the cut requests get to write their error before their connections are dropped
RETRY_AFTER = "5"  # seconds, on every 503 answered during the drain
FORCED_EXIT_STATUS = 130  # a second signal skipped the drain (128 + SIGINT, as a shell reports Ctrl-C)
SHUTDOWN_CODE = "server_shutting_down"


def check_drain_timeout(seconds: float) -> float:
    """`seconds` if it is a usable --drain-timeout, else a ServeSetupError saying what to give."""
    if not seconds >= 0 or seconds == float("inf"):
        raise ServeSetupError(f"--drain-timeout must be a finite number of seconds >= 0 (0: cut in-flight requests "
                              f"at once), got {seconds}")
    return seconds


class DrainState:
    """Shared between the server and its gate: whether the drain has begun and whether a second signal forced it."""

    def __init__(self) -> None:
        self.draining = False
        self.forced = False


class DrainGate:
    """ASGI middleware: once draining, every new HTTP request is answered 503 (OpenAI error body, `Retry-After`);
    a 503 the app itself answers meanwhile (a cut non-streaming request) gets `Retry-After` too."""

    def __init__(self, app: Any, state: DrainState):
        self.app, self.state = app, state

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.state.draining:
            await _refuse(send)
            return

        async def send_with_retry_after(message: dict) -> None:
            if (message["type"] == "http.response.start" and message["status"] == 503 and self.state.draining
                    and not any(name.lower() == b"retry-after" for name, _ in message.get("headers", ()))):
                message = {**message, "headers": [*message.get("headers", ()), (b"retry-after", RETRY_AFTER.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_retry_after)
        except asyncio.CancelledError:
            if not self.state.draining:
                raise
            # the drain ended this request's task after its grace: its client has had its error (or is gone), and
            # the server is exiting, so the cancellation is the expected end, not an error to log with a traceback


async def _refuse(send: Callable) -> None:
    error = APIError(503, "the server is shutting down and takes no new requests; retry on another replica or "
                          "after it restarts", code=SHUTDOWN_CODE)
    body = json.dumps(error_body(error)).encode()
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", RETRY_AFTER.encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class DrainingServer(uvicorn.Server):
    """uvicorn's server with the drain above in place of its own shutdown; `on_cut` ends the requests still running
    when the drain times out (it runs on a worker thread and may block briefly)."""

    def __init__(self, config: uvicorn.Config, state: DrainState, drain_timeout: float,
                 on_cut: Callable[[], None] = lambda: None):
        super().__init__(config)
        self.state, self.drain_timeout, self.on_cut = state, check_drain_timeout(drain_timeout), on_cut

    @property
    def exit_status(self) -> int:
        return FORCED_EXIT_STATUS if self.state.forced else 0

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Route SIGINT / SIGTERM to `handle_exit` while serving (main thread only); nothing is re-raised after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """First signal: drain (new requests get 503 from now on). A second one: cut what runs and exit."""
        if self.state.draining:
            self.state.forced = self.force_exit = True
        self.state.draining = self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.state.draining = True
        for server in getattr(self, "servers", ()):
            server.close()  # new connections are refused from here on
        for sock in sockets or []:
            sock.close()
        connections = self.server_state.connections
        for connection in list(connections):
            connection.shutdown()  # idle keep-alive connections close; busy ones close after their response
        await asyncio.sleep(0.05)  # let the idle ones go
        log.warning("dspark serve: shutting down: %d open connection(s) may finish for up to %g s (a second signal "
                    "stops at once)", len(connections), self.drain_timeout)
        if not await self._connections_closed(self.drain_timeout, stop_on_force=True):
            reason = "a second signal" if self.state.forced else f"the {self.drain_timeout:g} s drain timeout"
            log.warning("dspark serve: %s: cutting %d open connection(s)", reason, len(connections))
            await asyncio.to_thread(self.on_cut)
            await self._connections_closed(CUT_GRACE, stop_on_force=False)
        for task in list(self.server_state.tasks):
            task.cancel(msg="the server shut down")
        await self.lifespan.shutdown()

    async def _connections_closed(self, timeout: float, stop_on_force: bool) -> bool:
        """Wait (at most `timeout` s; with `stop_on_force`, until a second signal) for every connection to close."""
        deadline = time.monotonic() + timeout
        connections = self.server_state.connections
        while connections and time.monotonic() < deadline and not (stop_on_force and self.state.forced):
            await asyncio.sleep(0.05)
        return not connections
