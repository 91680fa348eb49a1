"""Scheduling: one FIFO queue of requests and one engine thread that decodes every running request in one batch.

The thread owns a `BatchEngine` built once at startup (max_batch = --max-concurrency rows, max_length = the served
context + a block; on a GPU with the static backend its CUDA graphs are all captured then) and loops: take queued
jobs into free rows of the open session, step one round, feed each request's new tokens to its job's `TokenSink`
(text, stop strings, metrics, events), release finished rows, cancel rows whose stop string matched or whose client
went away (a job cancelled while queued is skipped, never run). The HTTP side only calls `submit` and `close` and
reads the waiting / running counts.

Every row keeps its own sampling settings (temperature, top_p, top_k) and its own seeded random stream, so greedy and
sampled requests of any settings decode side by side in one batch, and a seeded request's output depends on its seed
alone, whatever else runs. The queue is FIFO. No HTTP and no speculative algorithm here.
"""
from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable

from dspark.config import GenerationConfig
from dspark.engine.batch import BatchEngine
from dspark.engine.schedule import Scheduling
from dspark.engine.batch_session import BatchSession
from dspark.engine.tree import TreeShape
from dspark.serve.generation_job import GenerationJob, TokenSink
from dspark.serve.model_source import ServedModel

log = logging.getLogger("dspark.serve")


class QueueFullError(RuntimeError):
    """More requests are waiting than the server allows (`--max-queue`)."""


class JobCounts:
    """What every scheduler shares with the HTTP side: waiting / running counts under one lock, reported through
    `on_change`, and the admission check of `submit` (closed server, full queue)."""

    def __init__(self, lock: threading.Lock | threading.Condition, max_queue: int,
                 on_change: Callable[[int, int], None]):
        self._lock = lock
        self._waiting = self._running = 0
        self._max_queue = max_queue
        self._on_change = on_change
        self._closed = False

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def running(self) -> int:
        return self._running

    def _changed(self, waiting: int, running: int) -> None:  # called with the lock held
        self._waiting += waiting
        self._running += running
        self._on_change(self._waiting, self._running)

    def _enqueue(self) -> None:
        """Count one more waiting job, or refuse it (called with the lock held)."""
        if self._closed:
            raise QueueFullError("the server is shutting down")
        if self._waiting >= self._max_queue:
            raise QueueFullError(f"{self._waiting} requests are already waiting (--max-queue {self._max_queue})")
        self._changed(+1, 0)


def session_key(config: GenerationConfig) -> tuple:
    """What a session fixes for every row: drafts per round and the confidence cut (the server's settings, so one
    key in practice). Temperature, top-p, top-k and seed are each row's own."""
    return config.max_drafts, config.confidence_threshold


class BatchScheduler(JobCounts):
    def __init__(self, served: ServedModel, max_batch: int, max_queue: int,
                 on_change: Callable[[int, int], None] = lambda waiting, running: None, algorithm1: bool = False,
                 tree: TreeShape | None = None):
        """`algorithm1`: every session schedules with the paper's Algorithm 1 on round-cost tables and plain step
        rates measured here, once, before the engine thread starts (a round drafts nothing where plain decoding is
        expected to be faster); else the config's threshold rule, or none. `tree`: every round
        verifies a tree of drafts per row instead of the block's chain."""
        if max_batch < 1 or max_queue < 1:
            raise ValueError("a batched scheduler needs at least one row and room for one queued job")
        gamma = served.draft.config.num_draft_tokens if served.draft is not None else 0
        self.engine = BatchEngine(served.new_target(), served.draft, max_batch, served.context_length + gamma + 1,
                                  tree=tree)
        if self.engine.graphs is not None:  # capture now, not during the first requests of each shape
            log.info("capturing CUDA graphs for up to %d rows and %d positions", max_batch, served.context_length)
            log.info("captured %d CUDA graphs", self.engine.warm_up())
        self.scheduling = Scheduling("algorithm1", self.engine.round_cost_tables(),
                                     self.engine.plain_step_rates()) if algorithm1 else None
        self._pending: deque[GenerationJob] = deque()
        self._live: dict[int, tuple[GenerationJob, TokenSink]] = {}
        self._ids = itertools.count()
        self._session: BatchSession | None = None
        self._key: tuple | None = None  # the open session's `session_key`
        self._cond = threading.Condition()
        super().__init__(self._cond, max_queue, on_change)
        self._thread = threading.Thread(target=self._loop, name="dspark-engine-batch", daemon=True)
        self._thread.start()

    def submit(self, job: GenerationJob) -> None:
        with self._cond:
            self._enqueue()
            self._pending.append(job)
            self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking jobs, fail the running and queued ones with a 503 'shutting down' error (the engine thread
        does it after its current round), and join the engine thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)

    # --- the engine thread ---------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._pending and not self._live:
                    self._cond.wait()
                if self._closed:
                    break
            try:
                self._admit()
                if self._live:
                    self._step()
            except Exception as exc:  # the engine failed: every running request fails, the next session starts clean
                log.exception("batched generation failed")
                self._fail_running(exc)
        for request_id in list(self._live):  # closed: whatever still runs or waits is cut
            job, _ = self._live.pop(request_id)
            self._session.cancel(request_id)
            job.shut_out()
            with self._cond:
                self._changed(0, -1)
        with self._cond:
            queued, self._pending = list(self._pending), deque()
            self._changed(-len(queued), 0)
        for job in queued:
            if job.cancelled():
                job.skip()
            else:
                job.shut_out()

    def _take(self) -> tuple[list[GenerationJob], list[GenerationJob]]:
        """Jobs to skip (cancelled while queued) and jobs to add now, in FIFO order. Rows with any sampling settings
        share a session; a job whose session settings differ (`session_key`) waits until the batch drains."""
        skipped, taken = [], []
        with self._cond:
            while self._pending:
                job = self._pending[0]
                if job.cancelled():
                    skipped.append(self._pending.popleft())
                    self._changed(-1, 0)
                    continue
                if self._running >= self.engine.max_batch:
                    break
                config = job.request.generation
                key = session_key(config)
                if self._session is None or (key != self._key and self._running == 0 and not taken):
                    self._session, self._key = self.engine.open(config, self.scheduling), key
                elif key != self._key:
                    break
                taken.append(self._pending.popleft())
                self._changed(-1, +1)
        return skipped, taken

    def _admit(self) -> None:
        skipped, taken = self._take()
        for job in skipped:
            job.skip()
        for job in taken:
            request_id, request = next(self._ids), job.request
            try:
                self._session.add(request_id, request.prompt_ids, request.generation.max_new_tokens,
                                  request.generation.eos_token_ids, sampling=request.generation)
            except ValueError as exc:
                job.fail(exc)
                with self._cond:
                    self._changed(0, -1)
                continue
            self._live[request_id] = (job, TokenSink(job, self._session.recorder(request_id)))

    def _fail_running(self, exc: Exception) -> None:
        for request_id in list(self._live):
            self._live.pop(request_id)[0].fail(exc)
            with self._cond:
                self._changed(0, -1)
        self._session = None

    def _step(self) -> None:
        for request_id, tokens, finished in self._session.step():
            more = self._live[request_id][1].push(tokens)
            if finished or not more:
                self._end(request_id, cancel=not finished)
        for request_id in [r for r, (job, _) in self._live.items() if job.cancelled()]:  # clients gone
            self._end(request_id, cancel=True, aborted=True)

    def _end(self, request_id: int, cancel: bool, aborted: bool = False) -> None:
        """Free the request's row (cancel: it has not finished in the engine) and report its finish."""
        _, sink = self._live.pop(request_id)
        if cancel:
            self._session.cancel(request_id)
        else:
            self._session.release(request_id)
        sink.finish(aborted or self._closed)
        with self._cond:
            self._changed(0, -1)
