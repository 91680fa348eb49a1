"""One batch of target hidden states (`HiddenStates`), the protocol every hidden-state source follows
(`HiddenStateSource`: online target, offline store, compact store, vLLM files), and right-padding several sequences
into one batch. No target, no files: the sources live in `hidden.py` and `compact_hidden.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch


@dataclass(frozen=True)
class HiddenStates:
    input_ids: torch.Tensor  # [1, S]
    loss_mask: torch.Tensor  # [1, S]
    features: torch.Tensor  # [1, S, m·d]
    last_hidden: torch.Tensor  # [1, S, d] final post-norm hidden (lm_head input)


class HiddenStateSource(Protocol):
    def __len__(self) -> int: ...
    def get(self, index: int) -> HiddenStates: ...


def get_batch(source: HiddenStateSource, indices: Sequence[int]) -> HiddenStates:
    """Several sequences, right-padded to the longest (padding has loss_mask 0, so no anchor or label lands there;
    causal targets and the block mask never let real tokens see it)."""
    if hasattr(source, "get_padded"):
        return source.get_padded(indices)
    return pad_batch([source.get(i) for i in indices])


def pad_batch(items: Sequence[HiddenStates]) -> HiddenStates:
    if len(items) == 1:
        return items[0]
    width = max(h.input_ids.shape[1] for h in items)

    def pad(t: torch.Tensor) -> torch.Tensor:
        extra = width - t.shape[1]
        return torch.nn.functional.pad(t, (0, 0, 0, extra) if t.dim() == 3 else (0, extra))

    return HiddenStates(*(torch.cat([pad(getattr(h, f)) for h in items]) for f in
                          ("input_ids", "loss_mask", "features", "last_hidden")))
