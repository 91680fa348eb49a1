"""End to end on a real (small) target: train the testbed target on the stdlib, regenerate data with it, train a
DSpark draft and a DFlash-mode draft with the same budget, and measure greedy τ on held-out files."""
from __future__ import annotations

import json

import pytest

from dspark.testbed import build_target
from dspark.testbed.draft_build import DraftRecipe, build_draft, heldout_tau

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)


@pytest.fixture(scope="module")
def target_dir():
    return build_target(threads=2)  # ~1.5–3 min on 2 cores the first time, cached afterwards


def test_dspark_draft_reaches_tau_2_at_block_7_and_beats_dflash_on_the_same_budget(target_dir):
    # the default recipe (also what `dspark serve` runs by default, so CI trains it once); DFlash gets the same budget
    spark = build_draft(target_dir, DraftRecipe(mode="dspark"), progress=False)
    flash = build_draft(target_dir, DraftRecipe(mode="dflash"), progress=False)
    tau_spark = heldout_tau(target_dir, spark, count=16).mean_acceptance_length
    tau_flash = heldout_tau(target_dir, flash, count=16).mean_acceptance_length
    assert tau_spark >= 2.0
    assert tau_spark > tau_flash


def test_testbed_draft_command_reuses_the_cached_draft_and_reports_its_held_out_tau(target_dir, capsys):
    from dspark.cli import main

    spark = build_draft(target_dir, DraftRecipe(mode="dspark"), progress=False)  # the test above's, cached
    assert main(["testbed", "draft", "--eval-prompts", "4"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    report = json.loads(printed[-1])
    assert report["draft"] == str(spark) and report["mode"] == "dspark"
    assert report["mean_tau"] == pytest.approx(heldout_tau(target_dir, spark, count=4).mean_acceptance_length)
    assert len(report["per_position"]) == 7 and sum(report["histogram"]) > 0
    assert printed[0] == f"draft {spark}" and "held-out greedy τ" in printed[1]
    assert main(["testbed", "draft", "--steps", "0"]) == 2
    assert "steps must be >= 1 (got 0)" in capsys.readouterr().err
