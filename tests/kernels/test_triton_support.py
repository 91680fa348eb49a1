"""When the engine's Triton kernels may run: CUDA, or the CPU under Triton's interpreter, unless DSPARK_KERNELS=0."""
from __future__ import annotations

import pytest
import torch

from dspark.engine import cache_attention, layer_kernels, triton_support

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)


def test_kernels_run_on_cpu_only_under_the_interpreter_and_dspark_kernels_0_switches_them_off(monkeypatch):
    cpu = torch.zeros(1)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("DSPARK_KERNELS", raising=False)
    assert not triton_support.available(cpu)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_support.available(cpu)
    assert cache_attention.usable(cpu, head_dim=64, grouped_queries=24)
    assert layer_kernels.usable(cpu, head_dim=64)
    monkeypatch.setenv("DSPARK_KERNELS", "0")
    assert not triton_support.available(cpu)
    assert not cache_attention.usable(cpu, head_dim=64, grouped_queries=24)
    assert not layer_kernels.usable(cpu, head_dim=64)


def test_shapes_the_kernels_do_not_tile_go_to_the_torch_ops(monkeypatch):
    cpu = torch.zeros(1)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("DSPARK_KERNELS", raising=False)
    assert not cache_attention.usable(cpu, head_dim=64, grouped_queries=cache_attention.MAX_QUERIES + 1)  # prefill
    assert not cache_attention.usable(cpu, head_dim=80, grouped_queries=8)  # not a power of two
    assert not layer_kernels.usable(cpu, head_dim=80)
