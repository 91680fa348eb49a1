"""Verification of a drafted block against the target: pure functions over tensors.

Greedy: a draft is accepted while it equals the target's argmax at the row before it. Sampling: the standard
speculative-sampling rule — accept d with probability min(1, p(d)/q(d)); on the first rejection draw from the
residual norm(max(0, p − q)); if all drafts survive, draw the bonus from the target's last row. Either way the
committed tokens are distributed exactly as the target's own samples.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from dspark.engine.sampling import sample


@dataclass(frozen=True)
class Verdict:
    accepted: int  # drafts kept (0 … L)
    bonus: int  # the target's own token after them: a correction, or one more after a fully accepted block


def verify_greedy(drafts: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """drafts [L] int, target_logits [L+1, V] for rows [anchor, d_0 … d_{L−1}]."""
    choice = target_logits.argmax(-1)  # [L+1]
    match = (choice[:-1] == drafts).long()  # [L]
    accepted = int(match.cumprod(0).sum()) if match.numel() else 0
    return Verdict(accepted, int(choice[accepted]))


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p − q)) [V]; falls back to p when no mass is left (p ≤ q everywhere)."""
    r = (p - q).clamp_min(0)
    total = r.sum()
    return r / total if total > 0 else p


def verify_sampling(drafts: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor,
                    generator: torch.Generator | None) -> Verdict:
    """drafts [L], draft_probs q [L, V], target_probs p [L+1, V] (processed) -> Verdict."""
    num = drafts.shape[0]
    if num:
        idx = torch.arange(num, device=drafts.device)
        p_d = target_probs[idx, drafts]  # [L]
        q_d = draft_probs[idx, drafts]  # [L]
        u = torch.rand(num, generator=generator, device=drafts.device)  # [L]
        ok = u * q_d < p_d  # u < p/q without dividing; p(d) = 0 never passes
        rejected = (~ok).nonzero()
        if rejected.numel():
            k = int(rejected[0])
            token = sample(residual(target_probs[k], draft_probs[k]), generator)
            return Verdict(k, int(token))
    return Verdict(num, int(sample(target_probs[num], generator)))
