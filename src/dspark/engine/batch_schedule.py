"""How many drafts each row of a batch verifies this round, decided on device from the confidence head.

Rules: `none` (every draft the token budget allows), `threshold` (cut at the first slot whose calibrated confidence
σ(c_k / T_k) is below GenerationConfig.confidence_threshold, as the batch-1 engine does) and `algorithm1` (the
DSpark paper's hardware-aware prefix scheduler over all active rows with a measured StepCostTable; the tensor form
here equals `schedule.schedule_prefixes`). Each decision only uses confidences, which depend on drafts before the
slot they decide about, so scheduling never changes what is committed (lossless); it only changes the work.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from dspark.engine.schedule import StepCostTable, survival

RULES = ("none", "threshold", "algorithm1")


@dataclass(frozen=True)
class Scheduling:
    rule: str = "none"  # one of RULES
    cost: StepCostTable | None = None  # algorithm1's measured verify cost (steps/s by total verify width)

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"scheduling rule {self.rule!r} is unknown; use one of {RULES}")
        if self.rule == "algorithm1" and self.cost is None:
            raise ValueError("algorithm1 scheduling needs a StepCostTable (engine.measure_step_costs(...) makes one)")


def table_rates(cost: StepCostTable, widths: torch.Tensor) -> torch.Tensor:
    """StepCostTable(width) for a tensor of widths, in float64, with the table's own arithmetic."""
    w = torch.tensor(cost.widths, dtype=torch.float64, device=widths.device)  # [K]
    r = torch.tensor(cost.rates, dtype=torch.float64, device=widths.device)  # [K]
    x = widths.to(torch.float64)
    if len(cost.widths) == 1:
        return r[0].expand_as(x)
    right = torch.searchsorted(w, x).clamp(1, len(cost.widths) - 1)  # first measured width ≥ x
    w0, w1, r0, r1 = w[right - 1], w[right], r[right - 1], r[right]
    inside = r0 + (r1 - r0) * (x - w0) / (w1 - w0)
    return torch.where(x <= w[0], r[0], torch.where(x > w[-1], r[-1], inside))


def schedule_prefixes_tensor(alive: torch.Tensor, cost: StepCostTable) -> torch.Tensor:
    """Algorithm 1 without leaving the device: survival `alive` [R, γ] -> drafts to verify per request [R] (long).

    Candidates (r, j) sorted by decreasing prefix survival (ties: slot, then request, as the list version); a
    prefix never increases, so every candidate extends its request's prefix by one. Keep candidates while the
    expected throughput τ*·SPS(width) improves; stop at the first that does not (or at a zero survival)."""
    prefix = alive.float().clamp(0, 1).cumprod(-1)  # [R, γ]
    requests = prefix.shape[0]
    values = prefix.t().reshape(-1).to(torch.float64)  # [γ·R], slot-major so a stable sort breaks ties (j, r)
    order = torch.sort(values, descending=True, stable=True).indices  # [γ·R]
    ranked = values[order]
    base = torch.full((1,), float(requests), dtype=torch.float64, device=values.device)
    tau = torch.cat([base, ranked]).cumsum(0)  # [γ·R + 1] (left-to-right sums, as the list version)
    widths = requests + torch.arange(ranked.numel() + 1, device=values.device)  # [γ·R + 1]
    throughput = tau * table_rates(cost, widths)  # [γ·R + 1]
    improving = (throughput[1:] > throughput[:-1]) & (ranked > 0)  # [γ·R]
    kept = improving.long().cumprod(0)  # [γ·R] 1 until the first non-improving candidate
    lengths = torch.zeros(requests, dtype=torch.long, device=values.device)
    return lengths.scatter_add_(0, order % requests, kept)


def scheduled_lengths(confidence_logits: torch.Tensor | None, room: torch.Tensor, gamma: int,
                      scheduling: Scheduling, threshold: float, temperatures: torch.Tensor | None) -> torch.Tensor:
    """Drafts to verify per row [B]: at most γ and at most `room` [B] (the token budget left after the bonus)."""
    lengths = room.clamp(0, gamma)  # [B]
    if scheduling.rule == "none" or confidence_logits is None or gamma == 0:
        return lengths
    alive = survival(confidence_logits, temperatures)  # [B, γ]
    if scheduling.rule == "threshold":
        if threshold <= 0:
            return lengths
        below = alive < threshold  # [B, γ]
        cut = torch.where(below.any(-1), below.long().argmax(-1), gamma)  # [B] first slot below
        return torch.minimum(lengths, cut)
    slots = torch.arange(gamma, device=room.device)
    alive = alive.masked_fill(slots[None] >= lengths[:, None], 0.0)  # slots beyond the budget cannot be verified
    return torch.minimum(lengths, schedule_prefixes_tensor(alive, scheduling.cost))
