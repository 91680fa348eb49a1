"""Fused projections: one Q/K/V and one gate/up matrix per layer, with the HF modules re-pointed at views of them."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dspark.engine.fused_layers import fuse_projections
from dspark.testbed.random_pair import tiny_target


@pytest.mark.parametrize("arch", ["llama", "qwen2"])  # qwen2: Q/K/V biases
def test_fused_matrices_give_the_separate_projections_and_leave_the_hf_forward_unchanged(arch):
    model = tiny_target(arch, vocab_size=300, num_layers=2, seed=3)
    ids = torch.tensor([[4, 8, 15, 16, 23, 42]])
    with torch.no_grad():
        before = model(ids).logits
    layer = model.model.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    x = torch.randn(2, 5, model.config.hidden_size)
    separate = torch.cat([attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)], dim=-1)
    fused = [fuse_projections(block) for block in model.model.layers][0]
    assert (fused.qkv_bias is not None) == (arch == "qwen2")
    torch.testing.assert_close(F.linear(x, fused.qkv_weight, fused.qkv_bias), separate, atol=1e-6, rtol=0)
    gate, up = F.linear(x, fused.gate_up_weight, fused.gate_up_bias).chunk(2, dim=-1)
    torch.testing.assert_close(gate, mlp.gate_proj(x), atol=1e-6, rtol=0)
    torch.testing.assert_close(up, mlp.up_proj(x), atol=1e-6, rtol=0)
    # the modules now read views of the fused storage: no second copy of the weights
    assert attn.k_proj.weight.untyped_storage().data_ptr() == fused.qkv_weight.untyped_storage().data_ptr()
    assert mlp.up_proj.weight.untyped_storage().data_ptr() == fused.gate_up_weight.untyped_storage().data_ptr()
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, before, atol=1e-6, rtol=0)
