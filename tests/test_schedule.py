"""Confidence scheduling: the threshold cut, the paper's Algorithm 1 (its list form, tests/oracle.py) and the round-cost
table."""
from __future__ import annotations

import pytest
import torch

from oracle import schedule_prefixes

from dspark.engine.schedule import StepCostTable, scheduled_lengths, survival


def test_threshold_cuts_at_the_first_slot_below_it_with_calibration_temperatures():
    def cut(threshold: float, temperatures: torch.Tensor | None = None) -> int:
        logits = torch.tensor([[2.0, 1.0, -1.0, 3.0]])
        return int(scheduled_lengths(logits, torch.tensor([9]), 4, "threshold", torch.tensor(threshold),
                                     temperatures, None)[0])

    assert cut(0.5) == 2  # σ(−1) < 0.5; the later 3.0 does not matter
    assert cut(0.9) == 0  # σ(2) ≈ 0.88
    assert cut(0.9, torch.tensor([0.5, 1, 1, 1])) == 1  # σ(4) ≈ 0.98 passes, σ(1) fails
    assert cut(0.0) == 4  # 0 cuts nothing
    torch.testing.assert_close(survival(torch.tensor([0.0])), torch.tensor([0.5]))


def test_flat_cost_verifies_every_positive_slot_and_steep_cost_only_anchors():
    conf = torch.tensor([[0.9, 0.8, 0.7], [0.6, 0.5, 0.1]])
    flat = StepCostTable([1, 64], [100.0, 100.0])
    assert schedule_prefixes(conf, flat) == [3, 3]
    steep = StepCostTable([2, 3], [100.0, 10.0])  # one extra token costs 10× the step time
    assert schedule_prefixes(conf, steep) == [0, 0]


def test_allocation_is_prefix_shaped_and_follows_survival_order():
    conf = torch.tensor([[0.95, 0.95, 0.95, 0.2], [0.5, 0.9, 0.9, 0.9]])
    cost = StepCostTable([2, 10], [100.0, 70.0])  # each extra verified token costs ~3.75 % throughput
    lengths = schedule_prefixes(conf, cost)
    # prefix survival: r0 = .95 .90 .86 .17, r1 = .50 .45 .41 .36 — every slot above .17 pays for itself here,
    # r0's fourth slot (.17) does not: slots are admitted by survival, not by request
    assert lengths == [3, 4]
    # check by brute force that the greedy answer is what Algorithm 1 describes: Θ improves at every admitted step
    prefix = conf.cumprod(-1)
    tau = 2 + sum(float(prefix[r, :n].sum()) for r, n in enumerate(lengths))
    width = 2 + sum(lengths)
    assert tau * cost(width) > 2 * cost(2)


def test_cost_table_interpolates_and_refuses_bad_tables():
    table = StepCostTable.from_latency_ms({1: 10.0, 9: 20.0})
    assert table(1) == pytest.approx(100.0) and table(9) == pytest.approx(50.0)
    assert table(5) == pytest.approx(75.0) and table(100) == pytest.approx(50.0)
    with pytest.raises(ValueError, match="increasing"):
        StepCostTable([4, 2], [1.0, 1.0])


def test_latency_ms_is_the_inverse_of_from_latency_ms():
    latency = {1: 10.0, 2: 12.5, 8: 40.0}
    table = StepCostTable.from_latency_ms(latency)
    assert table.latency_ms() == pytest.approx(latency) and list(table.latency_ms()) == [1, 2, 8]
