"""Tree drafts: a draft's block widened into a token tree, and acceptance of the deepest path the target agrees with.

The draft's block forward gives one hidden state per slot; only the Markov head makes slot k depend on the token
picked at slot k−1. So one block can seed many paths: a beam of `beam` nodes per depth, each node's children scored
by log-softmax(base_k + Markov(node's token)), the beam kept by cumulative log-probability (EAGLE-2's expansion),
or, for a draft without a Markov head (DFlash mode), by log-softmax(base_k) alone (every node's children are then
the slot's own top tokens whatever the path, as in Medusa's trees); then the `nodes` best nodes of all depths form
the tree (a node's parent always scores higher, so the tree is closed under ancestors). Slot 0 of a tree is the
anchor; nodes follow in depth order, so a node's parent sits in a lower slot. The target verifies all slots in one
pass, each slot attending to the context and to its own ancestors (`TreeDrafts.visible`), at rotary position start +
depth. Acceptance: a node is good when its token is the target's choice at its parent; the deepest node whose
ancestors are all good ends the accepted path, and the target's choice there is the bonus token. Greedy, the choice
is the target's argmax, and any tree gives the target's own greedy output, so the shape is a speed choice only.
Sampling, the target draws its choice after every slot, independently, from its processed distribution there; the
walk is the same. The committed tokens are then x_0 ~ p(·|context), x_1 ~
p(·|context, x_0), … — each the target's own draw given the path so far (draws at slots off the path are discarded,
and they are independent of the ones kept) — so outputs are distributed exactly as the target's samples. This is
recursive rejection sampling with point-mass proposals (a node's children are the draft's top choices, not samples
from it): a node's children are accepted with total probability Σ p(child).

What it does not do: the cache moves after acceptance (static_target.keep_path) or running the target.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from dspark.engine import tree_kernel
from dspark.model.draft import DSparkDraft


@dataclass(frozen=True)
class TreeShape:
    """`nodes` drafted nodes per tree (the verify width is nodes + 1: the anchor), `beam` nodes kept per depth.
    `max_rows`: rounds over more rows than this verify the block's chain instead (a tree's extra slots are nearly
    free at a row or two, not at 16: benchmarks/results/engine_speed/; None: trees at every batch size). `score_temperature`: nodes are scored by their
    path's cumulative log-softmax(logits / score_temperature) — below 1 a node's best child stays close to its
    parent's score, so the trees grow deeper along the draft's own greedy path (a draft trained toward the target's
    full distribution, as the DSpark loss's L1 term trains it, is flatter than its greedy acceptance warrants:
    benchmarks/results/testbed_tree/). Which children a node has does not change, only which nodes are kept; it is
    a draft-side choice and never changes what the target commits. Not the sampling temperature."""

    nodes: int = 23
    beam: int = 4
    max_rows: int | None = 2
    score_temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.beam < 1 or self.nodes < 1:
            raise ValueError(f"a tree needs nodes >= 1 and beam >= 1, got nodes={self.nodes}, beam={self.beam}")
        if self.max_rows is not None and self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1 (or None: trees at every batch size), got {self.max_rows}")
        if not self.score_temperature > 0:
            raise ValueError(f"score_temperature must be > 0 (1: the draft's own log-probabilities), got "
                             f"{self.score_temperature}")

    def serves(self, rows: int) -> bool:
        """Whether a round over `rows` rows (a bucket's, padding included) verifies trees."""
        return self.max_rows is None or rows <= self.max_rows

    def check(self, depth: int) -> None:
        """Refuse a shape the block cannot fill: more nodes than `depth` × beam candidates."""
        if self.nodes > depth * self.beam:
            raise ValueError(f"a tree of {self.nodes} nodes needs at least {self.nodes} candidates, but {depth} "
                             f"slots × beam {self.beam} give {depth * self.beam}; lower nodes or raise beam")


@dataclass(frozen=True)
class TreeDrafts:
    """Rows' trees of T = nodes + 1 slots, slot 0 the anchor."""

    tokens: torch.Tensor  # [B, T] full-vocabulary ids
    parent: torch.Tensor  # [B, T] slot of each slot's parent (0 for the anchor itself)
    depth: torch.Tensor  # [B, T] 0 for the anchor, k + 1 for a node drafted at slot k
    visible: torch.Tensor  # [B, T, T] bool: slot i attends to slot j (j is i or one of its ancestors)

    @property
    def parts(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.tokens, self.parent, self.depth, self.visible

    def rows(self, b: int) -> "TreeDrafts":
        """Rows 0 … b−1 (views)."""
        return TreeDrafts(*(part[:b] for part in self.parts))


def _beam_step(draft: DSparkDraft, base: torch.Tensor, hidden: torch.Tensor, prev: torch.Tensor,
               state: torch.Tensor | None, beam: int, temperature: float):
    """Children of the beam: base [B, V'] (one slot's logits before the bias), hidden [B, d], prev [B, P] full ids
    and the Markov state [B·P, r] or None -> scores (log-softmax of the logits / temperature) of the top `beam`
    children per parent [B, P, beam], their ids (a position among V') [B, P, beam] and the next state [B·P, r] or
    None."""
    b, p = prev.shape
    logits = base[:, None].expand(b, p, base.shape[-1]).float()  # [B, P, V']
    head, vocab = draft.markov_head, draft.draft_vocab
    state_next = None
    if head is not None:  # without a Markov head every parent's children come from the slot's own distribution
        mixed, state_next = head.step_features(prev.reshape(-1), hidden[:, None].expand(b, p, -1).reshape(b * p, -1),
                                               state)
        w2 = head.markov_w2 if vocab is None else vocab.markov_w2
        logits = logits + w2(mixed).view(b, p, -1)  # [B, P, V'] fp32
    if temperature != 1.0:
        logits = logits * (1.0 / temperature)  # as tree_kernel scales them, bit for bit
    top = torch.log_softmax(logits, dim=-1).topk(beam, dim=-1)  # [B, P, beam]
    return top.values, top.indices, state_next


def build_tree(draft: DSparkDraft, hidden: torch.Tensor, anchors: torch.Tensor, shape: TreeShape) -> TreeDrafts:
    """hidden [B, γ, d] (the block's predicting slots), anchors [B] -> each row's tree of shape.nodes nodes."""
    vocab = draft.draft_vocab
    b, gamma = hidden.shape[:2]
    k = shape.beam
    shape.check(gamma)
    base = draft.base_logits(hidden) if vocab is None else vocab.logits(hidden)  # [B, γ, V'] or [B, γ, K]

    def full(ids: torch.Tensor) -> torch.Tensor:
        return ids if vocab is None else vocab.full_ids(ids)

    if tree_kernel.usable(draft.markov_head, hidden) and gamma * k <= tree_kernel.MAX_POOL and not k & (k - 1):
        # two launches a depth and one for the choice (tree_kernel.py)
        beams = _kernel_beams(draft, base, anchors, k, 1.0 / shape.score_temperature)
        return TreeDrafts(*tree_kernel.select(*beams, anchors, shape.nodes))
    head = draft.markov_head
    state = head.init_state(b, hidden.device, hidden.dtype) if head is not None else None
    temperature = shape.score_temperature
    lp, ids, state = _beam_step(draft, base[:, 0], hidden[:, 0], anchors[:, None], state, k,
                                temperature)  # [B, 1, k]
    scores, tokens = lp[:, 0], full(ids[:, 0])  # [B, k]
    parents = torch.zeros_like(tokens)  # [B, k] beam index at the previous depth (the anchor at depth 0)
    if state is not None:
        state = state.repeat_interleave(k, dim=0)  # [B·k, r]
    pool_scores, pool_tokens, pool_parents = [scores], [tokens], [parents]
    for slot in range(1, gamma):
        lp, ids, state = _beam_step(draft, base[:, slot], hidden[:, slot], tokens, state, k,
                                    temperature)  # [B, k, k]
        total = (scores[:, :, None] + lp).reshape(b, k * k)  # [B, k²] cumulative log-probability
        scores, pick = total.topk(k, dim=-1)  # [B, k]
        parents = pick // k  # [B, k]
        tokens = full(ids.reshape(b, k * k).gather(1, pick))  # [B, k]
        if state is not None:
            rows = (torch.arange(b, device=pick.device)[:, None] * k + parents).reshape(-1)  # [B·k]
            state = state.index_select(0, rows)  # [B·k, r] what each new node's parent consumed
        pool_scores.append(scores)
        pool_tokens.append(tokens)
        pool_parents.append(parents)
    return _select(torch.stack(pool_scores, 1), torch.stack(pool_tokens, 1), torch.stack(pool_parents, 1),
                   anchors, shape.nodes)


def _kernel_beams(draft: DSparkDraft, base: torch.Tensor, anchors: torch.Tensor, k: int,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every depth's beam through tree_kernel: base [B, γ, V'] -> scores, tokens, parents [B, γ, k]."""
    head, vocab = draft.markov_head, draft.draft_vocab
    w1 = head.markov_w1.weight
    w2, ids = (head.markov_w2.weight, None) if vocab is None else (vocab.markov_w2.weight, vocab.token_ids)
    scores = torch.zeros(anchors.shape[0], 1, device=base.device)  # [B, 1] the anchor's
    tokens, beams = anchors[:, None], []
    for slot in range(base.shape[1]):
        scores, tokens, parents = tree_kernel.beam_step(base[:, slot], w1, w2, tokens, scores, k, ids, True, scale)
        beams.append((scores, tokens, parents))
    return tuple(torch.stack(part, 1) for part in zip(*beams))  # type: ignore[return-value]


def _select(scores: torch.Tensor, tokens: torch.Tensor, parents: torch.Tensor, anchors: torch.Tensor,
            nodes: int) -> TreeDrafts:
    """The pool of every depth's beam — scores, tokens, parents [B, γ, k] — -> the best `nodes` as a TreeDrafts."""
    b, gamma, k = scores.shape
    device = scores.device
    depth = torch.arange(gamma, device=device)[None, :, None]  # [1, γ, 1]
    # a parent never scores below its child (log-probabilities are ≤ 0); the depth term breaks exact ties upward
    key = (scores - 1e-3 * depth).reshape(b, gamma * k)  # [B, γ·k]
    chosen = key.topk(nodes, dim=-1).indices.sort(dim=-1).values  # [B, N] pool indices in depth order
    node_depth = chosen // k  # [B, N]
    parent_pool = (node_depth - 1) * k + parents.reshape(b, gamma * k).gather(1, chosen)  # [B, N] (< 0 at depth 0)
    slot_of = torch.zeros(b, gamma * k, dtype=torch.long, device=device)  # [B, γ·k] pool index -> tree slot
    slot_of.scatter_(1, chosen, torch.arange(1, nodes + 1, device=device).expand(b, nodes))
    parent = torch.where(node_depth > 0, slot_of.gather(1, parent_pool.clamp_min(0)), 0)  # [B, N]
    zero = torch.zeros(b, 1, dtype=torch.long, device=device)
    parent = torch.cat([zero, parent], dim=1)  # [B, T]
    slots = nodes + 1
    visible = torch.eye(slots, dtype=torch.bool, device=device).expand(b, slots, slots).clone()  # [B, T, T]
    visible[:, :, 0] = True  # every slot sees the anchor
    jump = parent
    for _ in range(max(1, (gamma).bit_length())):  # pointer doubling: ancestors up to 2^i − 1 levels up
        visible |= visible.gather(1, jump[:, :, None].expand(b, slots, slots))
        jump = jump.gather(1, jump)
    return TreeDrafts(tokens=torch.cat([anchors[:, None], tokens.reshape(b, gamma * k).gather(1, chosen)], dim=1),
                      parent=parent, depth=torch.cat([zero, node_depth + 1], dim=1), visible=visible)


def ancestor_slots(tree: TreeDrafts) -> torch.Tensor:
    """[B, T, T]: entry (t, e) is the slot of slot t's ancestor at depth e (t itself at its own depth; entries past
    its depth are 0), the table the attention kernel reads a slot's path through."""
    b, slots = tree.tokens.shape
    where = torch.where(tree.visible, tree.depth[:, None, :], slots)  # [B, T, T] depth of each visible slot, or spare
    table = torch.zeros(b, slots, slots + 1, dtype=torch.long, device=tree.depth.device)
    table.scatter_(2, where, torch.arange(slots, device=table.device).expand(b, slots, slots).contiguous())
    return table[:, :, :slots]


def accept_tree(tree: TreeDrafts, lengths: torch.Tensor,
                choice: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """tree (T slots), lengths [B] (the most drafts a row may accept), choice [B, T] (the target's token after each
    slot: its argmax, or a sample from its processed distribution there) -> accepted [B], bonus [B] and the accepted
    path's last slot [B] (0: only the anchor)."""
    good = (tree.tokens == choice.gather(1, tree.parent)) & (tree.depth <= lengths[:, None])  # [B, T]
    good[:, 0] = True
    path_ok = ~(tree.visible & ~good[:, None, :]).any(-1)  # [B, T] every slot it sees is good
    # the deepest good path's end: one slot per depth can be good (siblings differ), failing slots rank below the
    # anchor, so the maximum is unique and no tie order matters
    best = torch.where(path_ok, tree.depth, -1).argmax(-1)  # [B]
    accepted = tree.depth.gather(1, best[:, None])[:, 0]  # [B]
    bonus = choice.gather(1, best[:, None])[:, 0]  # [B]
    return accepted, bonus, best


def accepted_path(tree: TreeDrafts, best: torch.Tensor, width: int) -> torch.Tensor:
    """The slots on the path to `best` [B], by depth 1 … width -> [B, width]; past the path's end, slot = depth (so
    moving it is a no-op), or the last slot where the tree is smaller than that (what moves there stays masked)."""
    b, slots = tree.tokens.shape
    on_path = tree.visible.gather(1, best[:, None, None].expand(b, 1, slots))[:, 0] & (tree.depth > 0)  # [B, T]
    where = torch.where(on_path, tree.depth - 1, width)  # [B, T] depth − 1, or the spare column
    path = torch.arange(1, width + 2, device=best.device).clamp(max=slots - 1).expand(b, width + 1).clone()
    path.scatter_(1, where, torch.arange(slots, device=best.device).expand(b, slots))
    return path[:, :width]
