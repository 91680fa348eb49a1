"""End to end on a real (small) target: train the testbed target on the stdlib, regenerate data with it, train a
DSpark draft and a DFlash-mode draft with the same budget, and measure greedy τ on held-out files."""
from __future__ import annotations

import pytest

from dspark.testbed import build_target
from dspark.testbed.draft_build import DraftRecipe, build_draft, heldout_tau


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
