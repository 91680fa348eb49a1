"""`dspark testbed target`: reuses the cache, writes --out folders, prints a table or one JSON object, exits 2
with one line on bad input. The recipe is swapped for the tiny one so that each run takes seconds."""
from __future__ import annotations

import json

import pytest
from testbed_tiny import TINY

from dspark.cli import main


@pytest.fixture(autouse=True)
def _tiny_recipe(monkeypatch):
    import dspark.testbed.recipe as recipe_module

    monkeypatch.setattr(recipe_module, "TargetRecipe", lambda: TINY)


def test_cached_target_is_reported_as_json(tiny_target, tiny_cache, capsys):
    assert main(["testbed", "target", "--cache-dir", str(tiny_cache), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["path"] == str(tiny_target) and out["cached"] is True
    assert (out["eos_token_id"], out["mask_token_id"], out["vocab_size"], out["steps"]) == (0, 1, 320, 2)
    assert out["heldout_loss"] > 0 and out["train_files"] > 0 and out["heldout_files"] > 0


@pytest.mark.slow
def test_out_folder_gets_a_fresh_target_and_a_table(tmp_path, capsys):
    out = tmp_path / "target"
    assert main(["testbed", "target", "--out", str(out), "--steps", "1", "--threads", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "held-out" in printed and "perplexity" in printed and "greedy continuation" in printed
    card = json.loads((out / "testbed.json").read_text())
    assert card["training"]["steps"] == 1 and len(card["training"]["losses"]) == 1


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    assert main(["testbed", "target", "--steps", "0", "--cache-dir", str(tmp_path)]) == 2
    assert "steps must be >= 1" in capsys.readouterr().err
    (tmp_path / "x.txt").write_text("taken")
    assert main(["testbed", "target", "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "not an empty folder" in err and len(err.strip().splitlines()) == 1


def test_missing_subcommand_prints_help_and_exits_2(capsys):
    assert main(["testbed"]) == 2
    assert "target" in capsys.readouterr().err
