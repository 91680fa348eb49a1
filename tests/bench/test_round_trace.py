"""The profiler-trace summary of `benchmarks/speed/round_trace.py` on a hand-built Chrome trace: device idle gaps are
named by the label around the launch that ended them, syncs are counted by label, and the idle-by-cause plot draws."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "speed"))

from round_trace import analyse, idle_by_cause, plot_idle  # noqa: E402


def _x(name: str, cat: str, ts: float, dur: float, correlation: int | None = None) -> dict:
    event = {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "tid": 1}
    if correlation is not None:
        event["args"] = {"correlation": correlation}
    return event


def _trace() -> dict:
    """Host: verify launched at 5 (kernel 10–110), a retirement's launch at 150 (fill 200–210), a sync inside the
    land step at 120, the next verify launched at 300 (kernel 310–410). Device idle: 110–200 and 210–310 µs."""
    return {"traceEvents": [
        _x("engine.verify", "user_annotation", 0, 20), _x("cudaGraphLaunch", "cuda_runtime", 5, 5, 1),
        _x("session.land", "user_annotation", 100, 120), _x("round.retire", "user_annotation", 140, 30),
        _x("cudaStreamSynchronize", "cuda_runtime", 120, 10), _x("cudaLaunchKernel", "cuda_runtime", 150, 5, 2),
        _x("engine.verify", "user_annotation", 295, 20), _x("cudaGraphLaunch", "cuda_runtime", 300, 5, 3),
        _x("verify_kernel", "kernel", 10, 100, 1), _x("fill_kernel", "gpu_memset", 200, 10, 2),
        _x("verify_kernel", "kernel", 310, 100, 3),
    ]}


def test_idle_gaps_are_named_by_the_launch_that_ended_them_and_syncs_by_their_label():
    summary = analyse(_trace())
    assert summary["rounds"] == 2 and summary["span_ms"] == 0.4 and summary["gpu_busy_ms"] == 0.21
    assert summary["gpu_idle_ms"] == 0.19 and summary["gaps"] == 2
    assert summary["idle_by_next_launch"] == {"round.retire < session.land": 0.09, "engine.verify": 0.1}
    assert summary["syncs_by_label"] == {"session.land": 1}
    assert idle_by_cause(summary) == pytest.approx({"retirement": 0.09, "verify launch": 0.1, "other": 0.0})


def test_idle_plot_is_written_for_several_traces(tmp_path):
    summary = analyse(_trace())
    path = tmp_path / "idle.png"
    plot_idle({"before": summary, "after": summary}, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
