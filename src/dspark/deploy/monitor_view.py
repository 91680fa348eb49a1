"""The monitor's terminal view: a rich table of the latest window and the whole span, a τ sparkline, alerts.

Only formatting: it takes a `Snapshot` and returns rich renderables or strings; it never scrapes.
"""
from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from dspark.deploy.monitor import Snapshot
from dspark.deploy.monitor_window import Window

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
IDLE_MARK = "·"


def sparkline(values: Sequence[float | None], width: int = 60, low: float = 1.0) -> str:
    """The last `width` values as block characters scaled from `low` to their maximum; None → `·` (idle)."""
    shown = list(values)[-width:] if width > 0 else []
    present = [v for v in shown if v is not None]
    high = max(present, default=low)
    span = high - low
    out = []
    for value in shown:
        if value is None:
            out.append(IDLE_MARK)
            continue
        level = 0 if span <= 0 else round((min(max(value, low), high) - low) / span * (len(SPARK_BLOCKS) - 1))
        out.append(SPARK_BLOCKS[level])
    return "".join(out)


def _num(value: float | None, fmt: str = "{:.2f}", unit: str = "") -> str:
    return "–" if value is None else fmt.format(value) + unit


def _per_position(window: Window | None) -> str:
    """Conditional acceptance per draft position in percent, e.g. `90 84 79 80 71 71 75 %`."""
    if window is None or not window.per_position:
        return "–"
    return " ".join("–" if v is None else f"{v * 100:.0f}" for v in window.per_position) + " %"


def _rows(window: Window | None) -> list[str]:
    w = window
    if w is None:
        return ["–"] * 10
    drafts = "–" if w.drafts is None else f"{w.drafts:.0f}"
    return [
        _num(w.tau) if w.tau is not None else "idle",
        _num(w.acceptance_rate, "{:.1%}"),
        _per_position(w),
        drafts,
        _num(w.generation_tps, "{:.1f}"),
        _num(w.prompt_tps, "{:.1f}"),
        _num(w.requests_per_s, "{:.2f}"),
        _num(None if w.ttft_mean_s is None else w.ttft_mean_s * 1e3, "{:.1f}", " ms"),
        _num(None if w.itl_mean_s is None else w.itl_mean_s * 1e3, "{:.2f}", " ms"),
        f"{_num(w.queue, '{:.0f}')} / {_num(w.running, '{:.0f}')}",
    ]


_LABELS = [
    "mean τ (accepted + 1)",
    "acceptance rate",
    "acceptance by position",
    "drafts verified",
    "generation tok/s",
    "prompt tok/s",
    "requests/s",
    "mean TTFT",
    "mean ITL",
    "queued / running",
]


def render_snapshot(snapshot: Snapshot) -> Group:
    """Table + sparkline + alerts for one snapshot."""
    models = ", ".join(snapshot.models) or "?"
    table = Table(title=f"dspark monitor · {snapshot.kind} · {models}", title_justify="left")
    table.add_column("metric")
    columns = [("last window", snapshot.window)]
    if len(snapshot.tau_history) > 1:  # with one window, "since start" is the same span
        columns.append(("since start", snapshot.overall))
    for title, window in columns:
        table.add_column(f"{title} ({_num(window.seconds if window else None, '{:.1f}', ' s')})", justify="right")
    for label, *cells in zip(_LABELS, *(_rows(window) for _, window in columns)):
        table.add_row(label, *cells)
    taus = [t for t in snapshot.tau_history if t is not None]
    spark = Text("τ ")
    spark.append(sparkline(snapshot.tau_history) or IDLE_MARK, style="cyan")
    if taus:
        spark.append(f"  min {min(taus):.2f} · max {max(taus):.2f} · last {_num(snapshot.tau_history[-1])}")
    parts: list = [Text(snapshot.url, style="dim"), table, spark]
    if snapshot.kind == "sglang":
        parts.append(Text("SGLang: τ and rate are its window gauges (last --decode-log-interval decode steps); "
                          "no per-position counters.", style="dim"))
    if snapshot.last_error:
        parts.append(Text(f"last scrape failed: {snapshot.last_error}", style="yellow"))
    if snapshot.alerts:
        for alert in snapshot.alerts:
            parts.append(Text(f"ALERT {alert.code}: {alert.message}", style="bold red"))
    else:
        parts.append(Text(_status_line(snapshot), style="green" if snapshot.status == "ok" else "yellow"))
    return Group(*parts)


def _status_line(snapshot: Snapshot) -> str:
    return {
        "ok": "no alerts",
        "idle": "no speculative decoding traffic yet: nothing to judge",
        "warming": "one scrape so far: waiting for the next to compute deltas",
    }.get(snapshot.status, snapshot.status)
