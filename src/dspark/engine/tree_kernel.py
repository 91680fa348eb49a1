"""A tree's beam (tree.py) as Triton kernels (CUDA only): two launches a depth, one to choose the tree.

The torch ops spend about a dozen launches per depth (gather W1[prev], the rank-r GEMM, the add to the base logits,
log-softmax, two top-k, the cumulative add, the index arithmetic and gathers), ~80 for a block of 7. Here a depth is
two launches:
  children  one program per (beam node, vocabulary tile): logits = base + W2·W1[prev] in fp32, with the bias rounded
            to the weights' dtype as the eager GEMM rounds it; the tile's max and Σ exp (for the log-softmax) and its
            `beam` best (logit, index) pairs, written out.
  merge     one program per row: each node's log-sum-exp from its tiles' partials, every candidate's cumulative score
            (the node's score + logit − lse), and the row's `beam` best of them: the next beam's scores, tokens (full
            ids with a draft vocabulary) and parents.
A third kernel (`select`, one program per row) chooses the tree from every depth's beam: the `nodes` best by score,
numbered in depth order, with each node's parent slot, depth and ancestor mask, where the torch ops take ~30 launches.
A fourth (`accept`, one program per row) runs a tree verify's acceptance in one launch where the torch ops take ~25
(tree.accept_tree, tree.accepted_path and the committed tokens): each slot's verdict against the target's choice at
its parent, the deepest slot whose whole path is good, its depth (accepted) and the choice there (bonus), the path's
slot at every depth, and the committed tokens — the same values as the torch ops, bit for bit.
Ties go to the lowest index within a tile and to the earliest candidate across tiles. The sum over the rank runs in
another order than cuBLAS's, so a near-tie can choose another child than the torch ops; verification keeps the output
lossless whatever the tree.

What it does not do: the gated or RNN Markov heads (their bias depends on the slot's hidden state: the torch ops serve
them), CPU tensors (the torch ops; tests run the kernels through Triton's interpreter), pools of more than MAX_POOL
candidates a row (γ · beam; 7 × 8 = 56 fits), beams that are not a power of two (a Triton range must be one);
tree.build_tree sends those to the torch ops.
"""
from __future__ import annotations

import torch

from dspark.engine import triton_support

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU install without Triton: the torch ops serve
    triton = None

BLOCK_V = 256  # vocabulary entries per `children` program
MAX_POOL = 64  # candidates (γ · beam) the `select` program holds; larger pools take the torch ops


def usable(head: object, tensor: torch.Tensor) -> bool:
    """True when the kernels serve this head on this device: the vanilla Markov head, rank ≤ 128, and the kernels
    available there (`triton_support.available`)."""
    from dspark.model.heads import MarkovHead

    if triton is None or type(head) is not MarkovHead or head.rank > 128:
        return False
    return triton_support.available(tensor)


if triton is not None:

    @triton.jit
    def _children_kernel(base_ptr, base_stride, w1_ptr, w2_ptr, prev_ptr, value_ptr, index_ptr, max_ptr, sum_ptr,
                         parents, vocab, rank, tiles, scale, K: tl.constexpr, BIASED: tl.constexpr,
                         RANK_TILE: tl.constexpr, BLOCK: tl.constexpr):
        node = tl.program_id(0).to(tl.int64)  # row · parents + parent
        tile = tl.program_id(1)
        row = node // parents
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        inside = cols < vocab
        logits = tl.load(base_ptr + row * base_stride + cols, mask=inside, other=0.0).to(tl.float32)  # [BLOCK]
        if BIASED:
            prev = tl.load(prev_ptr + node).to(tl.int64)
            r = tl.arange(0, RANK_TILE)
            in_rank = r < rank
            u = tl.load(w1_ptr + prev * rank + r, mask=in_rank, other=0.0).to(tl.float32)  # [R] W1[prev]
            w = tl.load(w2_ptr + cols[:, None].to(tl.int64) * rank + r[None, :],
                        mask=inside[:, None] & in_rank[None, :], other=0.0).to(tl.float32)  # [BLOCK, R]
            bias = tl.sum(w * u[None, :], axis=1).to(w2_ptr.dtype.element_ty).to(tl.float32)  # rounded as the GEMM
            logits = logits + bias
        logits = logits * scale  # 1 / the tree's score temperature
        logits = tl.where(inside, logits, float("-inf"))
        top = tl.max(logits, axis=0)
        out = node * tiles + tile
        tl.store(max_ptr + out, top)
        tl.store(sum_ptr + out, tl.sum(tl.exp(logits - top), axis=0))
        lanes = tl.arange(0, BLOCK)
        for j in tl.static_range(K):  # the tile's K best, best first
            best = tl.max(logits, axis=0)
            at = tl.min(tl.where(logits == best, lanes, BLOCK), axis=0)  # the lowest index among ties
            tl.store(value_ptr + out * K + j, best)
            tl.store(index_ptr + out * K + j, tile * BLOCK + at)
            logits = tl.where(lanes == at, float("-inf"), logits)

    @triton.jit
    def _merge_kernel(value_ptr, index_ptr, max_ptr, sum_ptr, scores_ptr, ids_ptr, out_score_ptr, out_token_ptr,
                      out_parent_ptr, parents, tiles, K: tl.constexpr, MAPPED: tl.constexpr, BLOCK_P: tl.constexpr,
                      BLOCK_T: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        p = tl.arange(0, BLOCK_P)
        t = tl.arange(0, BLOCK_T)
        live = (p[:, None] < parents) & (t[None, :] < tiles)  # [BP, BT]
        part = (row * parents + p[:, None]) * tiles + t[None, :]
        m = tl.load(max_ptr + part, mask=live, other=float("-inf"))
        s = tl.load(sum_ptr + part, mask=live, other=0.0)
        top = tl.max(m, axis=1)  # [BP]
        top_safe = tl.where(p < parents, top, 0.0)
        total_exp = tl.sum(s * tl.exp(m - top_safe[:, None]), axis=1)  # [BP]
        lse = top_safe + tl.log(tl.where(p < parents, total_exp, 1.0))  # [BP] each node's log-sum-exp
        score = tl.load(scores_ptr + row * parents + p, mask=p < parents, other=0.0)  # [BP]
        c = tl.arange(0, BLOCK_T * K)  # a node's candidates: tile · K + j
        alive = (p[:, None] < parents) & (c[None, :] < tiles * K)
        flat = (row * parents + p[:, None]) * tiles * K + c[None, :]  # [BP, BT·K]
        value = tl.load(value_ptr + flat, mask=alive, other=float("-inf"))
        total = tl.where(alive, score[:, None] + value - lse[:, None], float("-inf"))  # cumulative log-probability
        order = p[:, None] * (BLOCK_T * K) + c[None, :]  # candidate rank for ties: earlier parent, tile, pick first
        for j in tl.static_range(K):
            best = tl.max(tl.max(total, axis=1), axis=0)
            at = tl.min(tl.min(tl.where(total == best, order, BLOCK_P * BLOCK_T * K), axis=1), axis=0)
            parent = at // (BLOCK_T * K)
            cand = at % (BLOCK_T * K)
            index = tl.load(index_ptr + (row * parents + parent) * tiles * K + cand)
            if MAPPED:
                index = tl.load(ids_ptr + index)
            tl.store(out_score_ptr + row * K + j, best)
            tl.store(out_token_ptr + row * K + j, index)
            tl.store(out_parent_ptr + row * K + j, parent)
            total = tl.where(order == at, float("-inf"), total)


    @triton.jit
    def _select_kernel(score_ptr, token_ptr, parent_ptr, anchor_ptr, out_token_ptr, out_parent_ptr, out_depth_ptr,
                       visible_ptr, pool, nodes, K: tl.constexpr, GAMMA: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        i = tl.arange(0, BLOCK)  # pool index: depth · K + beam position
        j = i
        inside = i < pool
        depth = i // K
        score = tl.load(score_ptr + row * pool + i, mask=inside, other=float("-inf"))
        key = tl.where(inside, score - 1e-3 * depth.to(tl.float32), float("-inf"))  # ties go to the shallower node
        ahead = (key[None, :] > key[:, None]) | ((key[None, :] == key[:, None]) & (j[None, :] < i[:, None]))
        chosen = (tl.sum(ahead.to(tl.int32), axis=1) < nodes) & inside  # [BLOCK] the `nodes` best
        before = (j[None, :] < i[:, None]) & chosen[None, :]
        slot = 1 + tl.sum(before.to(tl.int32), axis=1)  # [BLOCK] tree slot of a chosen node, in pool order
        up = tl.load(parent_ptr + row * pool + i, mask=inside, other=0)
        parent = tl.where(depth > 0, (depth - 1) * K + up, -1)  # [BLOCK] parent's pool index (−1: the anchor)
        parent_slot = tl.sum(tl.where(j[None, :] == parent[:, None], slot[None, :], 0), axis=1)  # 0 for the anchor
        seen = j[None, :] == i[:, None]  # [BLOCK, BLOCK] ancestor-or-self in pool space, grown one level a step
        walk = parent
        for _ in tl.static_range(GAMMA):
            seen = seen | (j[None, :] == walk[:, None])
            walk = tl.sum(tl.where(j[None, :] == walk[:, None], parent[None, :], 0), axis=1) + tl.where(walk < 0, -1, 0)
        token = tl.load(token_ptr + row * pool + i, mask=inside, other=0)
        slots = nodes + 1
        tl.store(out_token_ptr + row * slots + slot, token, mask=chosen)
        tl.store(out_parent_ptr + row * slots + slot, parent_slot, mask=chosen)
        tl.store(out_depth_ptr + row * slots + slot, depth + 1, mask=chosen)
        both = chosen[:, None] & chosen[None, :]
        tl.store(visible_ptr + (row * slots + slot[:, None]) * slots + slot[None, :], seen, mask=both)
        tl.store(visible_ptr + (row * slots + slot) * slots, chosen, mask=chosen)  # every node sees the anchor
        first = i == 0
        tl.store(out_token_ptr + row * slots + i, tl.load(anchor_ptr + row + i * 0), mask=first)
        tl.store(out_parent_ptr + row * slots + i, i * 0, mask=first)
        tl.store(out_depth_ptr + row * slots + i, i * 0, mask=first)
        tl.store(visible_ptr + row * slots * slots + i, i == 0, mask=i < slots)  # the anchor sees itself alone


    @triton.jit
    def _accept_kernel(token_ptr, parent_ptr, depth_ptr, visible_ptr, choice_ptr, length_ptr, accepted_ptr, bonus_ptr,
                       path_ptr, committed_ptr, slots, gamma, BLOCK: tl.constexpr, BLOCK_G: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        t = tl.arange(0, BLOCK)  # tree slots
        inside = t < slots
        base = row * slots
        token = tl.load(token_ptr + base + t, mask=inside, other=0)
        parent = tl.load(parent_ptr + base + t, mask=inside, other=0)
        depth = tl.load(depth_ptr + base + t, mask=inside, other=0)
        at_parent = tl.load(choice_ptr + base + parent, mask=inside, other=-1)  # the target's choice at the parent
        length = tl.load(length_ptr + row)
        good = ((token == at_parent) & (depth <= length)) | (t == 0)  # [BLOCK]
        seen = tl.load(visible_ptr + (base + t[:, None]) * slots + t[None, :],
                       mask=inside[:, None] & inside[None, :], other=0) != 0  # [BLOCK, BLOCK]
        bad = tl.sum((seen & (good[None, :] == 0)).to(tl.int32), axis=1)  # failing slots each slot sees
        key = tl.where((bad == 0) & inside, depth, -1)
        accepted = tl.max(key, axis=0)  # the deepest good path's depth (its end is unique)
        best = tl.min(tl.where(key == accepted, t, BLOCK), axis=0)
        bonus = tl.load(choice_ptr + base + best)
        tl.store(accepted_ptr + row, accepted)
        tl.store(bonus_ptr + row, bonus)
        on_path = (tl.load(visible_ptr + (base + best) * slots + t, mask=inside, other=0) != 0) & (depth > 0)
        g = tl.arange(0, BLOCK_G)  # depth − 1 along the path
        match = on_path[None, :] & (depth[None, :] == g[:, None] + 1)  # [BLOCK_G, BLOCK]
        found = tl.sum(tl.where(match, t[None, :], 0), axis=1)
        default = tl.minimum(g + 1, slots - 1)  # past the path: the slot at that depth, or the last one
        path = tl.where(tl.sum(match.to(tl.int32), axis=1) > 0, found, default)  # [BLOCK_G]
        tl.store(path_ptr + row * gamma + g, path.to(tl.int64), mask=g < gamma)
        on_slot = tl.sum(tl.where(t[None, :] == path[:, None], token[None, :], 0), axis=1)  # tokens along the path
        committed = tl.where(g == accepted, bonus, tl.where(g < gamma, on_slot, 0))
        tl.store(committed_ptr + row * (gamma + 1) + g, committed.to(tl.int64), mask=g < gamma + 1)


def select(scores: torch.Tensor, tokens: torch.Tensor, parents: torch.Tensor, anchors: torch.Tensor,
           nodes: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The pool of every depth's beam — scores, tokens, parents [B, γ, k] — -> the best `nodes` as a tree: tokens,
    parent slots, depths [B, T] and visibility [B, T, T] (T = nodes + 1, slot 0 the anchor), in one launch."""
    b, gamma, k = scores.shape
    slots = nodes + 1
    device = scores.device
    tokens_out = torch.empty(b, slots, dtype=torch.long, device=device)
    parent_out = torch.empty(b, slots, dtype=torch.long, device=device)
    depth_out = torch.empty(b, slots, dtype=torch.long, device=device)
    visible = torch.empty(b, slots, slots, dtype=torch.bool, device=device)
    _select_kernel[(b,)](scores.contiguous(), tokens.contiguous(), parents.contiguous(), anchors.contiguous(),
                         tokens_out, parent_out, depth_out, visible, gamma * k, nodes, K=k, GAMMA=gamma,
                         BLOCK=max(16, triton.next_power_of_2(gamma * k)))
    return tokens_out, parent_out, depth_out, visible


def beam_step(base: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, prev: torch.Tensor, scores: torch.Tensor,
              beam: int, token_ids: torch.Tensor | None = None, biased: bool = True,
              scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One depth: base [B, V'] (this slot's logits before the bias; V' = K ids with a draft vocabulary), W1 [V, r],
    W2 [V', r], the beam's tokens prev [B, P] (full ids) and scores [B, P] -> the next beam's scores [B, beam] (fp32),
    tokens [B, beam] (full ids via token_ids [V'] when given) and parents [B, beam] (indices into P). `biased` False:
    no Markov bias (a first slot without it). `scale`: the logits are multiplied by it before the log-softmax (1 /
    the tree's score temperature)."""
    b, parents = prev.shape
    vocab, rank = w2.shape
    tiles = triton.cdiv(vocab, BLOCK_V)
    device = base.device
    nodes = b * parents
    values = torch.empty(nodes, tiles, beam, dtype=torch.float32, device=device)
    indices = torch.empty(nodes, tiles, beam, dtype=torch.long, device=device)
    maxima = torch.empty(nodes, tiles, dtype=torch.float32, device=device)
    sums = torch.empty(nodes, tiles, dtype=torch.float32, device=device)
    prev = prev.contiguous()
    _children_kernel[(nodes, tiles)](base, base.stride(0), w1, w2, prev, values, indices, maxima, sums, parents,
                                     vocab, rank, tiles, scale, K=beam, BIASED=biased,
                                     RANK_TILE=max(16, triton.next_power_of_2(rank)), BLOCK=BLOCK_V)
    out_scores = torch.empty(b, beam, dtype=torch.float32, device=device)
    out_tokens = torch.empty(b, beam, dtype=torch.long, device=device)
    out_parents = torch.empty(b, beam, dtype=torch.long, device=device)
    ids = token_ids if token_ids is not None else prev
    _merge_kernel[(b,)](values, indices, maxima, sums, scores.float().contiguous(), ids, out_scores, out_tokens,
                        out_parents, parents, tiles, K=beam, MAPPED=token_ids is not None,
                        BLOCK_P=max(2, triton.next_power_of_2(parents)), BLOCK_T=max(2, triton.next_power_of_2(tiles)))
    return out_scores, out_tokens, out_parents


def accept_usable(tensor: torch.Tensor) -> bool:
    """True when `accept` may run on `tensor`'s device (triton_support.available)."""
    return triton is not None and triton_support.available(tensor)


def accept(tokens: torch.Tensor, parent: torch.Tensor, depth: torch.Tensor, visible: torch.Tensor,
           choice: torch.Tensor, lengths: torch.Tensor,
           gamma: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A tree verify's acceptance in one launch: the tree (tokens, parent, depth [B, T], visible [B, T, T]), the
    target's choice after each slot [B, T] and lengths [B] -> accepted [B], bonus [B], the path's slots by depth
    [B, γ] (tree.accepted_path) and the committed tokens [B, γ+1] (the path's tokens, the bonus at `accepted`)."""
    b, slots = tokens.shape
    device = tokens.device
    accepted = torch.empty(b, dtype=torch.long, device=device)
    bonus = torch.empty(b, dtype=torch.long, device=device)
    path = torch.empty(b, gamma, dtype=torch.long, device=device)
    committed = torch.empty(b, gamma + 1, dtype=torch.long, device=device)
    _accept_kernel[(b,)](tokens.contiguous(), parent.contiguous(), depth.contiguous(), visible.contiguous(),
                         choice.contiguous(), lengths.contiguous(), accepted, bonus, path, committed, slots, gamma,
                         BLOCK=max(16, triton.next_power_of_2(slots)),
                         BLOCK_G=max(16, triton.next_power_of_2(gamma + 1)))
    return accepted, bonus, path, committed
