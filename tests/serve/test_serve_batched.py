"""The scheduler behind the real server: concurrent greedy requests share decode rounds and each returns exactly what
decoding it alone returns (text, finish reason, usage, per-request spec stats); a stop string frees its row; /metrics
adds up over the requests; a seeded sampled request is reproducible whatever else runs; a target the static backend
cannot run is served the same way through the Hugging Face backend."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from test_serve_load import wait_for
from serve_support import client, scrape, single_thread, tiny_served, value  # noqa: F401

from dspark.config import GenerationConfig
from dspark.engine.batch import BatchEngine
from dspark.engine.generate import generate
from dspark.serve import scheduler as scheduler_module
from dspark.serve.app import create_app, start_scheduler
from dspark.serve.metrics import ServerMetrics
from dspark.serve.model_source import served_model
from dspark.serve.scheduler import BatchScheduler
from dspark.serve.server import BackgroundServer
from dspark.serve.settings import ServeSettings
from dspark.serve.spec_stats import SpecTally
from dspark.testbed.random_pair import tiny_target
from dspark.testbed.successor_pair import build_tokenizer
from eager_graphs import EagerReplay

ROWS = 3
REQUESTS = [("first", 20, ()), ("Hello", 40, ()), ("abc 0", 30, ()), ("The quick", 25, ("uv",)), ("mn", 12, ()),
            ("xyz", 33, ())]  # (prompt, max_tokens, stop strings); "Hello" ends at its EOS, "The quick" at "uv"


def decoded_alone(prompt: str, max_tokens: int):
    served = tiny_served()
    ids = served.tokenizer(prompt)["input_ids"]
    config = GenerationConfig(max_new_tokens=max_tokens, eos_token_ids=served.eos_token_ids)
    return generate(served.new_target(), served.draft, ids, config)


@pytest.mark.slow
@pytest.mark.parametrize("overlap", [False, True])  # True: rounds overlapped as on a GPU
def test_concurrent_greedy_requests_share_rounds_and_equal_decoding_each_alone_and_metrics_add_up(overlap):
    served = tiny_served()
    app = create_app(served, ServeSettings(port=0, max_concurrency=ROWS))
    with BackgroundServer(app) as url:
        scheduler = app.state.pool
        assert isinstance(scheduler, BatchScheduler)
        engine, gate, widths = scheduler.engine, threading.Event(), []
        engine.overlap = overlap
        admit, verify = engine.admit, engine.verify

        def gated_admit(*args):  # the first admission waits until every other request is queued
            gate.wait(30)
            return admit(*args)

        engine.admit = gated_admit
        engine.verify = lambda b, t, window: (widths.append(b), verify(b, t, window))[1]
        api = client(url)

        def ask(request):
            prompt, max_tokens, stop = request
            return api.completions.create(model=served.name, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                          stop=list(stop) or None)

        with ThreadPoolExecutor(len(REQUESTS)) as pool:
            first = pool.submit(ask, REQUESTS[0])
            wait_for(lambda s: value(s, "dspark:num_requests_running") == 1, url)
            rest = [pool.submit(ask, request) for request in REQUESTS[1:]]
            wait_for(lambda s: value(s, "dspark:num_requests_waiting") == len(REQUESTS) - 1, url)
            gate.set()
            responses = [first.result(), *(f.result() for f in rest)]
        samples = scrape(url)
        session = engine._session
        assert session.live == 0 and session.queued == 0  # finished, stopped and length rows were all freed
    assert max(widths) == ROWS  # queued requests were decoded side by side
    drafted = accepted = stops = 0
    for (prompt, max_tokens, stop), response in zip(REQUESTS, responses):
        expected = decoded_alone(prompt, max_tokens)
        text = served.tokenizer.decode(expected.tokens, skip_special_tokens=True)
        choice = response.choices[0]
        stops += choice.finish_reason == "stop"
        if stop:
            assert stop[0] in text and choice.text == text[: text.index(stop[0])] and choice.finish_reason == "stop"
            continue
        assert choice.text == text
        assert choice.finish_reason == ("stop" if len(expected.tokens) < max_tokens else "length")
        assert response.usage.completion_tokens == len(expected.tokens)
        tally = SpecTally(4)
        for p, a in zip(expected.stats.proposed_counts, expected.stats.accepted_counts):
            tally.add_round(p, a)
        assert response.metrics["speculative_decoding"] == tally.to_dict()
    assert stops >= 2  # the EOS and the stop string
    for response in responses:
        spec = response.metrics["speculative_decoding"]
        drafted, accepted = drafted + spec["num_draft_tokens"], accepted + spec["num_accepted_draft_tokens"]
    assert value(samples, "dspark:generation_tokens_total") == sum(r.usage.completion_tokens for r in responses)
    assert value(samples, "dspark:prompt_tokens_total") == sum(r.usage.prompt_tokens for r in responses)
    assert value(samples, "dspark:spec_decode_num_draft_tokens_total") == drafted
    assert value(samples, "dspark:spec_decode_num_accepted_tokens_total") == accepted > 20
    assert value(samples, "dspark:request_success_total", finished_reason="stop") == stops
    assert value(samples, "dspark:request_success_total", finished_reason="length") == len(REQUESTS) - stops
    assert value(samples, "dspark:num_requests_running") == value(samples, "dspark:num_requests_waiting") == 0


def test_a_seeded_sampled_request_gives_the_same_text_alone_and_amid_other_traffic():
    served = tiny_served()
    app = create_app(served, ServeSettings(port=0, max_concurrency=ROWS))
    with BackgroundServer(app) as url:
        api = client(url)

        def ask(temperature: float, seed: int | None):
            return api.completions.create(model=served.name, prompt="The", max_tokens=16, temperature=temperature,
                                          seed=seed).choices[0].text

        alone = ask(1.0, 7)
        with ThreadPoolExecutor(4) as pool:
            mixed = [pool.submit(ask, t, s) for t, s in ((0, None), (1.0, 7), (1.0, None), (0, None))]
            texts = [f.result() for f in mixed]
    assert texts[1] == alone
    assert texts[0] == texts[3] == served.tokenizer.decode(decoded_alone("The", 16).tokens, skip_special_tokens=True)


def test_a_deepseek_v3_target_is_served_by_the_same_scheduler_through_the_hf_backend():
    served = served_model(tiny_target("deepseek_v3", vocab_size=260, num_layers=2), build_tokenizer(), None, "mla")
    pool = start_scheduler(served, ServeSettings(max_concurrency=2), ServerMetrics("mla", 0))
    pool.close()
    assert isinstance(pool, BatchScheduler) and type(pool.engine.backend).__name__ == "HFBackend"
    app = create_app(served, ServeSettings(port=0, max_concurrency=2))
    with BackgroundServer(app) as url:
        api = client(url)
        with ThreadPoolExecutor(2) as threads:
            texts = list(threads.map(lambda p: api.completions.create(model="mla", prompt=p, max_tokens=12,
                                                                    temperature=0).choices[0].text, ["Hi", "abc"]))
    for prompt, text in zip(["Hi", "abc"], texts):
        ids = served.tokenizer(prompt)["input_ids"]
        config = GenerationConfig(max_new_tokens=12, eos_token_ids=served.eos_token_ids)
        expected = generate(served.new_target(), None, ids, config).tokens
        assert text == served.tokenizer.decode(expected, skip_special_tokens=True)


@pytest.mark.slow
def test_a_graphed_engine_captures_its_graphs_at_startup_and_serves_the_same_greedy_text(monkeypatch):
    class GraphedEngine(BatchEngine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, pad_to_buckets=True, **kwargs)
            self.graphs = EagerReplay(self.round)

    monkeypatch.setattr(scheduler_module, "BatchEngine", GraphedEngine)
    served = tiny_served()
    app = create_app(served, ServeSettings(port=0, max_concurrency=2))
    with BackgroundServer(app) as url:
        graphs = app.state.pool.engine.graphs.graphs
        captured = len(graphs)
        assert captured > 0 and {key[0] for key in graphs} == {"prefill", "propose", "verify"}
        text = client(url).completions.create(model=served.name, prompt="Hello", max_tokens=20,
                                              temperature=0).choices[0].text
        assert text == served.tokenizer.decode(decoded_alone("Hello", 20).tokens, skip_special_tokens=True)
        assert len(graphs) == captured  # the request needed no capture of its own
