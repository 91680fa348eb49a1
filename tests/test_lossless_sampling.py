"""Speculative sampling is distribution-exact: committed tokens follow the target's own (processed) distribution.

Tolerances: χ² goodness of fit with bins of expected count < 5 merged, rejected above df + 5·sqrt(2·df)
(p < 1e-5 under the null). Seeds are fixed, so the tests are deterministic; a negative control shows the
statistic catches a sampler that skips rejection.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch

from dspark import GenerationConfig, Target, generate
from dspark.engine.sampling import processed_probs
from test_verify import verify_sampling
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)


def chi_square_excess(counts: Counter, expected: dict, n: int) -> float:
    """χ² minus its rejection threshold (negative = consistent with `expected`)."""
    bins, small_obs, small_exp = [], 0, 0.0
    for key, p in expected.items():
        if p * n < 5:
            small_obs += counts.get(key, 0)
            small_exp += p * n
        else:
            bins.append((counts.get(key, 0), p * n))
    if small_exp > 0:
        bins.append((small_obs, small_exp))
    outside = n - sum(counts.get(k, 0) for k in expected)
    assert outside == 0, f"{outside} samples fell outside the target's support"
    stat = sum((o - e) ** 2 / e for o, e in bins)
    df = len(bins) - 1
    return stat - (df + 5 * math.sqrt(2 * df))


def exact_continuations(model, prompt, length, config, vocab):
    """P(continuation) for every continuation of `length` tokens under the processed target distribution."""
    probs = {}
    for seq in itertools.product(range(vocab), repeat=length):
        with torch.no_grad():
            logits = model(torch.tensor([prompt + list(seq[:-1])])).logits[0, len(prompt) - 1:]
        p = processed_probs(logits, config)
        probs[seq] = math.prod(float(p[i, t]) for i, t in enumerate(seq))
    return {k: v for k, v in probs.items() if v > 0}


def test_rejection_sampling_commits_tokens_from_the_target_distribution():
    gen = torch.Generator().manual_seed(0)
    vocab, drafts = 6, 3
    p = torch.softmax(torch.randn(drafts + 1, vocab, generator=gen) * 1.5, -1)  # target rows
    q = torch.softmax(torch.randn(drafts, vocab, generator=gen) * 1.5, -1)  # draft distributions
    q[1, 2] = 0.4  # a token the target can still pick...
    p[1, 4] = 0.0  # ...and one the target never picks
    p[1] /= p[1].sum()
    q[1] /= q[1].sum()
    n = 20000
    first, broken = Counter(), Counter()
    for _ in range(n):
        d = torch.stack([torch.multinomial(q[k], 1, generator=gen)[0] for k in range(drafts)])
        accepted, bonus = verify_sampling(d, q, p, gen)
        tokens = [*d[:accepted].tolist(), bonus]
        first[tokens[0]] += 1
        broken[int(d[0])] += 1  # negative control: always accepting the draft gives q, not p
    expected = {t: float(p[0, t]) for t in range(vocab)}
    assert chi_square_excess(first, expected, n) < 0
    assert chi_square_excess(broken, expected, n) > 0


def _end_to_end(config: GenerationConfig, samples: int):
    vocab = 4
    model = tiny_target("qwen3", vocab_size=vocab, hidden_size=32, num_layers=2, seed=0)
    cfg = draft_config_for(model, layer_ids=(0,), block_size=3, num_layers=1)
    draft = random_draft(cfg, scale=3.0)
    target = Target(model, cfg.target_layer_ids)
    prompt, length = [1, 2, 3], 3
    counts, accepted = Counter(), 0
    for seed in range(samples):
        result = generate(target, draft, prompt, config.__class__(**{**config.__dict__, "seed": seed}))
        counts[tuple(result.tokens)] += 1
        accepted += sum(result.stats.accepted_counts)
    expected = exact_continuations(model, prompt, length, config, vocab)
    return chi_square_excess(counts, expected, samples), accepted


def test_speculative_sampling_matches_target_distribution_at_temperature_one():
    excess, accepted = _end_to_end(GenerationConfig(max_new_tokens=3, temperature=1.0), 1500)
    assert excess < 0
    assert accepted > 150  # drafts were really accepted, so the rejection path and the bonus path both ran


def test_speculative_sampling_matches_with_temperature_top_k_and_top_p():
    excess, accepted = _end_to_end(GenerationConfig(max_new_tokens=3, temperature=0.7, top_k=3, top_p=0.9), 700)
    assert excess < 0
    assert accepted > 50
