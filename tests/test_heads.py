"""Markov heads: teacher-forced (parallel) outputs equal the serial decoding steps, for every variant."""
from __future__ import annotations

import pytest
import torch

from dspark.model.heads import MARKOV_HEADS, ConfidenceHead


@pytest.mark.parametrize("kind", sorted(MARKOV_HEADS))
def test_teacher_forced_bias_equals_serial_steps(kind):
    torch.manual_seed(0)
    head = MARKOV_HEADS[kind](vocab_size=23, rank=6, hidden_size=10)
    prev = torch.randint(0, 23, (3, 5))  # [B, γ]
    hidden = torch.randn(3, 5, 10)  # [B, γ, d]
    parallel = head.teacher_forced(prev, hidden)  # [B, γ, V]
    state = head.init_state(3, hidden.device, hidden.dtype)
    for k in range(5):
        bias, state = head.step(prev[:, k], hidden[:, k], state)
        torch.testing.assert_close(bias, parallel[:, k], atol=1e-6, rtol=0)


def test_vanilla_bias_is_w2_of_w1_row_and_ignores_hidden():
    head = MARKOV_HEADS["vanilla"](vocab_size=7, rank=3, hidden_size=4)
    prev = torch.tensor([[2, 5]])
    a = head.teacher_forced(prev, torch.randn(1, 2, 4))
    b = head.teacher_forced(prev, torch.randn(1, 2, 4))
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a[0, 1], head.markov_w2.weight @ head.markov_w1.weight[5])


def test_rnn_bias_depends_on_earlier_slots_but_vanilla_does_not():
    torch.manual_seed(1)
    hidden = torch.randn(1, 3, 4)
    for kind, depends in (("rnn", True), ("vanilla", False)):
        head = MARKOV_HEADS[kind](vocab_size=9, rank=3, hidden_size=4)
        a = head.teacher_forced(torch.tensor([[1, 2, 3]]), hidden)
        b = head.teacher_forced(torch.tensor([[4, 2, 3]]), hidden)
        assert (not torch.allclose(a[0, 2], b[0, 2])) == depends


def test_confidence_head_reads_hidden_and_markov_feature():
    head = ConfidenceHead(hidden_size=4, markov_rank=2)
    out = head(torch.randn(5, 4), torch.randn(5, 2))
    assert out.shape == (5,)
    assert head.proj.weight.shape == (1, 6)
