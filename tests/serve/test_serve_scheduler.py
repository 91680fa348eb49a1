"""The scheduler's admission: a bounded queue, and no new job once the server is shutting down."""
from __future__ import annotations

import threading

import pytest

from dspark.serve.scheduler import JobCounts, QueueFullError


def test_the_queue_is_bounded_and_a_closed_scheduler_refuses_new_jobs():
    changes = []
    counts = JobCounts(threading.Lock(), 2, lambda waiting, running: changes.append((waiting, running)))
    counts._enqueue()
    counts._enqueue()
    with pytest.raises(QueueFullError, match="2 requests are already waiting .--max-queue 2."):
        counts._enqueue()
    counts._changed(-1, +1)  # one job starts: room for one more
    counts._enqueue()
    assert (counts.waiting, counts.running) == (2, 1) and changes == [(1, 0), (2, 0), (1, 1), (2, 1)]
    counts._closed = True
    with pytest.raises(QueueFullError, match="shutting down"):
        counts._enqueue()
