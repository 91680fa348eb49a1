"""Scheduling in the batched engine: Algorithm 1 over the shared verify width equals the paper's list version for
one row and stops at the first width that does not raise expected throughput; over a ragged verify it equals the
paper's list version for any number of rows; the threshold and Algorithm 1 rules change how much is verified (and,
ragged, how much the target computes) but never what is committed."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import BatchEngine
from dspark.engine.batch_session import PROBE_EVERY
from dspark.engine.schedule import Scheduling, StepCostTable, rectangle_drafts
from dspark.testbed.successor_pair import EOS_ID, build_pair
from oracle import schedule_prefixes

PROMPTS = [list(b"hello wor"), list(b"abc"), list(b"xyz 123 456 789"), list(b"The quick"), list(b"q")]

probabilities = st.floats(0, 1, width=32)
tables = st.lists(st.tuples(st.integers(1, 9), st.floats(1, 1000)), min_size=1, max_size=4, unique_by=lambda x: x[0])


def _draw(data, requests: int, slots: int, table) -> tuple[torch.Tensor, StepCostTable]:
    alive = torch.tensor(data.draw(st.lists(probabilities, min_size=requests * slots, max_size=requests * slots)))
    widths, rates = zip(*sorted(table))
    return alive.reshape(requests, slots), StepCostTable(list(widths), list(rates))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.data(), tables)
def test_for_one_row_the_shared_width_rule_is_the_papers_algorithm1(slots, data, table):
    alive, cost = _draw(data, 1, slots, table)
    rates = Scheduling("algorithm1", cost).rates(1, slots, alive.device)
    assert [int(rectangle_drafts(alive, rates))] == schedule_prefixes(alive, cost)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.data(), tables)
def test_the_shared_width_grows_while_expected_throughput_improves_and_stops_at_the_first_width_that_does_not(
        requests, slots, data, table):
    alive, cost = _draw(data, requests, slots, table)
    drafts = int(rectangle_drafts(alive, Scheduling("algorithm1", cost).rates(requests, slots, alive.device)))
    prefix = alive.double().cumprod(-1)  # [R, γ]

    def throughput(k: int) -> float:  # expected commits per second when every row verifies k drafts
        return (requests + float(prefix[:, :k].sum())) * cost(k + 1)

    assert 0 <= drafts <= slots
    assert all(throughput(k + 1) > throughput(k) for k in range(drafts))
    if drafts < slots:
        assert throughput(drafts + 1) <= throughput(drafts) or float(prefix[:, drafts].sum()) == 0


def test_a_flat_table_verifies_every_budgeted_slot_and_a_steep_one_only_the_anchors():
    alive = torch.tensor([[0.9, 0.8, 0.7], [0.2, 0.1, 0.05]])  # [R=2, γ=3]
    flat = Scheduling("algorithm1", StepCostTable([1, 4], [100.0, 100.0]))
    steep = Scheduling("algorithm1", {1: StepCostTable([1, 4], [100.0, 100.0]),
                                      2: StepCostTable([1, 2], [100.0, 10.0])})
    assert int(rectangle_drafts(alive, flat.rates(2, 3, alive.device))) == 3
    assert int(rectangle_drafts(alive, steep.rates(2, 3, alive.device))) == 0  # batch 2 reads its own table
    assert steep.table(1) is steep.cost[1] and steep.table(3) is steep.cost[2]  # the largest holds bigger batches


@pytest.fixture(scope="module")
def pair():
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    return target, draft, BatchEngine(target, draft, max_batch=3, max_length=64)


@pytest.mark.slow
def test_threshold_scheduling_is_lossless_and_a_row_cuts_as_it_would_alone(pair):
    target, draft, engine = pair
    config = GenerationConfig(max_new_tokens=24, eos_token_ids=(EOS_ID,), confidence_threshold=0.5)
    results = engine.generate(PROMPTS, config)  # scheduling None follows config.confidence_threshold
    plain = engine.generate(PROMPTS, GenerationConfig(max_new_tokens=24, eos_token_ids=(EOS_ID,), max_drafts=0))
    for prompt, result, reference in zip(PROMPTS, results, plain):
        assert result.tokens == reference.tokens
        assert result.stats == generate(target, draft, prompt, config).stats  # the same cuts in a batch of one
    assert sum(sum(r.stats.proposed_counts) for r in results) < sum(4 * r.stats.rounds for r in results)


@pytest.mark.slow
def test_algorithm1_is_lossless_and_a_steep_cost_table_verifies_fewer_drafts(pair):
    _, _, engine = pair
    config = GenerationConfig(max_new_tokens=24)
    plain = [r.tokens for r in engine.generate(PROMPTS, GenerationConfig(max_new_tokens=24, max_drafts=0))]
    proposed = {}
    for name, cost in [("flat", StepCostTable([1, 64], [100.0, 100.0])),
                       ("steep", StepCostTable([1, 2, 5], [100.0, 30.0, 5.0]))]:  # a draft never pays
        results = engine.generate(PROMPTS, config, Scheduling("algorithm1", cost))
        assert [r.tokens for r in results] == plain
        proposed[name] = [sum(r.stats.proposed_counts) / r.stats.rounds for r in results]
    unscheduled = engine.generate(PROMPTS, config)
    # a flat table verifies every slot with positive survival: nearly the whole block
    assert sum(proposed["flat"]) > 0.9 * sum(sum(r.stats.proposed_counts) / r.stats.rounds for r in unscheduled)
    assert sum(proposed["steep"]) < 0.5 * sum(proposed["flat"])


def test_algorithm1_needs_a_cost_table():
    with pytest.raises(ValueError, match="round_cost_tables"):
        Scheduling("algorithm1")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 6), st.data(), tables)
def test_algorithm1_over_a_stack_of_rounds_decides_each_round_as_it_would_alone(rounds, requests, slots, data, table):
    stacked = torch.stack([_draw(data, requests, slots, table)[0] for _ in range(rounds)])  # [M, R, γ]
    rates = Scheduling("algorithm1", _draw(data, 1, 1, table)[1]).rates(requests, slots, stacked.device)
    each = [int(rectangle_drafts(alive, rates)) for alive in stacked]
    assert rectangle_drafts(stacked, rates).tolist() == each


def test_with_plain_decoding_faster_at_every_size_rounds_draft_nothing_but_probes_and_stay_token_identical(pair):
    _, _, engine = pair
    config = GenerationConfig(max_new_tokens=40, eos_token_ids=())
    plain = engine.generate(PROMPTS, replace(config, max_drafts=0))
    flat = StepCostTable([1, 8], [100.0, 100.0])
    results = engine.generate(PROMPTS, config, Scheduling("algorithm1", flat, plain={1: 1e6, 3: 1e6}))
    assert [r.tokens for r in results] == [r.tokens for r in plain]
    proposed = [p for r in results for p in r.stats.proposed_counts]
    drafted = sum(p > 0 for p in proposed)
    assert 0 < drafted and drafted <= len(proposed) // PROBE_EVERY + 3  # the first round per row, then probes
    assert sum(a for r in results for a in r.stats.accepted_counts) <= 4 * drafted


def test_with_plain_decoding_slower_the_rounds_are_algorithm1s_own(pair):
    _, _, engine = pair
    config = GenerationConfig(max_new_tokens=24)
    flat = StepCostTable([1, 8], [100.0, 100.0])
    alone = engine.generate(PROMPTS, config, Scheduling("algorithm1", flat))
    with_plain = engine.generate(PROMPTS, config, Scheduling("algorithm1", flat, plain={1: 1.0}))
    assert [r.stats for r in with_plain] == [r.stats for r in alone]


def test_plain_step_rates_go_with_algorithm1_and_are_positive():
    table = StepCostTable([1], [1.0])
    with pytest.raises(ValueError, match="plain step rates"):
        Scheduling("threshold", plain={1: 10.0})
    with pytest.raises(ValueError, match="plain step rates"):
        Scheduling("algorithm1", table, plain={1: 0.0})
    assert Scheduling("algorithm1", table, plain={1: 5.0, 4: 2.0}).plain_rate(3) == 2.0
    assert Scheduling("algorithm1", table).plain_rate(3) is None


def test_the_engine_measures_plain_step_rates_for_each_batch_size(pair):
    _, _, engine = pair
    rates = engine.plain_step_rates([1, 3])
    assert sorted(rates) == [1, 3] and all(r > 0 for r in rates.values())
