"""Concurrency: 200 concurrent requests all complete; a client that disconnects mid-stream (or while queued)
frees its engine slot, and the next request is served."""
from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from serve_support import tiny_served, running_server, scrape, single_thread, value  # noqa: F401

from dspark.testbed import successor_pair as tiny_successor
from dspark.serve.model_source import ServedModel, served_model

REQUESTS = 200


def max_tokens(i: int) -> int:
    """Mostly tiny requests (the point is the HTTP side), every tenth long enough to draft."""
    return 6 if i % 10 == 0 else 1 + i % 2


async def one_request(http: httpx.AsyncClient, i: int) -> tuple[int, int, str | None]:
    """(status, completion tokens, finish reason) of request i; odd ones stream with include_usage."""
    body = {"model": tiny_served().name, "prompt": f"{i % 10} ", "max_tokens": max_tokens(i), "temperature": 0}
    if i % 2 == 0:
        response = await http.post("/v1/completions", json=body)
        data = response.json()
        return response.status_code, data["usage"]["completion_tokens"], data["choices"][0]["finish_reason"]
    body.update(stream=True, stream_options={"include_usage": True})
    reason, tokens = None, -1
    async with http.stream("POST", "/v1/completions", json=body) as response:
        lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        chunk = json.loads(line[len("data: "):])
        if chunk["choices"] and chunk["choices"][0]["finish_reason"]:
            reason = chunk["choices"][0]["finish_reason"]
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    return response.status_code, tokens, reason


async def load(url: str) -> list[tuple[int, int, str | None]]:
    limits = httpx.Limits(max_connections=REQUESTS, max_keepalive_connections=REQUESTS)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:
        return await asyncio.gather(*(one_request(http, i) for i in range(REQUESTS)))


def wait_for(condition, url: str, timeout: float = 30.0) -> dict:
    """Poll /metrics until `condition(samples)` holds (the assertion is on the values, not on the timing)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(url)
        if condition(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(0.05)


@pytest.mark.slow
def test_two_hundred_concurrent_requests_all_complete():
    with running_server(max_concurrency=4) as url:
        results = asyncio.run(load(url))
        samples = scrape(url)
    assert [status for status, _, _ in results] == [200] * REQUESTS
    assert [tokens for _, tokens, _ in results] == [max_tokens(i) for i in range(REQUESTS)]
    assert {reason for _, _, reason in results} == {"length"}
    assert value(samples, "dspark:request_success_total", finished_reason="length") == REQUESTS
    assert value(samples, "dspark:generation_tokens_total") == sum(max_tokens(i) for i in range(REQUESTS))
    assert value(samples, "dspark:num_requests_waiting") == 0
    assert value(samples, "dspark:num_requests_running") == 0


def slow_tiny_model(seconds_per_forward: float) -> ServedModel:
    """A fresh tiny pair whose target forward sleeps, so a long generation surely outlasts the test's steps (the
    hook sits on the embedding, which the engine runs once per target forward)."""
    hf_model, tokenizer, draft = tiny_successor.load()
    hf_model.get_input_embeddings().register_forward_pre_hook(lambda module, args: time.sleep(seconds_per_forward))
    return served_model(hf_model, tokenizer, draft, "slow")


@pytest.mark.slow
def test_a_client_that_disconnects_frees_its_slot():
    # 2000 tokens need >= 400 target forwards (<= 5 tokens per round): >= 4 s, far longer than the steps below
    endless = {"prompt": "Go", "max_tokens": 2000, "temperature": 0, "ignore_eos": True, "stream": True}
    with running_server(slow_tiny_model(0.01), max_concurrency=1) as url:
        with httpx.stream("POST", f"{url}/v1/completions", json=endless, timeout=60) as running:
            lines = running.iter_lines()  # keep it: closing the iterator would close the connection
            assert next(lines).startswith("data: ")  # generating now
            queued_body = {**endless, "prompt": "Queued"}
            with httpx.stream("POST", f"{url}/v1/completions", json=queued_body, timeout=60) as queued:
                assert queued.status_code == 200
                waiting = wait_for(lambda s: value(s, "dspark:num_requests_waiting") == 1, url)
                assert value(waiting, "dspark:num_requests_waiting") == 1
            # both clients are gone now: the queued job is skipped, the running one stops between tokens
        samples = wait_for(lambda s: value(s, "dspark:request_success_total", finished_reason="abort") == 2
                           and value(s, "dspark:num_requests_running") == 0, url)
        assert value(samples, "dspark:request_success_total", finished_reason="abort") == 2
        assert value(samples, "dspark:num_requests_running") == 0
        assert value(samples, "dspark:num_requests_waiting") == 0
        assert value(samples, "dspark:prompt_tokens_total") == len("Go")  # the queued request never ran
        assert value(samples, "dspark:generation_tokens_total") < 2000  # the first stopped early
        after = httpx.post(f"{url}/v1/completions", json={"prompt": "Hi", "max_tokens": 3, "temperature": 0},
                           timeout=60)
        assert after.status_code == 200 and after.json()["usage"]["completion_tokens"] == 3
