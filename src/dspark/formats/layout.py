"""File names of a checkpoint folder and the error every reader and writer in `dspark.formats` raises.

Pure standard library, imported by the modules that read tensors (`tensors`, `compact`) and by the ones that read
configs (`native`, the layout converters), so none of them needs another to name a file or fail.
"""
from __future__ import annotations

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
EMBEDDING_TENSORS = ("embed_tokens.weight", "lm_head.weight")


class CheckpointError(ValueError):
    """A checkpoint folder that cannot be loaded as a draft; the message names the file, field or tensor."""
