"""Scheduling with batch-1 engines: one FIFO queue of requests and a pool of worker threads that take them in turn.

Used for targets the batched engine cannot run (see `batch_scheduler`, which serves Llama / Qwen3 / Qwen2 / Mistral
targets). Each worker owns one `Target` (its own KV cache over the shared HF model) and generates one sequence at a
time; N workers give N concurrent sequences (`--max-concurrency`). The HTTP side only calls `submit` and reads the
waiting / running counts, the same for both schedulers. A job cancelled while queued is skipped, never run; a running
job sees its cancel flag between tokens and stops, which frees its worker.
"""
from __future__ import annotations

import logging
import queue
import threading
from typing import Callable, Generic, Protocol, TypeVar

log = logging.getLogger("dspark.serve")
State = TypeVar("State")


class QueueFullError(RuntimeError):
    """More requests are waiting than the server allows (`--max-queue`)."""


class Job(Protocol[State]):
    def cancelled(self) -> bool: ...

    def run(self, state: State) -> None:
        """Generate on a worker thread with this worker's state (its Target); report through the job's sink."""

    def skip(self) -> None:
        """Called instead of `run` for a job cancelled before a worker took it."""


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


class WorkerPool(JobCounts, Generic[State]):
    def __init__(self, make_state: Callable[[], State], workers: int, max_queue: int,
                 on_change: Callable[[int, int], None] = lambda waiting, running: None):
        if workers < 1 or max_queue < 1:
            raise ValueError("a worker pool needs at least one worker and room for one queued job")
        super().__init__(threading.Lock(), max_queue, on_change)
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._work, args=(make_state(),), name=f"dspark-engine-{i}",
                                          daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> None:
        with self._lock:
            self._enqueue()
        self._queue.put(job)

    def _work(self, state: State) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            skip = job.cancelled()
            with self._lock:
                self._changed(-1, 0 if skip else +1)
            try:
                job.skip() if skip else job.run(state)
            except Exception:  # a job reports its own failures; this only keeps the worker alive
                log.exception("engine job failed")
            finally:
                if not skip:
                    with self._lock:
                        self._changed(0, -1)

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking jobs, let running ones see their cancel flags, and join the workers."""
        with self._lock:
            self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout)
