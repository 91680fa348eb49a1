"""The variants `throughput_h200.py --compare NAME` runs against each other: the engine as it is (first) and a
baseline that puts one of its choices back the other way, as a context the baseline's engine is built and run in.

  overlap  the engine's overlap (a round launched before the previous one is committed, for rounds that draft nothing
           and drafted rounds over OVERLAP_DRAFTED_ROWS rows), against stepwise rounds
  drafted  the engine's overlap policy (rounds that draft nothing, and drafted rounds over OVERLAP_DRAFTED_ROWS rows
           or more, left in flight), against drafted rounds always landing in their own step, and against every
           round left in flight
  logits   the target's logits kept in the model's dtype, against an fp32 copy of them
  rows     row changes as the engine makes them (fills on the device, prompts staged from pinned memory, a free row
           taken by a waiting request, compaction only when it shrinks the row bucket, every row of it moved at
           once), against the baseline: a retired row's buffers set from host scalars (a copy that waits for the
           device), prompts staged from pageable memory, compaction after every round that ends a request, a row at
           a time
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from dspark.config import GenerationConfig
from dspark.engine import batch_session
from dspark.engine.batch_round import BatchRound
from dspark.engine.batch_session import BatchSession
from dspark.engine.static_target import StaticTarget


@contextlib.contextmanager
def fp32_logits() -> Iterator[None]:
    """The static target's logits converted to fp32 before they are returned."""
    forward = StaticTarget.forward
    StaticTarget.forward = lambda self, *a, **k: (lambda out: (out[0].float(), out[1]))(forward(self, *a, **k))
    try:
        yield
    finally:
        StaticTarget.forward = forward


def _retire_from_host(self: BatchRound, slot: int) -> None:
    self.rows.set(slot, GenerationConfig(), 0)
    self.active[slot] = False
    self.budget[slot] = 0
    self.start[slot] = 0


def _stage_pageable(self: BatchRound, slots: list[int], prompts: list[list[int]], budgets: list[int], rows: int,
                    width: int) -> None:
    k = len(slots)
    self._staged = (list(slots), [len(p) for p in prompts])
    ids = torch.zeros(rows, width, dtype=torch.long)  # [rows, P]
    for i, prompt in enumerate(prompts):
        ids[i, : len(prompt)] = torch.tensor(prompt)
    ids[k:] = ids[0]
    meta = torch.tensor([slots + slots[:1] * (rows - k), [len(p) for p in prompts] + [len(prompts[0])] * (rows - k),
                         budgets + budgets[:1] * (rows - k)])  # [3, rows]
    self.prefill_ids[:rows, :width].copy_(ids)
    self.prefill_meta[:, :rows].copy_(meta)


def _move_row(self: BatchRound, source: int, destination: int) -> None:
    """One row's move, a copy per buffer and draft layer (the static backend's cache in one)."""
    self.target.cache[:, destination].copy_(self.target.cache[:, source])
    if self.draft is not None:
        for cache in self.draft.kv:
            cache[destination].copy_(cache[source])
    self.rows.move(source, destination)
    buffers = [self.anchor, self.start, self.budget, self.active, self.drafts, self.confidence, self.lengths]
    buffers += [self.probs] if self.probs is not None else []
    buffers += list(self.trees.parts) if self.tree is not None else []
    for buffer in buffers:
        buffer[destination] = buffer[source]
    _retire_from_host(self, source)


def _compact_always(self: BatchSession) -> None:
    live = [s for s, r in enumerate(self._slots) if r is not None]
    holes = [s for s in range(len(live)) if self._slots[s] is None]
    for hole, source in zip(holes, [s for s in live if s >= len(live)]):
        _move_row(self.engine.round, source, hole)
        self._slots[hole], self._slots[source] = self._slots[source], None


@contextlib.contextmanager
def drafted_in_flight(rows: int) -> Iterator[None]:
    """Drafted rounds over `rows` rows or more left in flight (with the engine's `overlap`)."""
    saved = batch_session.OVERLAP_DRAFTED_ROWS
    batch_session.OVERLAP_DRAFTED_ROWS = rows
    try:
        yield
    finally:
        batch_session.OVERLAP_DRAFTED_ROWS = saved


@contextlib.contextmanager
def rows_before() -> Iterator[None]:
    """Row changes the baseline way (module docstring)."""
    saved = (BatchRound.retire, BatchRound.stage, BatchSession._compact, BatchSession._land)
    land = BatchSession._land

    def land_then_compact(self: BatchSession, flight, new) -> None:
        land(self, flight, new)
        _compact_always(self)

    BatchRound.retire, BatchRound.stage = _retire_from_host, _stage_pageable
    BatchSession._compact, BatchSession._land = _compact_always, land_then_compact
    try:
        yield
    finally:
        BatchRound.retire, BatchRound.stage, BatchSession._compact, BatchSession._land = saved


COMPARISONS = {  # name -> {variant: (context it is built and run in, BatchEngine keyword arguments)}; first: ours
    "overlap": {"overlap": (contextlib.nullcontext, {"overlap": True}),
                "stepwise": (contextlib.nullcontext, {"overlap": False})},
    "drafted": {"policy": (contextlib.nullcontext, {"overlap": True}),
                "own-step": (lambda: drafted_in_flight(1 << 30), {"overlap": True}),
                "every-round": (lambda: drafted_in_flight(1), {"overlap": True})},
    "logits": {"model-dtype": (contextlib.nullcontext, {}), "fp32-copy": (fp32_logits, {})},
    "rows": {"free-rows": (contextlib.nullcontext, {}), "before": (rows_before, {})},
}
