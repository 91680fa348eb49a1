"""The model `dspark serve` runs when given no model arguments: the one place that knows what the default is.

Until the shipped SmolLM2-135M-Instruct draft exists, the default is the testbed: the small Qwen3 target trained on
the Python standard library and a DSpark draft trained against it (`dspark testbed target|draft`). Both are cached;
the first start on a fresh machine trains them (about 3 minutes on 2 cores), later starts take a second.
`--target/--draft` serve anything else. To change the default, change `DEFAULT_MODEL_NAME` and `load_default`.
"""
from __future__ import annotations

from typing import Any

from torch import nn

from dspark.model.draft import DSparkDraft

DEFAULT_MODEL_NAME = "dspark-testbed-stdlib"


def load_default() -> tuple[nn.Module, Any, DSparkDraft]:
    """(hf_model, tokenizer, draft) of the embedded default; the draft is tied to the target by `model_source`."""
    from dspark.formats.native import load_draft
    from dspark.testbed.draft_build import DraftRecipe, build_draft
    from dspark.testbed.target_build import build_target, load_target

    target_dir = build_target()
    draft_dir = build_draft(target_dir, DraftRecipe())
    model, tokenizer = load_target(target_dir)
    return model, tokenizer, load_draft(draft_dir)
