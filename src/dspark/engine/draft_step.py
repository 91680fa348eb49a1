"""One drafting step: extend the draft's context cache with newly verified features, run the block, and pick the
draft tokens left to right through the Markov head, keeping each slot's distribution q_k for rejection sampling.

The context cache holds, per draft layer, the keys/values projected from fused target features, so the prefix is
never recomputed; block keys/values are never cached. Verification and scheduling are elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from dspark.config import GenerationConfig
from dspark.engine import markov_kernel
from dspark.engine.sampling import processed_probs, sample
from dspark.model.draft import DSparkDraft, LayerKV


class DraftContextCache:
    """Per-layer context K/V of one sequence, grown as the target verifies tokens."""

    def __init__(self, draft: DSparkDraft):
        self.draft = draft
        self.kv: list[LayerKV] | None = None
        self.length = 0

    @torch.inference_mode()
    def extend(self, features: torch.Tensor) -> None:
        """Append verified target features [1, n, m·d] for positions length … length+n−1."""
        n = features.shape[1]
        positions = torch.arange(self.length, self.length + n, device=features.device)[None]  # [1, n]
        context = self.draft.fuse(features.to(self.draft.fc.weight.dtype))  # [1, n, d]
        new = self.draft.context_kv(context, positions)
        if self.kv is None:
            self.kv = new
        else:
            self.kv = [(torch.cat([k, nk], dim=2), torch.cat([v, nv], dim=2)) for (k, v), (nk, nv) in zip(self.kv, new)]
        self.length += n


@dataclass(frozen=True)
class Proposal:
    tokens: torch.Tensor  # [..., γ] drafted ids
    probs: torch.Tensor | None  # [..., γ, V] the processed q_k each token was drawn from (None when greedy)
    confidence_logits: torch.Tensor | None  # [..., γ] raw confidence logits (None without a confidence head)


def decode_blocks(draft: DSparkDraft, hidden: torch.Tensor, anchors: torch.Tensor, config: GenerationConfig,
                  generator: torch.Generator | None, confidence: bool = True) -> Proposal:
    """Pick the drafts of N blocks at once, left to right through the Markov head (greedy with the vanilla or gated
    head on CUDA: `markov_kernel`, with or without a draft vocabulary). hidden [N, γ, d] are the predicting slots'
    states, anchors [N] the tokens before slot 0. `confidence` False: no confidence logits (nothing will read them)."""
    head, vocab = draft.markov_head, draft.draft_vocab  # vocab: K frequent ids (FR-Spec) or None for all V
    n, gamma = hidden.shape[:2]
    fused = markov_kernel.usable(head, hidden, config.greedy)
    if fused:  # one launch per slot (CUDA)
        base = draft.base_logits(hidden) if vocab is None else vocab.logits(hidden)  # [N, γ, V] or [N, γ, K]
        w1 = head.markov_w1.weight
        w2, ids = (head.markov_w2.weight, None) if vocab is None else (vocab.markov_w2.weight, vocab.token_ids)
        gate = markov_kernel.gate_inputs(head, hidden)  # None for the vanilla head
        tokens = markov_kernel.greedy_decode(base, w1, w2, anchors, gate, ids)  # [N, γ]
        if not confidence:
            return Proposal(tokens, None, None)
        prevs = torch.cat([anchors[:, None], tokens[:, :-1]], dim=1)  # [N, γ]
        conf = draft.confidence_logits(hidden, prevs)  # [N, γ] or None
        return Proposal(tokens, None, None if conf is None else conf.float())
    base = (draft.base_logits(hidden) if vocab is None else vocab.logits(hidden)).float()  # [N, γ, V] or [N, γ, K]
    w2 = None if head is None else head.markov_w2 if vocab is None else vocab.markov_w2
    prev = anchors
    state = None if head is None else head.init_state(n, hidden.device, hidden.dtype)
    tokens, probs, prevs = [], [], []
    for k in range(gamma):
        logits = base[:, k]  # [N, V] (or [N, K])
        prevs.append(prev)
        if head is not None:
            mixed, state = head.step_features(prev, hidden[:, k], state)  # [N, r] (an RNN state advances every slot)
            logits = logits + w2(mixed)  # [N, V] fp32: the add promotes the bias exactly, no separate cast kernel
        if config.greedy:
            token = logits.argmax(-1)  # [N]
        else:
            q = processed_probs(logits, config)  # [N, V] (or [N, K])
            token = sample(q, generator)
            probs.append(q if vocab is None else vocab.widen(q))  # [N, V]
        if vocab is not None:
            token = vocab.full_ids(token)  # [N] full-vocabulary ids
        tokens.append(token)
        prev = token
    conf = draft.confidence_logits(hidden, torch.stack(prevs, dim=1)) if confidence else None  # [N, γ] or None
    return Proposal(torch.stack(tokens, dim=1), torch.stack(probs, dim=1) if probs else None,
                    None if conf is None else conf.float())


@torch.inference_mode()
def propose(draft: DSparkDraft, cache: DraftContextCache, anchor: int, config: GenerationConfig,
            generator: torch.Generator | None) -> Proposal:
    """Draft one block after `anchor`, which sits at position `cache.length` (everything before it is cached)."""
    cfg = draft.config
    device = draft.fc.weight.device
    start = cache.length
    block_ids = torch.full((1, cfg.block_size), cfg.mask_token_id, dtype=torch.long, device=device)  # [1, B]
    block_ids[0, 0] = anchor
    positions = torch.arange(start, start + cfg.block_size, device=device)[None]  # [1, B]
    hidden = draft(block_ids, positions, cache.kv)  # [1, B, d]
    if cfg.mode == "dflash":
        hidden = hidden[:, 1:]  # slot 0 predicts nothing; slot k predicts x_{p+k}
    out = decode_blocks(draft, hidden, block_ids[:, 0], config, generator)
    return Proposal(out.tokens[0], None if out.probs is None else out.probs[0],
                    None if out.confidence_logits is None else out.confidence_logits[0])
