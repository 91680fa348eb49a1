"""Attention of a few new tokens per row against a static KV cache, as one Triton kernel per layer (CUDA only).

The SDPA path (`static_target.grouped_attention`) needs the grouped-query layout [B, H_kv, G·T, D]: at T > 1 that is
a copy of q before the kernel and a copy of the output after it, plus an additive mask built per forward. Here one
program per (row, KV head) reads q where the fused projection left it ([B, T, H, D], any strides), the row's keys and
values straight from the cache ([B_max, 2·H_kv, L, D], keys in heads 0 … H_kv−1), masks by position (a query sees
keys up to `last` and, with a sliding window, only the `sliding` latest of them), runs an online softmax over key
blocks in fp32, and writes [B, T, H, D] contiguous, which the output projection reads as [B, T, H·D]. More than
QUERY_TILE grouped queries of a row split over programs, since one program's tile grows slow. Each query's result
does not depend on how many queries share its program (a key block it cannot see adds exactly nothing), so a verify
step and a plain decoding step compute a row's attention in the same order. A tree verify (tree.py) runs one program
per slot, which reads its ancestors' keys as if they stood in a chain: the same keys at the same positions as a
chain verify of its path, so a tree's accepted tokens get the hidden states (bitwise) that plain decoding gives them.

What it does not do: prefill-sized queries (G·T > 128 goes to SDPA), masks other than by position or a tree's slot
mask, CPU tensors (the SDPA path serves those; tests run the kernel on the CPU through Triton's interpreter,
TRITON_INTERPRET=1).
"""
from __future__ import annotations

import math

import torch

from dspark.engine import triton_support

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU install without Triton: SDPA serves
    triton = None

MAX_QUERIES = 128  # G·T per row; longer blocks (prefill) go to SDPA
QUERY_TILE = 32  # grouped queries per program: a row's wider blocks (a tree's) split over programs


def usable(tensor: torch.Tensor, head_dim: int, grouped_queries: int) -> bool:
    """True when the kernel serves a step on `tensor`'s device (`triton_support.available`): a power-of-two head dim
    ≥ 16 and at most MAX_QUERIES grouped queries (G·T) per program."""
    if triton is None or not triton_support.available(tensor):
        return False
    return head_dim >= 16 and not head_dim & (head_dim - 1) and grouped_queries <= MAX_QUERIES


if triton is not None:

    @triton.jit
    def _cache_attention_kernel(q_ptr, q_stride_b, q_stride_t, q_stride_h, cache_ptr, c_stride_b, c_stride_h,
                                c_stride_l, rows_ptr, last_ptr, out_ptr, start_ptr, tree_ptr, t_len, kv_heads,
                                window, sliding, scale, depth_stride, G: tl.constexpr, D: tl.constexpr,
                                BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, HAS_ROWS: tl.constexpr,
                                SLIDING: tl.constexpr, TREE: tl.constexpr, IEEE: tl.constexpr):
        b = tl.program_id(0)
        kv_head = tl.program_id(1)
        row = tl.load(rows_ptr + b).to(tl.int64) if HAS_ROWS else b.to(tl.int64)
        if TREE:  # one program per slot: its G query heads
            queries = tl.program_id(2) * G + tl.arange(0, BLOCK_Q)
            in_q = tl.arange(0, BLOCK_Q) < G
        else:
            queries = tl.program_id(2) * BLOCK_Q + tl.arange(0, BLOCK_Q)  # grouped queries: (t, g) → t·G + g
        t = queries // G
        head = kv_head * G + queries % G
        if not TREE:
            in_q = t < t_len
        dims = tl.arange(0, D)
        q = tl.load(q_ptr + b.to(tl.int64) * q_stride_b + t[:, None] * q_stride_t + head[:, None] * q_stride_h
                    + dims[None, :], mask=in_q[:, None], other=0.0)  # [BQ, D]
        last = tl.load(last_ptr + b * t_len + t, mask=in_q, other=-1)  # [BQ] last visible key position
        hi = tl.minimum(tl.max(last, axis=0) + 1, window)
        lo = 0
        tree_start = 0
        slot = tl.program_id(2)
        if TREE:
            tree_start = tl.load(start_ptr + b)
        if SLIDING:
            lo = tl.maximum(tl.min(tl.where(in_q, last, hi), axis=0) - sliding + 1, 0) // BLOCK_K * BLOCK_K
        keys_base = cache_ptr + row * c_stride_b + kv_head * c_stride_h
        values_base = cache_ptr + row * c_stride_b + (kv_heads + kv_head) * c_stride_h
        m_i = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_Q,), tl.float32)
        acc = tl.zeros((BLOCK_Q, D), tl.float32)
        for start in range(lo, hi, BLOCK_K):
            pos = start + tl.arange(0, BLOCK_K)  # [BK]
            in_k = pos < hi
            at = pos
            if TREE:  # position start + e holds the slot's ancestor at depth e: read that slot's keys and values
                e = pos - tree_start
                up = tl.load(tree_ptr + (b * t_len + slot) * depth_stride + e, mask=(e >= 0) & in_k, other=0)
                at = tl.where(e >= 0, tree_start + up, pos)
            k = tl.load(keys_base + at[:, None] * c_stride_l + dims[None, :], mask=in_k[:, None], other=0.0)
            v = tl.load(values_base + at[:, None] * c_stride_l + dims[None, :], mask=in_k[:, None], other=0.0)
            if IEEE:
                s = tl.dot(q, tl.trans(k), input_precision="ieee")  # [BQ, BK]
            else:
                s = tl.dot(q, tl.trans(k))  # bf16/fp16 inputs, fp32 accumulation (exact products)
            s = s * scale
            visible = (pos[None, :] <= last[:, None]) & in_k[None, :]
            if SLIDING:
                visible = visible & (pos[None, :] > last[:, None] - sliding)
            s = tl.where(visible, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a query with nothing visible yet
            p = tl.exp(s - m_safe[:, None])  # [BQ, BK]
            alpha = tl.exp(m_i - m_safe)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            if IEEE:
                pv = tl.dot(p, v, input_precision="ieee")
            else:
                pv = tl.dot(p.to(v.dtype), v)  # as flash attention: probabilities in the value dtype
            acc = acc * alpha[:, None] + pv
            m_i = m_new
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # padding queries saw nothing
        heads = kv_heads * G
        tl.store(out_ptr + ((b * t_len + t[:, None]).to(tl.int64) * heads + head[:, None]) * D + dims[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=in_q[:, None])


def attend(q: torch.Tensor, cache: torch.Tensor, kv_heads: int, last: torch.Tensor, rows: torch.Tensor | None,
           window: int, scale: float | None, sliding: int | None = None,
           tree: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """New queries q [B, T, H, D] (any strides, D contiguous) against cache [B_max, 2·H_kv, L, D] rows `rows` [B]
    (None: 0 … B−1): query (b, t) sees keys at positions ≤ last[b, t] ([B, T]), below `window`, and within the last
    `sliding` positions when given; scale None: 1/√D -> [B, T, H, D] contiguous, q's dtype. `tree` (start [B],
    ancestors [B, T, A]: slot t's ancestor at each depth e, itself at its own depth; tree.ancestor_slots): a tree
    verify's slots, written at start_b + t; query t reads positions < start_b from the cache and position start_b + e
    from its ancestor's slot, up to last[b, t] = start_b + its depth: the keys a chain verify of its path reads, at
    the same positions, so its attention sums in the same order."""
    b, t, heads, d = q.shape
    groups = heads // kv_heads
    block_q = max(16, min(QUERY_TILE, triton.next_power_of_2(groups * t)))
    out = torch.empty(b, t, heads, d, dtype=q.dtype, device=q.device)  # [B, T, H, D]
    last = last.contiguous()  # [B, T] integer positions (a no-op for the engine's own tensors)
    anchor = rows if rows is not None else last  # any tensor: unused without rows
    if tree is not None:  # one program per slot, reading its own path: a chain's keys at a chain's positions
        start, ancestors = tree[0], tree[1].contiguous()
        block_q, programs = max(16, triton.next_power_of_2(groups)), t
    else:
        start, ancestors = last, last  # unused without a tree
        programs = triton.cdiv(groups * t, block_q)
    _cache_attention_kernel[(b, kv_heads, programs)](
        q, q.stride(0), q.stride(1), q.stride(2), cache, cache.stride(0), cache.stride(1), cache.stride(2), anchor,
        last, out, start, ancestors, t, kv_heads, min(window, cache.shape[2]), sliding or 0,
        scale or 1 / math.sqrt(d), ancestors.shape[-1], G=groups, D=d, BLOCK_Q=block_q, BLOCK_K=64,
        HAS_ROWS=rows is not None, SLIDING=sliding is not None, TREE=tree is not None,
        IEEE=q.dtype == torch.float32)
    return out
