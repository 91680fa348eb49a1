"""Each monitor alert fires when it should and stays quiet otherwise; expected τ from a draft folder."""
from __future__ import annotations

import json

import pytest

from dspark.deploy.monitor_alerts import AlertConfig, AlertConfigError, evaluate_alerts
from dspark.deploy.monitor_expected import ExpectedTauError, expected_tau_from_draft
from dspark.deploy.monitor_window import Window, combine_windows


def win(tau: float, drafts: float = 100.0, block: int = 7) -> Window:
    accepted = (tau - 1.0) * drafts
    return Window(kind="vllm", seconds=2.0, drafts=drafts, draft_tokens=drafts * block, accepted=accepted)


def codes(windows: list[Window], config: AlertConfig = AlertConfig()) -> list[str]:
    return [a.code for a in evaluate_alerts(combine_windows(windows), windows, config)]


def test_healthy_acceptance_raises_nothing():
    assert codes([win(4.5)] * 8, AlertConfig(min_tau=3.0, expected_tau=5.0)) == []


def test_tau_near_one_is_reported_as_a_layout_mismatch():
    alerts = evaluate_alerts(win(1.03), [win(1.03)], AlertConfig())
    assert [a.code for a in alerts] == ["tau-mismatch"]
    assert "layout/convention mismatch" in alerts[0].message and "1.03" in alerts[0].message


def test_mismatch_threshold_is_configurable_and_quiet_above_it():
    assert codes([win(1.3)]) == []
    assert codes([win(1.3)], AlertConfig(mismatch_tau=1.5)) == ["tau-mismatch"]


def test_tau_below_min_fires_below_and_not_at_the_threshold():
    assert codes([win(2.9)], AlertConfig(min_tau=3.0)) == ["tau-below-min"]
    assert codes([win(3.0)], AlertConfig(min_tau=3.0)) == []


def test_tau_below_expected_uses_the_margin_and_names_the_source():
    config = AlertConfig(expected_tau=5.0, expected_margin=0.8, expected_source="card.json [tau]")
    assert codes([win(4.1)], config) == []  # 4.1 ≥ 0.8 × 5
    alerts = evaluate_alerts(win(3.9), [win(3.9)], config)
    assert [a.code for a in alerts] == ["tau-below-expected"]
    assert "card.json [tau]" in alerts[0].message and "5.00" in alerts[0].message


def test_too_few_drafts_is_not_evidence():
    assert codes([win(1.0, drafts=10)]) == []
    assert codes([win(1.0, drafts=10)], AlertConfig(min_drafts=5)) == ["tau-mismatch"]


def test_acceptance_collapse_compares_recent_windows_with_earlier_ones():
    windows = [win(4.5)] * 3 + [win(2.0)] * 3
    alerts = evaluate_alerts(combine_windows(windows), windows, AlertConfig())
    assert [a.code for a in alerts] == ["acceptance-collapse"]
    assert "4.50" in alerts[0].message and "2.00" in alerts[0].message and "71%" in alerts[0].message


def test_collapse_stays_quiet_for_small_drops_short_histories_and_idle_windows():
    assert codes([win(4.5)] * 3 + [win(3.6)] * 3) == []  # τ−1 down 26 % < 30 %
    assert codes([win(4.5)] * 2 + [win(2.0)] * 3) == []  # needs 2 × collapse_windows busy windows
    idle = Window(kind="vllm", seconds=2.0, drafts=0.0, draft_tokens=0.0, accepted=0.0)
    assert codes([win(4.5)] * 3 + [idle] * 5) == []


def test_no_span_no_alerts():
    assert evaluate_alerts(None, [], AlertConfig(min_tau=2.0)) == ()
    idle = Window(kind="sglang", seconds=1.0)
    assert evaluate_alerts(idle, [idle], AlertConfig(min_tau=2.0)) == ()


def test_sglang_gauge_windows_are_judged_without_a_draft_count():
    w = Window(kind="sglang", seconds=1.0, accept_length=1.02, accept_rate=0.003, gauge_windows=1)
    assert [a.code for a in evaluate_alerts(w, [w], AlertConfig())] == ["tau-mismatch"]


@pytest.mark.parametrize("kwargs, flag", [
    ({"min_tau": 0.5}, "--min-tau"), ({"expected_margin": 1.5}, "--expected-margin"),
    ({"collapse_drop": 1.0}, "--collapse-drop"), ({"collapse_windows": 0}, "--collapse-windows"),
    ({"mismatch_tau": 0.9}, "--mismatch-tau"),
])
def test_nonsense_thresholds_are_rejected_naming_the_flag(kwargs, flag):
    with pytest.raises(AlertConfigError, match=flag):
        AlertConfig(**kwargs)


def write(folder, name, data) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_expected_tau_from_card_number(tmp_path):
    write(tmp_path, "card.json", {"expected_tau": 4.25, "tau": {"gsm8k": 3.0}})
    assert expected_tau_from_draft(tmp_path) == (4.25, f"{tmp_path / 'card.json'} [expected_tau]")


def test_expected_tau_from_card_per_suite_takes_the_lowest(tmp_path):
    write(tmp_path, "card.json", {"steps": 1000, "tau": {"humaneval": 5.4, "mtbench": 3.8, "gsm8k": 4.6}})
    assert expected_tau_from_draft(tmp_path)[0] == 3.8
    write(tmp_path, "card.json", {"measured_tau": {"humaneval": {"mean_tau": 5.1}, "mtbench": {"mean_tau": 4.0}}})
    assert expected_tau_from_draft(tmp_path)[0] == 4.0


def test_expected_tau_from_config_when_the_card_has_none(tmp_path):
    write(tmp_path, "card.json", {"data": "sharegpt"})
    write(tmp_path, "config.json", {"block_size": 7, "expected_tau": 3.3})
    tau, source = expected_tau_from_draft(tmp_path)
    assert tau == 3.3 and source.endswith("config.json [expected_tau]")


def test_draft_folder_without_tau_says_to_pass_expected_tau(tmp_path):
    write(tmp_path, "config.json", {"block_size": 7})
    with pytest.raises(ExpectedTauError, match="--expected-tau"):
        expected_tau_from_draft(tmp_path)
    with pytest.raises(ExpectedTauError, match="does not exist"):
        expected_tau_from_draft(tmp_path / "missing")
    (tmp_path / "card.json").write_text("{not json")
    with pytest.raises(ExpectedTauError, match="cannot read"):
        expected_tau_from_draft(tmp_path)
    write(tmp_path, "card.json", {"expected_tau": 0.5})
    with pytest.raises(ExpectedTauError, match="≥ 1.0"):
        expected_tau_from_draft(tmp_path)
