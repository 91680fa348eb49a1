"""Decode speed model against vLLM's published Kimi K3 numbers (the seed's ~118 -> ~370 tok/s)."""
from __future__ import annotations

import pytest

from dspark.plan.errors import PlanError
from dspark.plan.gpus import get_gpu
from dspark.plan.layout import Layout
from dspark.plan.models import load_model
from dspark.plan.throughput import distinct_experts, estimate_decode, seed_decode_check
from dspark.plan.weights import plan_for


@pytest.fixture(scope="module")
def k3_pair():
    k3, draft = load_model("kimi-k3"), load_model("kimi-k3-dspark")
    return k3, plan_for(k3), draft, plan_for(draft)


def test_calibration_points_are_reproduced_and_dspark_is_predicted_within_15_percent(k3_pair):
    checks = seed_decode_check(*k3_pair, get_gpu("gb300"))
    for c in checks:
        assert c.estimate.ar_tok_s == pytest.approx(c.measured_ar, rel=0.01)
        assert c.estimate.spec_tok_s == pytest.approx(c.measured_spec, rel=0.15)
        assert 3.5 < c.implied_tau < 4.5  # the seed's 370 needs tau ~4 under this model
    tp16 = checks[1]
    assert tp16.estimate.speedup == pytest.approx(370 / 118, rel=0.1)


def test_single_stream_decode_is_latency_bound_far_below_the_bandwidth_roofline(k3_pair):
    k3, plan, _, _ = k3_pair
    est = estimate_decode(k3, plan, Layout(get_gpu("gb300"), tp=16), context=8192)
    assert est.ar_bound == "latency"
    assert est.roofline_tok_s > 5 * est.ar_tok_s


def test_dspark_gain_shrinks_as_concurrency_grows(k3_pair):
    k3, plan, draft, dplan = k3_pair
    layout = Layout(get_gpu("b300"), tp=8)
    low = estimate_decode(k3, plan, layout, draft=draft, draft_plan=dplan, concurrency=1, context=8192)
    high = estimate_decode(k3, plan, layout, draft=draft, draft_plan=dplan, concurrency=1024, context=8192)
    assert low.speedup > high.speedup
    assert high.spec_total_tok_s > low.spec_total_tok_s


def test_more_tokens_hit_more_experts_up_to_all_of_them():
    assert distinct_experts(896, 16, 1) == pytest.approx(16)
    assert distinct_experts(896, 16, 8) == pytest.approx(896 * (1 - (1 - 16 / 896) ** 8))
    assert distinct_experts(896, 16, 10_000) == pytest.approx(896)


def test_tau_outside_one_to_gamma_plus_one_is_rejected(k3_pair):
    k3, plan, draft, dplan = k3_pair
    with pytest.raises(PlanError, match="tau"):
        estimate_decode(k3, plan, Layout(get_gpu("b300"), tp=8), draft=draft, draft_plan=dplan, tau=9.0)
