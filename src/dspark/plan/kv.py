"""KV-cache and recurrent-state bytes: per token, per sequence, and for context x concurrency.

Formulas (llm-academy.dev/kv-cache-calculator; DeepSeek-V2 paper for MLA; vLLM's Kimi K3 blog for hybrid
linear attention):
- GQA / MHA: 2 (K and V) x layers x kv_heads x head_dim x bytes per token; sliding-window layers stop at the window.
- MLA: layers x (kv_lora_rank + qk_rope_head_dim) x bytes per token (one latent, shared by all heads).
- Linear attention (KDA, Gated DeltaNet): a fixed state per layer per sequence, independent of context.
The Kimi-K3-DSpark draft: 2 x 5 x 16 x 112 x 2 B = 35,840 B per token in bf16. How the cache is split over
GPUs is the cluster planner's business, not this module's.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.plan.errors import PlanError
from dspark.plan.quant import kv_bytes_per_element
from dspark.plan.spec import KvLayout


def kv_bytes_per_token(kv: KvLayout, dtype: str) -> float:
    """Cache bytes one more token of context costs in the unbounded (full-attention and MLA) layers."""
    return kv.elements_per_token * kv_bytes_per_element(dtype)


@dataclass(frozen=True)
class KvBytes:
    """Cache of `concurrency` sequences of `context` tokens each."""

    dtype: str
    context: int
    concurrency: int
    per_token: float  # unbounded layers, bytes per token
    attention: float  # full-attention + MLA + sliding-window bytes, all sequences
    state: float  # linear-attention recurrent state, all sequences

    @property
    def total(self) -> float:
        return self.attention + self.state


def kv_bytes(kv: KvLayout, dtype: str, context: int, concurrency: int = 1) -> KvBytes:
    """KV cache plus recurrent state for `concurrency` sequences of `context` tokens."""
    if context < 0 or concurrency < 1:
        raise PlanError(f"context must be >= 0 and concurrency >= 1 (got {context}, {concurrency})")
    per_elem = kv_bytes_per_element(dtype)
    per_token = kv.elements_per_token * per_elem
    windowed = kv.window_elements_per_token * per_elem * min(context, kv.window or context)
    attention = (per_token * context + windowed) * concurrency
    state = kv.linear_layers * kv.linear_state_bytes * concurrency
    return KvBytes(dtype, context, concurrency, per_token, attention, state)
