"""dspark: DSpark speculative decoding — draft models, a lossless engine, training, serving, deployment, planning.

The public API is re-exported here lazily so that `import dspark` stays light (no torch until you use a model).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from dspark.config import DraftConfig, GenerationConfig, RopeConfig, preset

__all__ = [
    "DraftConfig", "GenerationConfig", "RopeConfig", "preset",
    "DSparkDraft", "Target", "load_draft", "save_draft", "generate", "generate_stream",
    "generate_batch", "BatchEngine", "TreeShape", "load_smollm2",
]

_LAZY = {
    "DSparkDraft": "dspark.model.draft",
    "Target": "dspark.model.target",
    "load_draft": "dspark.formats.native",
    "save_draft": "dspark.formats.native",
    "generate": "dspark.engine.generate",
    "generate_stream": "dspark.engine.generate",
    "generate_batch": "dspark.engine.batch",
    "BatchEngine": "dspark.engine.batch",
    "TreeShape": "dspark.engine.tree",
    "load_smollm2": "dspark.formats.smollm2",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dspark' has no attribute {name!r}")
