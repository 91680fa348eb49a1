"""Batched speculative decoding: B sequences at once with ragged acceptance, over static KV caches.

`BatchEngine` is built once (caches, buffers, CUDA graphs) and generates many times; `generate_batch` is the
one-shot form. Each round: propose → schedule → verify at width T → accept → extend the draft → advance, all on
device (batch_round.py); the host syncs once per round to read [accepted, L, committed …] of every row, then
applies EOS (an accepted EOS ends the row; later tokens are dropped), the max_new_tokens budget, and continuous
batching: a finished row's slot takes the next prompt (prefilled eagerly), or the last live row moves into it so
the live rows stay 0 … n−1. With drafting off the same loop is plain decoding (L = 0, T = 1). Results and τ stats
are the batch-1 engine's types. Lossless: greedy output equals the target's own greedy decoding per prompt.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

import torch

from dspark.config import GenerationConfig
from dspark.engine.batch_round import BatchRound
from dspark.engine.batch_schedule import Scheduling
from dspark.engine.generate import GenerationResult, _drafts_per_round, prepare_pair
from dspark.engine.schedule import StepCostTable
from dspark.engine.static_draft import StaticDraft
from dspark.engine.static_target import StaticTarget
from dspark.engine.stats import StatsRecorder
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target

BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class _Request:
    def __init__(self, index: int, prompt: list[int]):
        self.index, self.prompt = index, prompt
        self.tokens: list[int] = []
        self.recorder = StatsRecorder(prompt_tokens=len(prompt))
        self.began = time.perf_counter()
        self.seconds = 0.0

    def emit(self, tokens: list[int]) -> None:
        self.tokens.extend(tokens)
        self.recorder.new_tokens += len(tokens)

    def result(self) -> GenerationResult:
        return GenerationResult(self.tokens, self.recorder.freeze(), self.seconds)


def _commit(request: _Request, packed: list[int], eos: set[int], max_new_tokens: int) -> bool:
    """Apply one row's round [accepted, L, committed …] to its request; False when the request is finished.
    An accepted EOS ends the request and nothing after it counts."""
    accepted, length = packed[0], packed[1]
    committed = packed[2 : 3 + accepted]
    stop = next((i for i, token in enumerate(committed) if token in eos), None)
    if stop is not None:
        committed = committed[: stop + 1]
    request.recorder.record(length, len(committed) - 1)
    request.emit(committed)
    return stop is None and len(request.tokens) < max_new_tokens


class BatchEngine:
    """Static caches for `max_batch` sequences of up to `max_length` positions (prompt + new tokens + a block)."""

    def __init__(self, target: Target, draft: DSparkDraft | None, max_batch: int = 8, max_length: int = 2048,
                 cuda_graphs: bool | None = None, pad_to_buckets: bool | None = None):
        if max_batch < 1 or max_length < 2:
            raise ValueError("max_batch must be >= 1 and max_length >= 2")
        if draft is not None:
            prepare_pair(target, draft)
        self.target, self.draft = target, draft
        self.max_batch, self.max_length = max_batch, max_length
        self.static_target = StaticTarget(target, max_batch, max_length)
        self.static_draft = StaticDraft(draft, max_batch, max_length) if draft is not None else None
        self.round = BatchRound(self.static_target, self.static_draft, max_batch)
        on_cuda = target.device.type == "cuda"
        self.cuda_graphs = on_cuda if cuda_graphs is None else cuda_graphs
        if self.cuda_graphs and not on_cuda:
            raise ValueError("cuda_graphs=True needs the target on a CUDA device")
        self.pad_to_buckets = self.cuda_graphs if pad_to_buckets is None else pad_to_buckets
        self.buckets = tuple(sorted({b for b in BUCKETS if b < max_batch} | {max_batch}))
        self.graphs = None
        if self.cuda_graphs:
            from dspark.engine.graphs import RoundGraphs

            self.graphs = RoundGraphs(self.round)

    # --- the steps, graphed or eager -----------------------------------------------------------------------------
    def _width_rows(self, n: int) -> int:
        return next(b for b in self.buckets if b >= n) if self.pad_to_buckets else n

    def _window(self, furthest: int) -> int:
        """Attention window covering positions < furthest: a power of two from 256 (few graph shapes), capped."""
        window = 256
        while window < furthest:
            window *= 2
        return min(window, self.static_target.max_length)

    def _propose(self, b: int, window: int) -> None:
        if self.graphs is not None and self.graphs.supports(self.round.config):
            self.graphs.propose(b, window)
        else:
            self.round.propose(b, window)

    def _verify(self, b: int, t: int, window: int) -> None:
        if self.graphs is not None and self.graphs.supports(self.round.config):
            self.graphs.verify(b, t, window)
        else:
            self.round.verify(b, t, window)

    # --- generation ----------------------------------------------------------------------------------------------
    def _check(self, prompts: Sequence[Sequence[int]], config: GenerationConfig, gamma: int) -> None:
        if not prompts:
            raise ValueError("prompts is empty: pass at least one list of token ids")
        vocab = self.target.vocab_size
        for i, prompt in enumerate(prompts):
            if len(prompt) == 0:
                raise ValueError(f"prompt {i} is empty; every prompt needs at least one token id")
            if min(prompt) < 0 or max(prompt) >= vocab:
                raise ValueError(f"prompt {i} has token ids outside the target vocabulary [0, {vocab})")
            need = len(prompt) + config.max_new_tokens + self.round.gamma_max + 1
            if need > self.max_length:
                raise ValueError(f"prompt {i} ({len(prompt)} tokens) + max_new_tokens ({config.max_new_tokens}) + a "
                                 f"block needs {need} positions but the engine holds {self.max_length}; build the "
                                 f"BatchEngine with a larger max_length or shorten the request")
            if gamma and need - 1 > self.draft.config.max_position_embeddings:
                raise ValueError(f"prompt {i} + max_new_tokens runs past the draft's "
                                 f"{self.draft.config.max_position_embeddings} positions; shorten the request")

    def generate(self, prompts: Sequence[Sequence[int]], config: GenerationConfig = GenerationConfig(),
                 scheduling: Scheduling | None = None,
                 calibration: torch.Tensor | None = None) -> list[GenerationResult]:
        """Generate for every prompt (token id lists); results in prompt order. `scheduling` None: the threshold
        rule when config.confidence_threshold > 0 (as the batch-1 engine), else none."""
        gamma = _drafts_per_round(self.draft, config)
        self._check(prompts, config, gamma)
        if scheduling is None:
            scheduling = Scheduling("threshold" if config.confidence_threshold > 0 else "none")
        if calibration is None and self.draft is not None:
            calibration = getattr(self.draft, "sts_temperatures", None)
        requests = [_Request(i, [int(t) for t in p]) for i, p in enumerate(prompts)]
        if config.max_new_tokens == 0:
            return [r.result() for r in requests]
        device = self.static_target.device
        generator = torch.Generator(device=device)
        generator.manual_seed(config.seed if config.seed is not None else int(torch.randint(2**62, (1,))))
        self.round.begin(config, gamma, generator)
        eos = set(config.eos_token_ids)
        queue = deque(requests)
        slots: list[_Request | None] = [None] * self.max_batch

        def finish(request: _Request) -> None:
            request.seconds = time.perf_counter() - request.began

        def fill(free: list[int]) -> None:
            """Admit queued prompts into free slots (prefilled together); a slot whose request ends at its first
            token takes the next prompt."""
            while free and queue:
                batch = [queue.popleft() for _ in range(min(len(free), len(queue)))]
                for request in batch:
                    request.began = time.perf_counter()
                firsts = self.round.admit(free[: len(batch)], [r.prompt for r in batch], config.max_new_tokens)
                for slot, request, first in zip(free, batch, firsts):
                    request.emit([first])
                    if first not in eos and config.max_new_tokens > 1:
                        slots[slot] = request
                    else:
                        self.round.retire(slot)
                        finish(request)
                free = [s for s in free if slots[s] is None]

        n = self._release(list(range(self.max_batch)), self.max_batch, slots, fill)
        while n:
            b = self._width_rows(n)
            anchor_at = max(len(slots[s].prompt) + len(slots[s].tokens) - 1 for s in range(n))  # furthest anchor
            window = self._window(anchor_at + max(self.round.gamma_max + 1, self.round.block_size))
            if gamma:
                self._propose(b, window)
            self.round.schedule(n, scheduling, calibration)
            if scheduling.rule != "none" and gamma:
                t = max(self.round.lengths[:n].tolist()) + 1  # the scheduled width (one small extra sync)
            else:
                t = min(gamma, max(config.max_new_tokens - len(slots[s].tokens) for s in range(n)) - 1) + 1
            self._verify(b, t, window)
            packed = self.round.packed[:n, : t + 2].tolist()  # the round's one sync
            done = [slot for slot in range(n) if not _commit(slots[slot], packed[slot], eos, config.max_new_tokens)]
            for slot in done:
                finish(slots[slot])
            n = self._release(done, n, slots, fill)
        return [r.result() for r in requests]

    def _release(self, done: list[int], n: int, slots: list, fill) -> int:
        """Retire finished rows, refill their slots from the queue, then compact live rows to 0 … n−1."""
        for slot in done:
            slots[slot] = None
            self.round.retire(slot)
        fill(done)
        live = [s for s in range(n) if slots[s] is not None]
        holes = [s for s in range(len(live)) if slots[s] is None]
        for hole, source in zip(holes, [s for s in live if s >= len(live)]):
            self.round.move(source, hole)
            slots[hole], slots[source] = slots[source], None
        return len(live)

    # --- capture and measurement (idle engine only: no sequence may be in flight) --------------------------------
    def warm_up(self, max_batch: int | None = None, context: int | None = None) -> int:
        """Run (and, with CUDA graphs, capture) every greedy step shape a generation can need: each batch bucket up to
        `max_batch`, verify widths 1 … γ+1, attention windows up to `context` positions (default: the whole cache),
        so no capture lands inside a timed run. Returns how many shapes it ran."""
        rows = [b for b in self.buckets if b <= self._width_rows(max_batch or self.max_batch)]
        top = self._window(context if context is not None else self.static_target.max_length)
        windows = sorted({self._window(w) for w in (256 * 2**k for k in range(32)) if w < top} | {top})
        self.round.begin(GenerationConfig(), self.round.gamma_max, torch.Generator(device=self.static_target.device))
        self.round.lengths.zero_()
        shapes = 0
        for b in rows:
            for window in windows:
                if self.draft is not None:
                    self._propose(b, window)
                    shapes += 1
                for t in range(1, self.round.gamma_max + 2):
                    self._verify(b, t, window)
                    shapes += 1
        return shapes

    def measure_step_costs(self, batch: int, widths: Sequence[int] | None = None, repeats: int = 5,
                           context: int | None = None) -> StepCostTable:
        """Time the verify step at `batch` rows × width T for T in `widths` (default 1 … γ+1), attending to a
        `context`-position window (default: the whole cache) -> a StepCostTable over total verify width batch·T.
        Greedy; runs on idle rows (no sequence may be in flight)."""
        widths = list(widths) if widths is not None else list(range(1, self.round.gamma_max + 2))
        b = self._width_rows(batch)
        window = self._window(context if context is not None else self.static_target.max_length)
        self.round.begin(GenerationConfig(), self.round.gamma_max, torch.Generator(device=self.static_target.device))
        self.round.lengths.zero_()
        synchronize = torch.cuda.synchronize if self.static_target.device.type == "cuda" else (lambda: None)
        latency = {}
        for t in widths:
            self._verify(b, t, window)  # warm-up (and graph capture)
            synchronize()
            began = time.perf_counter()
            for _ in range(repeats):
                self._verify(b, t, window)
            synchronize()
            latency[batch * t] = 1000.0 * (time.perf_counter() - began) / repeats
        return StepCostTable.from_latency_ms(latency)


def generate_batch(target: Target, draft: DSparkDraft | None, prompts: Sequence[Sequence[int]],
                   config: GenerationConfig = GenerationConfig(), scheduling: Scheduling | None = None,
                   max_batch: int = 8, cuda_graphs: bool | None = None) -> list[GenerationResult]:
    """One-shot batched generation (builds a BatchEngine sized for these prompts; keep an engine to reuse it)."""
    gamma = draft.config.num_draft_tokens if draft is not None else 0
    length = max(len(p) for p in prompts) + config.max_new_tokens + gamma + 1 if prompts else 2
    engine = BatchEngine(target, draft, min(max_batch, max(1, len(prompts))), length, cuda_graphs)
    return engine.generate(prompts, config, scheduling)
