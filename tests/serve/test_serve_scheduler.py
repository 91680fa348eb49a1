"""The worker pool: N workers with their own state, FIFO, bounded queue, cancelled jobs skipped, failing jobs
do not kill workers, and the waiting / running counts it reports."""
from __future__ import annotations

import threading

import pytest

from dspark.serve.scheduler import QueueFullError, WorkerPool


class FakeJob:
    def __init__(self, gate: threading.Event | None = None, fail: bool = False):
        self.gate, self.fail = gate, fail
        self.ran_on: object = None
        self.skipped = False
        self.done = threading.Event()
        self.started = threading.Event()
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    def cancelled(self) -> bool:
        return self._cancelled

    def run(self, state) -> None:
        self.ran_on = state
        self.started.set()
        try:
            if self.gate is not None:
                self.gate.wait(10)
            if self.fail:
                raise RuntimeError("boom")
        finally:
            self.done.set()

    def skip(self) -> None:
        self.skipped = True
        self.done.set()


def make_pool(workers: int, max_queue: int = 8):
    counter, changes = iter(range(100)), []
    pool = WorkerPool(lambda: f"state-{next(counter)}", workers, max_queue,
                      on_change=lambda waiting, running: changes.append((waiting, running)))
    return pool, changes


def test_each_worker_has_its_own_state_and_jobs_run_concurrently_up_to_the_worker_count():
    pool, _ = make_pool(2)
    gate = threading.Event()
    jobs = [FakeJob(gate) for _ in range(3)]
    for job in jobs:
        pool.submit(job)
    assert jobs[0].started.wait(5) and jobs[1].started.wait(5)
    assert (pool.running, pool.waiting) == (2, 1) and not jobs[2].started.is_set()
    assert {jobs[0].ran_on, jobs[1].ran_on} == {"state-0", "state-1"}
    gate.set()
    assert all(job.done.wait(5) for job in jobs)
    pool.close()
    assert (pool.running, pool.waiting) == (0, 0)


def test_a_job_cancelled_while_queued_is_skipped_not_run():
    pool, changes = make_pool(1)
    gate = threading.Event()
    blocker, queued = FakeJob(gate), FakeJob()
    pool.submit(blocker)
    pool.submit(queued)
    queued.cancel()
    gate.set()
    assert queued.done.wait(5)
    pool.close()
    assert queued.skipped and queued.ran_on is None
    assert changes[-1] == (0, 0)


def test_the_queue_is_bounded():
    pool, _ = make_pool(1, max_queue=1)
    gate = threading.Event()
    first = FakeJob(gate)
    pool.submit(first)
    assert first.started.wait(5)
    pool.submit(FakeJob())
    with pytest.raises(QueueFullError, match="--max-queue 1"):
        pool.submit(FakeJob())
    gate.set()
    pool.close()


def test_a_failing_job_does_not_stop_its_worker():
    pool, _ = make_pool(1)
    failing, after = FakeJob(fail=True), FakeJob()
    pool.submit(failing)
    pool.submit(after)
    assert after.done.wait(5) and after.ran_on == "state-0"
    pool.close()
    with pytest.raises(QueueFullError, match="shutting down"):
        pool.submit(FakeJob())
