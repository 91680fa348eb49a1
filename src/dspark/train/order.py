"""The training data order: which example the global sequence counter q points at.

Epoch e = q // n is a seeded permutation of the n examples, so the order is a function of (seed, position) and a
resumed run sees what the uninterrupted one saw. With `group_by_length` = w > 0 the permutation is cut into windows of
w micro-batches, each window sorted by sequence length, and the micro-batches (the trainer's slices of `batch_size`
consecutive counter values) shuffled within the epoch (seeded): a micro-batch then holds sequences of similar length,
so right-padding to its longest wastes little of the target's and the draft's context work (SmolLM2's 68k sequences:
43 % of a random batch of 32's padded tokens are real, 98 % when grouped), while the epoch stays a random order of
batches. Not here: reading the examples.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch


class DataOrder:
    """Example index for each value of the global sequence counter; `lengths` are needed only when grouping."""

    def __init__(self, n: int, seed: int, batch_size: int, group_by_length: int = 0,
                 lengths: Sequence[int] | None = None):
        if group_by_length and (lengths is None or len(lengths) != n):
            raise ValueError("group_by_length needs every example's length: use an online or offline hidden-state "
                             "source (they know them), or set group_by_length to 0")
        self.n, self.seed, self.batch_size, self.window = n, seed, batch_size, group_by_length
        self.lengths = torch.as_tensor(list(lengths)) if group_by_length else None
        self._epoch, self._order = -1, torch.empty(0, dtype=torch.long)

    def __getitem__(self, q: int) -> int:
        epoch = q // self.n
        if epoch != self._epoch:
            self._epoch, self._order = epoch, self.epoch_order(epoch)
        return int(self._order[q % self.n])

    def epoch_order(self, epoch: int) -> torch.Tensor:
        """The permutation of epoch `epoch` -> [n]."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        order = torch.randperm(self.n, generator=generator)
        if not self.window:
            return order
        span, b = self.window * self.batch_size, self.batch_size
        grouped = torch.cat([chunk[torch.argsort(self.lengths[chunk], stable=True)]  # shortest first in a window
                             for chunk in order.split(span)])
        # micro-batches start where the global counter is a multiple of b, so this epoch's first whole one starts
        # `head` items in; the items before it (and after the last whole one) share a batch with the next epoch
        head = -(epoch * self.n) % b
        units = (self.n - head) // b
        body = grouped[head: head + units * b].view(units, b)
        shuffled = body[torch.randperm(units, generator=generator)].reshape(-1)
        return torch.cat([grouped[:head], shuffled, grouped[head + units * b:]])
