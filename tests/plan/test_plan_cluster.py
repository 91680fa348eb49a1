"""Layout search for Kimi K3 + its draft: node counts, per-GPU memory, engine flags."""
from __future__ import annotations

import pytest

from dspark.deploy.launch_commands import plan_command
from dspark.plan.cluster import ClusterRequest, compare, pick, search
from dspark.plan.errors import PlanError
from dspark.plan.gpus import get_gpu
from dspark.plan.layout import Layout, kv_per_gpu
from dspark.plan.models import load_model
from dspark.plan.weights import plan_for


@pytest.fixture(scope="module")
def request_k3():
    k3, draft = load_model("kimi-k3"), load_model("kimi-k3-dspark")
    return ClusterRequest(k3, plan_for(k3), draft, plan_for(draft), context=131_072, concurrency=16)


@pytest.fixture(scope="module")
def choices(request_k3):
    return {c.gpu.key: c for c in compare(request_k3)}


def test_kimi_k3_needs_two_8xh200_nodes_or_one_8xb300_node(choices):
    assert (choices["h200"].best.layout.nodes, choices["h200"].best.layout.gpus) == (2, 16)
    assert (choices["b300"].best.layout.nodes, choices["b300"].best.layout.gpus) == (1, 8)
    assert choices["b200"].best.layout.gpus == 16  # 8 x 180 GB is short of ~1.56 TB
    assert choices["gb200"].best.layout.gpus == 16
    assert choices["h100"].best.layout.gpus > 16
    assert choices["h200"].min_gpus_for_weights > 8  # weights alone overflow one node


def test_best_h200_layout_fits_and_its_memory_adds_up(choices, request_k3):
    best = choices["h200"].best
    m = best.memory
    assert m.fits and m.total <= 141e9 * 0.90
    assert m.total == pytest.approx(m.target_weights + m.draft_weights + m.kv + m.state + m.draft_kv + m.overhead)
    assert m.target_weights == pytest.approx(1559.3e9 / 16, rel=0.01)


def test_mla_kv_is_replicated_over_tp_unless_decode_context_parallel_shards_it(request_k3):
    k3, h200 = request_k3.target, get_gpu("h200")
    tp16, _ = kv_per_gpu(k3, "fp8", 131_072, 16, Layout(h200, tp=16))
    dcp8, _ = kv_per_gpu(k3, "fp8", 131_072, 16, Layout(h200, tp=16, dcp=8))
    assert tp16 == 16 * 131_072 * 13_824  # every rank holds every sequence's latent
    assert dcp8 == tp16 / 8


def test_dp_attention_splits_sequences_and_replicates_attention_weights(request_k3):
    b300 = get_gpu("b300")
    tp, _ = kv_per_gpu(request_k3.target, "fp8", 131_072, 16, Layout(b300, tp=8))
    dep, _ = kv_per_gpu(request_k3.target, "fp8", 131_072, 16, Layout(b300, tp=8, ep=8, attn_dp=8))
    assert dep == tp / 8


def test_sglang_flags_and_pipeline_parallel_refusal(request_k3):
    ranked = search(request_k3, get_gpu("h200"))
    best = ranked[0]
    flags = plan_command(best, request_k3)  # the launch-command writer `dspark launch` uses
    assert "--tp-size 16" in flags and "--dcp-size 8" in flags and "--nnodes 2" in flags
    assert "--speculative-algorithm DSPARK" in flags and "--speculative-dspark-block-size 7" in flags
    assert "--trust-remote-code" in flags and "--kv-cache-dtype fp8_e4m3" in flags
    pp = [c for c in ranked if c.layout.pp > 1]
    assert pp and all("SGLang rejects pipeline parallelism" in c.blocked for c in pp)
    assert all(ranked.index(c) > ranked.index(best) for c in pp)


def test_vllm_flags_use_vllm_spellings_and_warn_about_pp(request_k3):
    req = ClusterRequest(request_k3.target, request_k3.target_plan, request_k3.draft, request_k3.draft_plan,
                         engine="vllm")
    ranked = search(req, get_gpu("h200"))
    flags = plan_command(ranked[0], req)
    assert "--tensor-parallel-size 16" in flags and '"method": "dspark"' in flags
    pp = next(c for c in ranked if c.layout.pp > 1)
    assert not pp.blocked and any("not composable" in w for w in pp.warnings)
    assert "--pipeline-parallel-size 2" in plan_command(pp, req)


def test_layouts_respect_head_and_expert_divisibility(request_k3):
    for cand in search(request_k3, get_gpu("gb200")):
        assert 896 % cand.layout.tp == 0 and 96 % cand.layout.attn_tp == 0


def test_nothing_fits_is_a_plan_error_that_says_what_to_try(request_k3):
    with pytest.raises(PlanError, match="try more GPUs"):
        pick(request_k3, get_gpu("h100"), gpus=8)


def test_small_dense_model_fits_one_gpu():
    q = load_model("qwen3-8b")
    best = pick(ClusterRequest(q, plan_for(q), context=32_768, concurrency=4), get_gpu("h100"))
    assert best.layout.gpus == 1 and best.layout.name == "TP1"
