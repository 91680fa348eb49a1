"""Target pre-training: packing, the schedule, batch order, and a short run that is deterministic and learns."""
from __future__ import annotations

import math

import pytest
import torch
from testbed_tiny import TINY

from dspark.testbed.recipe import RecipeError, TargetRecipe, qwen3_config
from dspark.testbed.target_train import batches, evaluate, lr_factor, pack, spread_rows, train


def _rows(n: int = 24, seq: int = 64) -> torch.Tensor:
    """Easily learnable rows: a cycle through 18 of the 320 tokens (x_{i+1} = x_i + 5 mod 18), random phase."""
    phase = torch.randint(0, 18, (n, 1), generator=torch.Generator().manual_seed(0))
    return 2 + (phase + 5 * torch.arange(seq)) % 18


def _short_run(recipe: TargetRecipe, rows: torch.Tensor):
    """One short run on one thread (tiny matrices gain nothing from more, and lose a lot on a busy machine)."""
    from transformers import Qwen3ForCausalLM

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(recipe.seed)
        model = Qwen3ForCausalLM(qwen3_config(recipe, 320, 0))
        return model, train(model, rows, recipe)
    finally:
        torch.set_num_threads(threads)


def test_pack_puts_an_eos_after_each_document_and_drops_the_ragged_tail():
    rows = pack([[5, 6, 7], [8, 9]], seq_len=3, eos_token_id=0)
    assert rows.tolist() == [[5, 6, 7], [0, 8, 9]]  # stream 5 6 7 0 8 9 0: the last EOS is cut off
    with pytest.raises(ValueError, match="fewer than one sequence"):
        pack([[1]], seq_len=8, eos_token_id=0)


def test_spread_rows_picks_evenly_spaced_rows_including_both_ends():
    rows = torch.arange(10).view(10, 1)
    assert spread_rows(rows, 4).flatten().tolist() == [0, 3, 6, 9]
    assert spread_rows(rows, 20).shape[0] == 10


def test_lr_schedule_warms_up_linearly_then_decays_by_cosine_to_the_floor():
    r = TargetRecipe(steps=110, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_factor(0, r) == pytest.approx(0.1)
    assert lr_factor(9, r) == pytest.approx(1.0)
    assert lr_factor(10, r) == pytest.approx(1.0)
    assert lr_factor(60, r) == pytest.approx(0.55)
    assert lr_factor(110, r) == pytest.approx(0.1)


def test_batches_alternate_short_pieces_and_whole_rows_in_a_seeded_order():
    rows = torch.arange(8 * 64).view(8, 64)
    r = TINY.replace(steps=6, batch_size=2, seq_len=64, short_seq_len=32, long_every=3)
    shapes = [tuple(b.shape) for b in batches(rows, r)]
    assert shapes == [(4, 32), (4, 32), (2, 64)] * 2
    first = [b.reshape(-1).tolist() for b in batches(rows, r)]
    assert first == [b.reshape(-1).tolist() for b in batches(rows, r)]
    seen = torch.cat([b.reshape(-1, 64)[:, 0] for b in list(batches(rows, r.replace(steps=4)))]) // 64
    assert sorted(seen.tolist()) == list(range(8))  # one epoch visits every row once


SHORT = TINY.replace(steps=8, warmup_steps=2, lr=1e-2, batch_size=4)


@pytest.fixture(scope="module")
def two_runs():
    """The same short run twice: (model of the first, result of the first, result of the second)."""
    model, first = _short_run(SHORT, _rows())
    return model, first, _short_run(SHORT, _rows())[1]


def test_short_training_run_is_deterministic_and_the_loss_falls(two_runs):
    _, first, second = two_runs
    assert first.losses == second.losses  # bit-identical
    assert len(first.losses) == 8 and first.tokens == 8 * 4 * 64
    assert first.losses[0] == pytest.approx(math.log(320), abs=0.3)  # starts near uniform
    assert sum(first.losses[-2:]) / 2 < first.losses[0] - 1.0


def test_evaluate_reports_loss_perplexity_and_top1_over_predicted_positions(two_runs):
    model = two_runs[0]
    ev = evaluate(model, _rows(n=4), batch_size=3)
    assert ev.tokens == 4 * 63
    assert ev.perplexity == pytest.approx(math.exp(ev.loss))
    assert 0.0 <= ev.top1 <= 1.0 and ev.loss < math.log(320)


def test_recipe_rejects_inconsistent_shapes_with_a_clear_message():
    with pytest.raises(RecipeError, match="must divide"):
        TargetRecipe(seq_len=512, short_seq_len=100)
    with pytest.raises(RecipeError, match="steps must be >= 1"):
        TargetRecipe(steps=0)
    with pytest.raises(RecipeError, match="exceeds the model context"):
        TargetRecipe(seq_len=1024)
    assert TargetRecipe.from_dict(TINY.to_dict()) == TINY
    assert TINY.digest() != TINY.replace(steps=3).digest()
