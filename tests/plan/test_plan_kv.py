"""KV-cache and recurrent-state bytes."""
from __future__ import annotations

import pytest

from dspark.plan.errors import PlanError
from dspark.plan.kv import kv_bytes, kv_bytes_per_token
from dspark.plan.models import load_model
from dspark.plan.spec import KvLayout


def test_kimi_k3_dspark_draft_kv_is_35840_bytes_per_token_in_bf16():
    kv = load_model("kimi-k3-dspark").kv
    assert kv_bytes_per_token(kv, "bf16") == 2 * 5 * 16 * 112 * 2 == 35_840
    assert kv_bytes_per_token(kv, "fp8") == 17_920
    assert kv_bytes(kv, "fp16", 1_000_000).total == 35_840_000_000


def test_mla_caches_one_576_element_latent_per_layer():
    assert kv_bytes_per_token(load_model("kimi-k3").kv, "bf16") == 24 * 576 * 2 == 27_648
    assert kv_bytes_per_token(load_model("kimi-k2").kv, "bf16") == 61 * 576 * 2 == 70_272


def test_kimi_k3_recurrent_state_is_fixed_per_sequence():
    kv = load_model("kimi-k3").kv
    short, long = kv_bytes(kv, "fp8", 1_000, 2), kv_bytes(kv, "fp8", 1_000_000, 2)
    assert short.state == long.state == 2 * 69 * (96 * 128 * 128 * 4 + 3 * 96 * 128 * 3 * 2)
    assert abs(short.state / 2 - 0.449e9) < 0.001e9


def test_kv_scales_with_context_and_concurrency_and_windows_cap_it():
    layout = KvLayout(full_layers=2, kv_heads=4, k_head_dim=64, v_head_dim=64, window_layers=2, window=1024)
    one = kv_bytes(layout, "bf16", 4096, 1)
    assert kv_bytes(layout, "bf16", 4096, 3).attention == 3 * one.attention
    assert one.attention == (2 * 4 * 128 * 2) * 4096 + (2 * 4 * 128 * 2) * 1024


def test_unknown_kv_dtype_is_a_plan_error():
    with pytest.raises(PlanError, match="unknown KV-cache dtype"):
        kv_bytes_per_token(KvLayout(), "fp3")
