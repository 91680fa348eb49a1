"""Graceful shutdown of a real `dspark serve` process (the testbed pair on 127.0.0.1): SIGTERM drains — in-flight
requests finish within --drain-timeout, later ones are refused — cuts what is left with OpenAI error bodies (a
stream's error event, then [DONE]) and exits 0; a second signal exits at once with 130. Plus the drain in-process
(BackgroundServer) and the flag's validation.

The generations are plain decoding (--max-drafts 0) of up to 2000 tokens with ignore_eos: seconds of work, so a
request is still running when the signal comes; every wait is bounded."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from serve_support import scrape, single_thread, tiny_served, value  # noqa: F401

from dspark.cli import main
from dspark.formats.native import save_draft
from dspark.serve.app import create_app
from dspark.serve.server import BackgroundServer, _uvicorn
from dspark.serve.settings import ServeSettings
from dspark.testbed import successor_pair

SRC = Path(__file__).resolve().parents[2] / "src"
MODEL = "tiny"
WAIT = 60.0  # seconds: the bound on every wait for the server


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[str, str]:
    """The testbed pair saved as a target folder (with its tokenizer) and a draft folder."""
    root = tmp_path_factory.mktemp("serve-shutdown")
    target, tokenizer, draft = successor_pair.load()
    target.save_pretrained(root / "target")
    tokenizer.save_pretrained(root / "target")
    save_draft(draft, root / "draft")
    return str(root / "target"), str(root / "draft")


class ServeProcess:
    """`dspark serve` on 127.0.0.1:<free port> as a subprocess; stderr is collected line by line."""

    def __init__(self, pair: tuple[str, str], *flags: str):
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dspark.cli", "serve", "--target", pair[0], "--draft", pair[1],
             "--served-model-name", MODEL, "--port", "0", "--log-level", "warning", "--threads", "1",
             "--max-drafts", "0", *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.err: list[str] = []
        self._draining = threading.Event()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        line = self.process.stdout.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+) ", line)
        assert found, f"no URL in {line!r}; stderr: {''.join(self.err)}"
        self.url = found.group(1)
        httpx.get(f"{self.url}/health", timeout=WAIT)  # ready once the socket answers

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.err.append(line)
            if "shutting down" in line:
                self._draining.set()

    def signal(self, sig: int) -> None:
        """Send `sig`, then wait until the server says it is draining (its listening socket is closed by then)."""
        self.process.send_signal(sig)
        assert self._draining.wait(WAIT), "".join(self.err)

    def wait(self) -> int:
        """The exit status, once the process has exited without a traceback."""
        code = self.process.wait(WAIT)
        assert "Traceback" not in "".join(self.err), "".join(self.err)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(WAIT)


@pytest.fixture
def serve(pair):
    started: list[ServeProcess] = []

    def start(*flags: str) -> ServeProcess:
        started.append(ServeProcess(pair, *flags))
        return started[-1]

    yield start
    for process in started:
        process.kill()


def stream_lines(http: httpx.Client, url: str, max_tokens: int):
    """A streamed completion's `data:` payloads as a context manager over the response's line iterator."""
    body = {"model": MODEL, "prompt": "a", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    return http.stream("POST", f"{url}/v1/completions", json=body)


def data_lines(lines) -> list[str]:
    return [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]


def assert_refused(url: str) -> None:
    """A new request is refused: no connection, or a 503 with an OpenAI error body and Retry-After."""
    try:
        response = httpx.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": "a", "max_tokens": 2},
                              timeout=WAIT)
    except httpx.TransportError:  # connection refused (or reset while the listener closed)
        return
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "server_shutting_down" and response.headers["retry-after"]


@pytest.mark.slow
def test_sigterm_lets_an_in_flight_stream_finish_refuses_new_requests_and_exits_0(serve):
    server = serve()
    with httpx.Client(timeout=WAIT) as http, stream_lines(http, server.url, 600) as response:
        lines = response.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        server.signal(signal.SIGTERM)
        assert_refused(server.url)
        rest = data_lines(lines)
    chunks = [json.loads(line) for line in data_lines([first]) + rest[:-1]]
    assert rest[-1] == "[DONE]" and all("error" not in chunk for chunk in chunks)
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-1]["usage"]["completion_tokens"] == 600
    assert server.wait() == 0, "".join(server.err)


@pytest.mark.slow
def test_past_the_drain_timeout_a_stream_ends_with_an_error_event_and_a_request_with_a_json_error(serve):
    server = serve("--drain-timeout", "0.2", "--max-concurrency", "1")
    with httpx.Client(timeout=WAIT) as http, stream_lines(http, server.url, 2000) as response:
        lines = response.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        queued: list[httpx.Response] = []
        asker = threading.Thread(target=lambda: queued.append(httpx.post(
            f"{server.url}/v1/completions", json={"model": MODEL, "prompt": "b", "max_tokens": 5}, timeout=WAIT)))
        asker.start()  # waits behind the stream (one row)
        deadline = time.monotonic() + WAIT
        while value(scrape(server.url), "dspark:num_requests_waiting") < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.signal(signal.SIGTERM)
        rest = data_lines(lines)
        asker.join(WAIT)
    assert rest[-1] == "[DONE]" and json.loads(rest[-2])["error"]["code"] == "server_shutting_down"
    assert all("error" not in json.loads(line) for line in rest[:-2])
    assert queued[0].status_code == 503 and queued[0].headers["content-type"] == "application/json"
    assert queued[0].json()["error"]["code"] == "server_shutting_down" and queued[0].headers["retry-after"]
    assert server.wait() == 0, "".join(server.err)


@pytest.mark.slow
def test_a_second_signal_during_the_drain_cuts_at_once_and_exits_130(serve):
    server = serve("--drain-timeout", "600")
    with httpx.Client(timeout=WAIT) as http, stream_lines(http, server.url, 2000) as response:
        lines = response.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        server.signal(signal.SIGTERM)
        server.process.send_signal(signal.SIGINT)
        rest = data_lines(lines)
    assert rest[-1] == "[DONE]" and json.loads(rest[-2])["error"]["code"] == "server_shutting_down"
    assert server.wait() == 130, "".join(server.err)


def test_leaving_a_background_server_cuts_a_running_stream_with_an_error_event_and_done():
    app = create_app(tiny_served(), ServeSettings(port=0, max_drafts=0))
    server = BackgroundServer(app, drain_timeout=0)
    url = server.__enter__()
    try:
        with httpx.Client(timeout=WAIT) as http, http.stream("POST", f"{url}/v1/completions", json={
                "model": successor_pair.MODEL_NAME, "prompt": "a", "max_tokens": 2000, "temperature": 0,
                "ignore_eos": True, "stream": True}) as response:
            lines = response.iter_lines()
            next(line for line in lines if line.startswith("data: "))
            leaving = threading.Thread(target=server.__exit__, args=(None, None, None))
            leaving.start()
            rest = data_lines(lines)
        leaving.join(WAIT)
    finally:
        server.__exit__(None, None, None)
    assert rest[-1] == "[DONE]" and json.loads(rest[-2])["error"] == {
        "message": "the server shut down before this request finished; retry it", "type": "server_error",
        "param": None, "code": "server_shutting_down"}


@pytest.mark.parametrize("seconds", ["-1", "nan", "inf"])
def test_a_bad_drain_timeout_exits_2_with_one_clear_message(capsys, seconds):
    code = main(["serve", "--dry-run", "--json", f"--drain-timeout={seconds}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("dspark serve: error: --drain-timeout must be") and "Traceback" not in err


def test_the_idle_timeout_reaches_uvicorns_keep_alive_setting():
    assert _uvicorn(create_app(tiny_served()), "warning", 1.0, idle_timeout=2.5).config.timeout_keep_alive == 2.5
