"""What a hostile client meets: no request body gets a 5xx (a property over random bodies), text that is not valid
Unicode and sampling values too small for float32 are 400s (a tiny temperature is greedy), a prompt too long in bytes
is refused before it is tokenized while /health stays fast and memory comes back, a body shorter than its
Content-Length is a 408, a full queue is a 429 with Retry-After. Loopback servers only (127.0.0.1)."""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import replace

import httpx
import psutil
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from serve_support import running_server, single_thread, tiny_served  # noqa: F401

from dspark.serve.app import create_app
from dspark.serve.prompts import max_token_bytes
from dspark.serve.scheduler import QueueFullError
from dspark.serve.server import BackgroundServer
from dspark.serve.settings import ServeSettings


@pytest.fixture(scope="module")
def url():
    with running_server(max_model_len=48, max_request_bytes=256 * 1024, request_timeout=0.5) as base:
        yield base


def post(url: str, path: str, body: bytes | dict, timeout: float = 60) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{url}{path}", content=content, headers={"content-type": "application/json"}, timeout=timeout)


def assert_error(response: httpx.Response, status: int, code: str, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code, error
    if param is not None:
        assert error["param"] == param
    return error


# --- a property over request bodies --------------------------------------------------------------------------------

WEIRD_FLOATS = st.sampled_from([0.0, -0.0, 5e-324, 1e-300, 1e-40, 1e-7, 1e-5, 0.5, 1.0, 2.0, 1e308, -1e-300])
TEXT = st.text(alphabet=st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)),
               max_size=12)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), WEIRD_FLOATS, TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6)
FIELDS = ["prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed",
          "stop", "stream", "stream_options", "n", "presence_penalty", "frequency_penalty", "logit_bias",
          "ignore_eos", "stop_token_ids", "return_token_ids", "model", "echo", "best_of", "logprobs", "user"]
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "wizard"]),
                                           "content": st.one_of(TEXT, VALUES)}), min_size=1, max_size=2)
SMALL_INTS = st.one_of(st.integers(-2, 6), st.integers(-2**70, 2**70))
BODIES = st.fixed_dictionaries(
    {"max_tokens": st.integers(1, 3)},  # keeps the valid requests short
    optional={"prompt": st.one_of(TEXT, st.lists(SMALL_INTS, max_size=3), VALUES), "messages": MESSAGES,
              "temperature": st.one_of(WEIRD_FLOATS, st.floats()), "top_p": st.one_of(WEIRD_FLOATS, st.floats()),
              "top_k": SMALL_INTS, "seed": SMALL_INTS, "n": SMALL_INTS, "stop": st.one_of(TEXT, st.lists(TEXT, max_size=3)),
              "stream": st.booleans(), "presence_penalty": WEIRD_FLOATS, "frequency_penalty": WEIRD_FLOATS,
              "stop_token_ids": st.lists(SMALL_INTS, max_size=2), "logit_bias": VALUES,
              **{name: VALUES for name in ("model", "user", "stream_options", "echo", "best_of", "logprobs")}},
).flatmap(lambda body: st.one_of(st.just(body), st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=4)
                                 .map(lambda extra: {**body, **extra})))


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(body=BODIES, chat=st.booleans())
def test_no_request_body_gets_a_5xx(url, body, chat):
    raw = json.dumps(body, ensure_ascii=True, allow_nan=True).encode()  # NaN / Infinity and \ud800 escapes included
    response = post(url, "/v1/chat/completions" if chat else "/v1/completions", raw)
    assert response.status_code < 500, response.text
    assert "server_error" not in response.text  # a streamed 200 carries no error event either
    if response.status_code != 200:
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}


# --- the cases a hostile client found ------------------------------------------------------------------------------

@pytest.mark.parametrize("path, body, param", [
    ("/v1/completions", b'{"prompt": "a\\ud800b", "max_tokens": 2}', "prompt"),
    ("/v1/completions", b'{"prompt": "ab", "stop": ["x", "\\udfff"], "max_tokens": 2}', "stop[1]"),
    ("/v1/completions", b'{"prompt": "ab", "model": "\\ud83d", "max_tokens": 2}', "model"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi \\udc00"}]}', "messages[0].content"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud800"}]}]}',
     "messages[0].content[0].text"),
    ("/v1/completions", b'{"prompt": "ab", "\\ud800": 1}', None),
])
def test_text_that_is_not_valid_unicode_is_400_naming_the_field(url, path, body, param):
    error = assert_error(post(url, path, body), 400, "invalid_unicode", param)
    assert "not valid Unicode" in error["message"]


def test_a_surrogate_pair_is_one_valid_character(url):
    response = post(url, "/v1/completions", b'{"prompt": "smile \\ud83d\\ude00", "max_tokens": 1}')
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("temperature", [1e-40, 1e-300, 5e-324, 9e-6])
def test_a_temperature_below_the_epsilon_is_greedy(url, temperature, stream):
    body = {"prompt": "abc", "max_tokens": 4, "temperature": temperature, "stream": stream}
    sampled, greedy = post(url, "/v1/completions", body), post(url, "/v1/completions", {**body, "temperature": 0})
    assert sampled.status_code == greedy.status_code == 200, sampled.text
    assert "error" not in sampled.text
    if not stream:
        assert sampled.json()["choices"][0]["text"] == greedy.json()["choices"][0]["text"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("top_p", [1e-300, 5e-324, 9e-6])
def test_a_top_p_below_the_smallest_accepted_is_400_saying_it(url, top_p, stream):
    body = {"prompt": "abc", "max_tokens": 4, "temperature": 1.0, "top_p": top_p, "stream": stream}
    error = assert_error(post(url, "/v1/completions", body), 400, "invalid_parameter", "top_p")
    assert "at least 1e-05" in error["message"]


def test_a_top_k_beyond_the_vocabulary_is_off(url):
    assert post(url, "/v1/completions", {"prompt": "abc", "max_tokens": 2, "top_k": 2**62}).status_code == 200


def test_an_overlong_stop_string_is_400(url):
    assert_error(post(url, "/v1/completions", {"prompt": "a", "stop": "x" * 5000}), 400, "invalid_parameter", "stop")


# --- prompts too long in bytes, /health and memory -----------------------------------------------------------------

class CountingTokenizer:
    """The served tokenizer, counting the texts it is asked to encode."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.inner(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_prompt_whose_bytes_cannot_fit_is_refused_without_tokenizing():
    base = tiny_served()
    spy = CountingTokenizer(base.tokenizer)
    served = replace(base, tokenizer=spy)
    bound = served.context_length * max_token_bytes(spy)
    with running_server(served, max_request_bytes=1024 * 1024) as base_url:
        for path, body in [("/v1/completions", {"prompt": "é" * bound}),
                           ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x" * (bound + 1)}]})]:
            error = assert_error(post(base_url, path, body), 400, "context_length_exceeded")
            assert "bytes of text" in error["message"]
        assert spy.calls == 0
        fits_in_bytes = post(base_url, "/v1/completions", {"prompt": "x" * (served.context_length + 1)})
        assert_error(fits_in_bytes, 400, "context_length_exceeded", "prompt")  # tokenized, then refused by tokens
        assert spy.calls == 1


def _rss() -> int:
    return psutil.Process().memory_info().rss


@pytest.mark.slow
def test_huge_prompts_are_refused_while_health_stays_fast_and_memory_comes_back():
    huge = json.dumps({"prompt": "word " * (1_500_000), "max_tokens": 1}).encode()  # 7.5 MB, under the 8 MB limit
    with running_server() as base_url:
        assert_error(post(base_url, "/v1/completions", huge), 400, "context_length_exceeded")  # warm-up
        start = _rss()
        done, latencies = threading.Event(), []

        def poll_health() -> None:
            with httpx.Client() as http:
                while not done.is_set():
                    began = time.perf_counter()
                    assert http.get(f"{base_url}/health").status_code == 200
                    latencies.append(time.perf_counter() - began)

        poller = threading.Thread(target=poll_health)
        poller.start()
        try:
            for _ in range(6):
                assert_error(post(base_url, "/v1/completions", huge), 400, "context_length_exceeded")
        finally:
            done.set()
            poller.join()
        grown = _rss() - start
    assert latencies and max(latencies) < 2.0, max(latencies)  # generous: the event loop never tokenizes
    assert grown < 64 * 1024 * 1024, f"RSS grew {grown / 2**20:.0f} MiB over 6 huge prompts"


# --- timeouts and the queue ----------------------------------------------------------------------------------------

def _host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def test_a_body_shorter_than_its_content_length_is_408_and_the_connection_closes(url):
    with socket.create_connection(_host_port(url), timeout=30) as sock:  # the server answers after 0.5 s
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"prompt\": ")
        answer = b""
        while chunk := sock.recv(65536):  # ends when the server closes the connection
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert json.loads(body)["error"]["code"] == "request_timeout"
    assert httpx.get(f"{url}/health").status_code == 200


class FullPool:
    def submit(self, job) -> None:
        raise QueueFullError("3 requests are already waiting (--max-queue 3)")

    def close(self) -> None:
        pass


def test_a_full_queue_is_429_with_retry_after():
    app = create_app(tiny_served(), ServeSettings(port=0, retry_after=7))
    with BackgroundServer(app) as base_url:
        real, app.state.pool = app.state.pool, FullPool()
        try:
            response = post(base_url, "/v1/completions", {"prompt": "a", "max_tokens": 1})
        finally:
            app.state.pool = real
    assert_error(response, 429, "queue_full")
    assert response.headers["retry-after"] == "7"
