"""Windowed counter-delta math: τ, acceptance rate, per-position acceptance, throughput, restarts, SGLang gauges."""
from __future__ import annotations

from pathlib import Path

import pytest

from dspark.deploy.monitor_readings import MonitorError, Reading, read_samples
from dspark.deploy.monitor_window import combine_windows, window_between, window_to_dict
from dspark.deploy.prom_scrape import parse_samples

FIXTURES = Path(__file__).parent / "fixtures"


def recorded(engine: str, i: int, time: float) -> Reading:
    return read_samples(parse_samples((FIXTURES / f"monitor_{engine}_{i}.prom").read_text()), engine, time)


def counters(time: float, drafts: float, draft_tokens: float, accepted: float, per_pos=(), generated=None) -> Reading:
    return Reading(kind="dspark", time=time, models=("m",), drafts=drafts, draft_tokens=draft_tokens,
                   accepted=accepted, accepted_per_pos=tuple(per_pos), generation_tokens=generated)


@pytest.mark.parametrize("engine", ["vllm", "dspark"])
def test_tau_and_rates_come_from_counter_deltas(engine):
    w = window_between(recorded(engine, 0, 100.0), recorded(engine, 1, 102.0))
    # Δdrafts 500, Δdraft_tokens 3500, Δaccepted 1750 (recorded bodies)
    assert w.tau == pytest.approx(1 + 1750 / 500) == pytest.approx(4.5)
    assert w.acceptance_rate == pytest.approx(0.5)
    assert w.seconds == 2.0
    assert w.per_position_rate == pytest.approx((0.9, 0.76, 0.6, 0.48, 0.34, 0.24, 0.18))
    assert w.per_position == pytest.approx((450 / 500, 380 / 450, 300 / 380, 240 / 300, 170 / 240, 120 / 170, 90 / 120))
    assert w.generation_tps == pytest.approx((1750 + 500 + 7) / 2.0)  # accepted + bonus per draft + first tokens
    assert w.requests_per_s == pytest.approx(7 / 2.0)


def test_overall_span_sums_the_windows():
    r0, r1, r2 = (recorded("vllm", i, 10.0 * i) for i in range(3))
    overall = combine_windows([window_between(r0, r1), window_between(r1, r2)])
    assert overall.tau == pytest.approx(1 + 2950 / 900)
    assert overall.acceptance_rate == pytest.approx(2950 / 6300)
    assert overall.seconds == 20.0
    assert overall.per_position[0] == pytest.approx(790 / 900)
    assert window_between(r0, r2).tau == pytest.approx(overall.tau)


def test_window_without_drafts_has_no_tau():
    w = window_between(counters(0, 100, 700, 300), counters(1, 100, 700, 300))
    assert w.tau is None and w.acceptance_rate is None and w.per_position == ()


def test_a_counter_that_goes_down_is_a_restart_and_counts_from_zero():
    w = window_between(counters(0, 1000, 7000, 3000, [900, 800]), counters(1, 40, 280, 120, [35, 30]))
    assert w.restarted
    assert (w.drafts, w.accepted) == (40, 120)
    assert w.tau == pytest.approx(4.0)
    assert w.accepted_per_pos == (35, 30)


def test_tau_equal_one_when_nothing_is_accepted():
    w = window_between(counters(0, 0, 0, 0, [0, 0]), counters(1, 200, 1400, 0, [0, 0]))
    assert w.tau == 1.0 and w.acceptance_rate == 0.0
    assert w.per_position == (0.0, None)  # position 1 was never reached


def test_sglang_window_uses_the_gauges_of_the_later_scrape():
    w = window_between(recorded("sglang", 0, 0.0), recorded("sglang", 1, 4.0))
    assert (w.tau, w.acceptance_rate) == (4.12, 0.446)
    assert w.generation_tps == pytest.approx((12600 - 10000) / 4.0)
    assert w.per_position == () and w.drafts is None


def test_sglang_gauges_are_ignored_while_no_tokens_are_generated():
    busy = recorded("sglang", 1, 0.0)
    idle = window_between(busy, Reading(**{**busy.__dict__, "time": 5.0}))
    assert idle.tau is None and idle.acceptance_rate is None
    assert idle.generation_tps == 0.0


def test_sglang_overall_averages_busy_windows_and_is_exact_incrementally():
    r = [recorded("sglang", i, float(i)) for i in range(3)]
    idle = window_between(r[2], Reading(**{**r[2].__dict__, "time": 3.0}))
    windows = [window_between(r[0], r[1]), window_between(r[1], r[2]), idle]
    overall = combine_windows(windows)
    assert overall.tau == pytest.approx((4.12 + 4.40) / 2)
    running = windows[0]
    for w in windows[1:]:
        running = combine_windows([running, w])
    assert running.tau == pytest.approx(overall.tau)
    assert running.gauge_windows == 2


def test_window_between_two_servers_is_refused():
    with pytest.raises(MonitorError, match="changed from vllm to sglang"):
        window_between(recorded("vllm", 0, 0.0), recorded("sglang", 1, 1.0))


def test_window_dict_has_the_derived_metrics():
    d = window_to_dict(window_between(recorded("dspark", 1, 0.0), recorded("dspark", 2, 2.0)))
    assert d["tau"] == 4.0 and d["acceptance_rate"] == pytest.approx(1200 / 2800, abs=1e-6)
    assert d["per_position_acceptance"][0] == 0.85 and len(d["per_position_rate"]) == 7
    assert d["drafts"] == 400 and d["restarted"] is False
    assert combine_windows([]) is None
