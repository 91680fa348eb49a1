"""The cache-attention kernel (engine/cache_attention.py, Triton, CUDA), run through Triton's interpreter: it equals
the SDPA path it replaces, and the static target through it equals the HF target."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)


def test_cache_attention_equals_sdpa_for_rows_windows_and_block_widths(facts):
    cases = {k: v for k, v in facts.items() if k.startswith("attention ")}
    assert len(cases) == 16  # widths 1, 5, 8, 20 × sliding window or not × row indices or not
    assert max(cases.values()) < 1e-5, cases


def test_static_target_through_the_kernels_equals_the_hf_target_with_qk_norms_and_with_a_sliding_window(facts):
    for arch in ("qwen3", "mistral"):  # the kernels' two paths each (interpreted_checks.static_target_agreement)
        assert facts[f"static target {arch}"] < 1e-4, arch


def test_a_prefill_too_long_for_the_attention_tile_runs_the_layer_kernels_with_sdpa_and_equals_hf(facts):
    for arch in ("qwen3", "mistral"):
        assert facts[f"static target {arch} long prefill"] < 1e-4, arch


def test_tree_verify_attention_and_rope_by_depth_equal_the_torch_ops(facts):
    assert facts["tree attention"] < 1e-5 and facts["tree rope_write"] < 1e-5


def test_a_tree_slot_attends_bitwise_as_a_chain_verify_of_its_path(facts):
    # the same keys at the same positions, summed in the same order: a tree's accepted tokens get the hidden states
    # plain decoding gives them (bf16 on a GPU too), so its output stays the target's own greedy decoding
    assert facts["tree attention equals its path's chain bitwise"] is True


def test_a_tree_engine_through_the_kernels_equals_greedy_decoding_and_its_torch_path(facts):
    assert facts["tree engine equals target"] == [True, True, True]
    assert facts["tree engine acceptance as eager"] == [True, True, True]
    assert facts["tree engine accepted"] > 5


def test_the_tree_acceptance_kernel_returns_the_torch_ops_verdicts_paths_and_commits(facts):
    assert len(facts["tree accept same"]) == 9 and all(facts["tree accept same"])
    assert facts["tree accept deepest"] >= 4  # paths ran deep, not only the anchor's bonus


def test_the_tree_beam_through_its_kernels_builds_the_torch_ops_tree(facts):
    cases = {k: v for k, v in facts.items() if k.startswith("tree build ")}
    assert len(cases) == 3 and all(cases.values()), cases  # one of them at score temperature 0.5…
    assert facts["tree temperature changes the tree"]  # …where the kernels' scale picked other nodes
