"""llama.cpp's per-tensor type choices for GGUF mixes."""
from __future__ import annotations

from dspark.plan.gguf_mix import tensor_type, use_more_bits
from dspark.plan.spec import ATTN_Q, ATTN_V, FFN_DOWN, OUTPUT


def test_use_more_bits_picks_half_of_32_layers():
    chosen = [i for i in range(32) if use_more_bits(i, 32)]
    assert len(chosen) == 16 and chosen[:5] == [0, 1, 2, 3, 6] and chosen[-4:] == [28, 29, 30, 31]


def test_q4_k_m_gives_q6_k_to_chosen_attn_v_and_ffn_down_layers_only():
    assert tensor_type("Q4_K_M", ATTN_V, 0, 32, 4096) == "Q6_K"
    assert tensor_type("Q4_K_M", ATTN_V, 4, 32, 4096) == "Q4_K"
    assert tensor_type("Q4_K_M", FFN_DOWN, 6, 32, 14336) == "Q6_K"
    assert tensor_type("Q4_K_M", ATTN_Q, 0, 32, 4096) == "Q4_K"
    assert tensor_type("Q4_K_M", OUTPUT, 0, 1, 4096) == "Q6_K"


def test_q2_k_attn_v_depends_on_the_gqa_ratio():
    assert tensor_type("Q2_K", ATTN_V, 3, 32, 4096, n_gqa=4) == "Q4_K"
    assert tensor_type("Q2_K", ATTN_V, 3, 32, 4096, n_gqa=1) == "Q3_K"
    assert tensor_type("Q2_K", FFN_DOWN, 3, 32, 4096) == "Q3_K"


def test_rows_not_a_multiple_of_256_fall_back_like_llama_cpp():
    assert tensor_type("Q4_K_M", ATTN_Q, 4, 32, 4000) == "Q5_0"  # Q4_K -> Q5_0 (32-blocks)
    assert tensor_type("Q6_K", ATTN_Q, 0, 1, 100) == "F16"  # no block fits at all


def test_mxfp4_moe_puts_expert_stacks_in_mxfp4_and_the_rest_in_q8_0():
    assert tensor_type("MXFP4_MOE", FFN_DOWN, 0, 92, 3072, is_expert_stack=True) == "MXFP4"
    assert tensor_type("MXFP4_MOE", ATTN_Q, 0, 92, 7168) == "Q8_0"
