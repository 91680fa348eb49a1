"""Shared test fixtures: the conformance folder and tiny models."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

CONFORMANCE = Path(__file__).parent / "fixtures" / "conformance"
VARIANTS = ("vanilla", "gated", "rnn")


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    yield


@pytest.fixture(scope="session")
def conformance_target():
    from transformers import Qwen3ForCausalLM

    return Qwen3ForCausalLM.from_pretrained(CONFORMANCE / "deepspec" / "target", dtype=torch.float32).eval()
