"""The fused Markov decode compiles for the H200 (sm_90) on a machine without a GPU: Triton's front end and NVIDIA
back end down to a cubin, for the vanilla and the gated head, bf16 and fp32 weights, one row and a tile of rows per
program. The interpreter tests check what it computes; this checks that the GPU can build it at all."""
from __future__ import annotations

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import dspark.engine.markov_kernel as markov_kernel  # noqa: E402


@pytest.mark.parametrize("gated", [False, True], ids=["vanilla", "gated"])
@pytest.mark.parametrize("dtype,block_n", [("bf16", 1), ("bf16", 16), ("fp32", 16)])
def test_markov_slot_kernel_compiles_to_a_cubin_for_sm90(gated, dtype, block_n, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # the GPU's default, said aloud (Triton 3.9 warns otherwise)
    signature = {"base_ptr": f"*{dtype}", "w1_ptr": f"*{dtype}", "w2_ptr": f"*{dtype}", "keys_ptr": "*i64",
                 "anchors_ptr": "*i64", "pre_ptr": "*fp32" if gated else f"*{dtype}", "we_ptr": f"*{dtype}",
                 "rows": "i32", "vocab": "i32", "rank": "i32", "base_row_stride": "i32"}
    constants = {"STEP": 1, "ROUND_BF16": dtype == "bf16", "TENSOR_CORES": dtype != "fp32", "GATED": gated,
                 "GAMMA": 7, "RANK_TILE": 32, "BLOCK_V": 256, "BLOCK_N": block_n}
    signature.update(dict.fromkeys(constants, "constexpr"))
    names = list(signature)
    source = ASTSource(fn=markov_kernel._slot_kernel, signature=signature,
                       constexprs={(names.index(k),): v for k, v in constants.items()})
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32))
    assert "cubin" in compiled.asm and len(compiled.asm["cubin"]) > 1000
