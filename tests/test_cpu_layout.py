"""Column-major weights (engine/cpu_layout.py) change where the numbers sit, not what the models compute: shapes, values
and ties stay, fused projections keep the layout, and both engines still decode exactly what the target's own greedy
decoding does."""
from __future__ import annotations

import copy
import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import BatchEngine
from dspark.engine.cpu_layout import column_major_weights, is_column_major
from dspark.engine.fused_layers import fuse_projections
from dspark.testbed.random_pair import ARCHITECTURES, draft_config_for, random_draft, tiny_target
from dspark.testbed.successor_pair import build_pair


def hf_greedy(model: nn.Module, prompt: list[int], n: int) -> list[int]:
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def linears(module: nn.Module) -> list[nn.Linear]:
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


def test_every_linear_weight_becomes_column_major_with_the_same_shape_values_and_ties():
    model = tiny_target("llama", seed=3)
    model.config.tie_word_embeddings = True
    model.tie_weights()  # the LM head shares the embedding, as SmolLM2's does
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    changed = column_major_weights(model)
    assert changed == len({id(m.weight) for m in linears(model)}) > 0
    for linear in linears(model):
        assert is_column_major(linear.weight) and not linear.weight.is_contiguous()
    for name, p in model.named_parameters():
        assert p.shape == before[name].shape and torch.equal(p, before[name]), name
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still one parameter
    assert column_major_weights(model) == 0  # idempotent


def test_a_column_major_linear_computes_what_the_row_major_one_does():
    torch.manual_seed(0)
    linear = nn.Linear(48, 80)
    x = torch.randn(2, 8, 48)
    expected = linear(x)
    column_major_weights(linear)
    assert torch.allclose(linear(x), expected, atol=1e-5, rtol=1e-5)
    assert torch.allclose(F.linear(x[0, :1], linear.weight, linear.bias), expected[0, :1], atol=1e-5, rtol=1e-5)


def test_fused_projections_of_column_major_weights_stay_column_major_and_hold_the_same_rows():
    model = tiny_target("qwen3", seed=4)
    layer = model.model.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach().clone()
    gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach().clone()
    column_major_weights(model)
    fused = fuse_projections(layer)
    assert is_column_major(fused.qkv_weight) and is_column_major(fused.gate_up_weight)
    assert torch.equal(fused.qkv_weight, qkv) and torch.equal(fused.gate_up_weight, gate_up)
    assert attn.k_proj.weight.data_ptr() == fused.qkv_weight[attn.q_proj.out_features:].data_ptr()  # views, no copy


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_speculative_greedy_on_column_major_weights_equals_the_original_targets_greedy(arch):
    original = tiny_target(arch, seed=1)
    model = copy.deepcopy(original)
    for block_size in (3, 7):
        cfg = draft_config_for(model, block_size=block_size)
        draft = random_draft(cfg, seed=block_size, scale=5.0)
        column_major_weights(model, draft)
        prompt = [random.Random(block_size).randrange(97) for _ in range(2 + 3 * block_size)]
        result = generate(Target(model, cfg.target_layer_ids), draft, prompt, GenerationConfig(max_new_tokens=17))
        assert result.tokens == hf_greedy(original, prompt, 17), (arch, block_size)


def test_the_batch_engine_on_column_major_weights_decodes_the_same_tokens_and_rounds():
    prompts = [list(b"hello wor"), list(b"abc"), list(b"xyz 123 456 789"), list(b"q")]
    config = GenerationConfig(max_new_tokens=24)
    results = []
    for layout in ("row-major", "column-major"):
        model, draft = build_pair()
        if layout == "column-major":
            assert column_major_weights(model, draft) > 0
        engine = BatchEngine(Target(model, draft.config.target_layer_ids), draft, max_batch=3, max_length=96)
        results.append(engine.generate(prompts, config))
    for row, col in zip(*results):
        assert col.tokens == row.tokens
        assert col.stats == row.stats
    assert sum(sum(r.stats.accepted_counts) for r in results[1]) > 10  # drafts were really accepted
