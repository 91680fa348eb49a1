"""Where the device waits during batched generation: a torch.profiler trace of one run, its device idle gaps named.

`round_timeline.py` says how long the device sits idle between the engine's steps; this says why. It runs one
generation under torch.profiler (CPU and CUDA activity), with a profiler label around each host-side piece of the
session and the engine (admission, launch, land, compaction, each step, row moves and retirements, the read-back
wait), and from the trace:
  gpu_busy_ms / gpu_idle_ms   the union of every kernel, copy and fill on every stream, and the time outside it
                              (between the first and the last device event)
  idle_by_next_launch         device idle summed by the label (innermost, then outermost) around the host call that
                              launched the work ending each gap: which step the device waited for
  host_during_idle            device idle summed by each label the host was inside during it (nested labels both
                              count): what the host was doing meanwhile
  aten_during_idle            the same by top-level aten operator (eager work the host issued meanwhile)
  host_ms_per_round           each label's host time per verify
  syncs_by_label              the host's stream / device / event synchronisations, counted by the labels around
                              them (innermost first): a sync outside the read-back wait is a stall to remove
The profiler adds a few microseconds to every operator the host issues, so host-bound gaps come out larger than in
an unprofiled run: read the shares, not the absolute times. Writes the trace (gzipped Chrome JSON) next to the report.

    from round_trace import traced; traced(engine, prompts, config, out_dir)   # throughput_h200.py's trace section
    python benchmarks/speed/round_trace.py OUT/trace-dspark-64.json.gz          # a saved trace's summary again
    python benchmarks/speed/round_trace.py before=A.json.gz after=B.json.gz --plot idle.png   # idle by cause
"""
from __future__ import annotations

import bisect
import gzip
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from dspark.config import GenerationConfig
from dspark.engine.batch import BatchEngine
from dspark.engine.batch_session import BatchSession

SESSION_LABELS = ("_fill", "_launch", "_land", "_compact", "_learn")  # BatchSession methods
ENGINE_LABELS = ("propose", "verify", "admit")  # BatchEngine methods (graphed or eager)
ROUND_LABELS = ("move_rows", "retire", "packed_reader")  # BatchRound methods (eager row changes, the read-back copy)
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}


def _around(marks: list[dict], starts: list[float], ts: float) -> str:
    """The innermost two labels open at host time ts ("(no label)" if none)."""
    around = [m for m in marks[: bisect.bisect_right(starts, ts)] if m["ts"] + m["dur"] >= ts]
    return " < ".join(m["name"] for m in sorted(around, key=lambda m: -m["ts"])[:2]) or "(no label)"


def _labelled(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        with record_function(name):
            return fn(*args, **kwargs)
    return call


@contextmanager
def labels(engine: BatchEngine) -> Iterator[None]:
    """Profiler labels around the session's methods, the engine's steps and the round's row changes; the read-back
    wait labelled "read-back wait". Everything is put back on exit."""
    saved = {name: getattr(BatchSession, name) for name in SESSION_LABELS}
    for name, fn in saved.items():
        setattr(BatchSession, name, _labelled(f"session.{name.strip('_')}", fn))
    for name in ENGINE_LABELS:
        setattr(engine, name, _labelled(f"engine.{name}", getattr(type(engine), name).__get__(engine)))
    rnd = engine.round
    for name in ROUND_LABELS[:2]:
        setattr(rnd, name, _labelled(f"round.{name}", getattr(type(rnd), name).__get__(rnd)))
    reader = type(rnd).packed_reader.__get__(rnd)

    def packed_reader(n: int, t: int) -> Callable[[], list[list[int]]]:
        with record_function("round.packed_reader"):
            wait = reader(n, t)
        return _labelled("read-back wait", wait)

    rnd.packed_reader = packed_reader
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(BatchSession, name, fn)
        for name in ENGINE_LABELS:
            delattr(engine, name)
        for name in ROUND_LABELS:
            delattr(rnd, name)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _top_level(events: list[dict]) -> list[dict]:
    """Events not nested inside another one of the list on the same thread."""
    out, open_end = [], {}
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        tid = e.get("tid")
        if e["ts"] >= open_end.get(tid, float("-inf")):
            out.append(e)
            open_end[tid] = e["ts"] + e["dur"]
    return out


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def analyse(trace: dict, min_gap_us: float = 1.0) -> dict[str, Any]:
    """The summary of a Chrome trace from torch.profiler (times in µs in the trace, ms in the summary)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    device = [e for e in events if e.get("cat") in DEVICE_CATEGORIES]
    marks = [e for e in events if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep")]
    rounds = max(1, sum(1 for e in marks if e["name"] == "engine.verify"))
    host_ms = {}
    for e in marks:
        host_ms[e["name"]] = host_ms.get(e["name"], 0.0) + e["dur"] / 1000
    out: dict[str, Any] = {"rounds": rounds, "host_ms_per_round": _rounded({k: v / rounds for k, v in host_ms.items()})}
    marks.sort(key=lambda e: e["ts"])
    starts = [e["ts"] for e in marks]
    syncs: dict[str, int] = {}
    for e in events:
        if e.get("cat") in LAUNCH_CATEGORIES and "Synchronize" in e["name"]:
            key = _around(marks, starts, e["ts"])
            syncs[key] = syncs.get(key, 0) + 1
    out["syncs_by_label"] = dict(sorted(syncs.items(), key=lambda kv: -kv[1]))
    if not device:
        return out
    busy = _union([(e["ts"], e["ts"] + e["dur"]) for e in device])
    gaps = [(a[1], b[0]) for a, b in zip(busy, busy[1:]) if b[0] - a[1] >= min_gap_us]
    launches = {e.get("args", {}).get("correlation"): e for e in events if e.get("cat") in LAUNCH_CATEGORIES}
    first_at = {}  # gap end -> the device event starting there
    for e in sorted(device, key=lambda e: e["ts"]):
        first_at.setdefault(e["ts"], e)
    aten = _top_level([e for e in events if e.get("cat") == "cpu_op"])
    aten.sort(key=lambda e: e["ts"])
    aten_starts = [e["ts"] for e in aten]
    by_launch: dict[str, float] = {}
    during: dict[str, float] = {}
    aten_during: dict[str, float] = {}
    for g0, g1 in gaps:
        gap = (g1 - g0) / 1000
        launch = launches.get(first_at.get(g1, {}).get("args", {}).get("correlation"))
        key = _around(marks, starts, launch["ts"]) if launch is not None else "(launch not in the trace)"
        by_launch[key] = by_launch.get(key, 0.0) + gap
        for m in marks[: bisect.bisect_right(starts, g1)]:
            share = _overlap(m["ts"], m["ts"] + m["dur"], g0, g1)
            if share:
                during[m["name"]] = during.get(m["name"], 0.0) + share / 1000
        for e in aten[max(0, bisect.bisect_left(aten_starts, g0) - 1): bisect.bisect_right(aten_starts, g1)]:
            share = _overlap(e["ts"], e["ts"] + e["dur"], g0, g1)
            if share:
                aten_during[e["name"]] = aten_during.get(e["name"], 0.0) + share / 1000
    span = (busy[-1][1] - busy[0][0]) / 1000
    gpu_busy = sum(b - a for a, b in busy) / 1000
    gap_sizes = sorted((g1 - g0) / 1000 for g0, g1 in gaps)
    out.update(span_ms=round(span, 3), gpu_busy_ms=round(gpu_busy, 3), gpu_idle_ms=round(span - gpu_busy, 3),
               idle_per_round_ms=round((span - gpu_busy) / rounds, 4), gaps=len(gaps),
               gap_median_ms=round(gap_sizes[len(gap_sizes) // 2], 4) if gap_sizes else 0.0,
               idle_in_gaps_over_50us_ms=round(sum(g for g in gap_sizes if g > 0.05), 3),
               idle_by_next_launch=_rounded(_top(by_launch, 8)), host_during_idle=_rounded(_top(during, 10)),
               aten_during_idle=_rounded(_top(aten_during, 10)))
    return out


def _top(values: dict[str, float], n: int) -> dict[str, float]:
    return dict(sorted(values.items(), key=lambda kv: -kv[1])[:n])


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in values.items()}


def traced(engine: BatchEngine, prompts: list[list[int]], config: GenerationConfig, out: Path,
           name: str = "trace") -> dict[str, Any]:
    """Generate `prompts` once under the profiler with the labels on; write out/{name}.json.gz; return the summary."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with labels(engine), profile(activities=activities) as prof:
        engine.generate(prompts, config)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    raw = out / f"{name}.json"
    prof.export_chrome_trace(str(raw))
    trace = json.loads(raw.read_text())
    with open(raw, "rb") as source, gzip.open(out / f"{name}.json.gz", "wb") as packed:
        shutil.copyfileobj(source, packed)
    raw.unlink()
    return analyse(trace)


CAUSES = {"engine.verify": "verify launch", "round.move_rows": "row moves", "round.move": "row moves",
          "engine.admit": "admission", "round.retire": "retirement", "engine.propose": "next block's draft"}


def idle_by_cause(summary: dict[str, Any]) -> dict[str, float]:
    """`idle_by_next_launch` summed by the step that ended each gap (its innermost label), in ms; "other" also
    holds the idle it does not name (the smallest labels)."""
    out: dict[str, float] = {}
    for key, ms in summary["idle_by_next_launch"].items():
        cause = CAUSES.get(key.split(" < ")[0], "other")
        out[cause] = out.get(cause, 0.0) + ms
    out["other"] = out.get("other", 0.0) + max(0.0, summary["gpu_idle_ms"] - sum(out.values()))
    return out


def plot_idle(summaries: dict[str, dict[str, Any]], path: Path) -> None:
    """One stacked bar per trace: its device idle by the step that ended each gap, and its busy time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    causes = list(dict.fromkeys([*CAUSES.values(), "other"]))
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.7 * len(summaries)))
    for i, (name, summary) in enumerate(summaries.items()):
        left = summary["gpu_busy_ms"]
        ax.barh(i, left, color="#cccccc", label="device busy" if i == 0 else None)
        split = idle_by_cause(summary)
        for j, cause in enumerate(causes):
            ax.barh(i, split.get(cause, 0.0), left=left, color=f"C{j}", label=cause if i == 0 else None)
            left += split.get(cause, 0.0)
        ax.text(left, i, f" idle {summary['gpu_idle_ms'] / summary['span_ms']:.0%}", va="center")
    ax.set_yticks(range(len(summaries)), list(summaries))
    ax.invert_yaxis()
    ax.set_xlabel("ms of the profiled run (idle by the step whose launch ended the gap)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4, frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="the summary of saved traces (trace-*.json.gz from --out)")
    parser.add_argument("traces", type=Path, nargs="+", help="NAME=PATH or PATH")
    parser.add_argument("--plot", type=Path, help="also draw each trace's device idle by cause into this PNG")
    args = parser.parse_args()
    summaries = {}
    for item in map(str, args.traces):
        name, _, path = item.rpartition("=")
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            summaries[name or Path(path).name] = analyse(json.load(f))
    print(json.dumps(summaries if len(summaries) > 1 else next(iter(summaries.values())), indent=1))
    if args.plot:
        plot_idle(summaries, args.plot)


if __name__ == "__main__":
    main()
