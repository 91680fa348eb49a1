"""The fused greedy Markov decode (engine/markov_kernel.py, a Triton kernel for CUDA), run on the CPU through
Triton's interpreter in a subprocess (the interpreter is chosen when the kernel is defined): it picks the eager
loop's tokens and keeps the engines lossless. The eager loop stays the CPU path everywhere else."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="Triton is a dev dependency on Linux (pyproject [dev])")


@pytest.fixture(scope="module")
def facts() -> dict:
    script = Path(__file__).with_name("markov_kernel_checks.py")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_fused_greedy_decode_picks_the_eager_loops_tokens_for_fp32_and_bf16_weights(facts):
    for key in [f"{t}/r{r}" for t in ("float32", "bfloat16") for r in (8, 20, 32)]:
        assert facts[f"{key}/mismatches"] == 0, key


def test_engines_through_the_fused_decode_equal_target_greedy_and_the_eager_drafts(facts):
    assert facts["kernel_calls"] > 10  # the kernel really served both engines' proposals
    assert facts["batch1_equals_target"] == [True, True, True]
    assert facts["batched_equals_target"] == [True, True, True]
    assert facts["same_acceptance_as_eager"] == [True, True, True]
    assert facts["accepted"] > 0
