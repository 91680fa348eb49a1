"""`dspark serve --algorithm1`: the paper's Algorithm 1 schedules every block, on step-cost tables measured once at
startup over batch sizes 1, 2, … Scheduling changes the work, never the output: greedy text equals decoding each
request alone."""
from __future__ import annotations

import pytest
from test_serve_batched import decoded_alone
from serve_support import client, tiny_served

from dspark.serve.app import create_app, start_scheduler
from dspark.serve.metrics import ServerMetrics
from dspark.serve.model_source import ServeSetupError, served_model
from dspark.serve.scheduler import BatchScheduler
from dspark.serve.server import BackgroundServer
from dspark.serve.settings import ServeSettings
from dspark.testbed.random_pair import tiny_target
from dspark.testbed.successor_pair import build_tokenizer

PROMPTS = [("Hello", 30), ("abc 0", 20), ("The quick", 25)]


def _greedy_texts_match_decoding_alone(url: str, served) -> None:
    api = client(url)
    for prompt, max_tokens in PROMPTS:
        text = api.completions.create(model=served.name, prompt=prompt, max_tokens=max_tokens,
                                      temperature=0).choices[0].text
        assert text == served.tokenizer.decode(decoded_alone(prompt, max_tokens).tokens, skip_special_tokens=True), prompt


@pytest.mark.slow
def test_algorithm1_on_the_batched_scheduler_measures_a_table_per_batch_size_and_keeps_greedy_text():
    served = tiny_served()
    app = create_app(served, ServeSettings(port=0, max_concurrency=2, algorithm1=True))
    with BackgroundServer(app) as url:
        scheduler = app.state.pool
        assert isinstance(scheduler, BatchScheduler)
        assert scheduler.scheduling.rule == "algorithm1"
        tables = scheduler.scheduling.cost
        assert sorted(tables) == [1, 2]  # batch sizes up to --max-concurrency
        assert all(t.widths == list(range(1, served.num_spec_tokens + 2)) for t in tables.values())
        assert sorted(scheduler.scheduling.plain) == [1, 2]  # and plain decoding's step rate at each size
        _greedy_texts_match_decoding_alone(url, served)


def test_algorithm1_excludes_the_threshold_and_needs_a_confidence_head():
    with pytest.raises(ServeSetupError, match="choose one"):
        ServeSettings(algorithm1=True, confidence_threshold=0.3)
    no_draft = served_model(tiny_target("deepseek_v3", vocab_size=260, num_layers=2), build_tokenizer(), None, "mla")
    with pytest.raises(ServeSetupError, match="confidence head"):
        start_scheduler(no_draft, ServeSettings(algorithm1=True), ServerMetrics("mla", 0))


def test_algorithm1_on_the_batched_path_also_needs_a_confidence_head():
    from dspark.serve.app import start_scheduler
    from dspark.serve.metrics import ServerMetrics

    no_draft = served_model(tiny_target("qwen3", vocab_size=260, num_layers=2), build_tokenizer(), None, "q")
    with pytest.raises(ServeSetupError, match="confidence head"):
        start_scheduler(no_draft, ServeSettings(algorithm1=True), ServerMetrics("q", 0))
