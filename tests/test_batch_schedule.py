"""Scheduling in the batched engine: Algorithm 1 over the shared verify width equals the paper's list version for
one row and stops at the first width that does not raise expected throughput; over a ragged verify it equals the
paper's list version for any number of rows; the threshold and Algorithm 1 rules change how much is verified (and,
ragged, how much the target computes) but never what is committed."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import BatchEngine
from dspark.engine import static_target
from dspark.engine.batch_schedule import Scheduling, ragged_drafts, rectangle_drafts
from dspark.engine.schedule import StepCostTable, schedule_prefixes
from dspark.testbed.successor_pair import EOS_ID, build_pair

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


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.data(), tables)
def test_over_a_ragged_verify_each_rows_length_is_the_papers_algorithm1_with_the_cost_by_total_tokens(
        requests, slots, data, table):
    alive, cost = _draw(data, requests, slots, table)
    rates = torch.tensor([cost(tokens) for tokens in range(requests * (slots + 1) + 1)], dtype=torch.float64)
    assert ragged_drafts(alive, rates).tolist() == schedule_prefixes(alive, cost)


def test_a_ragged_rounds_padding_rows_cost_their_anchor_token_but_commit_nothing():
    alive = torch.tensor([[0.5], [0.0]])  # one live row, one padding row of a bucket
    rates = torch.tensor([100.0, 100.0, 100.0, 80.0, 80.0], dtype=torch.float64)  # by total tokens 0 … 4
    # 1 commit at 2 tokens: 100/s; verifying the live row's draft: 1.5 commits at 3 tokens: 120/s, kept
    assert ragged_drafts(alive, rates, torch.tensor(1)).tolist() == [1, 0]
    assert ragged_drafts(alive, rates).tolist() == [0, 0]  # counted as 2 commits, the draft would not pay (200 vs 200)


def test_a_ragged_round_is_priced_at_the_mean_width_of_its_rows():
    table = StepCostTable([1, 2, 8], [100.0, 50.0, 20.0])
    rates = Scheduling("algorithm1", table).token_rates(4, 7)  # 4 rows, γ 7: 0 … 32 tokens
    assert rates.shape == (33,)
    assert float(rates[4]) == 100.0 and float(rates[8]) == 50.0 and float(rates[32]) == 20.0
    assert float(rates[6]) == 75.0  # 1.5 tokens a row: halfway between widths 1 and 2


def test_a_flat_table_verifies_every_budgeted_slot_and_a_steep_one_only_the_anchors():
    alive = torch.tensor([[0.9, 0.8, 0.7], [0.2, 0.1, 0.05]])  # [R=2, γ=3]
    flat = Scheduling("algorithm1", StepCostTable([1, 4], [100.0, 100.0]))
    steep = Scheduling("algorithm1", {1: StepCostTable([1, 4], [100.0, 100.0]),
                                      2: StepCostTable([1, 2], [100.0, 10.0])})
    assert int(rectangle_drafts(alive, flat.rates(2, 3, alive.device))) == 3
    assert int(rectangle_drafts(alive, steep.rates(2, 3, alive.device))) == 0  # batch 2 reads its own table
    assert steep.table(1) is steep.cost[1] and steep.table(3) is steep.cost[2]  # the largest holds bigger batches


@pytest.fixture(scope="module", params=[True, False], ids=["ragged", "rectangle"])
def pair(request):
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    return target, draft, BatchEngine(target, draft, max_batch=3, max_length=64, ragged=request.param)


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


def test_a_ragged_verify_computes_only_each_rows_anchor_and_scheduled_drafts(monkeypatch):
    model, draft = build_pair()
    engine = BatchEngine(Target(model, draft.config.target_layer_ids), draft, max_batch=3, max_length=64, ragged=True)
    computed, scheduled = [], []
    forward = static_target.StaticTarget.forward

    def counting(self, ids, start, rows=None, logits_at=None, window=None, tokens=None):
        if logits_at is None:  # a verify (prefills ask for one column); at width 1 every anchor is computed
            computed.append(int(tokens.numel()) if tokens is not None else ids.numel())
            scheduled.append(int((engine.round.lengths[: ids.shape[0]] + 1).sum()))
        return forward(self, ids, start, rows, logits_at, window, tokens)

    monkeypatch.setattr(static_target.StaticTarget, "forward", counting)
    config = GenerationConfig(max_new_tokens=24, confidence_threshold=0.5)
    results = engine.generate(PROMPTS, config)
    assert computed == scheduled and len(computed) >= max(r.stats.rounds for r in results)
    rectangle = sum(3 * (1 + 4) for _ in computed)  # what a rectangle of 3 rows × a full block would compute
    assert sum(computed) < rectangle  # cut blocks and short rows were not computed
    assert sum(computed) == sum(sum(r.stats.proposed_counts) + r.stats.rounds for r in results)
