"""How many drafts each row of a round verifies, decided on device from the confidence head.

Rules: `none` (every draft the token budget allows), `threshold` (cut at the first slot whose calibrated confidence
σ(c_k / T_k) is below GenerationConfig.confidence_threshold) and `algorithm1` (the DSpark paper's hardware-aware
prefix scheduler, on a round-cost table measured for this engine's verify pass: `BatchEngine.measure_step_costs`;
given plain decoding's step rates too, a round skips drafting where plain decoding is expected to be faster).

Every row of a round runs the target over the same width t (anchor + t−1 slots), so a round costs what its widest
row costs. Algorithm 1's greedy search therefore runs over the shared width (`rectangle_drafts`): t grows one slot at
a time, each step adding every row's chance of accepting that slot to the expected commits τ*, while
τ*·rounds-per-second(t) improves. With one row this is exactly the paper's Algorithm 1. A rule may only look at
information available before the token it decides about (non-anticipating): the decision to verify slot k uses
confidences c_0 … c_k, which depend on drafts before slot k, never on d_k or later (DSpark paper, Appendix A), so
scheduling never changes what is committed (lossless); it only changes the work.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch


def survival(confidence_logits: torch.Tensor, temperatures: torch.Tensor | None = None) -> torch.Tensor:
    """Per-slot conditional acceptance σ(c_k / T_k) [γ] (T_k from calibration; 1 when absent)."""
    logits = confidence_logits.float()
    if temperatures is not None:
        logits = logits / temperatures.to(logits.device)[: logits.shape[-1]]
    return torch.sigmoid(logits)


class StepCostTable:
    """Measured round cost: rounds (steps) per second at a verify width of B tokens per row (anchor included),
    linear in between the measured widths and flat beyond them. A flat table means verifying more costs nothing."""

    def __init__(self, widths: list[int], steps_per_second: list[float]):
        if len(widths) != len(steps_per_second) or not widths or sorted(widths) != list(widths):
            raise ValueError("step-cost table: widths must be increasing and match steps_per_second one to one")
        if any(s <= 0 for s in steps_per_second):
            raise ValueError("step-cost table: steps per second must be positive")
        self.widths, self.rates = list(widths), list(steps_per_second)

    def __call__(self, width: int) -> float:
        w, r = self.widths, self.rates
        if width <= w[0]:
            return r[0]
        for (w0, r0), (w1, r1) in zip(zip(w, r), zip(w[1:], r[1:])):
            if width <= w1:
                return r0 + (r1 - r0) * (width - w0) / (w1 - w0)
        return r[-1]

    @classmethod
    def from_latency_ms(cls, latency_ms: dict[int, float]) -> "StepCostTable":
        widths = sorted(latency_ms)
        return cls(widths, [1000.0 / latency_ms[w] for w in widths])

    def latency_ms(self) -> dict[int, float]:
        """Round latency in ms by measured width: the inverse of `from_latency_ms`."""
        return {w: 1000.0 / r for w, r in zip(self.widths, self.rates)}


RULES = ("none", "threshold", "algorithm1")


@dataclass(frozen=True)
class Scheduling:
    """A rule and, for algorithm1, the round cost by verify width t (tokens per row): one table for every batch
    size, or {rows: table} as `BatchEngine.round_cost_tables` measures (a batch uses the smallest measured size that
    holds it, else the largest). `plain` (algorithm1 only): plain decoding's steps per second by batch size
    (`BatchEngine.plain_step_rates`); with it a round drafts nothing when plain decoding is expected to be faster at
    its batch size — Algorithm 1 chooses among widths but pays the draft's block every round, which at many rows
    on a large target can cost more than all it saves."""

    rule: str = "none"  # one of RULES
    cost: StepCostTable | Mapping[int, StepCostTable] | None = None
    plain: Mapping[int, float] | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"scheduling rule {self.rule!r} is unknown; use one of {RULES}")
        if self.rule == "algorithm1" and not self.cost:
            raise ValueError("algorithm1 scheduling needs a StepCostTable per batch size "
                             "(BatchEngine.round_cost_tables() measures them)")
        if self.plain is not None and (self.rule != "algorithm1" or not self.plain
                                       or any(r <= 0 for r in self.plain.values())):
            raise ValueError("plain step rates go with algorithm1 and must be positive steps per second by batch "
                             "size (BatchEngine.plain_step_rates() measures them)")

    def table(self, rows: int) -> StepCostTable:
        if isinstance(self.cost, StepCostTable):
            return self.cost
        sizes = sorted(self.cost)
        return self.cost[next((s for s in sizes if s >= rows), sizes[-1])]

    def plain_rate(self, rows: int) -> float | None:
        """Plain decoding's steps per second for a batch of `rows` (None without `plain`)."""
        if not self.plain:
            return None
        sizes = sorted(self.plain)
        return self.plain[next((s for s in sizes if s >= rows), sizes[-1])]

    def rates(self, rows: int, gamma: int, device: torch.device | None = None) -> torch.Tensor:
        """Rounds per second at verify widths 1 … γ+1 for a batch of `rows` [γ+1], float64."""
        table = self.table(rows)
        return torch.tensor([table(t) for t in range(1, gamma + 2)], dtype=torch.float64, device=device)


def rectangle_drafts(alive: torch.Tensor, rates: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
    """Algorithm 1 over a shared verify width: survival `alive` [..., R, γ] (zero past a row's budget) and rounds per
    second at widths 1 … γ+1 `rates` [γ+1] -> drafts every row verifies [...] (long, stays on device; 0-d for one
    round, one per round for a stack of rounds). `anchors`: how many rows commit an anchor (0-d; default R; padding
    rows of a bucket commit nothing)."""
    prefix = alive.float().clamp(0, 1).cumprod(-1)  # [..., R, γ] chance that slot j is accepted
    gain = prefix.sum(-2).to(torch.float64)  # [..., γ] expected extra commits from verifying slot j in every row
    if anchors is None:
        anchors = torch.tensor(float(prefix.shape[-2]), device=alive.device)
    first = anchors.to(torch.float64).reshape(1).expand(*gain.shape[:-1], 1)  # [..., 1]
    tau = torch.cat([first, gain], -1).cumsum(-1)  # [..., γ+1] expected commits by width
    throughput = tau * rates  # [..., γ+1]
    improving = (throughput[..., 1:] > throughput[..., :-1]) & (gain > 0)  # [..., γ]
    return improving.long().cumprod(-1).sum(-1)  # slots kept until the first step that does not improve


def scheduled_lengths(confidence_logits: torch.Tensor | None, room: torch.Tensor, gamma: int, rule: str,
                      threshold: torch.Tensor, temperatures: torch.Tensor | None,
                      rates: torch.Tensor | None) -> torch.Tensor:
    """Drafts to verify per row [B]: at most γ and at most `room` [B] (the token budget left after the bonus; −1 on
    a row without a request). `threshold` (0-d): the threshold rule's cut (0 cuts nothing); `rates`: algorithm1's
    rounds per second for this many rows, by verify width [γ+1]. Tensor ops only (no host value is read), so a CUDA graph can capture it."""
    lengths = room.clamp(0, gamma)  # [B]
    if rule == "none" or confidence_logits is None or gamma == 0:
        return lengths
    alive = survival(confidence_logits[:, :gamma], temperatures)  # [B, γ]
    if rule == "threshold":
        below = alive < threshold  # [B, γ]
        cut = torch.where(below.any(-1), below.long().argmax(-1), gamma)  # [B] first slot below
        return torch.minimum(lengths, cut)
    slots = torch.arange(gamma, device=room.device)
    alive = alive.masked_fill(slots[None] >= lengths[:, None], 0.0)  # slots beyond the budget cannot be verified
    anchors = (room >= 0).sum()  # rows that hold a request
    return torch.minimum(lengths, rectangle_drafts(alive, rates, anchors))
