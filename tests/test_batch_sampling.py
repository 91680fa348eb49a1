"""Batched speculative sampling is distribution-exact: many copies of one prompt decoded side by side commit
continuations distributed as the target's own (processed) samples; a sampler that skips rejection is caught.
Same χ² rule as tests/test_lossless_sampling.py."""
from __future__ import annotations

from collections import Counter

import pytest
import torch
from test_lossless_sampling import chi_square_excess, exact_continuations

from dspark import GenerationConfig, Target
from dspark.engine import batch_round
from dspark.engine.batch import BatchEngine
from dspark.engine.schedule import Scheduling, StepCostTable
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)

VOCAB, PROMPT, LENGTH = 4, [1, 2, 3], 3


def _batched_counts(config: GenerationConfig, samples: int, arch: str = "qwen3",
                    scheduling: Scheduling | None = None) -> tuple[Counter, int, dict, float]:
    model = tiny_target(arch, vocab_size=VOCAB, hidden_size=32, num_layers=2, seed=0)
    cfg = draft_config_for(model, layer_ids=(0,), block_size=3, num_layers=1)
    draft = random_draft(cfg, scale=3.0)
    engine = BatchEngine(Target(model, cfg.target_layer_ids), draft, max_batch=64, max_length=16)
    results = engine.generate([PROMPT] * samples, config, scheduling)
    counts = Counter(tuple(r.tokens) for r in results)
    accepted = sum(sum(r.stats.accepted_counts) for r in results)
    verified = sum(sum(r.stats.proposed_counts) for r in results) / sum(r.stats.rounds for r in results)
    return counts, accepted, exact_continuations(model, PROMPT, LENGTH, config, VOCAB), verified


# 0.6: the threshold rule cuts blocks; deepseek_v3 (MLA + MoE) runs through the Hugging Face backend
@pytest.mark.parametrize("threshold,arch", [(0.0, "qwen3"), (0.6, "qwen3"), (0.0, "deepseek_v3")])
def test_batched_speculative_sampling_matches_target_distribution(threshold, arch):
    config = GenerationConfig(max_new_tokens=LENGTH, temperature=0.8, top_k=3, seed=0, confidence_threshold=threshold)
    counts, accepted, expected, verified = _batched_counts(config, 1500, arch)
    assert chi_square_excess(counts, expected, 1500) < 0
    assert accepted > 100  # drafts were really accepted: the rejection, residual and bonus paths all ran
    assert (verified < 0.3) == (threshold > 0)  # drafts verified per round (none: 0.59, the cut: 0.15)


def test_rounds_that_switch_drafting_off_stay_distribution_exact():
    # Algorithm 1 told that plain decoding is faster: the first round drafts (no estimate yet), the next ones do not
    off = Scheduling("algorithm1", StepCostTable([1, 4], [100.0, 100.0]), plain={64: 1e6})
    config = GenerationConfig(max_new_tokens=LENGTH, temperature=0.8, top_k=3, seed=0)
    counts, accepted, expected, verified = _batched_counts(config, 1500, scheduling=off)
    assert chi_square_excess(counts, expected, 1500) < 0
    assert accepted > 20 and verified < 0.59  # drafted rounds accepted drafts; undrafted ones verified none


def test_skipping_rejection_is_caught(monkeypatch):
    def accept_everything(drafts, lengths, draft_probs, target_probs, generator, rows=None, draws=0):  # no rejection
        index = torch.arange(drafts.shape[0])
        return lengths.clone(), rows.sample(target_probs[index, lengths])

    monkeypatch.setattr(batch_round, "accept_sampling", accept_everything)
    config = GenerationConfig(max_new_tokens=LENGTH, temperature=1.0, seed=0)  # full support: only χ² can tell
    counts, _, expected, _ = _batched_counts(config, 1000)
    assert chi_square_excess(counts, expected, 1000) > 0


def test_rows_of_different_settings_in_one_batch_each_follow_their_own_distribution_and_greedy_rows_stay_exact():
    model = tiny_target("qwen3", vocab_size=VOCAB, hidden_size=32, num_layers=2, seed=0)
    cfg = draft_config_for(model, layer_ids=(0,), block_size=3, num_layers=1)
    draft = random_draft(cfg, scale=3.0)
    engine = BatchEngine(Target(model, cfg.target_layer_ids), draft, max_batch=48, max_length=16)
    settings = {"hot": GenerationConfig(max_new_tokens=LENGTH, temperature=1.0),
                "cool": GenerationConfig(max_new_tokens=LENGTH, temperature=0.7, top_k=3, top_p=0.9),
                "greedy": GenerationConfig(max_new_tokens=LENGTH)}
    greedy_tokens = engine.generate([PROMPT], GenerationConfig(max_new_tokens=LENGTH))[0].tokens
    session = engine.open(GenerationConfig(max_new_tokens=LENGTH, seed=5))
    samples = 1200  # per sampled setting, interleaved so every batch mixes the three
    order = [name for _ in range(samples) for name in ("hot", "cool", "greedy")]
    for i, name in enumerate(order):
        session.add(i, PROMPT, LENGTH, sampling=settings[name])
    while not session.idle:
        session.step()
    counts = {name: Counter() for name in settings}
    for i, name in enumerate(order):
        counts[name][tuple(session.release(i).tokens)] += 1
    for name in ("hot", "cool"):
        expected = exact_continuations(model, PROMPT, LENGTH, settings[name], VOCAB)
        assert chi_square_excess(counts[name], expected, samples) < 0, name
    assert counts["greedy"] == Counter({tuple(greedy_tokens): samples})  # every greedy row: the target's argmax path
    assert counts["hot"] != counts["cool"]  # the rows really sampled with their own settings


@pytest.mark.parametrize("buckets", [False, True], ids=["compacted", "free-rows-inside-the-bucket"])
def test_a_seeded_row_samples_the_same_alone_and_beside_rows_of_other_settings(buckets):
    model = tiny_target("qwen3", vocab_size=32, hidden_size=32, num_layers=2, seed=1)
    cfg = draft_config_for(model, layer_ids=(0,), block_size=4, num_layers=1)
    engine = BatchEngine(Target(model, cfg.target_layer_ids), random_draft(cfg, scale=3.0), max_batch=4,
                         max_length=48, pad_to_buckets=buckets)  # with buckets a row that ends stays free
    seeded = GenerationConfig(max_new_tokens=20, temperature=1.0, seed=1234)
    alone = engine.generate([[3, 1, 4]], seeded)[0].tokens
    session = engine.open(GenerationConfig(max_new_tokens=20))
    others = [GenerationConfig(max_new_tokens=7, temperature=0.5), GenerationConfig(max_new_tokens=30),
              GenerationConfig(max_new_tokens=11, temperature=1.3, top_k=5)]
    session.add("other-0", [9, 9], 7, sampling=others[0])
    session.add("seeded", [3, 1, 4], 20, sampling=seeded)
    session.add("other-1", [5], 30, sampling=others[1])
    session.add("other-2", [2, 7, 1, 8], 11, sampling=others[2])
    while not session.idle:
        session.step()
    assert session.release("seeded").tokens == alone
