"""Every engine kernel compiles for the H200 (sm_90) on a machine without a GPU: Triton's front end and NVIDIA back
end down to a cubin, with the SmolLM2-shaped constants the engine launches them with (bf16, and fp32 where the engine
has an fp32 path). The interpreter tests check what the kernels compute; these check that the GPU can build them, so
a kernel change that would only fail on the device fails here first."""
from __future__ import annotations

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from dspark.engine import cache_attention, layer_kernels, markov_kernel, tree_kernel  # noqa: E402

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)


def compile_for_sm90(kernel, types: dict[str, str], constants: dict[str, object]) -> dict[str, object]:
    """The kernel compiled for sm_90 with these argument types and constexpr values -> its assembly stages."""
    signature = {**types, **dict.fromkeys(constants, "constexpr")}
    assert list(signature) == kernel.arg_names, "types and constants must name the kernel's arguments in order"
    names = list(signature)
    source = ASTSource(fn=kernel, signature=signature, constexprs={(names.index(k),): v for k, v in constants.items()})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # the GPU's default, said aloud (Triton 3.9 warns otherwise)


def _cubin(asm: dict) -> bool:
    return "cubin" in asm and len(asm["cubin"]) > 1000


@pytest.mark.parametrize("gated,mapped", [(False, False), (True, False), (False, True)],
                         ids=["vanilla", "gated", "draft-vocab"])
@pytest.mark.parametrize("dtype,block_n", [("bf16", 1), ("bf16", 16), ("fp32", 16)])
def test_markov_slot_kernel_compiles_for_sm90(gated, mapped, dtype, block_n):
    types = {"base_ptr": f"*{dtype}", "w1_ptr": f"*{dtype}", "w2_ptr": f"*{dtype}", "keys_ptr": "*i64",
             "anchors_ptr": "*i64", "pre_ptr": "*fp32" if gated else f"*{dtype}", "we_ptr": f"*{dtype}",
             "ids_ptr": "*i64", "rows": "i32", "vocab": "i32", "rank": "i32", "base_row_stride": "i32"}
    constants = {"STEP": 1, "ROUND_BF16": dtype == "bf16", "TENSOR_CORES": dtype != "fp32", "GATED": gated,
                 "MAPPED": mapped, "GAMMA": 7, "RANK_TILE": 32, "BLOCK_V": 256, "BLOCK_N": block_n}
    assert _cubin(compile_for_sm90(markov_kernel._slot_kernel, types, constants))


@pytest.mark.parametrize("has_rows,sliding,tree", [(False, False, False), (True, False, False), (True, True, False),
                                                   (False, False, True)])
def test_cache_attention_kernel_compiles_for_sm90(has_rows, sliding, tree):
    types = {"q_ptr": "*bf16", "q_stride_b": "i32", "q_stride_t": "i32", "q_stride_h": "i32", "cache_ptr": "*bf16",
             "c_stride_b": "i32", "c_stride_h": "i32", "c_stride_l": "i32", "rows_ptr": "*i64", "last_ptr": "*i64",
             "out_ptr": "*bf16", "start_ptr": "*i64", "tree_ptr": "*i64", "t_len": "i32",
             "kv_heads": "i32", "window": "i32", "sliding": "i32", "scale": "fp32", "depth_stride": "i32"}
    constants = {"G": 3, "D": 64, "BLOCK_Q": 16 if tree else 32, "BLOCK_K": 64, "HAS_ROWS": has_rows,
                 "SLIDING": sliding, "TREE": tree, "IEEE": False}
    assert _cubin(compile_for_sm90(cache_attention._cache_attention_kernel, types, constants))


@pytest.mark.parametrize("has_norms", [False, True], ids=["llama", "qwen3"])
def test_rope_write_kernel_compiles_for_sm90(has_norms):
    types = {"heads_ptr": "*bf16", "cos_ptr": "*bf16", "sin_ptr": "*bf16", "q_ptr": "*bf16", "cache_ptr": "*bf16",
             "c_stride_b": "i32", "c_stride_h": "i32", "c_stride_l": "i32", "rows_ptr": "*i64",
             "positions_ptr": "*i64", "rotary_ptr": "*i64", "q_norm_ptr": "*bf16", "k_norm_ptr": "*bf16", "eps": "fp32", "t_len": "i32",
             "token_stride": "i32", "q_heads": "i32", "kv_heads": "i32"}
    constants = {"D": 64, "BLOCK_H": 16, "HAS_ROWS": True, "HAS_NORMS": has_norms}
    assert _cubin(compile_for_sm90(layer_kernels._rope_write_kernel, types, constants))


def test_add_rms_norm_and_silu_mul_kernels_compile_for_sm90():
    norm = {"x_ptr": "*bf16", "delta_ptr": "*bf16", "weight_ptr": "*bf16", "sum_ptr": "*bf16", "normed_ptr": "*bf16",
            "width": "i32", "eps": "fp32"}
    assert _cubin(compile_for_sm90(layer_kernels._add_rms_norm_kernel, norm, {"BLOCK": 1024}))
    silu = {"gate_up_ptr": "*bf16", "out_ptr": "*bf16", "inner": "i32"}
    assert _cubin(compile_for_sm90(layer_kernels._silu_mul_kernel, silu, {"BLOCK": 1024}))


def test_tree_accept_kernel_compiles_for_sm90():
    accept = {"token_ptr": "*i64", "parent_ptr": "*i64", "depth_ptr": "*i64", "visible_ptr": "*i1",
              "choice_ptr": "*i64", "length_ptr": "*i64", "accepted_ptr": "*i64", "bonus_ptr": "*i64",
              "path_ptr": "*i64", "committed_ptr": "*i64", "slots": "i32", "gamma": "i32"}
    assert _cubin(compile_for_sm90(tree_kernel._accept_kernel, accept, {"BLOCK": 32, "BLOCK_G": 16}))


@pytest.mark.parametrize("beam", [8])  # the shipped tree's beam
def test_tree_beam_kernels_compile_for_sm90(beam):
    children = {"base_ptr": "*bf16", "base_stride": "i32", "w1_ptr": "*bf16", "w2_ptr": "*bf16", "prev_ptr": "*i64",
                "value_ptr": "*fp32", "index_ptr": "*i64", "max_ptr": "*fp32", "sum_ptr": "*fp32", "parents": "i32",
                "vocab": "i32", "rank": "i32", "tiles": "i32", "scale": "fp32"}
    constants = {"K": beam, "BIASED": True, "RANK_TILE": 32, "BLOCK": tree_kernel.BLOCK_V}
    assert _cubin(compile_for_sm90(tree_kernel._children_kernel, children, constants))
    merge = {"value_ptr": "*fp32", "index_ptr": "*i64", "max_ptr": "*fp32", "sum_ptr": "*fp32", "scores_ptr": "*fp32",
             "ids_ptr": "*i64", "out_score_ptr": "*fp32", "out_token_ptr": "*i64", "out_parent_ptr": "*i64",
             "parents": "i32", "tiles": "i32"}
    constants = {"K": beam, "MAPPED": True, "BLOCK_P": beam, "BLOCK_T": 64}
    assert _cubin(compile_for_sm90(tree_kernel._merge_kernel, merge, constants))
    select = {"score_ptr": "*fp32", "token_ptr": "*i64", "parent_ptr": "*i64", "anchor_ptr": "*i64",
              "out_token_ptr": "*i64", "out_parent_ptr": "*i64", "out_depth_ptr": "*i64", "visible_ptr": "*i1",
              "pool": "i32", "nodes": "i32"}
    assert _cubin(compile_for_sm90(tree_kernel._select_kernel, select, {"K": beam, "GAMMA": 7, "BLOCK": 64}))
