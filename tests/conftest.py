"""Shared test fixtures: the conformance folder and tiny models."""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # 2 shared cores: spinning OpenMP threads starve each other
# the demo / bench / serve loaders time GEMM calls to lay weights out (engine/cpu_layout.py); the tests pin one layout
# so that their numerics do not depend on this machine's timings (tests/test_cpu_layout.py runs the timed plan)
os.environ.setdefault("DSPARK_CPU_LAYOUT", "col")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True)  # the same examples on every run: CI never flakes on a fresh draw
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

from fixture_paths import CONFORMANCE  # noqa: E402


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)  # a worker per core under xdist
    yield


@pytest.fixture(scope="session")
def conformance_target():
    from transformers import Qwen3ForCausalLM

    return Qwen3ForCausalLM.from_pretrained(CONFORMANCE / "deepspec" / "target", dtype=torch.float32).eval()
