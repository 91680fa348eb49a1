"""PNG plots for the benchmark report: τ histogram, per-position acceptance, speedup by suite, throughput vs
concurrency. Each function draws what its data holds and returns None when there is nothing to draw.

matplotlib is imported inside the functions (Agg canvas, no pyplot, no display); files are written atomically.
Input rows come already labelled by run (see report.py); nothing here reads files or computes statistics.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Sequence

from dspark.bench.errors import BenchError
from dspark.files import write_bytes
from dspark.bench.results import AcceptanceRow

Labelled = tuple[str, AcceptanceRow]  # (series label, row)
Speed = tuple[str, float, Any]  # (series label, speedup or None, ThroughputRow)


def _figure(panels: int) -> tuple[Any, list[Any]]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise BenchError("the report's plots need matplotlib: pip install 'dspark[plot]'") from None
    fig = Figure(figsize=(6.4 * panels, 4.4), dpi=110)
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(1, panels, i + 1) for i in range(panels)]


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return write_bytes(path, buffer.getvalue())


def _by_temperature(rows: Sequence[Labelled]) -> dict[float, list[Labelled]]:
    groups: dict[float, list[Labelled]] = {}
    for label, row in rows:
        groups.setdefault(row.temperature, []).append((label, row))
    return dict(sorted(groups.items()))


def plot_tau_histogram(rows: Sequence[Labelled], path: Path) -> Path | None:
    """Share of verify rounds with each τ = 1 … γ+1, grouped bars per series, one panel per temperature."""
    rows = [(label, row) for label, row in rows if row.rounds]
    if not rows:
        return None
    groups = _by_temperature(rows)
    fig, axes = _figure(len(groups))
    for ax, (temperature, series) in zip(axes, groups.items()):
        width = 0.8 / len(series)
        for i, (label, row) in enumerate(series):
            counts = row.histogram
            xs = [tau + (i - (len(series) - 1) / 2) * width for tau in range(1, len(counts) + 1)]
            ax.bar(xs, [c / row.rounds for c in counts], width=width, label=f"{label} (mean τ {row.mean_tau:.2f})")
        ax.set_xlabel("acceptance length τ = accepted + 1")
        ax.set_ylabel("share of verify rounds")
        ax.set_title(f"τ histogram, T = {temperature:g}", fontsize=10)
        ax.grid(True, axis="y", alpha=0.25)
        ax.legend(frameon=False, fontsize=7)
    return _save(fig, path)


def plot_per_position(rows: Sequence[Labelled], path: Path) -> Path | None:
    """Conditional acceptance P(slot k accepted | earlier slots accepted), one line per series and panel per T."""
    rows = [(label, row) for label, row in rows if row.rounds]
    if not rows:
        return None
    groups = _by_temperature(rows)
    fig, axes = _figure(len(groups))
    for ax, (temperature, series) in zip(axes, groups.items()):
        for label, row in series:
            points = [(k + 1, v) for k, v in enumerate(row.reached_per_position) if v is not None]
            ax.plot([k for k, _ in points], [v for _, v in points], marker="o", label=label)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("draft position k")
        ax.set_ylabel("conditional acceptance")
        ax.set_title(f"per-position acceptance, T = {temperature:g}", fontsize=10)
        ax.grid(True, alpha=0.25)
        ax.legend(frameon=False, fontsize=7)
    return _save(fig, path)


def plot_speedup_by_suite(speeds: Sequence[Speed], path: Path) -> Path | None:
    """Speedup over the same run's baseline, bars per suite, at the lowest concurrency measured."""
    speeds = [(label, value, row) for label, value, row in speeds if value is not None and row.method != row.baseline]
    if not speeds:
        return None
    concurrency = min(row.concurrency for _, _, row in speeds)
    speeds = [s for s in speeds if s[2].concurrency == concurrency]
    suites = list(dict.fromkeys(row.suite for _, _, row in speeds))
    series = list(dict.fromkeys(_series(label, row) for label, _, row in speeds))
    fig, (ax,) = _figure(1)
    width = 0.8 / len(series)
    for i, name in enumerate(series):
        points = {row.suite: value for label, value, row in speeds if _series(label, row) == name}
        xs = [j + (i - (len(series) - 1) / 2) * width for j, suite in enumerate(suites) if suite in points]
        ax.bar(xs, [points[s] for s in suites if s in points], width=width, label=name)
    ax.axhline(1.0, color="#888888", linewidth=1)
    ax.set_xticks(range(len(suites)), suites)
    ax.set_ylabel("speedup over baseline (same run)")
    ax.set_title(f"speedup by suite, concurrency {concurrency}", fontsize=10)
    ax.grid(True, axis="y", alpha=0.25)
    ax.legend(frameon=False, fontsize=7)
    return _save(fig, path)


def plot_throughput_vs_concurrency(speeds: Sequence[Speed], path: Path) -> Path | None:
    """Output tokens/s (pooled over suites) against concurrency, one line per method, one panel per T."""
    if not speeds:
        return None
    pooled: dict[tuple[float, str, int], list[float]] = {}
    for label, _, row in speeds:
        tokens_seconds = pooled.setdefault((row.temperature, _series(label, row), row.concurrency), [0.0, 0.0])
        tokens_seconds[0] += row.new_tokens
        tokens_seconds[1] += row.seconds
    temperatures = sorted({t for t, _, _ in pooled})
    fig, axes = _figure(len(temperatures))
    for ax, temperature in zip(axes, temperatures):
        for name in dict.fromkeys(n for t, n, _ in pooled if t == temperature):
            points = sorted((c, tok / sec) for (t, n, c), (tok, sec) in pooled.items()
                            if t == temperature and n == name and sec > 0)
            ax.plot([c for c, _ in points], [v for _, v in points], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ticks = sorted({c for t, _, c in pooled if t == temperature})
        ax.set_xticks(ticks, [str(c) for c in ticks])
        ax.minorticks_off()
        ax.set_xlabel("concurrent sequences")
        ax.set_ylabel("output tokens / s")
        ax.set_title(f"throughput vs concurrency, T = {temperature:g}", fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(frameon=False, fontsize=7)
    return _save(fig, path)


def _series(label: str, row: Any) -> str:
    scheduler = "" if row.scheduler == "none" else f" +{row.scheduler}"
    return f"{label}: {row.method}{scheduler}" if label else f"{row.method}{scheduler}"
