"""The seed's four VRAM figures explained, the realistic numbers, and Kimi K3 + draft above 1.5 TB."""
from __future__ import annotations

import pytest

from dspark.plan.errors import PlanError
from dspark.plan.models import load_model
from dspark.plan.seed import SEED_FIGURES, explain_seed
from dspark.plan.vram import GB, Overheads, estimate_vram
from dspark.plan.weights import QuantPlan, plan_for


@pytest.fixture(scope="module")
def explanation():
    return explain_seed(load_model("kimi-k3-dspark"))


def test_seed_figures_are_rebuilt_within_5_percent(explanation):
    assert [r.quant for r in explanation.rows] == list(SEED_FIGURES)
    for row in explanation.rows:
        assert abs(row.error_pct) < 5, row
        assert abs(row.error_pct) < 1  # in fact within 1 % with the true parameter count
        assert abs(row.fit_gib - row.seed_figure) < 0.002  # the best fit lands on the printed digits


def test_seed_rows_are_itemised_and_kv_dominates_every_figure(explanation):
    for row in explanation.rows:
        assert row.kv == 35.84e9 and row.overhead == 2.0e9
        assert row.kv > 5 * row.weights
        assert row.kv_share > 0.8
    fp16, q2 = explanation.rows[0], explanation.rows[-1]
    assert fp16.weights - q2.weights < 4.0e9  # the whole quant ladder saves under 4 GB


def test_realistic_numbers_use_real_gguf_sizes_and_colocation(explanation):
    by_quant = {r.quant: r for r in explanation.realistic}
    assert abs(by_quant["Q8_0"].gguf_weights - 2.390) < 0.001
    assert by_quant["FP16"].standalone_1m_fp16 > 39.818  # + borrowed embed/lm_head and real overheads
    colocated = by_quant["Q8_0"].colocated_128k_fp8
    assert abs(colocated - (2.390148 + 131_072 * 17_920 / 1e9)) < 1e-3
    assert by_quant["Q8_0"].colocated_per_gpu_tp8 < 1.0


def test_kimi_k3_plus_draft_is_well_above_1_5_tb_with_an_itemised_breakdown():
    k3, draft = load_model("kimi-k3"), load_model("kimi-k3-dspark")
    native = estimate_vram(k3, draft, target_plan=plan_for(k3), context=1_048_576, kv_dtype="fp8")
    fp8 = estimate_vram(k3, draft, target_plan=plan_for(k3, "FP8"), context=131_072, kv_dtype="fp8")
    assert native.total > 1.55e12 and fp8.total > 1.5e12
    kinds = {i.kind for i in native.items}
    assert kinds == {"weights", "kv", "state", "overhead"}
    assert native.by_kind("weights") > 0.95 * native.total
    assert any("routed experts" in i.label and i.note == "stored as MXFP4" for i in native.items)


def test_draft_alone_borrows_the_targets_embeddings_unless_told_not_to():
    draft = load_model("kimi-k3-dspark")
    flat = Overheads(flat_bytes=0.0)
    alone = estimate_vram(draft=draft, draft_plan=QuantPlan("BF16"), context=0, overheads=flat)
    bare = estimate_vram(draft=draft, draft_plan=QuantPlan("BF16"), context=0, overheads=flat, borrow_embeddings=False)
    assert alone.total - bare.total == 2 * 163_840 * 7168 * 2


def test_overheads_are_stated_and_scale_with_gpus():
    spec = load_model("qwen3-8b")
    one = estimate_vram(spec, context=4096, gpus=1)
    eight = estimate_vram(spec, context=4096, gpus=8)
    assert eight.by_kind("overhead") - one.by_kind("overhead") == pytest.approx(7 * 1.0 * GB)
    assert any("CUDA context" in a for a in one.assumptions)


def test_nothing_to_size_is_a_plan_error():
    with pytest.raises(PlanError, match="nothing to size"):
        estimate_vram()
