"""One matrix for a decoder layer's Q/K/V projections and one for its gate/up projections, so the static target runs
two GEMMs where HF's forward runs five (at decode sizes each GEMM costs a kernel launch, not FLOPs).

The fused matrices are built once and the HF modules' own weights (and biases) are re-pointed at views of them: no
memory is added, and the HF forward (training, the Hugging Face backend) keeps reading the same numbers. Rows are stacked
[q; k; v] and [gate; up], so output columns split in that order. `projected_heads` is the fused projection step the
static target and draft share; rotation and attention are theirs.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from dspark.engine.cpu_layout import is_column_major


class FusedProjections(NamedTuple):
    qkv_weight: torch.Tensor  # [(H + 2·H_kv)·D, d]
    qkv_bias: torch.Tensor | None  # [(H + 2·H_kv)·D] (Qwen2) or None
    gate_up_weight: torch.Tensor  # [2·I, d]
    gate_up_bias: torch.Tensor | None  # [2·I] or None


def _stack(linears: list[nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Concatenate the linears' weights (and biases; a missing bias is zeros when another has one) row-wise and point
    each linear at its slice of the result; column-major weights (`cpu_layout`) stack column-major."""
    weights = [linear.weight.detach() for linear in linears]
    if all(is_column_major(w) for w in weights):
        weight = torch.cat([w.t() for w in weights], dim=1).t()  # [Σ out, in], stored [in, Σ out]
    else:
        weight = torch.cat(weights)  # [Σ out, in]
    has_bias = any(linear.bias is not None for linear in linears)
    bias = None
    if has_bias:
        bias = torch.cat([linear.bias.detach() if linear.bias is not None else
                          torch.zeros(linear.out_features, dtype=weight.dtype, device=weight.device)
                          for linear in linears])  # [Σ out]
    rows = 0
    for linear in linears:
        size = linear.out_features
        linear.weight.data = weight[rows : rows + size]
        if linear.bias is not None:
            linear.bias.data = bias[rows : rows + size]
        rows += size
    return weight, bias


def fuse_projections(layer: nn.Module) -> FusedProjections:
    """An HF Llama-style decoder layer (self_attn.{q,k,v}_proj, mlp.{gate,up}_proj) -> its fused matrices, built the
    first time and reused while the layer's weights are still views of them (each engine built over a model asks)."""
    attn, mlp = layer.self_attn, layer.mlp
    linears = [attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj]
    pointers = [linear.weight.data_ptr() for linear in linears]
    cached = getattr(layer, "_dspark_fused", None)
    if cached is not None and cached[1] == pointers:
        return cached[0]
    qkv_weight, qkv_bias = _stack(linears[:3])
    gate_up_weight, gate_up_bias = _stack(linears[3:])
    fused = FusedProjections(qkv_weight, qkv_bias, gate_up_weight, gate_up_bias)
    layer._dspark_fused = (fused, [linear.weight.data_ptr() for linear in linears])
    return fused


def projected_heads(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, q_heads: int, kv_heads: int,
                    head_dim: int, q_norm: Callable[[torch.Tensor], torch.Tensor] | None = None,
                    k_norm: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """x [B, T, d] through a fused [q; k; v] matrix (q_heads may be 0: [k; v] only) -> heads [B, T, q_heads +
    2·kv_heads, D], q and k normed per head when norms are given (Qwen3-style), not yet rotated: `rope.rotate` with
    tables that hold cos 1, sin 0 on v's heads turns q and k in one pass (or `layer_kernels.rope_write` on CUDA)."""
    b, t, _ = x.shape
    heads = F.linear(x, weight, bias).view(b, t, q_heads + 2 * kv_heads, head_dim)
    return heads if k_norm is None else head_norms(heads, q_heads, kv_heads, q_norm, k_norm)


def head_norms(heads: torch.Tensor, q_heads: int, kv_heads: int, q_norm: Callable[[torch.Tensor], torch.Tensor],
               k_norm: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Projected heads [B, T, q_heads + 2·kv_heads, D] -> the same with q and k normed per head (Qwen3-style)."""
    normed = [q_norm(heads[:, :, :q_heads])] if q_heads else []
    keys = k_norm(heads[:, :, q_heads : q_heads + kv_heads])
    return torch.cat(normed + [keys, heads[:, :, q_heads + kv_heads :]], dim=2)
