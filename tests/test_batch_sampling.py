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
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)

VOCAB, PROMPT, LENGTH = 4, [1, 2, 3], 3


def _batched_counts(config: GenerationConfig, samples: int, arch: str = "qwen3") -> tuple[Counter, int, dict, float]:
    model = tiny_target(arch, vocab_size=VOCAB, hidden_size=32, num_layers=2, seed=0)
    cfg = draft_config_for(model, layer_ids=(0,), block_size=3, num_layers=1)
    draft = random_draft(cfg, scale=3.0)
    engine = BatchEngine(Target(model, cfg.target_layer_ids), draft, max_batch=64, max_length=16)
    results = engine.generate([PROMPT] * samples, config)
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


def test_skipping_rejection_is_caught(monkeypatch):
    def accept_everything(drafts, lengths, draft_probs, target_probs, generator):  # no rejection at all
        rows = torch.arange(drafts.shape[0])
        return lengths.clone(), torch.multinomial(target_probs[rows, lengths], 1, generator=generator)[:, 0]

    monkeypatch.setattr(batch_round, "accept_sampling", accept_everything)
    config = GenerationConfig(max_new_tokens=LENGTH, temperature=1.0, seed=0)  # full support: only χ² can tell
    counts, _, expected, _ = _batched_counts(config, 1000)
    assert chi_square_excess(counts, expected, 1000) > 0
