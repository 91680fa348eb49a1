"""The draft over a preallocated (static) context cache: B sequences at once, each at its own position.

Per draft layer, context keys/values [B_max, H_kv, L_max, D] projected from fused target features (`extend`). A
block is drafted (`propose`) by writing the block's own keys/values just past the row's context (positions
start … start+block_size−1) and attending to everything before start + block_size: context causally complete,
block bidirectional, as `DSparkDraft.forward`. The next `extend` overwrites those block entries with real context.
Then the Markov decode picks the drafts (`decode_blocks`, shared with the batch-1 engine). No verification here.
"""
from __future__ import annotations

import torch

from dspark.config import GenerationConfig
from dspark.engine.draft_step import Proposal, decode_blocks
from dspark.engine.static_target import aligned, attention_bias, grouped_attention, read_rows, write_rows
from dspark.model.draft import DSparkDraft
from dspark.model.rope import apply_rotary


class StaticDraft:
    """Context K/V caches of a `DSparkDraft` for up to `max_batch` rows of `max_length` positions."""

    def __init__(self, draft: DSparkDraft, max_batch: int, max_length: int):
        self.draft = draft
        cfg = draft.config
        self.block_size = cfg.block_size
        self.max_length = aligned(max_length + cfg.block_size)  # room for the block after the last context
        weight = draft.fc.weight
        shape = (max_batch, cfg.num_key_value_heads, self.max_length, cfg.head_dim)
        self.keys = [torch.zeros(shape, dtype=weight.dtype, device=weight.device) for _ in draft.layers]
        self.values = [torch.zeros_like(k) for k in self.keys]

    def copy_row(self, source: int, destination: int) -> None:
        """Move one sequence's context to another row (compacting the batch)."""
        for cache in (*self.keys, *self.values):
            cache[destination].copy_(cache[source])

    def _write(self, context: torch.Tensor, positions: torch.Tensor, rows: torch.Tensor | None) -> None:
        """States [B, T, d] at positions [B, T] -> every layer's K/V written into the cache."""
        cos, sin = self.draft.rotary(positions, context.dtype)  # [B, T, D]
        for layer, keys, values in zip(self.draft.layers, self.keys, self.values):
            k, v = layer.self_attn.project_kv(context, cos, sin)  # [B, H_kv, T, D] each
            write_rows(keys, rows, positions, k)
            write_rows(values, rows, positions, v)

    @torch.inference_mode()
    def extend(self, features: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None = None) -> None:
        """Verified target features [B, T, m·d] for positions start_b … start_b+T−1 of rows [B] (None: 0 … B−1)."""
        t = features.shape[1]
        positions = start[:, None] + torch.arange(t, device=start.device)  # [B, T]
        context = self.draft.fuse(features.to(self.draft.fc.weight.dtype))  # [B, T, d]
        self._write(context, positions, rows)

    def _block_hidden(self, anchor: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None,
                      window: int) -> torch.Tensor:
        """The block [anchor, mask …] at positions start … start+block_size−1 -> final-normed states [B, γ_b, d]."""
        draft, b, size = self.draft, anchor.shape[0], self.block_size
        draft._require_embeddings()
        block_ids = torch.full((b, size), draft.config.mask_token_id, dtype=torch.long, device=anchor.device)
        block_ids[:, 0] = anchor
        positions = start[:, None] + torch.arange(size, device=anchor.device)  # [B, γ_b]
        x = draft.embed_tokens(block_ids).to(draft.fc.weight.dtype)  # [B, γ_b, d]
        cos, sin = draft.rotary(positions, x.dtype)
        seen = torch.arange(window, device=anchor.device)[None] < (start + size)[:, None]  # [B, W]: context + block
        attn0 = draft.layers[0].self_attn
        bias = attention_bias(seen[:, None, None, :].expand(b, 1, size, window), attn0.heads // attn0.kv_heads,
                              x.dtype)  # [B, 1, G·γ_b, W]
        for layer, keys, values in zip(draft.layers, self.keys, self.values):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_norm(attn.q_proj(h).view(b, size, attn.heads, attn.head_dim)).transpose(1, 2)  # [B, H, γ_b, D]
            q = apply_rotary(q, cos, sin)
            k, v = attn.project_kv(h, cos, sin)  # [B, H_kv, γ_b, D]
            write_rows(keys, rows, positions, k)
            write_rows(values, rows, positions, v)
            out = grouped_attention(q, read_rows(keys, rows, b, window), read_rows(values, rows, b, window), bias)
            x = x + attn.o_proj(out.transpose(1, 2).reshape(b, size, attn.heads * attn.head_dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return draft.norm(x)

    @torch.inference_mode()
    def propose(self, anchor: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None,
                config: GenerationConfig, generator: torch.Generator | None, window: int | None = None) -> Proposal:
        """Draft one block per row after anchor [B], which sits at position start [B] (context holds < start) ->
        tokens [B, γ], probs [B, γ, V] (sampling), confidence logits [B, γ] (with a confidence head). Attention
        reads positions < window (default: all), which must cover start + block_size."""
        hidden = self._block_hidden(anchor, start, rows, min(window or self.max_length, self.max_length))
        if self.draft.config.mode == "dflash":
            hidden = hidden[:, 1:]  # slot 0 predicts nothing; slot k predicts x_{p+k}
        return decode_blocks(self.draft, hidden, anchor, config, generator)
