"""How often the target writes each token, counted over the response tokens of regenerated training data: the
counts a draft vocabulary (FR-Spec) ranks its tokens by. Saving, loading and ranking them is
`dspark.formats.token_counts`.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from dspark.train.data import Example


def count_tokens(examples: Iterable[Example], vocab_size: int) -> torch.Tensor:
    """Occurrences of each id among the loss-masked (response) tokens -> counts [V] int64."""
    counts = torch.zeros(vocab_size, dtype=torch.long)  # [V]
    for example in examples:
        ids = torch.tensor(example.input_ids, dtype=torch.long)  # [L]
        mask = torch.tensor(example.loss_mask, dtype=torch.bool)  # [L]
        written = ids[mask]
        if written.numel() and int(written.max()) >= vocab_size:
            raise ValueError(f"example {example.id}: token id {int(written.max())} is outside a vocabulary of "
                             f"{vocab_size}; count with the target's vocabulary size")
        counts += torch.bincount(written, minlength=vocab_size)
    return counts
