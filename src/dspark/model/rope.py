"""Rotary position embeddings: plain RoPE and YaRN, with inv_freq and the attention factor kept in fp32.

Only the math of the frequencies and the rotation; the attention itself lives in `draft.py`. The frequencies follow
the YaRN paper (arXiv 2309.00071) with the same parameter names and defaults as transformers' `rope_parameters`.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from dspark.config import RopeConfig


def _yarn_correction_dim(num_rotations: float, dim: int, base: float, max_pos: int) -> float:
    # The dimension index whose wavelength completes `num_rotations` turns over `max_pos` positions.
    return (dim * math.log(max_pos / (num_rotations * 2 * math.pi))) / (2 * math.log(base))


def yarn_attention_factor(factor: float) -> float:
    """YaRN's softmax temperature correction sqrt(1/t) = 0.1·ln(s) + 1 (1 when not scaling)."""
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def rope_frequencies(rope: RopeConfig, head_dim: int) -> tuple[torch.Tensor, float]:
    """Inverse frequencies [head_dim/2] in fp32 and the factor that scales cos/sin."""
    base = float(rope.rope_theta)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim  # [D/2]
    pos_freqs = base**exponents  # [D/2]
    inv_freq = 1.0 / pos_freqs
    if rope.rope_type == "default":
        return inv_freq, 1.0
    factor = float(rope.factor)
    attention = rope.attention_factor if rope.attention_factor is not None else yarn_attention_factor(factor)
    beta_fast = rope.beta_fast or 32.0
    beta_slow = rope.beta_slow or 1.0
    original = int(rope.original_max_position_embeddings)
    low = _yarn_correction_dim(beta_fast, head_dim, base, original)
    high = _yarn_correction_dim(beta_slow, head_dim, base, original)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)  # [D/2]
    extrapolation_weight = 1 - ramp  # 1: keep the original frequency (high-frequency dims)
    inv_freq_interpolated = 1.0 / (factor * pos_freqs)
    inv_freq = inv_freq_interpolated * (1 - extrapolation_weight) + inv_freq * extrapolation_weight
    return inv_freq, float(attention)


class RotaryEmbedding(nn.Module):
    """cos/sin tables for given absolute positions; inv_freq stays fp32 whatever dtype the module is cast to."""

    def __init__(self, rope: RopeConfig, head_dim: int):
        super().__init__()
        self.rope, self.head_dim = rope, head_dim
        inv_freq, self.attention_scaling = rope_frequencies(rope, head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def reset_parameters(self) -> None:
        """Recompute the frequencies in place (after `to_empty` from the meta device)."""
        inv_freq, self.attention_scaling = rope_frequencies(self.rope, self.head_dim)
        self.inv_freq = inv_freq.to(self.inv_freq.device)

    def _apply(self, fn, recurse=True):  # keep inv_freq in fp32 under .to(bf16) / .half()
        super()._apply(fn, recurse)
        if self.inv_freq.dtype != torch.float32:
            self.inv_freq = self.inv_freq.float()
        return self

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [..., T] (int) -> cos, sin [..., T, head_dim] in `dtype`."""
        freqs = positions.to(torch.float32)[..., None] * self.inv_freq  # [..., T, D/2], fp32
        emb = torch.cat((freqs, freqs), dim=-1)  # [..., T, D]
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype), sin.to(dtype)


def signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin [..., D] -> [−sin_first_half, sin_second_half]: with it the rotation needs no negation per call."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """x·cos + rotate_half(x)·sin in three kernels: rotate_half(x)·sin = roll(x, D/2)·signed_sin (cos / sin_signed
    broadcast against x; build sin_signed once per forward with `signed_sin` and reuse it across layers)."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), sin_signed)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, H, T, D]; cos/sin [B, T, D] -> rotated x."""
    return rotate(x, cos[:, None], signed_sin(sin)[:, None])
