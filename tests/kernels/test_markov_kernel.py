"""The fused greedy Markov decode (engine/markov_kernel.py, a Triton kernel for CUDA), run through Triton's
interpreter: it picks the eager loop's tokens and keeps the engines lossless."""
from __future__ import annotations


def test_fused_greedy_decode_picks_the_eager_loops_tokens_for_fp32_and_bf16_weights(facts):
    for key in [f"{t}/r{r}" for t in ("float32", "bfloat16") for r in (8, 20, 32)]:
        assert facts[f"{key}/mismatches"] == 0, key


def test_engines_through_the_kernels_equal_target_greedy_and_the_eager_drafts(facts):
    assert facts["kernel_calls"] > 10  # the Markov kernel really served both engines' proposals
    assert facts["batch1_equals_target"] == [True, True, True]
    assert facts["batched_equals_target"] == [True, True, True]  # through the cache-attention kernel too
    assert facts["same_acceptance_as_eager"] == [True, True, True]
    assert facts["accepted"] > 0


def test_fused_decode_without_the_first_slot_bias_picks_the_eager_loops_tokens(facts):
    assert facts["first_slot_off_kernel_equals_eager"] is True
    assert facts["first_slot_off_slot0_is_backbone_argmax"] is True
