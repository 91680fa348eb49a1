"""Run the app under uvicorn: in the foreground (`dspark serve`) or on a background thread (tests, benchmarks).

The listening socket is bound here before uvicorn starts, so port 0 gets a free ephemeral port whose number is
known (and printed) before the first request. Shutting down drains (`drain`): SIGTERM / SIGINT, or leaving a
`BackgroundServer`, let in-flight requests finish for up to the drain timeout, then cut them through the app's
scheduler (`app.state.pool.close()`). No routes or models here.
"""
from __future__ import annotations

import socket
import threading
import time
from typing import Callable

import uvicorn
from fastapi import FastAPI

from dspark.serve.drain import DEFAULT_DRAIN_TIMEOUT, DrainGate, DrainingServer, DrainState
from dspark.serve.model_source import ServeSetupError


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free port)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise ServeSetupError(f"--host {host!r} does not resolve: {exc}") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServeSetupError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port or stop the "
                              f"process using it") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _cut_in_flight(app: FastAPI) -> None:
    """End the requests still running or queued (they fail with a 503 'shutting down' error)."""
    pool = getattr(app.state, "pool", None)
    if pool is not None:
        pool.close()


def _uvicorn(app: FastAPI, log_level: str, drain_timeout: float, idle_timeout: float = 5.0) -> DrainingServer:
    state = DrainState()
    config = uvicorn.Config(DrainGate(app, state), log_level=log_level, access_log=log_level == "debug",
                            lifespan="on", timeout_keep_alive=idle_timeout)
    return DrainingServer(config, state, drain_timeout, on_cut=lambda: _cut_in_flight(app))


def serve_forever(app: FastAPI, host: str, port: int, log_level: str = "info",
                  on_ready: Callable[[str], None] = lambda url: None,
                  drain_timeout: float = DEFAULT_DRAIN_TIMEOUT, idle_timeout: float = 5.0) -> int:
    """Serve until SIGTERM / SIGINT, then drain (see `drain`); `on_ready(url)` runs once the socket is bound;
    `idle_timeout`: seconds an idle keep-alive connection stays open. Returns the exit status: 0 after a drain, 130
    when a second signal cut it short."""
    server = _uvicorn(app, log_level, drain_timeout, idle_timeout)
    sock = bind_socket(host, port)
    on_ready(base_url(sock))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return server.exit_status


class BackgroundServer:
    """`with BackgroundServer(app) as url:` serves `app` on a loopback port from a thread, then shuts it down."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning",
                 start_timeout: float = 60.0, drain_timeout: float = 5.0):
        self.app, self.host, self.port, self.log_level, self.start_timeout = app, host, port, log_level, start_timeout
        self.drain_timeout = drain_timeout
        self.url = ""
        self._server: DrainingServer | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    def __enter__(self) -> str:
        self._sock = bind_socket(self.host, self.port)
        self.url = base_url(self._sock)
        self._server = _uvicorn(self.app, self.log_level, self.drain_timeout)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="dspark-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            self.__exit__(None, None, None)
            raise RuntimeError("the server did not start; see the log above")
        return self.url

    def __exit__(self, *exc) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self.start_timeout + self.drain_timeout)
        if self._sock is not None:
            self._sock.close()
