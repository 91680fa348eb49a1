"""Acceptance for a batch of verified blocks, each row with its own verified length, all on device (no host sync).

Row b verified [anchor, d_0 … d_{T−2}] but only its first L_b drafts count (the scheduler's cut; later ones are never accepted). Greedy: accept while the draft equals
the target's argmax. Sampling: accept d_k with probability min(1, p(d_k)/q(d_k)); at the first rejection draw from
norm(max(0, p − q)) (p itself when no mass is left); after L_b accepted drafts draw the bonus from p.
"""
from __future__ import annotations

import torch

from dspark.engine.sampling import RowSampling, sample


def accept_greedy(drafts: torch.Tensor, lengths: torch.Tensor,
                  target_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """drafts [B, T−1], lengths [B], target_logits [B, T, V] -> accepted [B], bonus [B]."""
    t = target_logits.shape[1]
    choice = target_logits.argmax(-1)  # [B, T]
    slots = torch.arange(t - 1, device=drafts.device)  # [T−1]
    match = (choice[:, :-1] == drafts) & (slots[None] < lengths[:, None])  # [B, T−1]
    accepted = match.long().cumprod(1).sum(1)  # [B]
    return accepted, choice.gather(1, accepted[:, None])[:, 0]


def accept_sampling(drafts: torch.Tensor, lengths: torch.Tensor, draft_probs: torch.Tensor,
                    target_probs: torch.Tensor, generator: torch.Generator | None, rows: RowSampling | None = None,
                    draws: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """drafts [B, T−1], lengths [B], draft_probs q [B, T−1, V], target_probs p [B, T, V] (processed)
    -> accepted [B], bonus [B], distributed exactly as the target's own samples. `rows`: each row draws from its own
    stream, `draws` (≥ T−1) uniforms a round whatever T is, so what a row draws does not depend on the others."""
    b, t, v = target_probs.shape
    slots = torch.arange(t - 1, device=drafts.device)  # [T−1]
    p_d = target_probs[:, :-1].gather(-1, drafts[..., None])[..., 0]  # [B, T−1]
    q_d = draft_probs.gather(-1, drafts[..., None])[..., 0]  # [B, T−1]
    if rows is None:
        u = torch.rand(drafts.shape, generator=generator, device=drafts.device)  # [B, T−1]
    else:
        u = rows.uniform(b, max(draws, t - 1), drafts.device)[:, : t - 1]  # [B, T−1]
    ok = (u * q_d < p_d) & (slots[None] < lengths[:, None])  # u < p/q without dividing; p(d) = 0 never passes
    accepted = ok.long().cumprod(1).sum(1)  # [B]
    at = accepted[:, None, None].expand(b, 1, v)  # [B, 1, V]
    p = target_probs.gather(1, at)[:, 0]  # [B, V]
    q_padded = torch.cat([draft_probs, torch.zeros_like(target_probs[:, :1])], dim=1)  # [B, T, V]
    q = q_padded.gather(1, at)[:, 0]  # [B, V]
    rejected = (accepted < lengths)[:, None]  # [B, 1]
    residual = (p - q).clamp_min(0)  # [B, V]
    total = residual.sum(-1, keepdim=True)  # [B, 1]
    pick = torch.where(rejected & (total > 0), residual / total.clamp_min(1e-30), p)  # [B, V]
    return accepted, sample(pick, generator) if rows is None else rows.sample(pick)
