"""How many of the drafted tokens to verify, decided from the confidence head.

A rule may only look at information available before the token it decides about (non-anticipating): the decision
to verify slot k may depend on confidences c_0 … c_k (which depend on drafts before slot k) but never on d_k or
later, or the output stops being lossless (DSpark paper, Appendix A).
"""
from __future__ import annotations

import torch


def survival(confidence_logits: torch.Tensor, temperatures: torch.Tensor | None = None) -> torch.Tensor:
    """Per-slot conditional acceptance σ(c_k / T_k) [γ] (T_k from calibration; 1 when absent)."""
    logits = confidence_logits.float()
    if temperatures is not None:
        logits = logits / temperatures.to(logits.device)[: logits.shape[-1]]
    return torch.sigmoid(logits)


def threshold_length(confidence_logits: torch.Tensor, threshold: float,
                     temperatures: torch.Tensor | None = None) -> int:
    """Verify slots up to the first whose confidence σ(c_k / T_k) is below `threshold` (all when none is)."""
    below = (survival(confidence_logits, temperatures) < threshold).nonzero()
    return int(below[0]) if below.numel() else int(confidence_logits.shape[-1])


class StepCostTable:
    """Measured round cost: rounds (steps) per second at a verify width of B tokens per row (anchor included),
    linear in between the measured widths and flat beyond them. A flat table means verifying more costs nothing.
    The list scheduler below reads B as the total over its requests (the paper's packed verify)."""

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


def schedule_prefixes(survival: torch.Tensor, cost: StepCostTable) -> list[int]:
    """DSpark's hardware-aware prefix scheduler (paper Algorithm 1) for R requests.

    survival [R, γ] holds each request's conditional acceptance per slot; a[r, j] = Π_{i≤j} survival[r, i] is the
    chance slot j is accepted. Every request verifies its anchor (B starts at R, τ* at R). Candidates (r, j) are
    taken in order of decreasing a; each one extends request r's prefix by one slot, and is kept while the expected
    throughput Θ = τ*·SPS(B) improves; the first candidate that does not improve it stops the search (the early
    stop keeps the rule non-anticipating). Returns how many drafts each request verifies."""
    prefix = survival.float().clamp(0, 1).cumprod(-1)  # [R, γ]
    requests, slots = prefix.shape
    order = sorted(((float(prefix[r, j]), j, r) for r in range(requests) for j in range(slots)
                    if prefix[r, j] > 0), key=lambda item: (-item[0], item[1], item[2]))
    lengths = [0] * requests
    width, tau = requests, float(requests)
    best = tau * cost(width)
    for value, j, r in order:
        if j != lengths[r]:  # a prefix is non-increasing, so request r's earlier slots always come first
            continue
        width, tau = width + 1, tau + value
        throughput = tau * cost(width)
        if throughput <= best:
            break
        best = throughput
        lengths[r] = j + 1
    return lengths
