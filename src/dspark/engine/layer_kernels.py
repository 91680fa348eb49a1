"""A decoder layer's elementwise steps as single Triton kernels (CUDA only), for the static target and draft.

At decode sizes a 135M model's step is a chain of ~18 tiny kernels per layer and each costs a launch, not work. Three
chains fold into one kernel each:
  add_rms_norm  the residual add and the next RMSNorm: x' = x + δ (rounded to x's dtype, as the add), h = RMSNorm(x');
                both come back (x' is the residual stream, h the next block's input). 2 kernels -> 1.
  silu_mul      SiLU(gate) · up over a fused [gate | up] GEMM output; SiLU's output is rounded to the dtype before the
                product, as HF's `act_fn(gate) * up`. 2 kernels -> 1.
  rope_write    RoPE on q and k and the cache write of k and v for a block of new tokens (after Qwen3-style per-head
                norms of q and k when given): q comes back rotated, k and v go straight into the rows' cache. cos
                and sin come from position tables built once per engine, so a step computes none. The torch path
                needs 4 kernels (x·cos, roll, addcmul, scatter; 3 more for the norms) plus per-forward tables for
                the fused heads. x·cos is rounded before the add, as `rope.rotate`'s two ops round.
What it does not do: CPU tensors (the torch ops in static_target / static_draft serve them; tests run these kernels
on the CPU through Triton's interpreter, TRITON_INTERPRET=1), norms other than RMSNorm, partial rotary dims.
"""
from __future__ import annotations

import torch

from dspark.engine import triton_support

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU install without Triton: the torch ops serve
    triton = None


def usable(tensor: torch.Tensor, head_dim: int) -> bool:
    """True when these kernels can run on `tensor`'s device (`triton_support.available`) with this head dim (a power
    of two: rope_write's tile)."""
    if triton is None or not triton_support.available(tensor):
        return False
    return head_dim >= 2 and not head_dim & (head_dim - 1)


if triton is not None:

    @triton.jit
    def _add_rms_norm_kernel(x_ptr, delta_ptr, weight_ptr, sum_ptr, normed_ptr, width, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < width
        x = tl.load(x_ptr + row * width + cols, mask=inside, other=0.0).to(tl.float32)
        delta = tl.load(delta_ptr + row * width + cols, mask=inside, other=0.0).to(tl.float32)
        total = (x + delta).to(sum_ptr.dtype.element_ty)  # the residual stream, rounded as the add
        tl.store(sum_ptr + row * width + cols, total, mask=inside)
        total = total.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(total * total, axis=0) / width + eps)
        weight = tl.load(weight_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        tl.store(normed_ptr + row * width + cols, (total * rstd * weight).to(normed_ptr.dtype.element_ty),
                 mask=inside)

    @triton.jit
    def _silu_mul_kernel(gate_up_ptr, out_ptr, inner, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = cols < inner
        gate = tl.load(gate_up_ptr + row * 2 * inner + cols, mask=inside, other=0.0).to(tl.float32)
        up = tl.load(gate_up_ptr + row * 2 * inner + inner + cols, mask=inside, other=0.0).to(tl.float32)
        act = (gate / (1.0 + tl.exp(-gate))).to(out_ptr.dtype.element_ty).to(tl.float32)  # SiLU, rounded
        tl.store(out_ptr + row * inner + cols, (act * up).to(out_ptr.dtype.element_ty), mask=inside)

    @triton.jit
    def _rope_write_kernel(heads_ptr, cos_ptr, sin_ptr, q_ptr, cache_ptr, c_stride_b, c_stride_h, c_stride_l,
                           rows_ptr, positions_ptr, rotary_ptr, q_norm_ptr, k_norm_ptr, eps, t_len, token_stride,
                           q_heads,
                           kv_heads, D: tl.constexpr, BLOCK_H: tl.constexpr, HAS_ROWS: tl.constexpr,
                           HAS_NORMS: tl.constexpr):
        token = tl.program_id(0).to(tl.int64)  # b·T + t
        b = token // t_len
        total = q_heads + 2 * kv_heads
        head = tl.arange(0, BLOCK_H)
        dims = tl.arange(0, D)
        inside = (head < total)[:, None]
        position = tl.load(positions_ptr + token).to(tl.int64)  # where k and v go
        turn = tl.load(rotary_ptr + token).to(tl.int64)  # the position RoPE turns by (a tree slot's: start + depth)
        base = heads_ptr + token * token_stride + head[:, None] * D
        spun = (dims + D // 2) % D  # rotate_half's source dims
        x = tl.load(base + dims[None, :], mask=inside, other=0.0).to(tl.float32)  # [BH, D]
        rolled = tl.load(base + spun[None, :], mask=inside, other=0.0).to(tl.float32)
        if HAS_NORMS:  # Qwen3-style per-head RMSNorm of q and k before RoPE, rounded to the dtype as the norm's output
            is_q_head = (head < q_heads)[:, None]
            normed = (head < q_heads + kv_heads)[:, None]
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / D + eps)[:, None]  # [BH, 1]
            w = tl.where(is_q_head, tl.load(q_norm_ptr + dims)[None, :].to(tl.float32),
                         tl.load(k_norm_ptr + dims)[None, :].to(tl.float32))
            w_spun = tl.where(is_q_head, tl.load(q_norm_ptr + spun)[None, :].to(tl.float32),
                              tl.load(k_norm_ptr + spun)[None, :].to(tl.float32))
            x = tl.where(normed, (x * rstd * w).to(q_ptr.dtype.element_ty).to(tl.float32), x)
            rolled = tl.where(normed, (rolled * rstd * w_spun).to(q_ptr.dtype.element_ty).to(tl.float32), rolled)
        cos = tl.load(cos_ptr + turn * D + dims).to(tl.float32)  # [D] the table's row for this position
        sin = tl.load(sin_ptr + turn * D + dims).to(tl.float32)  # [D] signed: −sin on the first half
        turned = (x * cos[None, :]).to(q_ptr.dtype.element_ty).to(tl.float32) + rolled * sin[None, :]
        rotate = (head < q_heads + kv_heads)[:, None]  # q and k turn, v is copied
        out = tl.where(rotate, turned, x).to(q_ptr.dtype.element_ty)  # [BH, D]
        is_q = (head < q_heads)[:, None]
        tl.store(q_ptr + (token * q_heads + head[:, None]) * D + dims[None, :], out, mask=inside & is_q)
        row = tl.load(rows_ptr + b).to(tl.int64) if HAS_ROWS else b
        slot = cache_ptr + row * c_stride_b + (head[:, None] - q_heads) * c_stride_h + position * c_stride_l
        tl.store(slot + dims[None, :], out.to(cache_ptr.dtype.element_ty), mask=inside & ~is_q)


def add_rms_norm(x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
    """x, δ [..., d], an RMSNorm's weight [d] and epsilon -> (x + δ, RMSNorm(x + δ)), both [..., d] in x's dtype."""
    width = x.shape[-1]
    x, delta = x.contiguous(), delta.contiguous()
    total, normed = torch.empty_like(x), torch.empty_like(x)
    _add_rms_norm_kernel[(x.numel() // width,)](x, delta, weight, total, normed, width, eps,
                                                BLOCK=triton.next_power_of_2(width))
    return total, normed


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """A fused [gate | up] projection [..., 2·I] -> SiLU(gate) · up [..., I]."""
    inner = gate_up.shape[-1] // 2
    gate_up = gate_up.contiguous()
    out = gate_up.new_empty(*gate_up.shape[:-1], inner)
    block = min(1024, triton.next_power_of_2(inner))
    _silu_mul_kernel[(gate_up.numel() // (2 * inner), triton.cdiv(inner, block))](gate_up, out, inner, BLOCK=block)
    return out


def rope_write(heads: torch.Tensor, q_heads: int, kv_heads: int, cos: torch.Tensor, sin_signed: torch.Tensor,
               cache: torch.Tensor, rows: torch.Tensor | None, positions: torch.Tensor,
               norms: tuple[torch.Tensor, torch.Tensor, float] | None = None,
               rotary: torch.Tensor | None = None) -> torch.Tensor:
    """Projected heads [B, T, H + 2·H_kv, D] ([q | k | v], H may be 0; a view with any token stride, e.g. one layer's
    slice of a wider projection, is read in place), position tables cos / sin_signed [P, D] (`rope.signed_sin`; row
    p for position p, every position < P), cache [B_max, 2·H_kv, L, D] (keys, then values), rows [B] (None: 0 … B−1),
    positions [B, T], and for Qwen3-style layers the per-head norms (q weight [D], k weight [D], epsilon), applied
    before the rotation -> rotated q [B, T, H, D]; rotated k and v written into the cache rows at their positions.
    `rotary` [B, T]: the positions q and k turn by when they differ from where k and v go (a tree's slots)."""
    b, t, total, d = heads.shape
    if heads.stride(3) != 1 or heads.stride(2) != d or heads.stride(0) != t * heads.stride(1):
        heads = heads.contiguous()
    positions = positions.contiguous()
    rotary = positions if rotary is None else rotary.contiguous()
    cos, sin_signed = cos.to(heads.dtype).contiguous(), sin_signed.to(heads.dtype).contiguous()  # no-ops for tables
    q = heads.new_empty(b, t, q_heads, d)  # [B, T, H, D]
    q_weight, k_weight, eps = norms if norms is not None else (cos, cos, 0.0)  # unused without norms
    _rope_write_kernel[(b * t,)](heads, cos, sin_signed, q, cache, cache.stride(0), cache.stride(1), cache.stride(2),
                                 rows if rows is not None else positions, positions, rotary, q_weight, k_weight,
                                 eps, t,
                                 heads.stride(1), q_heads, kv_heads, D=d, BLOCK_H=triton.next_power_of_2(total),
                                 HAS_ROWS=rows is not None, HAS_NORMS=norms is not None)
    return q
