"""A decoder layer's gated MLP, down(SiLU(gate·h) · up·h), for a few rows as one Triton kernel (CUDA only).

At decode sizes the MLP is three launches whatever the work: the fused [gate | up] GEMM, SiLU · up
(`layer_kernels.silu_mul`) and the down GEMM, each a few µs for a few hundred KB of weights. Here every program takes
a slice of the MLP's units: it computes gate and up for its units (fp32 accumulation, each rounded to the weights'
dtype as the GEMM's output is), SiLU · up rounded as HF's `act_fn(gate) * up`, and that slice's share of the down
projection, which it writes as one fp32 partial sum [rows, d]. The partials [S, rows, d] go to
`layer_kernels.add_rms_norm`, which sums them in a fixed order (deterministic: no atomics), rounds the sum to the
dtype as the down GEMM's output is, and adds it to the residual stream. Three launches become one, and the add + norm
that followed anyway takes the sum. The sums over d and over units run in another order than cuBLAS's, so the
output may differ from the torch ops by a rounding step.

What it does not do: biases (Qwen2-style gate/up/down biases go to the torch ops), activations other than SiLU,
many rows (a prefill: cuBLAS's tiles serve it better, `MAX_ROWS`), CPU tensors (the torch ops serve; tests run the
kernel on the CPU through Triton's interpreter, TRITON_INTERPRET=1).
"""
from __future__ import annotations

import torch

from dspark.engine import triton_support

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU install without Triton: the torch ops serve
    triton = None

MAX_ROWS = 64  # rows (tokens) per call; more go to cuBLAS
BLOCK_M = 16  # rows per program (tl.dot's smallest tile)
BLOCK_K = 64  # the model width's tile, for both GEMMs


def usable(h: torch.Tensor, silu: bool, *biases: torch.Tensor | None) -> bool:
    """True when the kernel serves an MLP step on h [..., d] (`triton_support.available`): SiLU, no biases, at most
    MAX_ROWS rows."""
    if triton is None or not triton_support.available(h) or not silu or any(b is not None for b in biases):
        return False
    return h.numel() // h.shape[-1] <= MAX_ROWS


if triton is not None:
    rounded_as = triton_support.rounded_as  # globals a kernel calls must be module-level names

    @triton.jit
    def _mlp_kernel(h_ptr, gate_up_ptr, gu_stride_out, gu_stride_in, down_ptr, down_stride_out, down_stride_in,
                    partial_ptr, rows, width, inner, BLOCK_M: tl.constexpr, BLOCK_I: tl.constexpr,
                    BLOCK_K: tl.constexpr, ROUND_BF16: tl.constexpr, TENSOR_CORES: tl.constexpr):
        chunk = tl.program_id(1)  # this program's slice of the MLP's units
        m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # [BM] rows
        units = chunk * BLOCK_I + tl.arange(0, BLOCK_I)  # [BI]
        in_m, in_u = m < rows, units < inner
        gate = tl.zeros((BLOCK_M, BLOCK_I), tl.float32)
        up = tl.zeros((BLOCK_M, BLOCK_I), tl.float32)
        for k0 in range(0, width, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)  # [BK]
            in_k = ks < width
            x = tl.load(h_ptr + m[:, None].to(tl.int64) * width + ks[None, :], mask=in_m[:, None] & in_k[None, :],
                        other=0.0)  # [BM, BK]
            tile = in_u[:, None] & in_k[None, :]
            w_gate = tl.load(gate_up_ptr + units[:, None] * gu_stride_out + ks[None, :] * gu_stride_in, mask=tile,
                             other=0.0)  # [BI, BK]
            w_up = tl.load(gate_up_ptr + (inner + units[:, None]) * gu_stride_out + ks[None, :] * gu_stride_in,
                           mask=tile, other=0.0)
            if TENSOR_CORES:  # bf16 / fp16 on the GPU: exact products, fp32 sums, as cuBLAS
                gate += tl.dot(x, tl.trans(w_gate))
                up += tl.dot(x, tl.trans(w_up))
            else:  # fp32, and Triton's interpreter (its bf16 dot is wrong): fp32 products, exact
                x = x.to(tl.float32)
                gate += tl.dot(x, tl.trans(w_gate.to(tl.float32)), input_precision="ieee")
                up += tl.dot(x, tl.trans(w_up.to(tl.float32)), input_precision="ieee")
        dtype = h_ptr.dtype.element_ty
        gate = rounded_as(gate, ROUND_BF16, dtype)  # the [gate | up] GEMM's output, rounded
        up = rounded_as(up, ROUND_BF16, dtype)
        act = rounded_as(gate / (1.0 + tl.exp(-gate)), ROUND_BF16, dtype)  # SiLU, rounded
        act = rounded_as(act * up, ROUND_BF16, dtype)  # [BM, BI] SiLU · up, rounded; 0 at units past `inner`
        for n0 in range(0, width, BLOCK_K):
            ns = n0 + tl.arange(0, BLOCK_K)  # [BN] output columns
            in_n = ns < width
            w_down = tl.load(down_ptr + ns[:, None] * down_stride_out + units[None, :] * down_stride_in,
                             mask=in_n[:, None] & in_u[None, :], other=0.0)  # [BN, BI]
            if TENSOR_CORES:
                out = tl.dot(act.to(dtype), tl.trans(w_down))  # [BM, BN]
            else:
                out = tl.dot(act, tl.trans(w_down.to(tl.float32)), input_precision="ieee")
            tl.store(partial_ptr + (chunk * rows + m[:, None]).to(tl.int64) * width + ns[None, :], out,
                     mask=in_m[:, None] & in_n[None, :])


def partials(h: torch.Tensor, gate_up_weight: torch.Tensor, down_weight: torch.Tensor) -> torch.Tensor:
    """Normed states h [..., d], the fused [gate; up] weight [2·I, d] and the down weight [d, I] (any strides) ->
    the MLP's output as fp32 partial sums [S, ..., d] over S slices of its units (`layer_kernels.add_rms_norm`
    sums them)."""
    width, inner = h.shape[-1], down_weight.shape[1]
    h = h.contiguous()
    rows = h.numel() // width
    # ~48–96 programs for a 135M model's 1,536–3,072 units: enough SMs pulling weights, few partials to sum
    block_i = 32 if inner <= 64 * 32 else 64
    slices = triton.cdiv(inner, block_i)
    out = torch.empty(slices, *h.shape, dtype=torch.float32, device=h.device)  # [S, ..., d]
    _mlp_kernel[(triton.cdiv(rows, BLOCK_M), slices)](
        h, gate_up_weight, gate_up_weight.stride(0), gate_up_weight.stride(1), down_weight, down_weight.stride(0),
        down_weight.stride(1), out, rows, width, inner, BLOCK_M=BLOCK_M, BLOCK_I=block_i, BLOCK_K=BLOCK_K,
        ROUND_BF16=h.dtype == torch.bfloat16,
        TENSOR_CORES=h.dtype != torch.float32 and not triton_support.interpreting())
    return out
