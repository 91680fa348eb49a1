"""The draft over a preallocated (static) context cache: B sequences at once, each at its own position.

Per draft layer, context keys/values [B_max, 2·H_kv, L_max, D] projected from fused target features (`extend`: one
GEMM for every layer's, since all of them project the same features; RoPE from position tables built once). A
block is drafted (`propose`) by writing the block's own keys/values just past the row's context (positions
start … start+block_size−1) and attending to everything before start + block_size: context causally complete,
block bidirectional, as `DSparkDraft.forward`. The next `extend` overwrites those block entries with real context.
Then the Markov decode picks the drafts (`draft_step.decode_blocks`). On CUDA the block and the
context extension run the same Triton kernels as the static target. No verification here.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from dspark.config import GenerationConfig
from dspark.engine import cache_attention, layer_kernels
from dspark.engine.draft_step import Proposal, decode_blocks
from dspark.engine.fused_layers import fuse_projections, head_norms
from dspark.engine.sampling import RowSampling
from dspark.engine.static_target import (added_norm, aligned, attention_bias, gated, grouped_attention,
                                         kernels_serve, norm_eps, position_tables, read_rows, rms_norm, rope_tables,
                                         write_rows)
from dspark.model.draft import DSparkDraft
from dspark.model.rope import rotate


class StaticDraft:
    """Context caches [B_max, 2·H_kv, L_max, D] of a `DSparkDraft` (keys, then values; `keys` / `values` are views) for
    up to `max_batch` rows of `max_length` positions. Each layer's Q/K/V and gate/up run as one GEMM (fused_layers.py),
    q and k are rotated in one pass, keys and values written in one."""

    def __init__(self, draft: DSparkDraft, max_batch: int, max_length: int):
        self.draft = draft
        cfg = draft.config
        self.block_size = cfg.block_size
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.max_length = aligned(max_length + cfg.block_size)  # room for the block after the last context
        self.fused = [fuse_projections(layer) for layer in draft.layers]
        # every layer's context keys/values project the same fused features: one GEMM for all of them
        kv_rows = slice(self.heads * self.head_dim, None)
        self.context_weight = torch.cat([f.qkv_weight[kv_rows] for f in self.fused])  # [n·2·H_kv·D, d]
        weight = draft.fc.weight
        self.offsets = torch.arange(self.max_length, device=weight.device)  # [L] a step's positions past its start
        self._mask: torch.Tensor | None = None  # [1, 1, d] the mask token's embedding (`mask_embedding`)
        self.rope = position_tables(*draft.rotary(self.offsets, weight.dtype))  # cos, signed sin [L, D]
        shape = (max_batch, 2 * self.kv_heads, self.max_length, self.head_dim)
        self.kv = [torch.zeros(shape, dtype=weight.dtype, device=weight.device) for _ in draft.layers]
        self.keys = [cache[:, : self.kv_heads] for cache in self.kv]  # [B_max, H_kv, L_max, D] views
        self.values = [cache[:, self.kv_heads :] for cache in self.kv]

    def copy_rows(self, sources: torch.Tensor, destinations: torch.Tensor) -> None:
        """Move sequences' contexts to other rows (compacting the batch), rows sources [k] to destinations [k]."""
        for cache in self.kv:
            cache.index_copy_(0, destinations, cache.index_select(0, sources))  # [k, 2·H_kv, L, D]

    def _rope(self, positions: torch.Tensor, rotated: int, fast: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The kernels' position tables cos / signed sin [L, D] (fast), else tables [B, T, rotated + H_kv, D] for
        `rotate` over [rotated heads | v heads] at positions [B, T], v's heads unchanged (once per step)."""
        if fast:
            return self.rope
        return rope_tables(self.rope[0][positions], self.rope[1][positions], rotated, self.kv_heads)

    def _into_cache(self, index: int, qkv: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                    positions: torch.Tensor, rows: torch.Tensor | None, q_heads: int, fast: bool) -> torch.Tensor:
        """Layer `index`'s projected heads qkv [B, T, q_heads + 2·H_kv, D] (q_heads 0: keys and values only) -> k, v
        normed, rotated and written into the layer's cache at positions; returns the rotated q [B, T, H, D] (empty
        when q_heads is 0)."""
        attn = self.draft.layers[index].self_attn
        if fast:  # q/k norms, rotation and the cache write in one kernel
            norms = (attn.q_norm.weight, attn.k_norm.weight, norm_eps(attn.q_norm))
            return layer_kernels.rope_write(qkv, q_heads, self.kv_heads, *rope, self.kv[index], rows, positions, norms)
        qkv = head_norms(qkv, q_heads, self.kv_heads, attn.q_norm, attn.k_norm)
        qkv = rotate(qkv, *rope)  # [B, T, (H +) 2·H_kv, D]
        write_rows(self.kv[index], rows, positions, qkv[:, :, q_heads:].transpose(1, 2))
        return qkv[:, :, :q_heads]

    @torch.inference_mode()
    def extend(self, features: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None = None) -> None:
        """Verified target features [B, T, m·d] for positions start_b … start_b+T−1 of rows [B] (None: 0 … B−1)."""
        b, t = features.shape[:2]
        positions = start[:, None] + self.offsets[:t]  # [B, T]
        context = self.draft.fuse(features.to(self.draft.fc.weight.dtype))  # [B, T, d]
        fast = layer_kernels.usable(context, self.head_dim)
        rope = self._rope(positions, self.kv_heads, fast)
        layers, per_layer = len(self.kv), 2 * self.kv_heads
        kv = F.linear(context, self.context_weight).view(b, t, layers, per_layer, self.head_dim)  # [B, T, n, 2·H_kv, D]
        for index in range(layers):
            self._into_cache(index, kv[:, :, index], rope, positions, rows, 0, fast)

    def mask_embedding(self) -> torch.Tensor:
        """[1, 1, d] the mask token's embedding in the draft's dtype, which fills every block slot after the anchor
        (taken once, from the embedding the draft is tied to)."""
        if self._mask is None:
            self.draft._require_embeddings()
            row = self.draft.embed_tokens.weight[self.draft.config.mask_token_id]  # [d]
            self._mask = row.to(self.draft.fc.weight.dtype)[None, None].clone()
        return self._mask

    def block_states(self, anchor: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None,
                     window: int | None = None) -> torch.Tensor:
        """The block [anchor, mask …] at positions start … start+block_size−1 -> the predicting slots' final-normed
        states [B, γ, d] (DFlash mode: slot 0 predicts nothing, so γ = block_size − 1). Attention reads positions <
        window (default: all)."""
        window = min(window or self.max_length, self.max_length)
        draft, b, size = self.draft, anchor.shape[0], self.block_size
        mask = self.mask_embedding()  # [1, 1, d]
        positions = start[:, None] + self.offsets[:size]  # [B, γ_b]
        anchors = draft.embed_tokens(anchor[:, None]).to(mask.dtype)  # [B, 1, d]
        x = torch.cat([anchors, mask.expand(b, size - 1, -1)], dim=1)  # [B, γ_b, d]: [anchor, mask …]
        fast = kernels_serve(x, self.heads, self.kv_heads, self.head_dim, size)
        rope = self._rope(positions, self.heads + self.kv_heads, fast)
        if fast:  # the attention kernel masks by position: every slot sees keys up to the block's last position
            last = positions[:, -1:].expand(b, size).contiguous()  # [B, γ_b]
        else:
            seen = torch.arange(window, device=anchor.device)[None] < (start + size)[:, None]  # [B, W]
            bias = attention_bias(seen[:, None, None, :].expand(b, 1, size, window), self.heads // self.kv_heads,
                                  x.dtype)  # [B, 1, G·γ_b, W]
        layers = draft.layers
        h = rms_norm(layers[0].input_layernorm, x)
        for index, (layer, cache) in enumerate(zip(layers, self.kv)):
            attn, fused = layer.self_attn, self.fused[index]
            qkv = F.linear(h, fused.qkv_weight).view(b, size, self.heads + 2 * self.kv_heads, self.head_dim)
            q = self._into_cache(index, qkv, rope, positions, rows, self.heads, fast)  # [B, γ_b, H, D]
            if fast:
                out = cache_attention.attend(q, cache, self.kv_heads, last, rows, window, None)  # [B, γ_b, H, D]
            else:
                keys = read_rows(self.keys[index], rows, b, window)  # [B, H_kv, W, D]
                values = read_rows(self.values[index], rows, b, window)
                out = grouped_attention(q.transpose(1, 2), keys, values, bias).transpose(1, 2)  # [B, γ_b, H, D]
            x, h = added_norm(x, attn.o_proj(out.reshape(b, size, self.heads * self.head_dim)),
                              layer.post_attention_layernorm, fast)
            act = gated(F.linear(h, fused.gate_up_weight), F.silu, fast)  # [B, γ_b, I]
            following = layers[index + 1].input_layernorm if index + 1 < len(layers) else draft.norm
            x, h = added_norm(x, layer.mlp.down_proj(act), following, fast)
        return h[:, 1:] if draft.config.mode == "dflash" else h  # DFlash: slot k predicts x_{p+k}

    @torch.inference_mode()
    def propose(self, anchor: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None,
                config: GenerationConfig, generator: torch.Generator | None, window: int | None = None,
                confidence: bool = True, row_sampling: RowSampling | None = None) -> Proposal:
        """Draft one block per row after anchor [B], which sits at position start [B] (context holds < start) ->
        tokens [B, γ], probs [B, γ, V] (sampling), confidence logits [B, γ] (with a confidence head, unless
        `confidence` is False). Attention reads positions < window (default: all), which must cover start +
        block_size. `row_sampling`: each row samples with its own settings and stream (`RowSampling`)."""
        hidden = self.block_states(anchor, start, rows, window)
        return decode_blocks(self.draft, hidden, anchor, config, generator, confidence, row_sampling)
