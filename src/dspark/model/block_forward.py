"""The draft's forward over many anchor blocks at once (training, and the exact replay of greedy rounds in
`dspark.bench.replay`), and the aligned teacher logits.

Given the target's concatenated features for a whole sequence and the blocks built by `blocks.build_blocks`, run
every block in one pass (each sees the context before its anchor and itself) and return base logits + the
teacher-forced Markov bias and the confidence logits. No loss and no optimiser here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from dspark.model.blocks import Blocks, flex_block_mask, sdpa_mask
from dspark.model.draft import DSparkDraft

FLEX_PAD = 128  # flex pads the context to a multiple of this, so a run compiles a handful of shapes, not one per length


@dataclass(frozen=True)
class DraftOutputs:
    hidden: torch.Tensor  # [B, N, γ, d] final-normed block states
    markov_bias: torch.Tensor | None  # [B, N, γ, V]
    logits: torch.Tensor  # [B, N, γ, V] base + Markov bias
    confidence_logits: torch.Tensor | None  # [B, N, γ]


def draft_forward(draft: DSparkDraft, features: torch.Tensor, blocks: Blocks, attention: str = "sdpa") -> DraftOutputs:
    """features [B, S, m·d] from the target; blocks for N anchors of γ slots; attention "sdpa" (dense mask) or
    "flex" (block mask; the context is zero-padded, and no block sees the padding, which lies past every anchor)."""
    b, s, _ = features.shape
    n, gamma = blocks.block_ids.shape[1:]
    positions = blocks.positions[:, :s]  # [B, S]
    if attention == "flex":
        extra = -s % FLEX_PAD
        features = F.pad(features, (0, 0, 0, extra))  # [B, S', m·d]
        positions = torch.cat([positions, torch.arange(s, s + extra, device=positions.device).expand(b, -1)], 1)
        mask = flex_block_mask(blocks.anchors, blocks.keep, s + extra, gamma)
    else:
        mask = sdpa_mask(blocks.attention_mask, blocks.keep, s, gamma)  # [B, 1, N·γ, S+N·γ]
    context = draft.fuse(features.to(draft.fc.weight.dtype))  # [B, S, d] (S' when padded for flex)
    kv = draft.context_kv(context, positions)
    hidden = draft(blocks.block_ids.reshape(b, n * gamma), blocks.positions[:, s:], kv, mask)
    hidden = hidden.view(b, n, gamma, -1)[:, :, blocks.slot_offset:]  # [B, N, P, d] the predicting slots
    logits = draft.base_logits(hidden)  # [B, N, γ, V]
    bias = None
    if draft.markov_head is not None:
        bias = draft.markov_head.teacher_forced(blocks.prev_ids, hidden)  # [B, N, γ, V]
        logits = logits + bias
    return DraftOutputs(hidden, bias, logits, draft.confidence_logits(hidden, blocks.prev_ids))


def teacher_logits(lm_head: nn.Module, last_hidden: torch.Tensor, blocks: Blocks) -> torch.Tensor:
    """The target's distribution for each slot's label: lm_head(last_hidden[p + k]) -> [B, N, γ, V] (no grad)."""
    b = last_hidden.shape[0]
    rows = blocks.teacher_rows.reshape(b, -1)  # [B, N·γ]
    picked = torch.gather(last_hidden, 1, rows[..., None].expand(-1, -1, last_hidden.shape[-1]))  # [B, N·γ, d]
    with torch.no_grad():
        return lm_head(picked).view(*blocks.teacher_rows.shape, -1).float()
