"""CUDA graphs for the batched round: `BatchRound.propose(b)` and `BatchRound.verify(b, t)` captured per batch
bucket b, verify width t and attention window (powers of two from 256), and `BatchRound.prefill(rows, width)` per
padded prefill shape, replayed over the round's static buffers.

A thin wrapper: the captured functions are the same step functions the CPU tests run eagerly; only capture and
replay are new. A graph is captured the first time its (b, t) is needed (warm-up on a side stream, the row
buffers restored afterwards, so capturing mid-generation changes nothing) and all graphs share one memory pool.
Greedy rounds only: sampling rounds run eagerly (the generator's state under capture is not handled here).
`check_graphs` compares graphed and eager generation and raises if they differ (for the GPU benchmark).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch

from dspark.config import GenerationConfig
from dspark.engine.batch_round import BatchRound


class RoundGraphs:
    """Captured steps of one BatchRound, keyed by (step, b, t, attention window[, the session's scheduling])."""

    def __init__(self, round: BatchRound):
        self.round = round
        self.graphs: dict[tuple, Callable[[], None]] = {}  # replays by (step, rows, width, window[, scheduling])
        self.pool = None

    def supports(self) -> bool:
        """Whether the round's rows are all greedy (sampling rounds run eagerly)."""
        return self.round.greedy()

    def propose(self, b: int, window: int) -> None:  # the session's scheduling rule is captured with it
        self._replay(("propose", b, 0, window, self.round.schedule_key), lambda: self.round.propose(b, window))

    def verify(self, b: int, t: int, window: int) -> None:
        self._replay(("verify", b, t, window), lambda: self.round.verify(b, t, window))

    def prefill(self, rows: int, width: int) -> None:
        self._replay(("prefill", rows, width, 0), lambda: self.round.prefill(rows, width))

    def _replay(self, key: tuple, step: Callable[[], None]) -> None:
        replay = self.graphs.get(key)
        if replay is None:
            self._warm_up(step)
            replay = self.graphs[key] = self._record(step)
        replay()

    def _warm_up(self, step: Callable[[], None]) -> None:
        """Run the step twice (lazy initialisation, kernel selection) on a side stream, then put the row buffers
        back; cache entries the warm-up wrote past a row's position are masked until the row overwrites them."""
        r = self.round
        buffers = (r.anchor, r.start, r.budget, r.active, r.drafts, r.confidence, r.lengths, r.packed, r.first,
                   r.width, r.threshold)
        saved = [buffer.clone() for buffer in buffers]
        on_cuda = r.anchor.device.type == "cuda"
        side = torch.cuda.Stream() if on_cuda else None
        if on_cuda:
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side) if on_cuda else contextlib.nullcontext():
            for _ in range(2):
                step()
        if on_cuda:
            torch.cuda.current_stream().wait_stream(side)
        for buffer, copy in zip(buffers, saved):
            buffer.copy_(copy)

    def _record(self, step: Callable[[], None]) -> Callable[[], None]:
        """Capture the step into a CUDA graph (sharing one pool); returns its replay."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            step()
        self.pool = graph.pool()
        return graph.replay


def check_graphs(engine, prompts: list[list[int]], config: GenerationConfig = GenerationConfig(max_new_tokens=32),
                 scheduling=None) -> None:
    """Generate with the engine's CUDA graphs and eagerly (same engine, same caches); raise if any token or
    acceptance count differs. Greedy configs only (sampling is never graphed)."""
    if engine.graphs is None:
        raise ValueError("this engine has no CUDA graphs (build it on a CUDA target with cuda_graphs=True)")
    if not config.greedy:
        raise ValueError("check_graphs compares greedy runs; sampling rounds are not graphed")
    graphed = engine.generate(prompts, config, scheduling)
    graphs, engine.graphs = engine.graphs, None
    try:
        eager = engine.generate(prompts, config, scheduling)
    finally:
        engine.graphs = graphs
    for i, (g, e) in enumerate(zip(graphed, eager)):
        if g.tokens != e.tokens or g.stats.accepted_counts != e.stats.accepted_counts:
            raise AssertionError(f"CUDA-graph run differs from the eager run on prompt {i}: "
                                 f"{g.tokens[:16]}… vs {e.tokens[:16]}…")
