"""The model `dspark serve` runs when given no model arguments: the one place that knows what the default is.

The default is SmolLM2-135M-Instruct with the DSpark draft shipped in the package (`dspark.assets.SMOLLM2_DRAFT`,
or `$DSPARK_SMOLLM2_DRAFT`), when the packages SmolLM2 loads from are installed (`dspark.formats.smollm2`) and the
draft folder is there. Otherwise it is the testbed pair (the small Qwen3 trained on the Python standard library and
its DSpark draft, cached; a fresh machine trains them first, about 3 minutes on 2 cores), and one warning on the
`dspark.serve` logger says why. `--target/--draft` serve anything else. The choice lives in the command line because
it spans layers the server may not import (the testbed); `dspark.serve.model_source.load_served_model` gets
`load_default` as its `default` and loads nothing else by itself.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

    from dspark.model.draft import DSparkDraft

SMOLLM2_MODEL_NAME = "SmolLM2-135M-Instruct"
TESTBED_MODEL_NAME = "dspark-testbed-stdlib"

log = logging.getLogger("dspark.serve")


@dataclass(frozen=True)
class DefaultChoice:
    name: str  # the served model id
    fallback_reason: str | None  # why the testbed pair is served instead of SmolLM2 (None: SmolLM2 is)


def choose_default() -> DefaultChoice:
    """Which default `load_default` will load, decided from what is installed (nothing is loaded)."""
    from dspark.assets import MissingAsset, smollm2_draft
    from dspark.formats import smollm2

    missing = smollm2.missing_packages()
    if missing:
        return DefaultChoice(TESTBED_MODEL_NAME, f"{', '.join(missing)} not installed (to serve {SMOLLM2_MODEL_NAME}, "
                                                 f"run: {smollm2.install_command(missing)})")
    try:
        smollm2_draft()
    except MissingAsset as err:
        return DefaultChoice(TESTBED_MODEL_NAME, str(err))
    return DefaultChoice(SMOLLM2_MODEL_NAME, None)


def load_default() -> tuple[str, nn.Module, Any, DSparkDraft, Path]:
    """(name, hf_model, tokenizer, draft, draft folder) of the default; the draft is tied to the target by
    `dspark.serve.model_source`."""
    from dspark.formats.native import load_draft

    choice = choose_default()
    if choice.fallback_reason is None:
        from dspark.assets import smollm2_draft
        from dspark.formats.smollm2 import load_smollm2

        model, tokenizer = load_smollm2()
        return choice.name, model, tokenizer, load_draft(smollm2_draft()), Path(smollm2_draft())
    log.warning("serving the testbed pair %s instead of %s: %s", choice.name, SMOLLM2_MODEL_NAME,
                choice.fallback_reason)
    from dspark.testbed.draft_build import DraftRecipe, build_draft
    from dspark.testbed.target_build import build_target, load_target

    target_dir = build_target()
    draft_dir = build_draft(target_dir, DraftRecipe())
    model, tokenizer = load_target(target_dir)
    return choice.name, model, tokenizer, load_draft(draft_dir), Path(draft_dir)
