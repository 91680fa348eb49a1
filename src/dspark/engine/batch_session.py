"""A stepping session over a `BatchEngine`: requests come and go while the batch decodes (continuous batching).

`session = engine.open(config)` fixes the sampling settings (temperature, top_p, top_k, seed, max_drafts,
confidence threshold) for every request of the session; `add(request_id, prompt_ids, max_new_tokens)` queues a
request (its own token budget and, optionally, its own EOS ids); `step()` first admits queued requests into free rows
(prefilled together; a request that ends at its first token frees its row for the next), then runs one round over
all live rows and returns each request's new tokens; `cancel(request_id)` frees a row before the next round;
`release(request_id)` hands back a finished request's result and forgets it. Host bookkeeping only: the round
itself is `BatchRound`'s, driven through the engine's (graphed or eager) steps. A round runs rows 0 … n−1, n past the
last live row: a waiting request takes the lowest free row, and live rows are moved down into free ones (compaction)
only when that lets the round run a smaller row bucket (`engine.width_rows`); a free row inside the round is retired
(inactive, nothing verified), as a bucket's padding rows are. One session per engine at a time: opening one ends the
previous.
`BatchEngine.generate` is a loop over a session. Lossless per request, as the engine is. `session.blocks = []`
before stepping collects a `BlockRecord` per row and round (survival per slot, drafts verified, accepted) under a
rule that computes confidences (threshold or algorithm1; a threshold of 0 verifies every draft). Under Algorithm 1
with plain step rates (`Scheduling.plain`) a round drafts nothing when plain decoding is expected to be faster at its
batch size: expected from the commits per row and the width of recent drafted rounds (a drafted round every
`PROBE_EVERY` rounds keeps that estimate current). With the engine's `overlap` (on a GPU) a round that drafts nothing,
and a drafted round over `OVERLAP_DRAFTED_ROWS` rows or more, lands in the next step, after that step's round is
launched, so the device runs while the host does this bookkeeping (`step`).
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple, Protocol

import torch

from dspark.config import GenerationConfig
from dspark.engine.batch_round import BatchRound
from dspark.engine.schedule import Scheduling, survival
from dspark.engine.stats import BlockRecord, GenerationResult, StatsRecorder


class RoundSteps(Protocol):
    """What a session drives: the engine's steps (`BatchEngine` is one) and its round's device buffers."""

    round: BatchRound
    max_batch: int
    overlap: bool  # leave a round in flight until the next step's round is launched (step, _stays_in_flight)

    def check_request(self, label: object, prompt: Sequence[int], max_new_tokens: int, gamma: int) -> None: ...

    def admit(self, slots: list[int], prompts: list[list[int]], budgets: list[int],
              samplings: Sequence[tuple[GenerationConfig, int]] | None = None) -> list[int]: ...

    def width_rows(self, n: int) -> int: ...

    def window(self, furthest: int) -> int: ...

    def propose(self, b: int, window: int) -> None: ...

    def verify(self, b: int, t: int, window: int) -> None: ...


PROBE_EVERY = 16  # with drafting switched off, every this many rounds one drafts again to refresh the estimate
OVERLAP_DRAFTED_ROWS = 32  # drafted rounds over this many rows or more are left in flight too (overlap)


class Update(NamedTuple):
    """What one step did for one request: its new tokens (admission's first token and/or the round's commits)."""

    request_id: Hashable
    tokens: list[int]
    finished: bool  # EOS or the token budget: the request left its row (cancelled requests are not reported)


class _Flight(NamedTuple):
    """A launched round, until it lands: the request in each of its rows then, its read-back, its verify width,
    whether it drafted, and (`session.blocks`) its block's survival per row and slot [n, γ]."""

    rows: list[_Request]
    read: Callable[[], list[list[int]]]
    width: int
    drafted: bool
    alive: torch.Tensor | None


class _Request:
    def __init__(self, request_id: Hashable, prompt: list[int], max_new_tokens: int, eos: set[int],
                 recorder: StatsRecorder, sampling: GenerationConfig, seed: int):
        self.request_id, self.prompt, self.max_new_tokens, self.eos = request_id, prompt, max_new_tokens, eos
        self.sampling, self.seed = sampling, seed
        self.tokens: list[int] = []
        self.recorder = recorder
        recorder.prompt_tokens += len(prompt)
        self.began = time.perf_counter()
        self.seconds = 0.0
        self.finished = False

    def emit(self, tokens: list[int]) -> None:
        self.tokens.extend(tokens)
        self.recorder.new_tokens += len(tokens)

    def finish(self) -> None:
        self.finished = True
        self.seconds = time.perf_counter() - self.began

    def commit(self, packed: list[int]) -> list[int]:
        """Apply this row's round [accepted, L, committed …]; returns the tokens kept. An accepted EOS ends the
        request and nothing after it counts."""
        accepted, length = packed[0], packed[1]
        committed = packed[2 : 3 + accepted]
        stop = next((i for i, token in enumerate(committed) if token in self.eos), None)
        if stop is not None:
            committed = committed[: stop + 1]
        self.recorder.record(length, len(committed) - 1)
        self.emit(committed)
        if stop is not None or len(self.tokens) >= self.max_new_tokens:
            self.finish()
        return committed

    def result(self) -> GenerationResult:
        return GenerationResult(list(self.tokens), self.recorder.freeze(), self.seconds)


class BatchSession:
    """Requests decoded together with one GenerationConfig's sampling settings; see the module docstring."""

    def __init__(self, engine: RoundSteps, config: GenerationConfig, gamma: int, generator: torch.Generator,
                 scheduling: Scheduling = Scheduling()):
        self.engine, self.config, self.gamma, self.generator = engine, config, gamma, generator
        self.scheduling = scheduling
        self._tau: float | None = None  # running commits per row of drafted rounds (Scheduling.plain's estimate)
        self._width = 1.0  # running verify width of drafted rounds
        self._undrafted = 0  # rounds in a row launched without drafting
        self._requests: dict[Hashable, _Request] = {}
        self._queue: deque[_Request] = deque()
        self._slots: list[_Request | None] = [None] * engine.max_batch
        self._reported: list[Update] = []  # requests finished outside a step (budget 0), reported by the next step
        self._ahead: tuple[int, int] | None = None  # (rows, window) of a block already drafted for the rows as they are
        self._flight: _Flight | None = None  # the round launched by the last step, not yet landed (overlap)
        self._ending = 0.0  # running share of rounds in which a request ended (a waiting request then takes its row)
        self.closed = False
        self._added = 0  # requests added so far (a seedless request's seed under a seeded session)
        self.blocks: list[BlockRecord] | None = None  # a list here collects every verified block (module docstring)

    # --- requests ------------------------------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """No live or queued request (and nothing left to report)."""
        return not self._span and not self._queue and not self._reported

    @property
    def live(self) -> int:
        """Requests holding a row."""
        return sum(r is not None for r in self._slots)

    @property
    def _span(self) -> int:
        """Rows a round runs: 0 … the last live row."""
        return next((s + 1 for s in range(len(self._slots) - 1, -1, -1) if self._slots[s] is not None), 0)

    @property
    def queued(self) -> int:
        """Requests added but not yet admitted into a row."""
        return len(self._queue)

    def add(self, request_id: Hashable, prompt_ids: Sequence[int], max_new_tokens: int,
            eos_token_ids: Sequence[int] | None = None, recorder: StatsRecorder | None = None,
            sampling: GenerationConfig | None = None) -> None:
        """Queue a request; it is admitted into a free row at the next step. eos_token_ids None: the session's.
        `recorder`: where its acceptance is recorded (default: a new one, `recorder(request_id)`). `sampling`: the
        request's own temperature, top-p, top-k and seed (default: the session's), decoded side by side with rows
        of other settings; its seed alone decides its samples. Without a seed of its own a request gets one from
        the session's: the session's seed for the first request, one derived from it and the request's order for
        the others, a random one when the session has none."""
        self._check_open()
        if request_id in self._requests:
            raise ValueError(f"request {request_id!r} is already in this session; use a new id or release it first")
        if max_new_tokens < 0:
            raise ValueError(f"request {request_id!r}: max_new_tokens must be >= 0")
        prompt = [int(t) for t in prompt_ids]
        self.engine.check_request(request_id, prompt, max_new_tokens, self.gamma)
        eos = set(self.config.eos_token_ids if eos_token_ids is None else (int(t) for t in eos_token_ids))
        if sampling is not None and sampling.seed is not None:
            seed = sampling.seed
        elif self.config.seed is not None:  # the first request takes the session's seed itself
            seed = self.config.seed if not self._added else hash((self.config.seed, self._added)) & (2**62 - 1)
        else:
            seed = int(torch.randint(2**62, (1,), generator=self.generator))
        self._added += 1
        request = _Request(request_id, prompt, max_new_tokens, eos,
                           recorder if recorder is not None else StatsRecorder(),
                           sampling if sampling is not None else self.config, seed)
        self._requests[request_id] = request
        if max_new_tokens == 0:
            request.finish()
            self._reported.append(Update(request_id, [], True))
        else:
            self._queue.append(request)

    def recorder(self, request_id: Hashable) -> StatsRecorder:
        """The request's live acceptance record (rounds so far)."""
        return self._get(request_id).recorder

    def release(self, request_id: Hashable) -> GenerationResult:
        """A finished request's result; the session forgets it."""
        request = self._get(request_id)
        if not request.finished:
            raise ValueError(f"request {request_id!r} is still running; cancel it or step until it finishes")
        del self._requests[request_id]
        return request.result()

    def cancel(self, request_id: Hashable) -> GenerationResult:
        """Stop a queued or live request now (its row is free for the next step); returns what it generated."""
        request = self._get(request_id)
        if request in self._queue:
            self._queue.remove(request)
        elif not request.finished:
            slot = self._slots.index(request)
            self._slots[slot] = None
            self.engine.round.retire(slot)
            self._compact()
            self._ahead = None
        if not request.finished:
            request.finish()
        self._reported = [u for u in self._reported if u.request_id != request_id]
        return self.release(request_id)

    def _get(self, request_id: Hashable) -> _Request:
        if request_id not in self._requests:
            raise KeyError(f"request {request_id!r} is not in this session")
        return self._requests[request_id]

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this session was ended by a newer engine.open(...); open a new session")

    # --- stepping ------------------------------------------------------------------------------------------------
    def step(self) -> list[Update]:
        """Admit queued requests into free rows, then run one round over every live row. With the engine's `overlap`
        a round that drafts nothing (plain decoding, or Algorithm 1 with drafting switched off) is left in flight:
        it lands (is read back and committed) in the next step, after that step's round is launched, so the device
        runs while the host commits. A drafted round over fewer than OVERLAP_DRAFTED_ROWS rows lands in its own
        step: the next block, drafted before the read-back, already keeps the device busy while the host commits,
        and a round launched early would add a dropped round for every request that ends. Over more rows the host's
        commits take longer than that block's draft, and drafted rounds are left in flight too."""
        self._check_open()
        new: dict[Hashable, list[int]] = {}
        updates, self._reported = self._reported, []
        self._fill(new)
        landing, self._flight = self._flight, None
        span = self._span
        launched = self._launch(span, landing is not None) if span else None
        if landing is not None:  # committed after the next round is queued: the device runs on meanwhile
            self._land(landing, new)
        if launched is not None and self._stays_in_flight(launched):
            self._flight = launched
        elif launched is not None:
            self._land(launched, new)
        for request_id, tokens in new.items():
            updates.append(Update(request_id, tokens, self._requests[request_id].finished))
        return updates

    def _stays_in_flight(self, launched: _Flight) -> bool:
        """Whether a launched round lands in the next step, under the engine's `overlap`: a round that drafts
        nothing, or one over OVERLAP_DRAFTED_ROWS rows or more."""
        return self.engine.overlap and (not launched.drafted or len(launched.rows) >= OVERLAP_DRAFTED_ROWS)

    def _fill(self, new: dict[Hashable, list[int]]) -> None:
        """Admit queued prompts into the free rows, lowest first (prefilled together); a request that ends at its
        first token frees its row for the next prompt. Then compact."""
        engine = self.engine
        while self._queue and None in self._slots:
            free = [s for s, r in enumerate(self._slots) if r is None]
            batch = [self._queue.popleft() for _ in range(min(len(free), len(self._queue)))]
            for request in batch:
                request.began = time.perf_counter()
            firsts = engine.admit(free[: len(batch)], [r.prompt for r in batch], [r.max_new_tokens for r in batch],
                                  [(r.sampling, r.seed) for r in batch])
            self._ahead = None  # new rows have no drafts yet
            for slot, request, first in zip(free, batch, firsts):
                request.emit([first])
                new[request.request_id] = [first]
                if first in request.eos or request.max_new_tokens <= 1:
                    engine.round.retire(slot)
                    request.finish()
                else:
                    self._slots[slot] = request
            self._compact()

    def _launch(self, n: int, in_flight: bool) -> _Flight:
        """Queue one round over rows 0 … n−1: propose, schedule, verify, the read-back of its commits, and the next
        round's block.

        The next round's block is drafted before the read-back is waited for (the GPU drafts while the host commits):
        the propose step reads only the rows' device state, which verify has just advanced, and a row that moves
        takes its block along. The block is used when the next round has the same row bucket and attention window
        and admits no request, else drafted again; so the drafts are the ones drafting after the sync would give
        (under Algorithm 1 the shared width may still count a row that just ended: lossless either way). It is not
        drafted ahead while requests wait and most recent rounds ended one (the admission would discard it). With a
        round still in flight (overlap) the rows may be one block further than the host knows: the attention window
        allows for it, and a row that the round in flight ends runs this round for nothing (its commits are dropped
        when it lands)."""
        engine, rows = self.engine, self._slots[:n]
        live = [r for r in rows if r is not None]
        b = engine.width_rows(n)
        unseen = engine.round.gamma_max + 1 if in_flight else 0  # what the round in flight may commit per row
        anchor_at = max(len(r.prompt) + len(r.tokens) - 1 for r in live) + unseen  # the furthest anchor
        window = engine.window(anchor_at + max(engine.round.verify_span, engine.round.block_size))
        drafting = self.gamma > 0 and self._drafting_pays(n)
        self._undrafted = 0 if drafting else self._undrafted + 1
        if drafting and self._ahead != (b, window):
            engine.propose(b, window)  # drafts, and how many of them each row verifies
        if not drafting:
            t = 1
            if self.gamma:  # plain decoding is expected to be faster at this batch size: the anchor alone
                engine.round.lengths[:b] = 0
        elif engine.round.rule != "none":
            t = int(engine.round.width)  # the scheduled width (one small extra sync)
        else:
            t = min(self.gamma, max(r.max_new_tokens - len(r.tokens) for r in live) - 1) + 1
            if t > 1 and engine.round.uses_tree(b):
                t = engine.round.verify_span  # the whole tree (a row accepts at most its budget)
        alive = None
        if self.blocks is not None and engine.round.rule != "none" and drafting:
            # this round's survival, before the next block overwrites the confidences
            alive = survival(engine.round.confidence[:n], engine.round.temperatures).clone()  # [n, γ]
        engine.verify(b, t, window)
        read = engine.round.packed_reader(n, t)
        self._ahead = None
        if drafting and not (self._queue and self._ending >= 0.5):
            engine.propose(b, window)  # the next round's block, at this window (the next one's usual value)
            self._ahead = (b, window)
        return _Flight(list(rows), read, t, drafting, alive)

    def _land(self, flight: _Flight, new: dict[Hashable, list[int]]) -> None:
        """Read a launched round back (its one sync: it waits for verify, not for the work queued after it), commit
        each of its rows whose request is still running, retire the rows that finish and, when no request waits
        for a free row, compact."""
        packed = flight.read()
        landed = [(slot, request) for slot, request in enumerate(flight.rows)
                  if request is not None and not request.finished]
        if flight.alive is not None and self.blocks is not None:
            alive = flight.alive.tolist()
            self.blocks.extend(BlockRecord(tuple(alive[slot][: self.gamma]), packed[slot][1], packed[slot][0])
                               for slot, _ in landed)
        self._learn(flight.drafted, [packed[slot] for slot, _ in landed], flight.width)
        ended = False
        for slot, request in landed:
            new.setdefault(request.request_id, []).extend(request.commit(packed[slot]))
            if request.finished:
                row = slot if self._slots[slot] is request else self._slots.index(request)  # compaction moved it
                self._slots[row] = None
                self.engine.round.retire(row)
                ended = True
        self._ending = 0.9 * self._ending + 0.1 * ended
        if not self._queue:  # else the next step's admission takes the free rows
            self._compact()

    def _drafting_pays(self, n: int) -> bool:
        """Whether a round over n rows drafts: always, unless the scheduling knows plain decoding's step rates and
        the running estimate says plain decoding commits more per second at this batch size."""
        plain = self.scheduling.plain_rate(n) if self.engine.round.rule == "algorithm1" else None
        if plain is None or self._tau is None or self._undrafted >= PROBE_EVERY:
            return True
        return self._tau * self.scheduling.table(n)(round(self._width)) >= plain

    def _learn(self, drafted: bool, packed: list[list[int]], width: int) -> None:
        """Update the running commits per row and width of drafted rounds."""
        if not drafted or not packed:  # an undrafted round, or every row of the round had already finished
            return
        commits = sum(p[0] + 1 for p in packed) / len(packed)
        if self._tau is None:
            self._tau, self._width = commits, float(width)
        else:
            self._tau, self._width = 0.8 * self._tau + 0.2 * commits, 0.8 * self._width + 0.2 * width

    def _compact(self) -> None:
        """Move live rows into the free rows below them so they occupy rows 0 … n−1, when that shrinks the round's
        row bucket (a move copies the row's caches and state: a free row inside the bucket costs nothing)."""
        live = [s for s, r in enumerate(self._slots) if r is not None]
        if self.engine.width_rows(len(live)) == self.engine.width_rows(self._span):
            return
        holes = [s for s in range(len(live)) if self._slots[s] is None]
        sources = [s for s in live if s >= len(live)]  # as many as the holes
        self.engine.round.move_rows(sources, holes)
        for hole, source in zip(holes, sources):
            self._slots[hole], self._slots[source] = self._slots[source], None
