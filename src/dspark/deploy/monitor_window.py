"""Windowed counter-delta math: what happened between two scrapes, and the metrics derived from it.

A `Window` holds the deltas of every counter between two `Reading`s (Prometheus `increase()` semantics: a
counter that went down means the server restarted, and the new value is the whole increase) plus the
gauges of the later scrape. Derived metrics follow the engines' own formulas (vLLM `SpecDecodingProm`
docstring and `SpecDecodingLogging.log`):

- mean acceptance length τ = 1 + Δaccepted / Δdrafts (bonus token included; 1.0 = nothing accepted);
- acceptance rate = Δaccepted / Δdraft_tokens (bonus excluded);
- per-position rate k = Δaccepted_per_pos[k] / Δdrafts (vLLM's "Per-position acceptance rate");
- per-position conditional acceptance k = Δaccepted_per_pos[k] / Δaccepted_per_pos[k−1]
  (position 0: / Δdrafts), i.e. P(slot k accepted | slots < k accepted).

SGLang has no spec-decode counters: τ and the rate are its window gauges (already averaged over the last
`--decode-log-interval` decode steps); they are dropped for a window where `sglang:generation_tokens_total`
did not move, since a gauge keeps its last value while the server is idle.
No HTTP, no alerts, no printing here.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.deploy.monitor_readings import MonitorError, Reading


@dataclass(frozen=True)
class Window:
    """Counter deltas over `seconds` (None = the server has no such counter) and the gauges at its end."""

    kind: str
    seconds: float
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    accepted_per_pos: tuple[float, ...] = ()
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    requests: float | None = None
    ttft_sum: float | None = None
    ttft_count: float | None = None
    itl_sum: float | None = None
    itl_count: float | None = None
    queue: float | None = None
    running: float | None = None
    accept_length: float | None = None  # SGLang gauges (None while idle)
    accept_rate: float | None = None
    gen_throughput: float | None = None
    gauge_windows: int = 0  # how many busy SGLang windows the gauges above average over
    restarted: bool = False  # a counter went down: the server restarted inside this window

    @property
    def tau(self) -> float | None:
        """Mean acceptance length (bonus included); None when no draft was verified in the window."""
        if self.drafts is not None:
            return 1.0 + self.accepted / self.drafts if self.drafts > 0 and self.accepted is not None else None
        return self.accept_length

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted drafts / proposed drafts (bonus excluded)."""
        if self.draft_tokens is not None:
            return self.accepted / self.draft_tokens if self.draft_tokens > 0 and self.accepted is not None else None
        return self.accept_rate if self.drafts is None else None

    @property
    def per_position_rate(self) -> tuple[float, ...]:
        """Fraction of drafts whose position k was accepted (unconditional), k = 0 … γ−1."""
        if not self.drafts:
            return ()
        return tuple(count / self.drafts for count in self.accepted_per_pos)

    @property
    def per_position(self) -> tuple[float | None, ...]:
        """P(position k accepted | positions < k accepted); None where no draft reached position k."""
        if not self.drafts:
            return ()
        out: list[float | None] = []
        previous = self.drafts
        for count in self.accepted_per_pos:
            out.append(count / previous if previous > 0 else None)
            previous = count
        return tuple(out)

    @property
    def generation_tps(self) -> float | None:
        """Generated tokens per second (from the counter; SGLang without it: its gen_throughput gauge)."""
        if self.generation_tokens is not None:
            return self.generation_tokens / self.seconds if self.seconds > 0 else None
        return self.gen_throughput

    @property
    def prompt_tps(self) -> float | None:
        return _per_second(self.prompt_tokens, self.seconds)

    @property
    def requests_per_s(self) -> float | None:
        return _per_second(self.requests, self.seconds)

    @property
    def ttft_mean_s(self) -> float | None:
        return _ratio(self.ttft_sum, self.ttft_count)

    @property
    def itl_mean_s(self) -> float | None:
        return _ratio(self.itl_sum, self.itl_count)


# Reading / Window fields that are monotonic counters (windows hold their increase).
_COUNTERS = ("drafts", "draft_tokens", "accepted", "generation_tokens", "prompt_tokens", "requests",
             "ttft_sum", "ttft_count", "itl_sum", "itl_count")


def _per_second(count: float | None, seconds: float) -> float | None:
    return count / seconds if count is not None and seconds > 0 else None


def _ratio(total: float | None, count: float | None) -> float | None:
    return total / count if total is not None and count else None


def _increase(before: float | None, after: float | None) -> tuple[float | None, bool]:
    """(increase, restarted) of a counter, Prometheus style: a drop means it restarted from zero."""
    if before is None or after is None:
        return (None, False) if after is None else (after, False)
    return (after, True) if after < before else (after - before, False)


def window_between(prev: Reading, cur: Reading) -> Window:
    """The window from scrape `prev` to scrape `cur` of the same server."""
    if prev.kind != cur.kind:
        raise MonitorError(f"the server changed from {prev.kind} to {cur.kind} between two scrapes; restart the monitor")
    restarted = False
    deltas: dict[str, float | None] = {}
    for name in _COUNTERS:
        deltas[name], reset = _increase(getattr(prev, name), getattr(cur, name))
        restarted = restarted or reset
    per_pos = []
    for k, after in enumerate(cur.accepted_per_pos):
        before = prev.accepted_per_pos[k] if k < len(prev.accepted_per_pos) else 0.0
        increase, reset = _increase(before, after)
        per_pos.append(increase)
        restarted = restarted or reset
    idle = deltas["generation_tokens"] == 0
    gauges_live = cur.kind == "sglang" and not idle
    return Window(
        kind=cur.kind,
        seconds=max(cur.time - prev.time, 0.0),
        accepted_per_pos=tuple(per_pos),
        queue=cur.queue,
        running=cur.running,
        accept_length=cur.accept_length if gauges_live else None,
        accept_rate=cur.accept_rate if gauges_live else None,
        gen_throughput=cur.gen_throughput if gauges_live else None,
        gauge_windows=1 if gauges_live and cur.accept_length is not None else 0,
        restarted=restarted,
        **deltas,
    )


def _sum(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(sum(present)) if present else None


def _weighted_mean(pairs: list[tuple[float | None, int]]) -> float | None:
    present = [(v, n) for v, n in pairs if v is not None and n > 0]
    total = sum(n for _, n in present)
    return sum(v * n for v, n in present) / total if total else None


def combine_windows(windows: list[Window]) -> Window | None:
    """One window spanning consecutive `windows`: counters summed, SGLang gauges averaged over busy windows.

    Exact when applied incrementally (`combine_windows([overall, latest])`), since gauge averages are
    weighted by `gauge_windows`.
    """
    if not windows:
        return None
    width = max(len(w.accepted_per_pos) for w in windows)
    per_pos = tuple(float(sum(w.accepted_per_pos[k] for w in windows if k < len(w.accepted_per_pos)))
                    for k in range(width))
    summed = {name: _sum([getattr(w, name) for w in windows]) for name in _COUNTERS}
    return Window(
        kind=windows[-1].kind,
        seconds=sum(w.seconds for w in windows),
        accepted_per_pos=per_pos,
        queue=windows[-1].queue,
        running=windows[-1].running,
        accept_length=_weighted_mean([(w.accept_length, w.gauge_windows) for w in windows]),
        accept_rate=_weighted_mean([(w.accept_rate, w.gauge_windows) for w in windows]),
        gen_throughput=_weighted_mean([(w.gen_throughput, w.gauge_windows) for w in windows]),
        gauge_windows=sum(w.gauge_windows for w in windows),
        restarted=any(w.restarted for w in windows),
        **summed,
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def window_to_dict(window: Window) -> dict:
    """The derived metrics of a window, JSON-ready (None → null)."""
    return {
        "seconds": _rounded(window.seconds),
        "tau": _rounded(window.tau),
        "acceptance_rate": _rounded(window.acceptance_rate),
        "per_position_acceptance": [_rounded(v) for v in window.per_position],
        "per_position_rate": [_rounded(v) for v in window.per_position_rate],
        "drafts": window.drafts,
        "draft_tokens": window.draft_tokens,
        "accepted": window.accepted,
        "generation_tokens_per_s": _rounded(window.generation_tps),
        "prompt_tokens_per_s": _rounded(window.prompt_tps),
        "requests_per_s": _rounded(window.requests_per_s),
        "ttft_mean_s": _rounded(window.ttft_mean_s),
        "itl_mean_s": _rounded(window.itl_mean_s),
        "queue": window.queue,
        "running": window.running,
        "restarted": window.restarted,
    }
