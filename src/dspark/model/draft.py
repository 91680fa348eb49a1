"""The DSpark draft network: fc fusion of target features and KV-injection Qwen3 layers, plus the heads.

Target features of the chosen layers are fused once (`fc` → `hidden_norm`) into context states. Every draft layer
projects those context states and the block states with the same k_proj / v_proj / k_norm; queries come from the
block only; keys/values = [context ; block]; attention inside the block is bidirectional. The network does not
sample, cache or compute losses: the engine and the trainer do.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from dspark.config import DraftConfig
from dspark.model.heads import MARKOV_HEADS, ConfidenceHead
from dspark.model.rope import RotaryEmbedding, apply_rotary

LayerKV = tuple[torch.Tensor, torch.Tensor]  # keys, values: [B, H_kv, S, D] each (keys normed and rotated)


@functools.cache
def flex_attention_fn(cuda: bool):
    """FlexAttention: compiled on CUDA (its fast path), eager elsewhere (a slow reference, for tests)."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention) if cuda else flex_attention


class RMSNorm(nn.Module):
    """x · rsqrt(mean(x²) + eps) · weight as one fused op (`F.rms_norm`, fp32 accumulation): one kernel where the
    spelled-out form is eight, which matters in the launch-bound draft step."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.weight.shape, self.weight.to(x.dtype), self.eps)


class DraftAttention(nn.Module):
    def __init__(self, cfg: DraftConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        d = cfg.hidden_size
        self.q_proj = nn.Linear(d, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, d, bias=False)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def project_kv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> LayerKV:
        """x [B, S, d] -> rotated keys and values [B, H_kv, S, D]."""
        b, s, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(b, s, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rotary(k, cos, sin), v

    def forward(self, x: torch.Tensor, context: LayerKV, cos: torch.Tensor, sin: torch.Tensor,
                mask: torch.Tensor | None) -> torch.Tensor:
        """x [B, T, d] (normed block states), context K/V [B, H_kv, S, D], mask [B, 1, T, S+T] bool, a FlexAttention
        BlockMask over the same [T, S+T], or None."""
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.heads, self.head_dim)).transpose(1, 2)  # [B, H, T, D]
        q = apply_rotary(q, cos, sin)
        k, v = self.project_kv(x, cos, sin)  # [B, H_kv, T, D]
        keys = torch.cat([context[0], k], dim=2)  # [B, H_kv, S+T, D]
        values = torch.cat([context[1], v], dim=2)
        if mask is None or isinstance(mask, torch.Tensor):
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=self.heads != self.kv_heads)
        else:  # a FlexAttention BlockMask (training); flex has no autocast rule, so one dtype for q, k, v
            out = flex_attention_fn(q.is_cuda)(q.to(values.dtype), keys.to(values.dtype), values, block_mask=mask,
                                               enable_gqa=self.heads != self.kv_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class DraftMLP(nn.Module):
    def __init__(self, cfg: DraftConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DraftLayer(nn.Module):
    def __init__(self, cfg: DraftConfig):
        super().__init__()
        self.self_attn = DraftAttention(cfg)
        self.mlp = DraftMLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, context: LayerKV, cos: torch.Tensor, sin: torch.Tensor,
                mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), context, cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class DSparkDraft(nn.Module):
    """The draft. `embed_tokens` / `lm_head` are the target's (frozen): bind them with `tie_embeddings`, or build
    the draft `with_embeddings=True` to own frozen copies (as DeepSpec checkpoints do)."""

    def __init__(self, config: DraftConfig, with_embeddings: bool = False):
        super().__init__()
        self.config = cfg = config
        d = cfg.hidden_size
        self.fc = nn.Linear(cfg.feature_size, d, bias=False)
        self.hidden_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DraftLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(d, cfg.rms_norm_eps)
        self.rotary = RotaryEmbedding(cfg.rope, cfg.head_dim)
        self.markov_head = MARKOV_HEADS[cfg.markov_head_type](cfg.vocab_size, cfg.markov_rank, d) if cfg.markov_rank else None
        self.confidence_head = (
            ConfidenceHead(d, cfg.markov_rank if cfg.confidence_head_with_markov else 0)
            if cfg.enable_confidence_head else None
        )
        self.embed_tokens: nn.Embedding | None = None
        self.lm_head: nn.Linear | None = None
        self.draft_vocab: nn.Module | None = None  # inference only: a DraftVocab (model/draft_vocab.py) drafts from K ids
        if with_embeddings:
            self.tie_embeddings(nn.Embedding(cfg.vocab_size, d), nn.Linear(d, cfg.vocab_size, bias=False))

    def tie_embeddings(self, embed_tokens: nn.Embedding, lm_head: nn.Module) -> None:
        """Use these (frozen) modules as the draft's token embedding and LM head; usually the target's own."""
        v, d = self.config.vocab_size, self.config.hidden_size
        if tuple(embed_tokens.weight.shape) != (v, d) or tuple(lm_head.weight.shape) != (v, d):
            raise ValueError(
                f"embeddings {tuple(embed_tokens.weight.shape)} / lm_head {tuple(lm_head.weight.shape)} do not fit a "
                f"draft with vocab {v} and hidden {d}; the draft must be built for this target"
            )
        embed_tokens.weight.requires_grad_(False)
        lm_head.weight.requires_grad_(False)
        self.embed_tokens, self.lm_head = embed_tokens, lm_head

    def _require_embeddings(self) -> None:
        if self.embed_tokens is None or self.lm_head is None:
            raise RuntimeError("the draft has no token embedding / LM head: call draft.tie_embeddings(...) with the "
                               "target's, or pass the draft to dspark.generate, which ties them")

    # --- backbone ----------------------------------------------------------------------------------------------
    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """Concatenated target features [B, S, m·d] -> context states [B, S, d]."""
        return self.hidden_norm(self.fc(features))

    def context_kv(self, context: torch.Tensor, positions: torch.Tensor) -> list[LayerKV]:
        """Context states [B, S, d] at positions [B, S] -> per-layer K/V, each [B, H_kv, S, D]."""
        cos, sin = self.rotary(positions, context.dtype)
        return [layer.self_attn.project_kv(context, cos, sin) for layer in self.layers]

    def forward(self, block_ids: torch.Tensor, block_positions: torch.Tensor, context: list[LayerKV],
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Block token ids [B, T] at positions [B, T] attending to per-layer context K/V (and to each other,
        as `mask` [B, 1, T, S+T] allows; None = everything) -> final-normed block hidden states [B, T, d]."""
        self._require_embeddings()
        x = self.embed_tokens(block_ids).to(self.fc.weight.dtype)  # [B, T, d] (the target may run in another dtype)
        cos, sin = self.rotary(block_positions, x.dtype)
        for layer, layer_context in zip(self.layers, context):
            x = layer(x, layer_context, cos, sin, mask)
        return self.norm(x)

    def base_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Block hidden [..., d] -> logits before the Markov bias [..., V]."""
        self._require_embeddings()
        return self.lm_head(hidden.to(self.lm_head.weight.dtype))

    def confidence_logits(self, hidden: torch.Tensor, prev_ids: torch.Tensor) -> torch.Tensor | None:
        """hidden [..., d], prev_ids [...] -> raw confidence logits [...] (None without a confidence head)."""
        if self.confidence_head is None:
            return None
        feats = self.markov_head.features(prev_ids) if self.config.confidence_head_with_markov else None
        return self.confidence_head(hidden, feats)


def count_parameters(draft: DSparkDraft) -> int:
    """Trainable parameters: everything but the (shared, frozen) token embedding and LM head."""
    shared = {id(p) for m in (draft.embed_tokens, draft.lm_head) if m is not None for p in m.parameters()}
    return sum(p.numel() for p in draft.parameters() if id(p) not in shared)
