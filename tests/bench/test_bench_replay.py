"""Greedy replay gives exactly the engine's verify rounds, computed in one batched pass."""
from __future__ import annotations

import json
import pytest

from dspark import GenerationConfig, Target, generate, load_draft
from dspark.bench.replay import replay_greedy

from fixture_paths import CONFORMANCE, VARIANTS  # noqa: E402  (tests/ is on sys.path via its conftest)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("block_size", [None, 2])
def test_replay_matches_the_engine_on_the_reference_drafts(variant, block_size, conformance_target):
    folder = CONFORMANCE / "deepspec" / variant
    meta = json.loads((folder / "inputs.json").read_text())
    record = json.loads((folder / "inference.json").read_text())["thr0"]
    draft = load_draft(folder / "draft")
    target = Target(conformance_target, meta["target_layer_ids"])
    prompt = record["output_ids"][: record["prompt_len"]]
    engine = generate(target, draft, prompt, GenerationConfig(max_new_tokens=40, max_drafts=block_size))
    replay = replay_greedy(target, draft, prompt, engine.tokens, max_drafts=block_size)
    assert replay.accepted_counts == engine.stats.accepted_counts
    assert replay.proposed_counts == engine.stats.proposed_counts
    assert max(replay.acceptance_lengths) > 1
