"""Configs written the way the real tools publish them parse to the right DraftConfig (no weights needed).

The field sets transcribe sgl-project/SpecForge configs/kimi-k3-dspark.json and configs/qwen3-8b-dflash.json, and
what vllm-project/speculators 0.9.0 `save_pretrained` writes for a DSpark draft (vLLM's aux-id base, a Qwen3
`transformer_layer_config`, `speculators_config` with the verifier).
"""
from __future__ import annotations

import json

from dspark.formats.checkpoint import ConvertOptions
from dspark.formats.convert import read_draft_config
from formats_support import TARGET_DIR

SPECFORGE_KIMI_K3 = {
    "architectures": ["DSparkDraftModel"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoModel": "dspark.DSparkDraftModel"}, "block_size": 7, "bos_token_id": 163584,
    "dflash_config": {"attention_mode": "gqa", "confidence_head_alpha": 1.0, "confidence_head_with_markov": True,
                      "enable_confidence_head": True, "markov_head_type": "vanilla", "markov_rank": 256,
                      "mask_token_id": 163824, "projector_type": "dspark", "target_layer_ids": [7, 23, 51, 67, 83]},
    "dtype": "bfloat16", "eos_token_id": 163586, "head_dim": 64, "hidden_act": "silu", "hidden_size": 7168,
    "initializer_range": 0.02, "intermediate_size": 14336, "layer_types": ["full_attention"] * 5,
    "max_position_embeddings": 65536, "max_window_layers": 5, "model_type": "qwen3", "num_attention_heads": 64,
    "num_hidden_layers": 5, "num_key_value_heads": 16, "num_target_layers": 93, "pad_token_id": 163839,
    "rms_norm_eps": 1e-05, "rope_parameters": {"factor": 16.0, "original_max_position_embeddings": 4096,
                                               "rope_theta": 10000.0, "rope_type": "yarn"},
    "sliding_window": None, "tie_word_embeddings": False, "use_cache": True, "use_sliding_window": False,
    "vocab_size": 163840,
}

SPECFORGE_QWEN3_8B_DFLASH = {
    "architectures": ["DFlashDraftModel"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoModel": "dflash.DFlashDraftModel"}, "block_size": 16, "bos_token_id": 151643,
    "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]}, "dtype": "bfloat16",
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 12288, "layer_types": ["full_attention"] * 5, "max_position_embeddings": 40960,
    "max_window_layers": 5, "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 5,
    "num_key_value_heads": 8, "num_target_layers": 36, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False, "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}

SPECULATORS_DSPARK = {
    "architectures": ["DSparkDraftModel"], "auto_map": {"": "config.DSparkSpeculatorConfig"},
    "aux_hidden_state_layer_ids": [1, 3, 5], "block_size": 4, "confidence_head_with_markov": True,
    "draft_vocab_size": 97, "dtype": "float32", "enable_confidence_head": True, "markov_head_type": "gated",
    "markov_rank": 8, "mask_token_id": 96, "sample_from_anchor": True, "sliding_window_non_causal": False,
    "speculators_config": {"algorithm": "dspark", "default_proposal_method": "greedy",
                           "proposal_methods": [{"accept_tolerance": 0.0, "proposal_type": "greedy",
                                                 "speculative_tokens": 4, "verifier_accept_k": 1}],
                           "verifier": {"architectures": ["Qwen3ForCausalLM"], "name_or_path": "/gone/target"}},
    "speculators_model_type": "dspark", "speculators_version": "0.9.0", "target_hidden_size": None,
    "tie_word_embeddings": False,
    "transformer_layer_config": {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": None, "eos_token_id": None,
        "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
        "layer_types": ["full_attention", "full_attention"], "max_position_embeddings": 256, "max_window_layers": 28,
        "model_type": "qwen3", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "pad_token_id": None, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "sliding_window": None, "tie_word_embeddings": False, "use_cache": True, "use_sliding_window": False,
        "vocab_size": 97},
    "transformers_version": "5.17.0",
}


def _write(tmp_path, data: dict):
    (tmp_path / "config.json").write_text(json.dumps(data))
    return tmp_path / "config.json"


def test_specforge_kimi_k3_dspark_config_parses_with_its_yarn_range_and_heads(tmp_path):
    config = read_draft_config(_write(tmp_path, SPECFORGE_KIMI_K3))
    assert (config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim) == \
        (7168, 64, 16, 64)
    assert config.target_layer_ids == (7, 23, 51, 67, 83) and config.num_target_layers == 93
    assert (config.block_size, config.mask_token_id, config.markov_rank, config.mode) == (7, 163824, 256, "dspark")
    assert config.confidence_head_with_markov and config.rms_norm_eps == 1e-5
    assert (config.rope.rope_type, config.rope.factor, config.rope.original_max_position_embeddings) == \
        ("yarn", 16.0, 4096)


def test_specforge_qwen3_8b_dflash_config_parses_as_a_dflash_mode_draft(tmp_path):
    config = read_draft_config(_write(tmp_path, SPECFORGE_QWEN3_8B_DFLASH))
    assert config.mode == "dflash" and config.block_size == 16 and config.num_draft_tokens == 15
    assert config.target_layer_ids == (1, 9, 17, 25, 33) and config.mask_token_id == 151669
    assert config.rope.rope_theta == 1_000_000 and config.markov_rank == 0 and not config.enable_confidence_head


def test_speculators_saved_config_parses_with_aux_ids_shifted_back(tmp_path):
    config = read_draft_config(_write(tmp_path, SPECULATORS_DSPARK), ConvertOptions(target=TARGET_DIR))
    assert config.target_layer_ids == (0, 2, 4)  # aux ids [1, 3, 5] name layer inputs: ours = aux - 1
    assert (config.markov_head_type, config.markov_rank, config.block_size, config.num_target_layers) == \
        ("gated", 8, 4, 6)
