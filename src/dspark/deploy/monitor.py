"""Watch the acceptance of a live dspark, vLLM or SGLang server through its Prometheus `/metrics`.

`Monitor` scrapes one URL (via `prom_scrape`), detects the server kind on the first scrape, turns each
pair of consecutive scrapes into a `Window` and keeps the span since the first scrape (`overall`);
`snapshot()` bundles the latest window, the overall span, the τ history and the alerts. `watch()` is the
bounded scrape loop (an initial scrape, then one scrape every `interval` seconds), so a single snapshot
needs two scrapes `interval` apart: counters only say something as deltas.

No printing and no argument parsing here (see `cli/monitor.py` and `monitor_view.py`).
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from dspark.deploy.monitor_alerts import Alert, AlertConfig, evaluate_alerts
from dspark.deploy.monitor_readings import MonitorError, Reading, detect_server_kind, read_samples
from dspark.deploy.monitor_window import Window, combine_windows, window_between, window_to_dict
from dspark.deploy.prom_scrape import ScrapeError, fetch_metrics_text, metrics_url, parse_samples


@dataclass(frozen=True)
class Snapshot:
    """What the monitor knows after `scrapes` scrapes of `url`."""

    url: str
    kind: str
    models: tuple[str, ...]
    scrapes: int
    window: Window | None  # the latest interval
    overall: Window | None  # everything since the first scrape
    tau_history: tuple[float | None, ...]  # τ of each kept window, oldest first (None = idle)
    alerts: tuple[Alert, ...]
    last_error: str | None = None  # the latest failed scrape, while watching

    @property
    def status(self) -> str:
        """"warming" (one scrape), "idle" (no speculative traffic yet), "alert" or "ok"."""
        if self.overall is None:
            return "warming"
        if self.alerts:
            return "alert"
        return "idle" if self.overall.tau is None else "ok"


class Monitor:
    """Scrapes one server and accumulates windows; `clock` and `fetch` are injectable for tests."""

    def __init__(
        self,
        url: str,
        *,
        alert_config: AlertConfig | None = None,
        timeout: float = 5.0,
        model: str | None = None,
        history: int = 600,
        clock: Callable[[], float] = time.monotonic,
        fetch: Callable[[str, float], str] = fetch_metrics_text,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise MonitorError(f"URL must start with http:// or https:// (e.g. http://127.0.0.1:8000), got {url!r}")
        if timeout <= 0:
            raise MonitorError("--timeout must be > 0 seconds")
        if history < 1:
            raise MonitorError("history must keep at least one window")
        self.url = metrics_url(url)
        self.alert_config = alert_config or AlertConfig()
        self.timeout = timeout
        self.model = model
        self.clock = clock
        self._fetch = fetch
        self.kind: str | None = None
        self.scrapes = 0
        self.last: Reading | None = None
        self.windows: deque[Window] = deque(maxlen=history)
        self.overall: Window | None = None
        self.last_error: str | None = None

    def scrape(self) -> Window | None:
        """Scrape once; return the window since the previous scrape (None on the first)."""
        samples = parse_samples(self._fetch(self.url, self.timeout))
        kind = detect_server_kind(samples)
        if self.kind is not None and kind != self.kind:
            raise MonitorError(f"{self.url} changed from a {self.kind} to a {kind} server; restart the monitor")
        reading = read_samples(samples, kind, self.clock(), self.model)
        self.kind = kind
        self.scrapes += 1
        self.last_error = None
        previous, self.last = self.last, reading
        if previous is None:
            return None
        window = window_between(previous, reading)
        self.windows.append(window)
        self.overall = combine_windows([self.overall, window] if self.overall else [window])
        return window

    def snapshot(self) -> Snapshot:
        if self.kind is None or self.last is None:
            raise MonitorError(f"{self.url} has not been scraped yet")
        windows = list(self.windows)
        return Snapshot(
            url=self.url,
            kind=self.kind,
            models=self.last.models,
            scrapes=self.scrapes,
            window=windows[-1] if windows else None,
            overall=self.overall,
            tau_history=tuple(w.tau for w in windows),
            alerts=evaluate_alerts(self.overall, windows, self.alert_config),
            last_error=self.last_error,
        )


def watch(
    monitor: Monitor,
    *,
    interval: float,
    iterations: int | None = None,
    duration: float | None = None,
    on_snapshot: Callable[[Snapshot], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Snapshot:
    """Scrape now, then every `interval` s until `iterations` windows or `duration` s (unbounded if neither).

    The first scrape must succeed (wrong URL, not a server, no speculative metrics → MonitorError /
    ScrapeError); later failed scrapes are reported in `Snapshot.last_error` and the loop goes on.
    Stops on KeyboardInterrupt after the first scrape and returns the latest snapshot.
    """
    if interval <= 0:
        raise MonitorError("--interval must be > 0 seconds")
    if iterations is not None and iterations < 1:
        raise MonitorError("--iterations must be ≥ 1")
    if duration is not None and duration <= 0:
        raise MonitorError("--duration must be > 0 seconds")
    monitor.scrape()
    start = monitor.clock()
    done = 0
    try:
        while True:
            sleep(interval)
            try:
                monitor.scrape()
            except ScrapeError as exc:
                monitor.last_error = str(exc)
            done += 1
            if on_snapshot is not None:
                on_snapshot(monitor.snapshot())
            if iterations is not None and done >= iterations:
                break
            if duration is not None and monitor.clock() - start >= duration:
                break
    except KeyboardInterrupt:
        pass
    return monitor.snapshot()


def snapshot_to_dict(snapshot: Snapshot) -> dict:
    """JSON-ready form of a snapshot (the `--json` output)."""
    return {
        "url": snapshot.url,
        "server": snapshot.kind,
        "models": list(snapshot.models),
        "status": snapshot.status,
        "scrapes": snapshot.scrapes,
        "window": window_to_dict(snapshot.window) if snapshot.window else None,
        "overall": window_to_dict(snapshot.overall) if snapshot.overall else None,
        "tau_history": [None if t is None else round(t, 6) for t in snapshot.tau_history],
        "alerts": [{"code": a.code, "message": a.message} for a in snapshot.alerts],
        "last_error": snapshot.last_error,
    }
