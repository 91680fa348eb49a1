"""Small real and random targets we can build here, for demos and tests.

`random_pair` makes untrained models that exercise every code path. The rest builds a real tiny target: a
Qwen3 trained from scratch on the Python standard library's code (`corpus`, `code_text`, `tokenizer`, `recipe`,
`target_train`, `target_build`), plus held-out prompt/continuation examples (`examples`). The main entry points
are re-exported here and imported lazily (this package import stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "build_target": "dspark.testbed.target_build",
    "write_target": "dspark.testbed.target_build",
    "load_target": "dspark.testbed.target_build",
    "read_card": "dspark.testbed.card",
    "TestbedError": "dspark.testbed.card",
    "TargetRecipe": "dspark.testbed.recipe",
    "heldout_examples": "dspark.testbed.examples",
    "CodeExample": "dspark.testbed.examples",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'dspark.testbed' has no attribute {name!r}")
