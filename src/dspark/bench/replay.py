"""Greedy acceptance by replay: the exact verify rounds of greedy speculative decoding, computed in parallel.

At temperature 0 the output is the target's own greedy continuation, so every round is determined by it: at anchor
position p the draft sees the target's features of positions < p, proposes a block, and the accepted count is the
length of the prefix that matches the continuation. This module runs the target once over prompt + continuation,
drafts a block at *every* position in one batched draft pass, then walks the rounds — the same τ as running the
engine (tested), at a fraction of the cost, which makes held-out evaluation cheap on a GPU. Greedy only.
"""
from __future__ import annotations

from typing import Sequence

import torch

from dspark.config import GenerationConfig
from dspark.engine.draft_step import decode_blocks
from dspark.engine.stats import GenerationStats
from dspark.model.block_forward import draft_forward
from dspark.model.blocks import build_blocks
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target


@torch.inference_mode()
def replay_greedy(target: Target, draft: DSparkDraft, prompt: Sequence[int], continuation: Sequence[int],
                  max_drafts: int | None = None, confidence: list | None = None) -> GenerationStats:
    """Rounds of greedy speculative decoding of `prompt` that produce exactly `continuation` (the target's greedy
    output, first token included), with at most `max_drafts` drafts verified per round. When `confidence` is a
    list, each round appends (confidence logits of its whole block, proposed, accepted)."""
    from dspark.engine.batch import prepare_pair

    prepare_pair(target, draft)
    cfg = draft.config
    gamma = min(max_drafts or cfg.num_draft_tokens, cfg.num_draft_tokens)
    p0, total = len(prompt), len(continuation)
    if total < 2:
        return GenerationStats((), (), p0, total)
    device = target.device
    ids = torch.tensor([list(prompt) + list(continuation)], device=device)  # [1, S]
    out = target.forward(ids)
    anchors = torch.arange(p0, p0 + total - 1, device=device)[None]  # every position that can be an anchor
    keep = torch.ones_like(anchors, dtype=torch.bool)
    mask = torch.zeros_like(ids)
    mask[:, p0:] = 1
    blocks = build_blocks(ids, mask, anchors, keep, cfg.block_size, cfg.mask_token_id, mode=cfg.mode)
    hidden = draft_forward(draft, out.features.to(draft.fc.weight.dtype), blocks).hidden[0]  # [N, γ, d]
    proposal = decode_blocks(draft, hidden, ids[0, anchors[0]], GenerationConfig(), None)
    drafts = proposal.tokens.tolist()  # [N, γ]
    logits = proposal.confidence_logits.tolist() if proposal.confidence_logits is not None else None
    seq = ids[0].tolist()
    accepted, proposed = [], []
    p = p0  # the anchor's position; the first token (position p0) came from the prefill
    while p < p0 + total - 1:
        room = min(gamma, p0 + total - 1 - p - 1)  # drafts that still fit before the last token
        block = drafts[p - p0][:room]
        a = 0
        while a < len(block) and block[a] == seq[p + 1 + a]:
            a += 1
        accepted.append(a)
        proposed.append(len(block))
        if confidence is not None and logits is not None:
            confidence.append((logits[p - p0], len(block), a))
        p += a + 1
    return GenerationStats(tuple(accepted), tuple(proposed), p0, total)
