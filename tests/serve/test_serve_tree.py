"""`dspark serve --tree-nodes N --tree-beam K`: the batched scheduler verifies a tree of drafts per row every round;
greedy text equals decoding each request alone, sampled requests decode too, and settings or pairs that cannot verify a
tree are refused before the server starts."""
from __future__ import annotations

import pytest
from test_serve_batched import decoded_alone
from serve_support import client, tiny_served

from dspark.engine.tree import TreeShape
from dspark.serve.app import create_app
from dspark.serve.scheduler import BatchScheduler
from dspark.serve.model_source import ServeSetupError, served_model
from dspark.serve.server import BackgroundServer
from dspark.serve.settings import ServeSettings
from dspark.testbed.random_pair import tiny_target
from dspark.testbed.successor_pair import build_tokenizer

PROMPTS = [("Hello", 30), ("abc 0", 20), ("The quick", 25)]


def test_a_tree_serving_scheduler_keeps_greedy_text_equal_to_decoding_alone_and_serves_sampled_requests():
    served = tiny_served()
    app = create_app(served, ServeSettings(port=0, max_concurrency=2, tree_nodes=8, tree_beam=2, tree_max_rows=1))
    with BackgroundServer(app) as url:
        scheduler = app.state.pool
        assert isinstance(scheduler, BatchScheduler) and scheduler.engine.round.tree == TreeShape(8, 2, max_rows=1)
        api = client(url)
        for prompt, max_tokens in PROMPTS:
            text = api.completions.create(model=served.name, prompt=prompt, max_tokens=max_tokens,
                                          temperature=0).choices[0].text
            assert text == served.tokenizer.decode(decoded_alone(prompt, max_tokens).tokens, skip_special_tokens=True)
        sampled = api.completions.create(model=served.name, prompt="Hello", max_tokens=12, temperature=1.0, seed=3)
        assert sampled.usage.completion_tokens == 12 or sampled.choices[0].finish_reason == "stop"


def test_tree_settings_that_cannot_verify_a_tree_are_refused_before_serving():
    with pytest.raises(ServeSetupError, match="whole block"):
        ServeSettings(tree_nodes=8, algorithm1=True)
    with pytest.raises(ServeSetupError, match="whole block"):
        ServeSettings(tree_nodes=8, max_drafts=3)
    with pytest.raises(ServeSetupError, match="--tree-beam >= 1"):
        ServeSettings(tree_nodes=8, tree_beam=0)
    with pytest.raises(ServeSetupError, match="--tree-max-rows >= 0"):
        ServeSettings(tree_nodes=8, tree_max_rows=-1)
    with pytest.raises(ServeSetupError, match="candidates"):
        create_app(tiny_served(), ServeSettings(port=0, tree_nodes=500, tree_beam=2))
    no_draft = served_model(tiny_target("qwen3", vocab_size=260, num_layers=2), build_tokenizer(), None, "plain")
    with pytest.raises(ServeSetupError, match="give --draft"):
        create_app(no_draft, ServeSettings(port=0, tree_nodes=8))
