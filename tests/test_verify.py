"""The engine's acceptance rules (engine/accept.py) on hand-written logits and distributions, one row at a time."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark.engine.accept import accept_greedy, accept_sampling


def verify_greedy(drafts: torch.Tensor, logits: torch.Tensor) -> tuple[int, int]:
    """One row: drafts [L], logits [L+1, V] -> (accepted, bonus)."""
    accepted, bonus = accept_greedy(drafts[None], torch.tensor([drafts.numel()]), logits[None])
    return int(accepted[0]), int(bonus[0])


def verify_sampling(drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor, generator) -> tuple[int, int]:
    """One row: drafts [L], q [L, V], p [L+1, V] -> (accepted, bonus)."""
    accepted, bonus = accept_sampling(drafts[None], torch.tensor([drafts.numel()]), q[None], p[None], generator)
    return int(accepted[0]), int(bonus[0])


def one_hot_logits(choices, vocab=10):
    logits = torch.zeros(len(choices), vocab)
    logits[torch.arange(len(choices)), torch.tensor(choices)] = 5.0
    return logits


def test_greedy_accepts_the_matching_prefix_and_returns_the_targets_correction():
    v = verify_greedy(torch.tensor([3, 4, 9, 1]), one_hot_logits([3, 4, 5, 1, 2]))
    assert v == (2, 5)


def test_greedy_full_acceptance_returns_the_bonus_from_the_last_row():
    v = verify_greedy(torch.tensor([3, 4]), one_hot_logits([3, 4, 7]))
    assert v == (2, 7)


def test_greedy_with_no_drafts_is_the_targets_argmax():
    v = verify_greedy(torch.empty(0, dtype=torch.long), one_hot_logits([6]))
    assert v == (0, 6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=8), st.lists(st.integers(0, 9), min_size=9, max_size=9))
def test_greedy_accepted_count_is_the_length_of_the_common_prefix(drafts, choices):
    choices = choices[: len(drafts) + 1]
    v = verify_greedy(torch.tensor(drafts), one_hot_logits(choices))
    expected = next((i for i, (d, c) in enumerate(zip(drafts, choices)) if d != c), len(drafts))
    assert v == (expected, choices[expected])


def test_sampling_always_accepts_when_draft_equals_target():
    p = torch.softmax(torch.randn(4, 6), -1)
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        d = torch.stack([torch.multinomial(p[k], 1, generator=gen)[0] for k in range(3)])
        assert verify_sampling(d, p[:3], p, gen)[0] == 3


def test_sampling_never_accepts_a_token_the_target_cannot_produce():
    p = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    q = torch.tensor([[1.0, 0.0, 0.0]])
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        v = verify_sampling(torch.tensor([0]), q, p, gen)
        assert v == (0, 1)


def test_a_rejection_draws_from_the_normalised_positive_part_of_p_minus_q():
    p = torch.tensor([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])
    q = torch.tensor([[0.2, 0.6, 0.2]])  # p − q > 0 only at token 0: every correction after rejecting d=1 is 0
    gen = torch.Generator().manual_seed(0)
    outcomes = {verify_sampling(torch.tensor([1]), q, p, gen) for _ in range(200)}
    assert {accepted for accepted, _ in outcomes} == {0, 1}  # d=1 is kept with chance p/q = 0.5
    assert all(bonus == 0 for accepted, bonus in outcomes if accepted == 0)
