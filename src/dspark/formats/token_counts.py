"""A draft's token counts (how often the target writes each token) and the K most frequent of them: the ranking a
draft vocabulary (FR-Spec, `dspark.model.draft_vocab`) drafts from.

The counts live beside a draft as `token_counts.safetensors` (one int64 tensor `counts` [V]), so a user picks K at
load time; `restrict_by_counts` hands a draft its top K (through `restrict_draft_vocab`). Counting them over
regenerated training data is `dspark.train.token_counts`. What it does not do: decide whether K is worth it (the demo
and `benchmarks/results/cpu_profile/` measure that).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file, save_file

from dspark.files import atomic_write

if TYPE_CHECKING:
    from dspark.model.draft import DSparkDraft
    from dspark.model.draft_vocab import DraftVocab

TOKEN_COUNTS_NAME = "token_counts.safetensors"


def top_tokens(counts: torch.Tensor, k: int) -> torch.Tensor:
    """The k most frequent ids, most frequent first, ties by lower id -> ids [k] int64."""
    v = counts.numel()
    if not 1 <= k <= v:
        raise ValueError(f"a draft vocabulary of {k} tokens: choose 1 … {v} (the target's vocabulary)")
    return torch.sort(-counts.long(), stable=True).indices[:k]  # stable: equal counts stay in id order


def coverage(counts: torch.Tensor, k: int) -> float:
    """The share of counted tokens among the k most frequent (what a draft vocabulary of k can ever propose)."""
    total = int(counts.sum())
    return float(counts[top_tokens(counts, k)].sum()) / total if total else 0.0


def save_token_counts(counts: torch.Tensor, path: str | Path) -> Path:
    """Write counts [V] atomically (a draft folder's TOKEN_COUNTS_NAME)."""
    tensor = counts.detach().to(torch.long).contiguous().cpu()
    return atomic_write(path, lambda tmp: save_file({"counts": tensor}, tmp))


def load_token_counts(path: str | Path, vocab_size: int | None = None) -> torch.Tensor:
    """counts [V] from a file or a draft folder; checks the size against the draft's vocabulary when given."""
    path = Path(path)
    if path.is_dir():
        path = path / TOKEN_COUNTS_NAME
    if not path.is_file():
        raise ValueError(f"{path}: no token counts; write them with `dspark train token-counts`")
    counts = load_file(str(path)).get("counts")
    if counts is None or counts.dim() != 1:
        raise ValueError(f"{path}: expected one 1-D tensor 'counts'")
    if vocab_size is not None and counts.numel() != vocab_size:
        raise ValueError(f"{path}: counts for {counts.numel()} tokens, but the draft's vocabulary has {vocab_size}")
    return counts.long()


def draft_vocab_ids(draft_path: str | Path, k: int, vocab_size: int) -> torch.Tensor | None:
    """The top-k ids by the counts beside a draft (for `restrict_draft_vocab`); None when k is 0 or covers the whole
    vocabulary."""
    if k < 0:
        raise ValueError(f"a draft vocabulary of {k} tokens: pass 0 for the full vocabulary or a token count")
    if not k or k >= vocab_size:
        return None
    return top_tokens(load_token_counts(draft_path, vocab_size), k)


def restrict_by_counts(draft: DSparkDraft, folder: str | Path, k: int) -> DraftVocab | None:
    """Let a draft that has its LM head (tied to the target's) score only the top-k tokens of the counts in `folder`
    (`restrict_draft_vocab`); k 0, or k ≥ the vocabulary: the whole vocabulary. Returns the draft vocabulary or None."""
    from dspark.model.draft_vocab import restrict_draft_vocab

    return restrict_draft_vocab(draft, draft_vocab_ids(folder, k, draft.config.vocab_size))
