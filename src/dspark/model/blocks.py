"""Anchor blocks over one sequence: anchor sampling, block inputs, labels, positions, the block attention mask and
validity mask. Training drafts from sampled anchors (`dspark.train.trainer`); the exact replay of greedy verify
rounds drafts from every position (`dspark.bench.replay`).

A valid anchor p has loss_mask[p] = loss_mask[p+1] = 1 (p ≤ S−2). Block j is [x_p, MASK × (γ−1)] at positions
p … p+γ−1; slot k is supervised with x_{p+k+1} ("sample from anchor") while the cumulative-product eval mask holds.
A block sees the context strictly before its anchor and its whole own block (bidirectional), nothing else: as a dense
mask for SDPA (`sdpa_mask`) or as a FlexAttention block mask (`flex_block_mask`).
DFlash mode (the comparison baseline) uses the same block inputs but slot k predicts x_{p+k}: slot 0 predicts
nothing, so the label arrays cover slots 1 … γ−1 only. Pure tensor bookkeeping: no model, no loss.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Blocks:
    block_ids: torch.Tensor  # [B, N, γ] draft inputs
    slot_offset: int  # 0 (dspark) or 1 (dflash): block slot of the first label below
    positions: torch.Tensor  # [B, S + N·γ] context positions then block positions
    label_indices: torch.Tensor  # [B, N, γ] p+1 … p+γ (unclamped)
    target_ids: torch.Tensor  # [B, N, γ] dataset tokens the slots predict
    prev_ids: torch.Tensor  # [B, N, γ] teacher-forced Markov predecessors [x_p, x_{p+1}, …]
    teacher_rows: torch.Tensor  # [B, N, γ] row of the target's last hidden that predicts each label
    eval_mask: torch.Tensor  # [B, N, γ] bool, contiguous valid prefix
    loss_weights: torch.Tensor  # [B, N, γ] eval_mask · exp(−k / decay)
    attention_mask: torch.Tensor  # [B, N·γ, S + N·γ] bool, the semantic mask (dummy blocks see nothing)
    keep: torch.Tensor  # [B, N] bool, real (not padding) blocks
    anchors: torch.Tensor  # [B, N] anchor positions p


def valid_anchor_mask(loss_mask: torch.Tensor) -> torch.Tensor:
    """loss_mask [B, S] -> [B, S] bool, True where p and p+1 are both supervised."""
    valid = torch.zeros_like(loss_mask, dtype=torch.bool)
    valid[:, :-1] = (loss_mask[:, :-1] > 0) & (loss_mask[:, 1:] > 0)
    return valid


def sample_anchors(loss_mask: torch.Tensor, num_anchors: int,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to `num_anchors` valid anchors per sequence, uniformly without replacement, sorted, padded with dummy
    blocks (anchor 0, keep False) -> anchors [B, N] long, keep [B, N] bool."""
    valid = valid_anchor_mask(loss_mask)
    b = loss_mask.shape[0]
    anchors = torch.zeros(b, num_anchors, dtype=torch.long)
    keep = torch.zeros(b, num_anchors, dtype=torch.bool)
    for i in range(b):
        candidates = valid[i].nonzero().flatten().cpu()
        if candidates.numel() > num_anchors:
            pick = torch.randperm(candidates.numel(), generator=generator)[:num_anchors]
            candidates = candidates[pick].sort().values
        anchors[i, : candidates.numel()] = candidates
        keep[i, : candidates.numel()] = True
    return anchors.to(loss_mask.device), keep.to(loss_mask.device)


def block_attention_mask(anchors: torch.Tensor, keep: torch.Tensor, seq_len: int, block_size: int) -> torch.Tensor:
    """[B, N·γ, S + N·γ] bool: block j sees context positions < p_j and its own γ slots; dummy blocks see nothing."""
    b, n = anchors.shape
    device = anchors.device
    ctx_visible = torch.arange(seq_len, device=device)[None, None, :] < anchors[:, :, None]  # [B, N, S]
    block_of_key = torch.arange(n * block_size, device=device) // block_size  # [N·γ]
    own_block = block_of_key[None, :] == torch.arange(n, device=device)[:, None]  # [N, N·γ]
    rows = torch.cat([ctx_visible, own_block[None].expand(b, -1, -1)], dim=-1)  # [B, N, S + N·γ]
    rows = rows & keep[:, :, None]
    return rows.repeat_interleave(block_size, dim=1)  # [B, N·γ, S + N·γ]


def sdpa_mask(attention_mask: torch.Tensor, keep: torch.Tensor, seq_len: int, block_size: int) -> torch.Tensor:
    """The mask to feed SDPA [B, 1, N·γ, S + N·γ]: dummy blocks also see their own block, so no row is empty
    (an empty row gives NaN); their outputs are masked out of every loss."""
    queries = attention_mask.shape[1]
    block = torch.arange(queries, device=keep.device) // block_size  # [N·γ]
    own = block[:, None] == block[None, :]  # [N·γ, N·γ]
    dummy = (~keep).repeat_interleave(block_size, dim=1)[:, :, None]  # [B, N·γ, 1]
    mask = attention_mask.clone()
    mask[:, :, seq_len:] |= own & dummy
    return mask[:, None]


def flex_block_mask(anchors: torch.Tensor, keep: torch.Tensor, seq_len: int, block_size: int):
    """The same visibility as `sdpa_mask` as a FlexAttention `BlockMask` over N·γ queries and S + N·γ keys: block j
    sees context positions < p_j (when kept) and its own γ slots. Tiles nobody sees are skipped, so the cost follows
    the visible area instead of the dense [N·γ, S + N·γ] rectangle."""
    from torch.nn.attention.flex_attention import create_block_mask

    b, n = anchors.shape

    def visible(batch, head, q, kv):
        block = q // block_size
        context = (kv < seq_len) & (kv < anchors[batch, block]) & keep[batch, block]
        return context | ((kv >= seq_len) & ((kv - seq_len) // block_size == block))

    return create_block_mask(visible, b, None, n * block_size, seq_len + n * block_size, device=anchors.device)


def build_blocks(input_ids: torch.Tensor, loss_mask: torch.Tensor, anchors: torch.Tensor, keep: torch.Tensor,
                 block_size: int, mask_token_id: int, decay: float = 4.0, mode: str = "dspark") -> Blocks:
    """Everything a training forward needs for the given anchors (see module doc). Label-side arrays have
    γ slots in "dspark" mode and γ−1 (slots 1 … γ−1) in "dflash" mode."""
    b, s = input_ids.shape
    device = input_ids.device
    offset = 1 if mode == "dflash" else 0  # first block slot that predicts a token
    k = torch.arange(block_size - offset, device=device)  # [P] prediction slots, 0-indexed among themselves
    gather = lambda idx: torch.gather(input_ids, 1, idx.reshape(b, -1)).reshape(idx.shape)  # noqa: E731
    anchor_tokens = gather(anchors)  # [B, N]
    block_ids = torch.full((*anchors.shape, block_size), mask_token_id, dtype=torch.long, device=device)
    block_ids[..., 0] = torch.where(keep, anchor_tokens, torch.full_like(anchor_tokens, mask_token_id))
    labels = anchors[..., None] + 1 + k  # [B, N, P]: x_{p+k+1} (dspark slot k; dflash slot k+1)
    clamped = labels.clamp(max=s - 1)
    target_ids = torch.where(keep[..., None], gather(clamped), anchor_tokens[..., None].expand_as(labels))
    prev_ids = torch.cat([anchor_tokens[..., None], target_ids[..., :-1]], dim=-1)  # [B, N, γ]
    in_range = labels < s
    supervised = torch.gather(loss_mask, 1, clamped.reshape(b, -1)).reshape(labels.shape) > 0
    eval_mask = (in_range & supervised & keep[..., None]).long().cumprod(-1).bool()  # [B, N, γ]
    weights = eval_mask.float() * torch.exp(-k.float() / decay)  # [B, N, γ]
    ctx_positions = torch.arange(s, device=device).expand(b, s)  # [B, S]
    block_positions = (anchors[..., None] + torch.arange(block_size, device=device)).reshape(b, -1)  # [B, N·γ]
    return Blocks(
        block_ids=block_ids,
        slot_offset=offset,
        positions=torch.cat([ctx_positions, block_positions], dim=1),
        label_indices=labels,
        target_ids=target_ids,
        prev_ids=prev_ids,
        teacher_rows=clamped - 1,
        eval_mask=eval_mask,
        loss_weights=weights,
        attention_mask=block_attention_mask(anchors, keep, s, block_size),
        keep=keep,
        anchors=anchors,
    )
