"""Scheduling in the batched engine: the on-device Algorithm 1 equals the list version, and the threshold and
Algorithm 1 rules change how much is verified but never what is committed."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import BatchEngine
from dspark.engine.batch_schedule import Scheduling, schedule_prefixes_tensor, table_rates
from dspark.engine.schedule import StepCostTable, schedule_prefixes
from dspark.testbed.successor_pair import EOS_ID, build_pair

PROMPTS = [list(b"hello wor"), list(b"abc"), list(b"xyz 123 456 789"), list(b"The quick"), list(b"q")]

probabilities = st.floats(0, 1, width=32)
tables = st.lists(st.tuples(st.integers(1, 40), st.floats(1, 1000)), min_size=1, max_size=4, unique_by=lambda x: x[0])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.data(), tables)
def test_on_device_algorithm1_equals_the_list_version(requests, slots, data, table):
    alive = torch.tensor(data.draw(st.lists(probabilities, min_size=requests * slots, max_size=requests * slots)))
    alive = alive.reshape(requests, slots)
    widths, rates = zip(*sorted(table))
    cost = StepCostTable(list(widths), list(rates))
    assert schedule_prefixes_tensor(alive, cost).tolist() == schedule_prefixes(alive, cost)
    some = torch.arange(0, 50)
    assert table_rates(cost, some).tolist() == [cost(int(w)) for w in some]


@pytest.fixture(scope="module")
def pair():
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    return target, draft, BatchEngine(target, draft, max_batch=3, max_length=64)


def test_threshold_scheduling_is_lossless_and_matches_the_batch1_engine(pair):
    target, draft, engine = pair
    config = GenerationConfig(max_new_tokens=24, eos_token_ids=(EOS_ID,), confidence_threshold=0.5)
    results = engine.generate(PROMPTS, config)  # scheduling None follows config.confidence_threshold
    plain = engine.generate(PROMPTS, GenerationConfig(max_new_tokens=24, eos_token_ids=(EOS_ID,), block_size=0))
    for prompt, result, reference in zip(PROMPTS, results, plain):
        assert result.tokens == reference.tokens
        assert result.stats == generate(target, draft, prompt, config).stats  # same cuts as batch 1
    assert sum(sum(r.stats.proposed_counts) for r in results) < sum(4 * r.stats.rounds for r in results)


def test_algorithm1_is_lossless_and_a_steep_cost_table_verifies_fewer_drafts(pair):
    _, _, engine = pair
    config = GenerationConfig(max_new_tokens=24)
    plain = [r.tokens for r in engine.generate(PROMPTS, GenerationConfig(max_new_tokens=24, block_size=0))]
    proposed = {}
    for name, cost in [("flat", StepCostTable([1, 64], [100.0, 100.0])),
                       ("steep", StepCostTable([3, 6, 9], [100.0, 60.0, 20.0]))]:
        results = engine.generate(PROMPTS, config, Scheduling("algorithm1", cost))
        assert [r.tokens for r in results] == plain
        proposed[name] = [sum(r.stats.proposed_counts) / r.stats.rounds for r in results]
    unscheduled = engine.generate(PROMPTS, config)
    # a flat table verifies every slot with positive survival: nearly the whole block
    assert sum(proposed["flat"]) > 0.9 * sum(sum(r.stats.proposed_counts) / r.stats.rounds for r in unscheduled)
    assert sum(proposed["steep"]) < 0.5 * sum(proposed["flat"])


def test_algorithm1_needs_a_cost_table():
    with pytest.raises(ValueError, match="StepCostTable"):
        Scheduling("algorithm1")
