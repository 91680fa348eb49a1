"""Tensor-group builders for the usual transformer blocks (GQA, MLA, KDA, Gated DeltaNet, SwiGLU, MoE).

Each function returns the `TensorGroup`s of one block type repeated over `layers` layers, with PyTorch
(out, in) shapes and the categories quantizers key on. The recurrent-state helpers give the fixed per-sequence
state of linear-attention layers. Nothing here knows any particular model; presets and the HF config reader
call these with numbers.
"""
from __future__ import annotations

from dspark.plan.spec import (
    ATTN_K,
    ATTN_KV_B,
    ATTN_OTHER,
    ATTN_OUTPUT,
    ATTN_Q,
    ATTN_V,
    EMBED,
    FFN_DOWN,
    FFN_GATE,
    FFN_UP,
    OUTPUT,
    ROUTER,
    SMALL,
    TensorGroup,
)

Groups = tuple[TensorGroup, ...]


def norms(name: str, size: int, count: int) -> Groups:
    return (TensorGroup(name, SMALL, (size,), count),) if count else ()


def embeddings(vocab: int, hidden: int, tied: bool) -> Groups:
    """Token embedding plus an untied lm_head (a tied head is the same tensor and is not stored twice)."""
    embed = TensorGroup("embed_tokens", EMBED, (vocab, hidden))
    return (embed,) if tied else (embed, TensorGroup("lm_head", OUTPUT, (vocab, hidden)))


def gqa_attention(prefix: str, hidden: int, heads: int, kv_heads: int, head_dim: int, layers: int,
                  qk_norm: bool = False, bias: bool = False, gated_q: bool = False) -> Groups:
    """q/k/v/o projections of grouped-query attention (`gated_q`: q_proj also emits an output gate, Qwen3-Next)."""
    if not layers:
        return ()
    q_out = heads * head_dim * (2 if gated_q else 1)
    kv_out = kv_heads * head_dim
    groups = [
        TensorGroup(f"{prefix}.q_proj", ATTN_Q, (q_out, hidden), layers),
        TensorGroup(f"{prefix}.k_proj", ATTN_K, (kv_out, hidden), layers),
        TensorGroup(f"{prefix}.v_proj", ATTN_V, (kv_out, hidden), layers),
        TensorGroup(f"{prefix}.o_proj", ATTN_OUTPUT, (hidden, heads * head_dim), layers),
    ]
    if bias:
        groups.append(TensorGroup(f"{prefix}.qkv_bias", SMALL, (q_out + 2 * kv_out,), layers))
    if qk_norm:
        groups += norms(f"{prefix}.q_norm", head_dim, layers) + norms(f"{prefix}.k_norm", head_dim, layers)
    return tuple(groups)


def mla_attention(prefix: str, hidden: int, heads: int, q_lora_rank: int, kv_lora_rank: int, qk_nope: int,
                  qk_rope: int, v_head: int, layers: int, output_gate: bool = False) -> Groups:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2/K3); `q_lora_rank` 0 means a direct q_proj."""
    if not layers:
        return ()
    qk = qk_nope + qk_rope
    groups: list[TensorGroup] = []
    if q_lora_rank:
        groups += [TensorGroup(f"{prefix}.q_a_proj", ATTN_OTHER, (q_lora_rank, hidden), layers)]
        groups += norms(f"{prefix}.q_a_layernorm", q_lora_rank, layers)
        groups += [TensorGroup(f"{prefix}.q_b_proj", ATTN_Q, (heads * qk, q_lora_rank), layers)]
    else:
        groups += [TensorGroup(f"{prefix}.q_proj", ATTN_Q, (heads * qk, hidden), layers)]
    groups += [TensorGroup(f"{prefix}.kv_a_proj_with_mqa", ATTN_OTHER, (kv_lora_rank + qk_rope, hidden), layers)]
    groups += norms(f"{prefix}.kv_a_layernorm", kv_lora_rank, layers)
    groups += [
        TensorGroup(f"{prefix}.kv_b_proj", ATTN_KV_B, (heads * (qk_nope + v_head), kv_lora_rank), layers),
        TensorGroup(f"{prefix}.o_proj", ATTN_OUTPUT, (hidden, heads * v_head), layers),
    ]
    if output_gate:
        groups += [TensorGroup(f"{prefix}.g_proj", ATTN_OTHER, (heads * v_head, hidden), layers)]
    return tuple(groups)


def kda_attention(prefix: str, hidden: int, heads: int, head_dim: int, layers: int, conv_kernel: int = 4) -> Groups:
    """Kimi Delta Attention: q/k/v, short convs, low-rank decay, beta, full sigmoid output gate, o_proj."""
    if not layers:
        return ()
    width = heads * head_dim
    groups = [
        TensorGroup(f"{prefix}.q_proj", ATTN_Q, (width, hidden), layers),
        TensorGroup(f"{prefix}.k_proj", ATTN_K, (width, hidden), layers),
        TensorGroup(f"{prefix}.v_proj", ATTN_V, (width, hidden), layers),
        TensorGroup(f"{prefix}.g_proj", ATTN_OTHER, (width, hidden), layers),
        TensorGroup(f"{prefix}.f_a_proj", ATTN_OTHER, (head_dim, hidden), layers),
        TensorGroup(f"{prefix}.f_b_proj", ATTN_OTHER, (width, head_dim), layers),
        TensorGroup(f"{prefix}.b_proj", ATTN_OTHER, (heads, hidden), layers),
        TensorGroup(f"{prefix}.short_conv", SMALL, (3 * width, conv_kernel), layers),
        TensorGroup(f"{prefix}.o_proj", ATTN_OUTPUT, (hidden, width), layers),
    ]
    return tuple(groups) + norms(f"{prefix}.A_log", heads, layers) + norms(f"{prefix}.dt_bias", width, layers) \
        + norms(f"{prefix}.o_norm", head_dim, layers)


def gated_deltanet(prefix: str, hidden: int, k_heads: int, k_dim: int, v_heads: int, v_dim: int, layers: int,
                   conv_kernel: int = 4) -> Groups:
    """Gated DeltaNet linear attention as in Qwen3-Next (fused qkvz and ba input projections)."""
    if not layers:
        return ()
    key, value = k_heads * k_dim, v_heads * v_dim
    groups = (
        TensorGroup(f"{prefix}.in_proj_qkvz", ATTN_Q, (2 * key + 2 * value, hidden), layers),
        TensorGroup(f"{prefix}.in_proj_ba", ATTN_OTHER, (2 * v_heads, hidden), layers),
        TensorGroup(f"{prefix}.conv1d", SMALL, (2 * key + value, conv_kernel), layers),
        TensorGroup(f"{prefix}.out_proj", ATTN_OUTPUT, (hidden, value), layers),
    )
    return groups + norms(f"{prefix}.A_log", v_heads, layers) + norms(f"{prefix}.dt_bias", v_heads, layers) \
        + norms(f"{prefix}.norm", v_dim, layers)


def recurrent_state_bytes(heads: int, k_dim: int, v_dim: int, conv_channels: int, conv_kernel: int,
                          state_bytes: int = 4, conv_bytes: int = 2) -> int:
    """One linear-attention layer's per-sequence state: heads x k_dim x v_dim matrix (fp32) + conv tail (bf16)."""
    return heads * k_dim * v_dim * state_bytes + conv_channels * (conv_kernel - 1) * conv_bytes


def swiglu(prefix: str, hidden: int, inter: int, layers: int, in_dim: int | None = None) -> Groups:
    """gate/up/down of a SwiGLU MLP; `in_dim` differs from `hidden` for latent MoE experts."""
    if not layers or not inter:
        return ()
    d = in_dim or hidden
    return (
        TensorGroup(f"{prefix}.gate_proj", FFN_GATE, (inter, d), layers),
        TensorGroup(f"{prefix}.up_proj", FFN_UP, (inter, d), layers),
        TensorGroup(f"{prefix}.down_proj", FFN_DOWN, (d, inter), layers),
    )


def routed_experts(prefix: str, dim: int, inter: int, experts: int, layers: int) -> Groups:
    """A stack of `experts` SwiGLU experts per MoE layer (3-D tensors in GGUF, `ffn_*_exps`)."""
    if not layers:
        return ()
    return (
        TensorGroup(f"{prefix}.experts.gate_proj", FFN_GATE, (inter, dim), layers, experts, True),
        TensorGroup(f"{prefix}.experts.up_proj", FFN_UP, (inter, dim), layers, experts, True),
        TensorGroup(f"{prefix}.experts.down_proj", FFN_DOWN, (dim, inter), layers, experts, True),
    )


def router(prefix: str, hidden: int, experts: int, layers: int, correction_bias: bool = False) -> Groups:
    if not layers:
        return ()
    groups = (TensorGroup(f"{prefix}.gate", ROUTER, (experts, hidden), layers),)
    return groups + (norms(f"{prefix}.e_score_correction_bias", experts, layers) if correction_bias else ())
