"""The model `dspark serve` runs when given no model arguments: the one place that knows what the default is.

Until the shipped SmolLM2-135M-Instruct draft exists, the default is the tiny synthetic pair of `tiny_successor`
(a toy target that continues text with the next ASCII character, and a draft that knows the rule). To change the
default, change `DEFAULT_MODEL_NAME` and `load_default` here and nothing else.
"""
from __future__ import annotations

from typing import Any

from torch import nn

from dspark.model.draft import DSparkDraft
from dspark.serve import tiny_successor

DEFAULT_MODEL_NAME = tiny_successor.MODEL_NAME


def load_default() -> tuple[nn.Module, Any, DSparkDraft]:
    """(hf_model, tokenizer, draft) of the embedded default; the draft is tied to the target by `model_source`."""
    return tiny_successor.load()
