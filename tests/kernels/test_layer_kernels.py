"""The decoder-layer kernels (engine/layer_kernels.py, Triton, CUDA), run through Triton's interpreter: add + RMSNorm,
SiLU · up and RoPE + cache write equal the torch ops they replace, and the static draft through them drafts what the
batch-1 engine drafts."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)


def test_add_rms_norm_and_silu_mul_equal_the_torch_ops(facts):
    assert facts["add_rms_norm"] < 1e-5
    assert facts["silu_mul"] < 1e-5


def test_rope_write_norms_rotates_and_fills_the_cache_rows_like_the_torch_ops(facts):
    cases = {k: v for k, v in facts.items() if k.startswith("rope_write ")}
    assert len(cases) == 8  # q heads or none (the draft's context extension), rows or not, Qwen3 norms or not
    assert max(cases.values()) < 1e-5, cases


def test_batched_engine_through_the_kernels_accepts_what_the_batch1_eager_engine_accepts(facts):
    assert facts["batched_acceptance_as_eager"] == [True, True, True]
