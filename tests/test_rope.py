"""RoPE and YaRN equal transformers' own implementation (inv_freq, attention factor, cos/sin up to 1M positions)."""
from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding

from dspark.config import RopeConfig, preset
from dspark.model.rope import RotaryEmbedding

POSITIONS = torch.tensor([[0, 1, 7, 4095, 65535, 65536, 131071, 500_000, 1_000_000, 1_048_575]])


def hf_rope(rope: RopeConfig, head_dim: int, max_pos: int):
    config = Qwen3Config(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
                         max_position_embeddings=max_pos, rope_parameters=rope.to_dict())
    return Qwen3RotaryEmbedding(config)


@pytest.mark.parametrize("rope,head_dim,max_pos", [
    (RopeConfig(rope_theta=10000.0, rope_type="yarn", factor=16.0, original_max_position_embeddings=65536), 112, 1 << 20),
    (RopeConfig(rope_theta=1e6, rope_type="yarn", factor=4.0, original_max_position_embeddings=32768,
                beta_fast=16, beta_slow=2), 128, 131072),
    (RopeConfig(rope_theta=1e6), 128, 40960),
])
def test_cos_sin_equal_transformers_to_1e6_up_to_position_1048575(rope, head_dim, max_pos):
    ours = RotaryEmbedding(rope, head_dim)
    theirs = hf_rope(rope, head_dim, max_pos)
    torch.testing.assert_close(ours.inv_freq, theirs.inv_freq.float(), atol=0, rtol=0)
    assert ours.attention_scaling == pytest.approx(theirs.attention_scaling, abs=1e-12)
    x = torch.zeros(1, POSITIONS.shape[1], head_dim)
    cos_ref, sin_ref = theirs(x, POSITIONS)
    cos, sin = ours(POSITIONS, torch.float32)
    torch.testing.assert_close(cos, cos_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(sin, sin_ref, atol=1e-6, rtol=0)


def test_kimi_preset_uses_yarn_x16_to_1m_and_inv_freq_stays_fp32_under_bf16():
    cfg = preset("kimi-k3-dspark")
    assert cfg.rope.rope_type == "yarn" and cfg.rope.factor == 16 and cfg.max_position_embeddings == 1_048_576
    rotary = RotaryEmbedding(cfg.rope, cfg.head_dim).to(torch.bfloat16)
    assert rotary.inv_freq.dtype == torch.float32
    assert rotary.attention_scaling == pytest.approx(0.1 * torch.log(torch.tensor(16.0)).item() + 1, rel=1e-6)
