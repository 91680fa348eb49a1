"""Regeneration through an OpenAI-compatible server (`dspark train regenerate --server`): a real `dspark serve` on
loopback gives the in-process greedy examples (single- and multi-turn, its own token ids or the local tokenizer's);
a server stopped mid-run and restarted loses nothing; 429 / 5xx / timeouts / dropped connections are retried with
backoff (Retry-After honoured) and a request that keeps failing is counted failed and asked again on the next run;
an unreachable server, a wrong model and a bad key are one clear error each, with nothing written."""
from __future__ import annotations

import email.utils
import functools
import json
import logging
import random
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from serve_support import single_thread, tiny_served  # noqa: F401

from dspark.serve.app import create_app
from dspark.serve.server import BackgroundServer
from dspark.serve.settings import ServeSettings
from dspark.testbed import successor_pair
from dspark.train.data import Example, Prompt, read_examples
from dspark.train.regenerate import regenerate
from dspark.train.regenerate_server import Answer, Sampling, build_example, regenerate_via_server
from dspark.train.server_client import RetryPolicy, ServerError, retry_after

NEW_TOKENS = 12
PROMPTS = [
    Prompt("plain", text="abc"),
    Prompt("plain-eos", text="hello }"),  # the target answers '~' and its EOS
    Prompt("chat", messages=(("user", "hi"),)),
    Prompt("multi", messages=(("system", "be brief"), ("user", "one"), ("assistant", "the dataset's answer"),
                              ("user", "two"), ("user", "three"))),
]
QUICK_RETRIES = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.05, timeout=60)


@contextmanager
def dspark_serve(port: int = 0, wrap=None, **settings) -> Iterator[BackgroundServer]:
    """A real `dspark serve` of the tiny pair on 127.0.0.1 (`wrap`: an ASGI wrapper around its app)."""
    app = create_app(tiny_served(), ServeSettings(port=0, **settings))
    server = BackgroundServer(app if wrap is None else wrap(app), port=port)
    with server:
        yield server


def examples(path: Path) -> dict[str, Example]:
    found = read_examples(path)
    assert len({e.id for e in found}) == len(found), "an id is written twice"
    return {e.id: e for e in found}


@functools.lru_cache(maxsize=None)
def in_process_pair():
    return successor_pair.load()


def in_process(prompt: Prompt, tmp_path: Path) -> Example:
    model, tok, _ = in_process_pair()
    out = tmp_path / f"in-process-{prompt.id}-{len(prompt.messages)}.jsonl"
    counts = regenerate(model, tok, [prompt], out, max_new_tokens=NEW_TOKENS, progress=False)
    assert counts.success == 1
    return read_examples(out)[0]


def in_process_turn_by_turn(tmp_path: Path) -> Example:
    """The 'multi' prompt regenerated in process one turn at a time: each answer replaces the dataset's and carries
    the loss in the final example."""
    _, tok, _ = in_process_pair()
    history: list[tuple[str, str]] = [("system", "be brief"), ("user", "one")]
    answered = []
    for next_user in ("two", "three", None):
        example = in_process(Prompt("multi", messages=tuple(history)), tmp_path)
        answered.append(example)
        reply = [t for t, m in zip(example.input_ids, example.loss_mask) if m]
        if next_user is not None:
            history += [("assistant", tok.decode(reply, skip_special_tokens=True)), ("user", next_user)]
    final = answered[-1]
    mask = list(final.loss_mask)
    for earlier in answered[:-1]:
        assert final.input_ids[: len(earlier.input_ids)] == earlier.input_ids
        start = earlier.loss_mask.index(1)
        mask[start: len(earlier.input_ids)] = [1] * (len(earlier.input_ids) - start)
    return Example("multi", final.input_ids, tuple(mask))


def without_token_ids(url: str) -> httpx.MockTransport:
    """A transport in front of the real server that drops the token ids from its answers (as SGLang sends none)."""
    async def forward(request: httpx.Request) -> httpx.Response:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            answer = await http.request(request.method, request.url.path, content=request.content,
                                        headers={"content-type": "application/json"})
        data = answer.json()
        data.pop("prompt_token_ids", None)
        for choice in data.get("choices", []) if isinstance(data, dict) else []:
            choice.pop("token_ids", None)
            choice.pop("prompt_token_ids", None)
        return httpx.Response(answer.status_code, json=data)

    return httpx.MockTransport(forward)


@pytest.mark.slow
def test_greedy_through_dspark_serve_equals_in_process_greedy_single_and_multi_turn(tmp_path, caplog):
    expected = {p.id: in_process(p, tmp_path) for p in PROMPTS if p.id != "multi"}
    expected["multi"] = in_process_turn_by_turn(tmp_path)
    assert expected["plain-eos"].input_ids[-1] == successor_pair.EOS_ID  # the EOS is kept, as in process
    with dspark_serve() as server:
        counts = regenerate_via_server(server.url, PROMPTS, tmp_path / "served.jsonl", concurrency=3,
                                       sampling=Sampling(max_new_tokens=NEW_TOKENS), progress=False)
        with caplog.at_level(logging.WARNING, "dspark.train.regenerate_server"):
            local = regenerate_via_server(server.url, PROMPTS, tmp_path / "local.jsonl", concurrency=3,
                                          sampling=Sampling(max_new_tokens=NEW_TOKENS),
                                          tokenizer=successor_pair.build_tokenizer(), progress=False,
                                          transport=without_token_ids(server.url))
        with pytest.raises(ServerError, match="sends no token ids.*--tokenizer"):
            regenerate_via_server(server.url, PROMPTS, tmp_path / "none.jsonl", progress=False,
                                  transport=without_token_ids(server.url))
    assert (counts.success, counts.skipped, counts.failed) == (len(PROMPTS), 0, 0)
    assert examples(tmp_path / "served.jsonl") == expected
    assert (local.success, local.failed) == (len(PROMPTS), 0)
    assert examples(tmp_path / "local.jsonl") == expected  # the tiny tokenizer round-trips the answers exactly
    assert sum("sends no token ids" in r.getMessage() for r in caplog.records) == 1
    assert not (tmp_path / "none.jsonl").exists() or not (tmp_path / "none.jsonl").read_text()


def stop_after(generations: int, holder: dict):
    """An ASGI wrapper: the server starts shutting down at its `generations`-th generation request (which it still
    answers); later ones get a 503 until the socket closes."""
    seen = 0

    def wrap(app):
        async def wrapped(scope, receive, send):
            nonlocal seen
            if scope["type"] == "http" and scope["path"].endswith("completions"):
                seen += 1
                if seen == generations:
                    holder["server"]._server.should_exit = True
                elif seen > generations:
                    await send({"type": "http.response.start", "status": 503, "headers": []})
                    await send({"type": "http.response.body", "body": b"shutting down"})
                    return
            await app(scope, receive, send)
        return wrapped
    return wrap


@pytest.mark.slow
def test_a_server_stopped_mid_run_and_restarted_loses_nothing(tmp_path):
    prompts = PROMPTS + [Prompt(f"more-{i}", text=f"{chr(97 + i)} ") for i in range(6)]
    sampling = Sampling(max_new_tokens=NEW_TOKENS)
    with dspark_serve() as server:
        clean = regenerate_via_server(server.url, prompts, tmp_path / "clean.jsonl", concurrency=2,
                                      sampling=sampling, progress=False)
    assert (clean.success, clean.failed) == (len(prompts), 0)

    holder: dict = {}
    out = tmp_path / "stopped.jsonl"
    with dspark_serve(wrap=stop_after(4, holder)) as server:
        holder["server"] = server
        port = int(server.url.rsplit(":", 1)[1])
        first = regenerate_via_server(server.url, prompts, out, concurrency=2, sampling=sampling, retry=QUICK_RETRIES,
                                      progress=False)
    assert first.failed > 0 and first.success + first.skipped + first.failed == len(prompts)
    assert len(examples(out)) == first.success
    with dspark_serve(port=port) as server:  # restarted on the same address
        second = regenerate_via_server(server.url, prompts, out, concurrency=2, sampling=sampling, progress=False)
        assert (second.success, second.skipped, second.failed) == (first.failed, first.success, 0)
        assert examples(out) == examples(tmp_path / "clean.jsonl")

        raw = out.read_bytes()  # a kill mid-write: the last line half written
        cut = raw[: raw.rstrip(b"\n").rfind(b"\n") + 1 + 20]
        out.write_bytes(cut)
        third = regenerate_via_server(server.url, prompts, out, concurrency=2, sampling=sampling, progress=False)
    assert (third.success, third.skipped, third.failed) == (1, len(prompts) - 1, 0)
    assert examples(out) == examples(tmp_path / "clean.jsonl")


class FakeServer:
    """An OpenAI-compatible server in a MockTransport: each prompt text fails as its script says (an HTTP status, or
    an exception raised as the transport's), then answers with token ids; `always_failing` texts never answer."""

    def __init__(self, scripts: dict[str, list], always_failing: set[str] = frozenset()):
        self.scripts = {text: list(script) for text, script in scripts.items()}
        self.always_failing = set(always_failing)
        self.requests: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "fake", "object": "model"}]})
        body = json.loads(request.content)
        self.requests.append(body)
        text = body.get("prompt") or body["messages"][-1]["content"]
        if text in self.always_failing:
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        script = self.scripts.get(text, [])
        if script:
            step = script.pop(0)
            if isinstance(step, tuple):
                status, headers = step
                return httpx.Response(status, headers=headers, json={"error": {"message": f"HTTP {status}"}})
            if isinstance(step, int):
                return httpx.Response(step, json={"error": {"message": "nope", "code": "context_length_exceeded"
                                                            if step == 400 else None}})
            raise step("simulated", request=request)
        ids = [ord(c) for c in text]
        if "messages" in body:  # vLLM's layout: the prompt's ids on the response, the answer's on the choice
            choice = {"index": 0, "message": {"role": "assistant", "content": text.upper()},
                      "finish_reason": "length", "token_ids": [1, 2, 3]}
            return httpx.Response(200, json={"id": "x", "object": "chat.completion", "choices": [choice],
                                             "prompt_token_ids": ids})
        choice = {"index": 0, "text": text.upper(), "finish_reason": "length", "prompt_token_ids": ids,
                  "token_ids": [1, 2, 3]}
        return httpx.Response(200, json={"id": "x", "object": "text_completion", "choices": [choice]})


def run_fake(fake: FakeServer, prompts, out: Path, policy: RetryPolicy, delays: list[float], **kwargs):
    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    return regenerate_via_server("http://127.0.0.1:9/v1", prompts, out, transport=httpx.MockTransport(fake),
                                 retry=policy, sleep=sleep, progress=False, concurrency=1, **kwargs)


def test_429_5xx_timeouts_and_resets_are_retried_with_backoff_and_retry_after(tmp_path):
    policy = RetryPolicy(attempts=5, base_delay=1.0, max_delay=8.0)
    fake = FakeServer({
        "rate": [(429, {"Retry-After": "7"}), (429, {"Retry-After": "1000"})],
        "errors": [500, 503, 502],
        "slow": [httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ConnectError],
        "long": [400],
    }, always_failing={"down"})
    prompts = [Prompt(text, text=text) for text in ("rate", "errors", "slow", "long", "down", "fine")]
    delays: list[float] = []
    counts = run_fake(fake, prompts, tmp_path / "out.jsonl", policy, delays)
    assert (counts.success, counts.skipped, counts.failed) == (4, 1, 1)  # "long" is too long: skipped
    assert delays[:2] == [7.0, 8.0]  # Retry-After honoured, capped at max_delay
    backoff = delays[2:5] + delays[5:8] + delays[8:]  # errors, slow, then down's four waits
    steps = [1, 2, 4] * 2 + [1, 2, 4, 8]
    assert len(backoff) == len(steps) and all(s / 2 <= d <= s for d, s in zip(backoff, steps))
    assert sum(body["prompt"] == "down" for body in fake.requests) == policy.attempts
    written = examples(tmp_path / "out.jsonl")
    assert sorted(written) == ["errors", "fine", "rate", "slow"]
    assert written["rate"].input_ids == (*b"rate", 1, 2, 3) and written["rate"].loss_mask == (0,) * 4 + (1,) * 3

    fake.always_failing.clear()  # the server recovered: the failed request is asked again, the rest skipped
    fake.scripts["long"] = [400]
    again = run_fake(fake, prompts, tmp_path / "out.jsonl", policy, delays)
    assert (again.success, again.skipped, again.failed) == (1, 5, 0)
    assert sorted(examples(tmp_path / "out.jsonl")) == ["down", "errors", "fine", "rate", "slow"]


def test_retry_after_reads_seconds_and_http_dates():
    def answer(value: str) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": value})

    assert retry_after(answer("12")) == 12.0 and retry_after(httpx.Response(503)) is None
    assert retry_after(answer("soon")) is None
    in_an_hour = email.utils.formatdate(time.time() + 3600, usegmt=True)
    assert 3500 < retry_after(answer(in_an_hour)) <= 3600
    policy = RetryPolicy(base_delay=2.0, max_delay=5.0)
    rng = random.Random(0)
    assert all(1.0 <= policy.delay(0, None, rng) <= 2.0 for _ in range(50))
    assert all(2.5 <= policy.delay(6, None, rng) <= 5.0 for _ in range(50))


def test_requests_carry_the_settings_a_stable_per_prompt_seed_and_the_targets_own_earlier_answers(tmp_path):
    fake = FakeServer({})
    chat = Prompt("c", messages=(("user", "one"), ("assistant", "dataset"), ("user", "two")))
    prompts = [Prompt("a", text="x"), Prompt("b", text="y"), chat]
    sampling = Sampling(max_new_tokens=9, temperature=0.7, top_p=0.9, seed=5)
    run_fake(fake, prompts, tmp_path / "one.jsonl", RetryPolicy(), [], sampling=sampling)
    first = list(fake.requests)
    fake.requests.clear()
    run_fake(fake, prompts, tmp_path / "two.jsonl", RetryPolicy(), [], sampling=sampling)
    assert [r["seed"] for r in fake.requests] == [r["seed"] for r in first]  # stable across runs
    assert len({r["seed"] for r in first}) == 4  # per prompt and per turn
    assert all((r["max_tokens"], r["temperature"], r["top_p"], r["return_token_ids"], r["model"])
               == (9, 0.7, 0.9, True, "fake") for r in first)
    turns = [r["messages"] for r in first if "messages" in r]
    assert turns == [[{"role": "user", "content": "one"}],
                     [{"role": "user", "content": "one"}, {"role": "assistant", "content": "ONE"},
                      {"role": "user", "content": "two"}]]


def test_an_earlier_answer_the_final_prompt_does_not_repeat_carries_no_loss():
    first = Answer((1, 2), (3, 4))
    kept = build_example("k", [first, Answer((1, 2, 3, 4, 5), (6,))])[0]
    assert kept.loss_mask == (0, 0, 1, 1, 0, 1)
    rewritten, unmasked = build_example("r", [first, Answer((1, 2, 9, 5), (6,))])
    assert rewritten.loss_mask == (0, 0, 0, 0, 1) and unmasked == 1


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_unreachable_server_wrong_model_and_bad_key_are_one_clear_error_each(tmp_path, capsys):
    from dspark.cli import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "a", "prompt": "abc"}) + "\n")
    out = tmp_path / "sub" / "out.jsonl"

    def fails(*flags: str) -> str:
        code = main(["train", "regenerate", "--prompts", str(prompts), "--out", str(out), *flags])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("dspark train regenerate: error: ")
        assert not out.parent.exists()  # nothing written
        return err[0]

    assert "cannot reach a server at http://127.0.0.1:" in fails("--server", f"http://127.0.0.1:{free_loopback_port()}")
    with dspark_serve(api_key="s3cret") as server:
        key = ("--api-key", "s3cret")
        said = fails("--server", server.url, *key, "--model", "gpt-4")
        assert f"does not serve the model `gpt-4`; it serves: {successor_pair.MODEL_NAME}" in said
        assert "refused the API key (HTTP 401" in fails("--server", server.url, "--api-key", "wrong")
        assert "it needs --api-key" in fails("--server", server.url)
        assert main(["train", "regenerate", "--prompts", str(prompts), "--out", str(out), "--server",
                     f"{server.url}/v1", *key, "--max-new-tokens", "3", "--concurrency", "2"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"total": 1, "success": 1, "skipped": 0,
                                                                           "failed": 0}
    assert [e.id for e in read_examples(out)] == ["a"]


@pytest.mark.slow
def test_dspark_serve_returns_token_ids_only_when_asked():
    tokenizer = successor_pair.build_tokenizer()
    with dspark_serve() as server, httpx.Client(base_url=server.url, timeout=60) as http:
        ask = {"model": successor_pair.MODEL_NAME, "max_tokens": 4, "temperature": 0}
        plain = http.post("/v1/completions", json={**ask, "prompt": "hello }", "return_token_ids": True}).json()
        chat = http.post("/v1/chat/completions", json={**ask, "messages": [{"role": "user", "content": "hi"}],
                                                       "return_token_ids": True}).json()
        bare = http.post("/v1/completions", json={**ask, "prompt": "abc"}).json()
        streamed = http.post("/v1/completions", json={**ask, "prompt": "abc", "stream": True,
                                                       "return_token_ids": True})
    assert plain["choices"][0]["prompt_token_ids"] == list(b"hello }")
    assert plain["choices"][0]["token_ids"] == [ord("~"), successor_pair.EOS_ID]  # the EOS that ended it included
    template = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                             tokenize=False)
    assert chat["prompt_token_ids"] == tokenizer(template, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(chat["choices"][0]["token_ids"]) == chat["choices"][0]["message"]["content"]
    assert "token_ids" not in bare["choices"][0] and "prompt_token_ids" not in bare["choices"][0]
    assert streamed.status_code == 400 and "return_token_ids with stream" in streamed.json()["error"]["message"]
