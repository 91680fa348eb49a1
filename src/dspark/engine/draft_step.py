"""The token choice of a drafting step: the drafts of N blocks picked left to right through the Markov head, keeping
each slot's distribution q_k for rejection sampling, plus the confidence head's logits.

The block forward that produces the slots' states is `StaticDraft.block_states`; verification and scheduling are
elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from dspark.config import GenerationConfig
from dspark.engine import markov_kernel
from dspark.engine.sampling import ProposalSampler, RowSampling, processed_probs, proposal_config, sample
from dspark.model.draft import DSparkDraft


@dataclass(frozen=True)
class Proposal:
    tokens: torch.Tensor  # [..., γ] drafted ids
    probs: torch.Tensor | None  # [..., γ, V] the processed q_k each token was drawn from (None when greedy)
    confidence_logits: torch.Tensor | None  # [..., γ] raw confidence logits (None without a confidence head)


def decode_blocks(draft: DSparkDraft, hidden: torch.Tensor, anchors: torch.Tensor, config: GenerationConfig,
                  generator: torch.Generator | None, confidence: bool = True,
                  rows: RowSampling | None = None) -> Proposal:
    """Pick the drafts of N blocks at once, left to right through the Markov head (greedy with the vanilla or gated
    head on CUDA: `markov_kernel`, with or without a draft vocabulary). hidden [N, γ, d] are the predicting slots'
    states, anchors [N] the tokens before slot 0. `confidence` False: no confidence logits (nothing will read them).
    `rows`: each row samples with its own settings and stream (`RowSampling`) instead of `config` and `generator`."""
    head, vocab = draft.markov_head, draft.draft_vocab  # vocab: K frequent ids (FR-Spec) or None for all V
    n, gamma = hidden.shape[:2]
    greedy = config.greedy if rows is None else rows.greedy(hidden.shape[0])
    fused = markov_kernel.usable(head, hidden, greedy)
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
    sampler = None if greedy or rows is None else ProposalSampler(rows, n, gamma, base.shape[-1], hidden.device)
    tokens, probs, prevs = [], [], []
    for k in range(gamma):
        logits = base[:, k]  # [N, V] (or [N, K])
        prevs.append(prev)
        if head is not None:
            mixed, state = head.step_features(prev, hidden[:, k], state)  # [N, r] (an RNN state advances every slot)
            logits = logits + w2(mixed)  # [N, V] fp32: the add promotes the bias exactly, no separate cast kernel
        if greedy:
            token = logits.argmax(-1)  # [N]
        else:
            if rows is None:
                q = processed_probs(logits, proposal_config(config))  # [N, V] (or [N, K])
                token = sample(q, generator)
            else:  # each row its own settings and stream
                q = sampler.probs(logits)  # [N, V] (or [N, K])
                token = sampler.sample(q, k)
            probs.append(q if vocab is None else vocab.widen(q))  # [N, V]
        if vocab is not None:
            token = vocab.full_ids(token)  # [N] full-vocabulary ids
        tokens.append(token)
        prev = token
    conf = draft.confidence_logits(hidden, torch.stack(prevs, dim=1)) if confidence else None  # [N, γ] or None
    return Proposal(torch.stack(tokens, dim=1), torch.stack(probs, dim=1) if probs else None,
                    None if conf is None else conf.float())
