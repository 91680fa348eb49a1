"""Cost per Mtok, monthly cost, break-even, the price file and the plot."""
from __future__ import annotations

import json

import pytest

from dspark.plan.cost import CostInputs, analyse, api_per_output, cost_curve, cost_per_million
from dspark.plan.errors import PlanError
from dspark.plan.examples import reproduce
from dspark.plan.prices import ApiPrice, api_price, gpu_hour, load_prices, write_prices

K3 = ApiPrice("kimi-k3", input=3.0, output=15.0, cached_input=0.3)


def test_public_worked_examples_are_reproduced():
    examples = reproduce()
    assert len(examples) >= 8
    for e in examples:
        assert abs(e.error_pct) < 1.5, e  # published figures are rounded to 2-3 digits


def test_cost_per_million_and_utilisation():
    assert cost_per_million(2.5, 700) == pytest.approx(0.992, abs=1e-3)
    assert cost_per_million(2.5, 700, 0.1) == pytest.approx(10 * cost_per_million(2.5, 700))
    with pytest.raises(PlanError):
        cost_per_million(2.5, 0)


def test_api_price_per_output_token_includes_its_prompt_and_cache_hits():
    assert api_per_output(K3, 3.0) == 3 * 3.0 + 15.0
    assert api_per_output(K3, 3.0, cache_hit=0.5) == pytest.approx(3 * 1.65 + 15.0)
    assert api_per_output(K3, 0.0) == 15.0


def test_break_even_and_dspark_lower_the_cost_per_token():
    inputs = CostInputs(gpu_hour=4.0, gpus=16, tok_s_without=2000, tok_s_with=5000, utilisation=0.5)
    r = analyse(inputs, K3, 3.0)
    assert r.monthly == 16 * 4.0 * 730
    assert r.per_m_with == pytest.approx(r.per_m_without * 2000 / 5000)
    assert r.break_even_total_tokens == pytest.approx(46_720 / 6.0 * 1e6)
    assert r.break_even_util_with == pytest.approx(r.break_even_util_without * 2000 / 5000)
    assert r.break_even_tok_s == pytest.approx(r.break_even_output_tokens / (730 * 3600))


def test_cost_curve_falls_with_utilisation():
    curve = cost_curve(CostInputs(2.0, 8, 1000, 3000))
    assert curve[0][0] == pytest.approx(0.05) and curve[-1][0] == pytest.approx(1.0)
    assert all(a[1] > b[1] and a[2] > b[2] for a, b in zip(curve, curve[1:]))


def test_shipped_prices_hold_kimi_k3_list_price_and_gpu_tiers():
    table = load_prices()
    assert api_price(table, "kimi-k3") == ApiPrice("kimi-k3", 3.0, 15.0, 0.3, api_price(table, "kimi-k3").source)
    assert gpu_hour(table, "h200", "tco") == 1.41
    with pytest.raises(PlanError, match="no on_demand price for mi355x"):
        gpu_hour(table, "mi355x")


def test_price_file_overrides_one_entry_and_round_trips(tmp_path):
    override = tmp_path / "mine.json"
    override.write_text(json.dumps({"gpu_hour": {"h200": {"on_demand": 2.1}}}))
    table = load_prices(override)
    assert gpu_hour(table, "h200") == 2.1 and gpu_hour(table, "h200", "tco") == 1.41
    out = write_prices(table, tmp_path / "sub" / "prices.json")
    assert json.loads(out.read_text())["gpu_hour"]["h200"]["on_demand"] == 2.1
    assert [p.name for p in out.parent.iterdir()] == ["prices.json"]  # no temp file left behind


def test_bad_price_file_is_a_plan_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(PlanError, match="JSON object"):
        load_prices(bad)
    with pytest.raises(PlanError, match="not found"):
        load_prices(tmp_path / "missing.json")
