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
