"""Reading local Hugging Face config.json files."""
from __future__ import annotations

import json

import pytest

from dspark.plan.errors import PlanError
from dspark.plan.hf_config import spec_from_config
from dspark.plan.models import load_model

DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "vocab_size": 129280, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
    "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "topk_method": "noaux_tc", "max_position_embeddings": 163840,
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
}
QWEN3_NEXT = {
    "model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 151936, "intermediate_size": 5120,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts": 512,
    "num_experts_per_tok": 10, "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "max_position_embeddings": 262144,
}


def _write(tmp_path, cfg) -> str:
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


def test_deepseek_v3_config_reads_like_the_hand_built_preset(tmp_path):
    spec = load_model(_write(tmp_path, DEEPSEEK_V3))
    preset = load_model("deepseek-v3")
    assert spec.params == preset.params == 671_026_419_200
    assert spec.active_params == preset.active_params
    assert spec.kv == preset.kv and spec.default_quant == "FP8"


def test_hybrid_linear_attention_config_reads_like_the_qwen3_next_preset():
    spec = spec_from_config(QWEN3_NEXT)
    preset = load_model("qwen3-next-80b-a3b")
    assert spec.params == preset.params and spec.kv == preset.kv
    assert (spec.kv.full_layers, spec.kv.linear_layers) == (12, 36)


def test_dense_qwen3_config_matches_the_preset_and_multimodal_wrappers_use_text_config():
    dense = {"model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32,
             "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "intermediate_size": 12288}
    assert spec_from_config(dense).params == load_model("qwen3-8b").params
    wrapped = spec_from_config({"model_type": "vlm", "text_config": dense, "vision_config": {}})
    assert wrapped.params == load_model("qwen3-8b").params


def test_kimi_linear_style_kda_plus_mla_layers_are_counted():
    kda = [i for i in range(1, 28) if i % 4]
    cfg = {"model_type": "kimi_linear", "hidden_size": 2304, "num_hidden_layers": 27, "num_attention_heads": 32,
           "vocab_size": 163840, "intermediate_size": 9216, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
           "qk_rope_head_dim": 64, "v_head_dim": 128, "num_experts": 256, "num_experts_per_token": 8,
           "moe_intermediate_size": 1024, "num_shared_experts": 1, "first_k_dense_replace": 1,
           "linear_attn_config": {"kda_layers": kda, "full_attn_layers": [4, 8, 12, 16, 20, 24],
                                  "num_heads": 32, "head_dim": 128, "short_conv_kernel_size": 4}}
    spec = spec_from_config(cfg)
    assert (spec.kv.linear_layers, spec.kv.mla_layers, spec.kv.mla_latent) == (21, 6, 576)
    assert spec.kv.linear_state_bytes == 32 * 128 * 128 * 4 + 3 * 32 * 128 * 3 * 2
    assert spec.moe_top_k == 8 and spec.moe_experts == 256


def test_native_draft_config_json_becomes_the_draft_spec():
    cfg = {"hidden_size": 7168, "num_hidden_layers": 5, "num_attention_heads": 64, "num_key_value_heads": 16,
           "head_dim": 112, "intermediate_size": 11776, "vocab_size": 163840, "block_size": 7,
           "target_layer_ids": [7, 23, 51, 67, 83], "mask_token_id": 163824, "num_target_layers": 93,
           "markov_rank": 256, "markov_head_type": "vanilla", "enable_confidence_head": True,
           "confidence_head_with_markov": True}
    spec = spec_from_config(cfg)
    assert spec.role == "draft" and spec.params == 2_249_290_081 and spec.block_size == 7


def test_quantization_config_sets_the_default_storage():
    base = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
            "intermediate_size": 128}
    nvfp4 = {"quant_method": "compressed-tensors", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "group_size": 16}}}}
    experts = {"quant_method": "compressed-tensors", "config_groups": {"g": {
        "targets": ["re:.*experts.*"], "weights": {"num_bits": 4, "type": "float", "group_size": 32}}}}
    assert spec_from_config({**base, "quantization_config": nvfp4}).default_quant == "NVFP4"
    spec = spec_from_config({**base, "quantization_config": experts})
    assert (spec.default_quant, spec.default_expert_quant) == ("BF16", "MXFP4")


def test_bad_configs_give_one_clear_plan_error(tmp_path):
    with pytest.raises(PlanError, match="lacks 'hidden_size'"):
        spec_from_config({"num_hidden_layers": 2})
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(PlanError, match="cannot read"):
        load_model(str(tmp_path))
    with pytest.raises(PlanError, match="unknown model"):
        load_model(str(tmp_path / "missing"))
