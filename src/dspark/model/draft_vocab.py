"""A frequency-ranked draft vocabulary (FR-Spec, arXiv 2502.14856): the draft scores only the K tokens its target
writes most, so its LM head and the Markov head's output rows cost K / V of the full ones.

Verification keeps the target's full head, so generation stays lossless: a token outside the K can still be
committed, as the target's own correction or bonus; it just can never be drafted. Under sampling the proposal is the
softmax over the K, widened with zeros to the full vocabulary, so rejection sampling stays exact. On a CPU the draft's
full head is a large share of a small target's round (`benchmarks/results/cpu_profile/`); on a GPU the fused Markov kernel
(`engine/markov_kernel.py`) tiles the K ids instead of the V.

What it does not do: train. `restrict_draft_vocab` gives an inference-only draft; train and save the full one. The
counts that rank the tokens are saved beside the draft (`dspark.formats.token_counts`), counted over regenerated
training data (`dspark.train.token_counts`).
"""
from __future__ import annotations

import torch
from torch import nn

from dspark.model.draft import DSparkDraft


class DraftVocab(nn.Module):
    """K full-vocabulary ids and the rows of the LM head and of the Markov head's W2 that score them."""

    def __init__(self, token_ids: torch.Tensor, lm_head_weight: torch.Tensor, markov_w2_weight: torch.Tensor | None,
                 vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.register_buffer("token_ids", token_ids.to(device=lm_head_weight.device, dtype=torch.long))  # [K]
        self.lm_head = _rows(lm_head_weight, self.token_ids)  # [K, d]
        self.markov_w2 = None if markov_w2_weight is None else _rows(markov_w2_weight, self.token_ids)  # [K, r]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Block hidden [..., d] -> logits over the K tokens [..., K] (before the Markov bias)."""
        return self.lm_head(hidden.to(self.lm_head.weight.dtype))

    def full_ids(self, index: torch.Tensor) -> torch.Tensor:
        """Positions among the K [...] -> full-vocabulary ids [...]."""
        return self.token_ids[index]

    def widen(self, probs: torch.Tensor) -> torch.Tensor:
        """A distribution over the K [..., K] -> the same over the full vocabulary, zero elsewhere [..., V]."""
        full = probs.new_zeros(*probs.shape[:-1], self.vocab_size)  # [..., V]
        return full.index_copy_(-1, self.token_ids, probs)


def _rows(weight: torch.Tensor, ids: torch.Tensor) -> nn.Linear:
    out, inp = len(ids), weight.shape[1]
    linear = nn.Linear(inp, out, bias=False, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        linear.weight.copy_(weight.detach().index_select(0, ids))
    linear.weight.requires_grad_(False)
    return linear


def restrict_draft_vocab(draft: DSparkDraft, token_ids: torch.Tensor | None) -> DraftVocab | None:
    """Let the draft score only `token_ids` (distinct full-vocabulary ids; None restores the full vocabulary). Call
    after the draft has its LM head (`prepare_pair` / `tie_embeddings`) and after any `.to(device, dtype)`."""
    if token_ids is None:
        draft.draft_vocab = None
        return None
    if draft.lm_head is None:
        raise RuntimeError("the draft has no LM head yet: tie it to the target's (dspark.engine.batch.prepare_pair)"
                           " before restricting its vocabulary")
    v = draft.config.vocab_size
    ids = torch.as_tensor(token_ids).long().flatten()
    if ids.numel() == 0 or int(ids.min()) < 0 or int(ids.max()) >= v or ids.unique().numel() != ids.numel():
        raise ValueError(f"a draft vocabulary needs 1 to {v} distinct ids in [0, {v}); got {ids.numel()} ids")
    head = draft.markov_head
    draft.draft_vocab = DraftVocab(ids, draft.lm_head.weight, None if head is None else head.markov_w2.weight, v)
    return draft.draft_vocab
