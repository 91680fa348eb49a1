"""Parameter counts and weight bytes of the presets against published numbers."""
from __future__ import annotations

import pytest

from dspark.plan.models import load_model
from dspark.plan.quant import QUANT_TYPES, quant_type
from dspark.plan.spec import SMALL
from dspark.plan.weights import QuantPlan, plan_for, weight_bytes

GiB = 2**30


def test_kimi_k3_dspark_parameter_count_matches_its_arithmetic_and_the_published_total():
    # Per layer: q, k, v, o, q_norm + k_norm, SwiGLU MLP, two RMSNorms; then fc, hidden_norm, final norm,
    # Markov W1 + W2 and the confidence head Linear(7168 + 256 -> 1) with bias. Embeddings are shared.
    per_layer = (7168 * 64 * 112 + 2 * 7168 * 16 * 112 + 64 * 112 * 7168 + 2 * 112
                 + 3 * 7168 * 11776 + 2 * 7168)
    arithmetic = 5 * per_layer + 5 * 7168 * 7168 + 7168 + 7168 + 163840 * 256 + 256 * 163840 + (7168 + 256) + 1
    spec = load_model("kimi-k3-dspark")
    assert arithmetic == 2_249_290_081
    assert spec.params == arithmetic


def test_kimi_k3_dspark_splits_into_the_gguf_matrix_and_f32_counts():
    spec = load_model("kimi-k3-dspark")
    small = sum(t.params for t in spec.tensors if t.category == SMALL)
    assert spec.params - small == 2_249_195_520  # Q8_0 tensors in the published GGUF
    assert small == 94_561  # F32 tensors


def test_draft_bf16_and_q8_0_sizes_match_the_published_files():
    spec = load_model("kimi-k3-dspark")
    assert weight_bytes(spec, QuantPlan("BF16")).total == 4_498_580_162  # safetensors file minus its 5.7 KB header
    q8 = weight_bytes(spec, QuantPlan("Q8_0")).total
    assert abs(q8 - 2_390_153_920) / 2_390_153_920 < 1e-5  # GGUF file = tensors + metadata


def test_exact_bits_per_weight_of_block_types():
    expected = {"Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K": 5.5, "Q4_K": 4.5, "Q4_0": 4.5, "Q3_K": 3.4375, "Q2_K": 2.625,
                "IQ4_XS": 4.25, "IQ2_XXS": 2.0625, "IQ1_S": 1.5625, "MXFP4": 4.25, "NVFP4": 4.5, "BF16": 16.0}
    for name, bits in expected.items():
        assert QUANT_TYPES[name].bits == bits, name
    assert quant_type("fp16").name == "F16" and quant_type("w4a16").bits == 4.125


def test_llama_31_8b_has_its_known_parameter_count():
    assert load_model("llama-3.1-8b").params == 8_030_261_248


@pytest.mark.parametrize("ftype,gib", [("Q2_K", 2.96), ("Q3_K_M", 3.74), ("Q4_0", 4.34), ("Q4_K_M", 4.58),
                                       ("Q5_K_M", 5.33), ("Q6_K", 6.14), ("Q8_0", 7.96)])
def test_gguf_mixes_reproduce_llama_cpp_quantize_sizes_for_llama3_8b(ftype, gib):
    # tools/quantize/quantize.cpp QUANT_OPTIONS lists these file sizes (GiB) for Llama-3-8B.
    size = weight_bytes(load_model("llama-3.1-8b"), QuantPlan(ftype)).total / GiB
    assert abs(size - gib) / gib < 0.01


def test_kimi_k3_matches_its_published_size_split():
    k3 = load_model("kimi-k3")
    w = weight_bytes(k3, plan_for(k3))  # native: routed experts MXFP4, the rest BF16
    assert abs(k3.params - 2.78e12) / 2.78e12 < 0.01
    assert abs(k3.active_params - 104e9) / 104e9 < 0.02
    per_expert = w.routed / (92 * 896)
    assert abs(per_expert - 17.55e6) < 0.01e6  # 17.55 MB per MXFP4 expert
    assert abs(w.routed - 1.45e12) / 1.45e12 < 0.01
    assert abs(w.by_part["embeddings + lm_head"] - 4.70e9) < 0.01e9
    trunk = w.total - w.routed - w.by_part["embeddings + lm_head"]
    assert abs(trunk - 108.81e9) / 108.81e9 < 0.01
    assert abs(w.total - 1.56e12) / 1.56e12 < 0.01


@pytest.mark.parametrize("name,params,active", [("kimi-k2", 1.026e12, 32.9e9), ("deepseek-v3", 671.0e9, 37.5e9),
                                                ("qwen3-8b", 8.19e9, 8.19e9)])
def test_reference_presets_match_published_parameter_counts(name, params, active):
    spec = load_model(name)
    assert abs(spec.params - params) / params < 0.005
    assert abs(spec.active_params - active) / active < 0.01


def test_kimi_k2_thinking_int4_checkpoint_is_about_594_gb():
    spec = load_model("kimi-k2-thinking")
    assert abs(weight_bytes(spec, plan_for(spec)).total - 594e9) / 594e9 < 0.01


def test_safetensors_quantizers_keep_embeddings_router_and_norms_in_bf16():
    k3 = load_model("kimi-k3")
    w = weight_bytes(k3, QuantPlan("FP8", "MXFP4"))
    assert w.types_by_part["embeddings + lm_head"] == ("BF16",)
    assert w.types_by_part["routed experts"] == ("MXFP4",)
    assert w.types_by_part["attention"] == ("FP8",)


def test_asking_a_float_type_keeps_kimi_k3_experts_in_their_native_mxfp4():
    k3 = load_model("kimi-k3")
    assert plan_for(k3, "FP8") == QuantPlan("FP8", "MXFP4")
    assert plan_for(k3, "Q4_K_M") == QuantPlan("Q4_K_M")  # a GGUF mix decides every tensor itself
