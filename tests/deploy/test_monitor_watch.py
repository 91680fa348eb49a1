"""The scrape loop: bounds, snapshots, failed scrapes, Ctrl-C, JSON form, and the τ sparkline view."""
from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from dspark.deploy.monitor import Monitor, snapshot_to_dict, watch
from dspark.deploy.monitor_alerts import AlertConfig
from dspark.deploy.monitor_readings import MonitorError
from dspark.deploy.monitor_view import SPARK_BLOCKS, render_snapshot, sparkline
from dspark.deploy.prom_scrape import ScrapeError

FIXTURES = Path(__file__).parent / "fixtures"


class FakeServer:
    """Hands out recorded bodies in order (the last one repeats); a body that is an exception is raised."""

    def __init__(self, bodies: list):
        self.bodies = bodies
        self.urls: list[str] = []

    def __call__(self, url: str, timeout: float) -> str:
        self.urls.append(url)
        body = self.bodies[min(len(self.urls) - 1, len(self.bodies) - 1)]
        if isinstance(body, Exception):
            raise body
        return body


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def recorded(engine: str) -> list[str]:
    return [(FIXTURES / f"monitor_{engine}_{i}.prom").read_text() for i in range(3)]


def make(bodies: list, **kwargs) -> tuple[Monitor, FakeClock, FakeServer]:
    clock, server = FakeClock(), FakeServer(bodies)
    return Monitor("http://127.0.0.1:9/", clock=clock, fetch=server, **kwargs), clock, server


def test_once_is_two_scrapes_one_interval_apart():
    monitor, clock, server = make(recorded("vllm"))
    snap = watch(monitor, interval=5.0, iterations=1, sleep=clock.sleep)
    assert server.urls == ["http://127.0.0.1:9/metrics"] * 2
    assert snap.scrapes == 2 and snap.window.seconds == 5.0
    assert snap.window.tau == pytest.approx(4.5) and snap.status == "ok"
    assert snap.window.generation_tps == pytest.approx(2257 / 5.0)


def test_iterations_bound_the_loop_and_each_window_is_reported():
    monitor, clock, _ = make(recorded("dspark"))
    seen = []
    snap = watch(monitor, interval=1.0, iterations=3, sleep=clock.sleep, on_snapshot=seen.append)
    assert len(seen) == 3 and snap.scrapes == 4
    assert snap.tau_history[:2] == pytest.approx((4.5, 4.0))
    assert snap.tau_history[2] is None  # the last body repeats: no drafts, an idle window
    assert snap.overall.tau == pytest.approx(1 + 2950 / 900)


def test_duration_bounds_the_loop():
    monitor, clock, _ = make(recorded("sglang"))
    snap = watch(monitor, interval=2.0, duration=5.0, sleep=clock.sleep)
    assert snap.scrapes == 4  # windows end at 2, 4, 6 s


def test_a_failed_scrape_while_watching_is_reported_and_the_loop_goes_on():
    bodies = recorded("vllm")
    monitor, clock, _ = make([bodies[0], ScrapeError("cannot reach it"), bodies[1]])
    seen = []
    snap = watch(monitor, interval=1.0, iterations=2, sleep=clock.sleep, on_snapshot=seen.append)
    assert seen[0].last_error == "cannot reach it" and seen[0].window is None
    assert snap.last_error is None and snap.window.seconds == 2.0 and snap.window.tau == pytest.approx(4.5)


def test_the_first_scrape_must_succeed():
    monitor, clock, _ = make([ScrapeError("cannot reach it")])
    with pytest.raises(ScrapeError):
        watch(monitor, interval=1.0, iterations=1, sleep=clock.sleep)


def test_ctrl_c_returns_the_latest_snapshot():
    monitor, clock, _ = make(recorded("vllm"))

    def sleep(seconds: float) -> None:
        if monitor.scrapes >= 2:
            raise KeyboardInterrupt
        clock.sleep(seconds)

    snap = watch(monitor, interval=1.0, sleep=sleep)
    assert snap.scrapes == 2 and snap.window.tau == pytest.approx(4.5)


def test_switching_server_kind_is_an_error():
    monitor, clock, _ = make([recorded("vllm")[0], recorded("sglang")[0]])
    with pytest.raises(MonitorError, match="changed from a vllm to a sglang"):
        watch(monitor, interval=1.0, iterations=1, sleep=clock.sleep)


@pytest.mark.parametrize("kwargs, flag", [
    ({"interval": 0.0}, "--interval"), ({"interval": 1.0, "iterations": 0}, "--iterations"),
    ({"interval": 1.0, "duration": -1.0}, "--duration"),
])
def test_bad_loop_bounds_are_rejected(kwargs, flag):
    monitor, clock, _ = make(recorded("vllm"))
    with pytest.raises(MonitorError, match=flag):
        watch(monitor, sleep=clock.sleep, **kwargs)


def test_bad_url_is_rejected_before_any_request():
    with pytest.raises(MonitorError, match="http://"):
        Monitor("127.0.0.1:8000")


def test_snapshot_dict_is_the_json_contract():
    monitor, clock, _ = make(recorded("vllm"), alert_config=AlertConfig(min_tau=5.0))
    d = snapshot_to_dict(watch(monitor, interval=1.0, iterations=1, sleep=clock.sleep))
    assert d["server"] == "vllm" and d["models"] == ["Qwen/Qwen3-8B"] and d["scrapes"] == 2
    assert d["status"] == "alert" and [a["code"] for a in d["alerts"]] == ["tau-below-min"]
    assert d["window"]["tau"] == 4.5 and d["tau_history"] == [4.5]
    assert set(d) == {"url", "server", "models", "status", "scrapes", "window", "overall", "tau_history",
                      "alerts", "last_error"}


def test_sparkline_scales_from_one_to_the_maximum_and_marks_idle_windows():
    assert sparkline([1.0, 4.0, None, 8.0]) == SPARK_BLOCKS[0] + SPARK_BLOCKS[3] + "·" + SPARK_BLOCKS[-1]
    assert sparkline([3.0] * 100, width=10) == SPARK_BLOCKS[-1] * 10
    assert sparkline([]) == "" and sparkline([None]) == "·"


def test_view_shows_tau_per_position_and_alerts():
    monitor, clock, _ = make(recorded("dspark"), alert_config=AlertConfig(min_tau=4.4))
    snap = watch(monitor, interval=1.0, iterations=2, sleep=clock.sleep)
    console = Console(width=120, record=True, file=open("/dev/null", "w"))
    console.print(render_snapshot(snap))
    text = console.export_text()
    assert "dspark monitor · dspark · smollm2-135m-instruct" in text
    assert "4.50" in text and "4.00" in text and "85 82 75 76 69 55 67 %" in text
    assert "since start" in text and "τ " + SPARK_BLOCKS[-1] + SPARK_BLOCKS[6] in text
    assert "ALERT tau-below-min" in text
