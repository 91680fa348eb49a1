"""The CPU layout plan (engine/cpu_layout.py) changes where the numbers sit and which GEMM call multiplies them, not
what the models compute: every call equals nn.Linear's, a weight whose best call changes with the row count keeps both
layouts and picks per call, shapes, values, state dicts and ties stay, fused projections keep the layout, and both
engines still decode exactly what the target's own greedy decoding does. Plans here come from injected timings (the
real ones depend on the machine); one test runs the real timer and checks only what must hold whatever it chose."""
from __future__ import annotations

import copy
import random

import pytest
import torch
from torch import nn

from dspark import GenerationConfig, Target, generate
from dspark.engine import cpu_layout
from dspark.engine.batch import BatchEngine
from dspark.engine.cpu_layout import PlannedLinear, is_column_major, linear_call, plan_cpu_layout
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


def split_timer(few: str = "col", many: str = "row-nt", cut: int = 4):
    """Injected timings: `few` is fastest below `cut` rows, `many` from there on, every other call 3× slower."""
    def timer(formulation: str, stored: torch.Tensor, rows: int) -> float:
        return 1.0 if formulation == (few if rows < cut else many) else 3.0
    return timer


def plan_for(kind: str, *modules: nn.Module, monkeypatch: pytest.MonkeyPatch) -> None:
    """kind: "row" / "col" fixed by the environment, or "split" (two layouts, chosen per row count)."""
    if kind == "split":
        monkeypatch.setenv("DSPARK_CPU_LAYOUT", "auto")
        plan_cpu_layout(*modules, timer=split_timer())
    else:
        monkeypatch.setenv("DSPARK_CPU_LAYOUT", kind)
        plan_cpu_layout(*modules)


def test_a_fixed_column_layout_stores_every_weight_column_major_with_the_same_shape_values_and_ties(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "col")
    model = tiny_target("llama", seed=3)
    model.config.tie_word_embeddings = True
    model.tie_weights()  # the LM head shares the embedding, as SmolLM2's does
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    plans = plan_cpu_layout(model)
    assert set(plans) == {tuple(m.weight.shape) for m in linears(model)}
    for linear in linears(model):
        assert type(linear) is nn.Linear and is_column_major(linear.weight) and not linear.weight.is_contiguous()
    for name, p in model.named_parameters():
        assert p.shape == before[name].shape and torch.equal(p, before[name]), name
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still one parameter
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "row")
    plan_cpu_layout(model)  # back to nn.Linear's own layout
    assert all(linear.weight.is_contiguous() for linear in linears(model))


@pytest.mark.parametrize("formulation", cpu_layout.FORMULATIONS)
@pytest.mark.parametrize("rows", [1, 3, 8])
@pytest.mark.parametrize("bias", [False, True])
def test_each_call_computes_what_nn_linear_computes(formulation, rows, bias):
    torch.manual_seed(rows)
    linear = nn.Linear(48, 80, bias=bias)
    x = torch.randn(rows, 2, 48)
    weight = linear.weight.detach()
    stored = weight.t().contiguous().t() if formulation == "col" else weight
    out = linear_call(x, formulation, stored, None if linear.bias is None else linear.bias.detach())
    assert out.shape == (rows, 2, 80) and out.is_contiguous()
    assert torch.allclose(out, linear(x), atol=1e-5, rtol=1e-5)


def test_a_weight_whose_best_call_changes_with_rows_keeps_both_layouts_and_picks_per_call(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "auto")
    torch.manual_seed(0)
    linear = nn.Linear(48, 80)
    expected = {rows: linear(torch.ones(rows, 48) * 0.1 * rows) for rows in (1, 2, 7, 8, 40)}
    keys = set(linear.state_dict())
    plan = plan_cpu_layout(linear, timer=split_timer())[(80, 48)]
    assert plan.calls == ("col", "col", "row-nt", "row-nt", "row-nt", "row-nt") and plan.layouts == {"row", "col"}
    assert isinstance(linear, PlannedLinear) and isinstance(linear, nn.Linear)
    assert linear.weight.is_contiguous() and is_column_major(linear.weight_col)
    assert torch.equal(linear.weight_col, linear.weight) and set(linear.state_dict()) == keys  # the copy is not saved
    used = []
    real = cpu_layout.linear_call
    monkeypatch.setattr(cpu_layout, "linear_call", lambda x, f, w, b: used.append(f) or real(x, f, w, b))
    for rows, want in expected.items():
        assert torch.allclose(linear(torch.ones(rows, 48) * 0.1 * rows), want, atol=1e-5, rtol=1e-5)
    assert used == ["col", "col", "row-nt", "row-nt", "row-nt"]  # 1, 2 rows, then 7 (nearest 8), 8, 40 (nearest 32)
    assert "col at 1–2 rows, row-nt at 4–32 rows" in plan.describe()


def test_one_layout_within_the_slack_at_every_row_count_keeps_a_plain_nn_linear(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "auto")
    linear = nn.Linear(48, 80)

    def timer(formulation: str, stored: torch.Tensor, rows: int) -> float:  # col best, row within 10 %
        return {"col": 1.0, "row": 1.1, "row-nt": 2.0}[formulation]

    plan = plan_cpu_layout(linear, timer=timer)[(80, 48)]
    assert plan.calls == ("row",) * len(plan.rows)  # row-major kept: nn.Linear's layout, no second copy
    assert type(linear) is nn.Linear and linear.weight.is_contiguous()


def test_planning_again_returns_a_two_layout_linear_to_one_layout(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "auto")
    linear = nn.Linear(48, 80)
    plan_cpu_layout(linear, timer=split_timer())
    plan_cpu_layout(linear, timer=split_timer())  # idempotent
    assert isinstance(linear, PlannedLinear)
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "col")
    plan_cpu_layout(linear)
    assert type(linear) is nn.Linear and is_column_major(linear.weight) and "weight_col" not in dict(
        linear.named_buffers())


def test_a_tied_lm_head_under_a_two_layout_plan_stays_tied_to_the_embedding(monkeypatch):
    model = tiny_target("llama", seed=3)
    model.config.tie_word_embeddings = True
    model.tie_weights()
    prompt = [5, 9, 2, 7]
    expected = hf_greedy(copy.deepcopy(model), prompt, 6)
    plan_for("split", model, monkeypatch=monkeypatch)
    assert isinstance(model.lm_head, PlannedLinear)
    assert model.lm_head.weight is model.model.embed_tokens.weight and model.lm_head.weight.is_contiguous()
    assert hf_greedy(model, prompt, 6) == expected


def test_an_unknown_layout_setting_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "column-major")
    with pytest.raises(ValueError, match="auto .* row or col"):
        plan_cpu_layout(nn.Linear(4, 4))


def test_the_timed_plan_covers_every_linear_and_computes_the_same(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "auto")
    model = tiny_target("qwen3", seed=2)
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    expected = model(ids).logits
    plans = plan_cpu_layout(model, rows=(1, 8))
    assert set(plans) == {tuple(m.weight.shape) for m in linears(model)}
    for plan in plans.values():
        assert len(plan.calls) == 2 and all(s > 0 for times in plan.seconds.values() for s in times)
    assert torch.allclose(model(ids).logits, expected, atol=1e-4, rtol=1e-4)


def test_fused_projections_of_column_major_weights_stay_column_major_and_hold_the_same_rows(monkeypatch):
    model = tiny_target("qwen3", seed=4)
    layer = model.model.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach().clone()
    gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach().clone()
    plan_for("col", model, monkeypatch=monkeypatch)
    fused = fuse_projections(layer)
    assert is_column_major(fused.qkv_weight) and is_column_major(fused.gate_up_weight)
    assert torch.equal(fused.qkv_weight, qkv) and torch.equal(fused.gate_up_weight, gate_up)
    assert attn.k_proj.weight.data_ptr() == fused.qkv_weight[attn.q_proj.out_features:].data_ptr()  # views, no copy


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["col", "split"])
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_speculative_greedy_under_a_layout_plan_equals_the_original_targets_greedy(arch, layout, monkeypatch):
    original = tiny_target(arch, seed=1)
    model = copy.deepcopy(original)
    for block_size in (3, 7):
        cfg = draft_config_for(model, block_size=block_size)
        draft = random_draft(cfg, seed=block_size, scale=5.0)
        plan_for(layout, model, draft, monkeypatch=monkeypatch)
        prompt = [random.Random(block_size).randrange(97) for _ in range(2 + 3 * block_size)]
        result = generate(Target(model, cfg.target_layer_ids), draft, prompt, GenerationConfig(max_new_tokens=17))
        assert result.tokens == hf_greedy(original, prompt, 17), (arch, block_size)


def test_the_batch_engine_under_every_layout_plan_decodes_the_same_tokens_and_rounds(monkeypatch):
    prompts = [list(b"hello wor"), list(b"abc"), list(b"xyz 123 456 789"), list(b"q")]
    config = GenerationConfig(max_new_tokens=24)
    results = []
    for layout in ("row", "col", "split"):
        model, draft = build_pair()
        plan_for(layout, model, draft, monkeypatch=monkeypatch)
        engine = BatchEngine(Target(model, draft.config.target_layer_ids), draft, max_batch=3, max_length=96)
        results.append(engine.generate(prompts, config))
    for row, other in zip(results[0], results[1]):
        assert other.tokens == row.tokens and other.stats == row.stats
    for row, other in zip(results[0], results[2]):
        assert other.tokens == row.tokens and other.stats == row.stats
    assert sum(sum(r.stats.accepted_counts) for r in results[1]) > 10  # drafts were really accepted


def test_an_earlier_plan_lays_the_weights_out_again_without_timing(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "auto")
    linear = nn.Linear(48, 80)
    plans = plan_cpu_layout(linear, timer=split_timer())
    plan_cpu_layout(linear, layout="row")
    assert type(linear) is nn.Linear

    def no_timing(*args):
        raise AssertionError("timed a shape the plan already had")

    assert plan_cpu_layout(linear, timer=no_timing, plans=plans) == plans
    assert isinstance(linear, PlannedLinear) and linear.plan == plans[(80, 48)]


def test_a_few_microseconds_between_layouts_count_as_noise_and_keep_one_layout(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "auto")
    linear = nn.Linear(608, 1)  # e.g. a confidence head: ~3 µs a call either way

    def timer(formulation: str, stored: torch.Tensor, rows: int) -> float:  # col 2× faster at 1 row, by 3 µs
        return {"col": 3e-6 if rows == 1 else 6e-6, "row": 6e-6, "row-nt": 9e-6}[formulation]

    plan = plan_cpu_layout(linear, timer=timer)[(1, 608)]
    assert set(plan.calls) == {"row"} and type(linear) is nn.Linear


def test_timing_the_calls_leaves_the_global_random_state_alone(monkeypatch):
    monkeypatch.setenv("DSPARK_CPU_LAYOUT", "auto")
    linear = nn.Linear(16, 24)
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    plan_cpu_layout(linear, rows=(1, 4))
    assert torch.equal(torch.rand(3), expected)
