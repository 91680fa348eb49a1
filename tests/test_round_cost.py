"""Algorithm 1 for one request: the measured round-cost table, and scheduling that changes work, never output."""
from __future__ import annotations

import pytest
import torch

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import engine_for
from dspark.engine.schedule import Scheduling, StepCostTable
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]


def _pair(arch: str = "qwen3", block_size: int = 5):
    model = tiny_target(arch, seed=7)
    cfg = draft_config_for(model, block_size=block_size)
    return model, Target(model, cfg.target_layer_ids), random_draft(cfg, seed=3, scale=3.0)


def _greedy(model, n: int) -> list[int]:
    ids = torch.tensor([PROMPT])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, len(PROMPT):].tolist()


@pytest.mark.parametrize("arch", ["qwen3", "deepseek_v3"])  # the static and the Hugging Face backend
def test_the_round_cost_table_covers_every_verify_width_and_leaves_the_engine_as_it_was(arch):
    model, target, draft = _pair(arch, block_size=5)
    engine = engine_for(target, draft, [PROMPT], 20, max_batch=1)
    table = engine.measure_step_costs(1, repeats=2)
    assert table.widths == [1, 2, 3, 4, 5, 6]  # anchor alone … anchor + γ drafts
    assert all(rate > 0 for rate in table.rates)
    assert all(a >= b for a, b in zip(table.rates, table.rates[1:]))  # a wider verify never costs less
    assert [r.tokens for r in engine.generate([PROMPT], GenerationConfig(max_new_tokens=20))] == [_greedy(model, 20)]


def test_a_steep_cost_table_verifies_only_the_anchor_and_stays_lossless():
    model, target, draft = _pair()
    steep = StepCostTable.from_latency_ms({1: 1.0, 2: 100.0, 6: 500.0})  # one more token never pays for itself
    result = generate(target, draft, PROMPT, GenerationConfig(max_new_tokens=20), scheduling=Scheduling("algorithm1", steep))
    assert result.tokens == _greedy(model, 20)
    assert set(result.stats.proposed_counts) == {0} and set(result.stats.acceptance_lengths) == {1}


def test_a_flat_cost_table_verifies_whole_blocks_like_no_scheduling():
    model, target, draft = _pair()
    flat = StepCostTable.from_latency_ms({1: 5.0, 6: 5.0})  # verifying more is free: every slot with survival > 0
    scheduled = generate(target, draft, PROMPT, GenerationConfig(max_new_tokens=20), scheduling=Scheduling("algorithm1", flat))
    unscheduled = generate(target, draft, PROMPT, GenerationConfig(max_new_tokens=20))
    assert scheduled.tokens == unscheduled.tokens == _greedy(model, 20)
    assert scheduled.stats.proposed_counts == unscheduled.stats.proposed_counts


@pytest.mark.slow
def test_a_rising_cost_table_cuts_some_blocks_and_every_architecture_stays_lossless():
    for arch in ("llama", "qwen3", "mistral", "deepseek_v3"):
        model, target, draft = _pair(arch)
        rising = StepCostTable.from_latency_ms({w: 10.0 + 3.0 * w for w in range(1, 7)})
        result = generate(target, draft, PROMPT, GenerationConfig(max_new_tokens=24), scheduling=Scheduling("algorithm1", rising))
        assert result.tokens == _greedy(model, 24), arch
        assert max(result.stats.proposed_counts) <= 5


def test_algorithm1_with_sampling_keeps_the_seeded_output_reproducible():
    _, target, draft = _pair()
    rising = StepCostTable.from_latency_ms({w: 10.0 + 3.0 * w for w in range(1, 7)})
    config = GenerationConfig(max_new_tokens=16, temperature=1.0, seed=11)
    first = generate(target, draft, PROMPT, config, scheduling=Scheduling("algorithm1", rising)).tokens
    assert generate(target, draft, PROMPT, config, scheduling=Scheduling("algorithm1", rising)).tokens == first
    assert len(first) == 16
