"""Greedy decoding through the vanilla or gated Markov head as one Triton kernel per slot (CUDA only).

The eager loop spends four kernels per slot (gather W1[prev], the rank-r GEMM W2·W1[prev], the add to the base
logits, an argmax over the vocabulary, which runs as a single-block reduction), 28 launches for a block of 7. Here a
slot is one launch: every program takes a tile of the vocabulary for a tile of rows, computes base + W2·W1[prev]
with the bias rounded to the weights' dtype as the eager GEMM rounds it, and folds its best (logit, lowest index)
into one int64 per row with an atomic max. The next slot's launch decodes `prev` from that key, so no logits are
ever written. Ties go to the lowest index, as `torch.argmax`. The sum over the rank runs in another order than
cuBLAS's, so a near-tie can pick another draft token than the eager loop; verification keeps the output lossless.
The gated head's gate σ(W_h·h_k + b + W_e·W1[prev]) splits in two: W_h·h_k + b for every slot is one GEMM before the
launches (`gate_inputs`, fp32, rounded once with the prev term as the eager GEMM rounds it), and W_e·W1[prev], an
r × r product, runs in each program beside the W2 tile; the gate and g ⊙ W1[prev] round as the eager ops round.

A draft vocabulary (FR-Spec, `dspark.model.draft_vocab`) runs through the same kernel: the programs tile its K ids
instead of the V, and a pick is mapped to its full id before W1 is read.

What it does not do: sampling (the probabilities q_k are needed there), the RNN head, CPU tensors. The
eager loop in `draft_step.decode_blocks` serves those, and `usable` says when this path applies. Tests run it on
the CPU through Triton's interpreter (TRITON_INTERPRET=1).
"""
from __future__ import annotations

import torch

from dspark.engine import triton_support

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU install without Triton: the eager loop serves
    triton = None

INT64_MIN = -(2**63)
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def usable(head: object, tensor: torch.Tensor, greedy: bool) -> bool:
    """True when the fused greedy decode serves this head and device: the vanilla or gated Markov head, greedy, and
    the kernels available there (`triton_support.available`)."""
    from dspark.model.heads import GatedMarkovHead, MarkovHead

    if triton is None or not greedy or type(head) not in (MarkovHead, GatedMarkovHead):
        return False
    return _fits(head.markov_w1.weight, head.markov_w2.weight) and triton_support.available(tensor)


def gate_inputs(head: torch.nn.Module, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The gated head's share of `greedy_decode`: (W_h·h_k + b in fp32 [N, γ, r], W_e [r, r]) from its gate_proj
    over [h_k ; W1[prev]]; None for the vanilla head. hidden [N, γ, d] are the slots the decode covers."""
    proj = getattr(head, "gate_proj", None)
    if proj is None:
        return None
    d = hidden.shape[-1]
    w_h, w_e = proj.weight[:, :d], proj.weight[:, d:]  # [r, d], [r, r]
    pre = torch.nn.functional.linear(hidden.float(), w_h.float(), proj.bias.float())  # [N, γ, r]
    return pre, w_e.contiguous()


def _fits(w1: torch.Tensor, w2: torch.Tensor) -> bool:
    rank = w1.shape[1]
    return w1.dtype == w2.dtype and w1.dtype in _FLOATS and 1 <= rank <= 512


if triton is not None:
    _FLOOR = tl.constexpr(INT64_MIN)  # globals inside a Triton kernel must be constexpr

    @triton.jit
    def _as_weights(x, ROUND_BF16: tl.constexpr, dtype: tl.constexpr):
        """fp32 x rounded to the weights' dtype (and back to fp32) as an eager op's output rounds."""
        if ROUND_BF16:  # nearest-even, in integer ops: exact everywhere (the interpreter's bf16 casts are not)
            raw = x.to(tl.int32, bitcast=True)
            raw = (raw + 0x7FFF + ((raw >> 16) & 1)) & -65536
            rounded = raw.to(tl.float32, bitcast=True)
        else:  # fp32: nothing to round; fp16: numpy and the GPU both round to nearest-even
            rounded = x.to(dtype).to(tl.float32)
        return rounded

    @triton.jit
    def _slot_kernel(base_ptr, w1_ptr, w2_ptr, keys_ptr, anchors_ptr, pre_ptr, we_ptr, ids_ptr, rows, vocab, rank,
                     base_row_stride, STEP: tl.constexpr, ROUND_BF16: tl.constexpr, TENSOR_CORES: tl.constexpr,
                     GATED: tl.constexpr, MAPPED: tl.constexpr, GAMMA: tl.constexpr, RANK_TILE: tl.constexpr,
                     BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr):
        vocab_ids = tl.program_id(0) * BLOCK_V + tl.arange(0, BLOCK_V)  # [BV]
        row_ids = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
        in_vocab = vocab_ids < vocab
        in_rows = row_ids < rows
        ranks = tl.arange(0, RANK_TILE)  # the rank, padded to a power of two ≥ 16 (tl.dot's least)
        in_rank = ranks < rank
        # the loads that do not wait for the previous slot first: the W2 tile and the base logits
        w2 = tl.load(w2_ptr + vocab_ids.to(tl.int64)[:, None] * rank + ranks[None, :],
                     mask=in_vocab[:, None] & in_rank[None, :], other=0.0).to(tl.float32)  # [BV, R]
        base = tl.load(base_ptr + row_ids.to(tl.int64)[None, :] * base_row_stride + STEP * vocab
                       + vocab_ids[:, None], mask=in_vocab[:, None] & in_rows[None, :], other=0.0)  # [BV, BN]
        if STEP == 0:
            prev = tl.load(anchors_ptr + row_ids, mask=in_rows, other=0)  # [BN]
        else:
            key = tl.load(keys_ptr + row_ids * GAMMA + (STEP - 1), mask=in_rows, other=0)  # [BN]
            prev = (vocab - 1) - (key & 0xFFFFFFFF)  # [BN] decoded token of the previous slot
            if MAPPED:  # a position among the draft vocabulary's K ids -> its full-vocabulary id (W1's row)
                prev = tl.load(ids_ptr + prev, mask=in_rows, other=0)
        emb = tl.load(w1_ptr + prev.to(tl.int64)[None, :] * rank + ranks[:, None], mask=in_rank[:, None],
                      other=0.0).to(tl.float32)  # [R, BN] W1[prev]ᵀ
        if GATED:  # emb ← σ(W_h·h + b + W_e·emb) ⊙ emb, each op rounded to the weights' dtype as the eager ops
            in_square = in_rank[:, None] & in_rank[None, :]
            w_e = tl.load(we_ptr + ranks[:, None] * rank + ranks[None, :], mask=in_square, other=0.0).to(tl.float32)
            pre = tl.load(pre_ptr + row_ids.to(tl.int64)[None, :] * (GAMMA * rank) + STEP * rank + ranks[:, None],
                          mask=in_rank[:, None] & in_rows[None, :], other=0.0)  # [R, BN] W_h·h + b, fp32
            if BLOCK_N == 1:
                mixed = tl.sum(w_e[:, :, None] * emb[None, :, :], axis=1)  # [R, 1]
            else:
                mixed = tl.dot(w_e, emb, input_precision="ieee")  # [R, BN]
            gate = _as_weights(tl.sigmoid(_as_weights(pre + mixed, ROUND_BF16, w2_ptr.dtype.element_ty)),
                               ROUND_BF16, w2_ptr.dtype.element_ty)  # [R, BN]
            emb = _as_weights(gate * emb, ROUND_BF16, w2_ptr.dtype.element_ty)  # [R, BN]
        if BLOCK_N == 1:  # one row per program: a multiply-and-sum, no padded matrix product
            bias = tl.sum(w2[:, :, None] * emb[None, :, :], axis=1)  # [BV, 1]
        elif TENSOR_CORES:  # bf16 / fp16 weights on the GPU: exact products, fp32 sums, as the eager GEMM
            bias = tl.dot(w2.to(w2_ptr.dtype.element_ty), emb.to(w2_ptr.dtype.element_ty))  # [BV, BN]
        else:  # fp32 weights, and Triton's interpreter (its bf16 dot is wrong): fp32 products of the weights, exact
            bias = tl.dot(w2, emb, input_precision="ieee")  # [BV, BN]
        bias = _as_weights(bias, ROUND_BF16, w2_ptr.dtype.element_ty)  # as the eager GEMM's output
        logits = base.to(tl.float32) + bias  # [BV, BN]
        bits = logits.to(tl.int32, bitcast=True)
        ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # float order as signed int order
        keys = (ordered.to(tl.int64) << 32) | ((vocab - 1) - vocab_ids).to(tl.int64)[:, None]  # [BV, BN]
        keys = tl.where(in_vocab[:, None], keys, _FLOOR)
        best = tl.max(keys, axis=0)  # [BN]
        tl.atomic_max(keys_ptr + row_ids * GAMMA + STEP, best, mask=in_rows)


def greedy_decode(base: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, anchors: torch.Tensor,
                  gate: tuple[torch.Tensor, torch.Tensor] | None = None,
                  token_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Base logits [N, γ, V] (the draft's dtype), W1 [V, r], W2 [V, r] (the Markov head's embedding and output
    weights, one dtype, r ≤ 512), anchors [N] -> greedy drafts [N, γ]:
    token_k = argmax(base_k + W2·W1[token_{k−1}]), token_{−1} = the anchor. With `gate` (`gate_inputs` of a gated
    head, for the same N × γ slots) W1[token_{k−1}] is gated first, as `GatedMarkovHead` does. With `token_ids` [K]
    (a draft vocabulary, FR-Spec) base [N, γ, K] and W2 [K, r] score only those ids, the argmax runs over the K and
    W1 [V, r] is read at the full id of the previous pick; the drafts come back as full ids."""
    rows, gamma, vocab = base.shape
    rank = w1.shape[1]
    if not _fits(w1, w2):
        raise ValueError(f"the fused Markov decode needs W1 and W2 of one float dtype and a rank ≤ 512; got "
                         f"{w1.dtype} / {w2.dtype}, rank {rank}: use the eager loop (draft_step.decode_blocks)")
    if gate is not None and (gate[0].shape != (rows, gamma, rank) or gate[1].shape != (rank, rank)):
        raise ValueError(f"gate inputs {tuple(gate[0].shape)} / {tuple(gate[1].shape)} do not fit {rows} rows × "
                         f"{gamma} slots at rank {rank}: build them with gate_inputs(head, hidden) for these slots")
    if w2.shape[0] != vocab or (token_ids is not None and token_ids.shape != (vocab,)):
        raise ValueError(f"base logits score {vocab} tokens but W2 has {w2.shape[0]} rows"
                         + ("" if token_ids is None else f" and token_ids {tuple(token_ids.shape)}")
                         + ": pass the draft vocabulary's own rows (DraftVocab.markov_w2, DraftVocab.token_ids)")
    base, w1, w2 = base.contiguous(), w1.contiguous(), w2.contiguous()  # no-ops for the draft's own tensors
    pre, w_e = (w1, w1) if gate is None else (gate[0].float().contiguous(), gate[1].contiguous())  # unused: w1
    keys = torch.full((rows, gamma), INT64_MIN, dtype=torch.int64, device=base.device)  # [N, γ]
    rank_tile = max(16, triton.next_power_of_2(rank))
    block_v = max(16, 8192 // rank_tile)  # a [block_v, rank] tile of W2 per program
    block_n = 1 if rows < 16 else 16  # rows per program: one, or a tile for tl.dot
    grid = (triton.cdiv(vocab, block_v), triton.cdiv(rows, block_n))
    anchors = anchors.to(torch.int64).contiguous()
    ids = anchors if token_ids is None else token_ids.to(torch.int64).contiguous()  # unused without a vocabulary
    for step in range(gamma):
        _slot_kernel[grid](base, w1, w2, keys, anchors, pre, w_e, ids, rows, vocab, rank, gamma * vocab, STEP=step,
                           ROUND_BF16=w2.dtype == torch.bfloat16,
                           TENSOR_CORES=w2.dtype != torch.float32 and not triton_support.interpreting(),
                           GATED=gate is not None, MAPPED=token_ids is not None, GAMMA=gamma, RANK_TILE=rank_tile,
                           BLOCK_V=block_v, BLOCK_N=block_n)
    picks = (vocab - 1) - (keys & 0xFFFFFFFF)  # [N, γ] positions among the scored tokens
    return picks if token_ids is None else ids[picks]  # [N, γ] full-vocabulary ids
