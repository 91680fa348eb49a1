"""What the checkpoint-format tests share: paths and a maker of small native draft folders.

A plain module rather than a conftest.py: every folder's conftest is imported under the name `conftest`, and tests
elsewhere import names from the root one.
"""
from __future__ import annotations

from pathlib import Path

import torch

from dspark.config import preset
from dspark.formats.native import save_draft
from dspark.testbed.random_pair import random_draft

CONFORMANCE = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"
TARGET_DIR = CONFORMANCE / "deepspec" / "target"  # a 6-layer Qwen3, vocab 97, hidden 64: fits the tiny presets


def make_native(tmp_path: Path, name: str = "tiny", dtype: torch.dtype = torch.float32, embeddings: bool = False,
                folder: str = "native") -> Path:
    """A random native draft folder of a preset (fitted to the 6-layer target), in a dtype, with or without copies
    of an embedding / LM head."""
    config = preset(name).replace(num_target_layers=6)
    draft = random_draft(config, seed=3, scale=2.0).to(dtype)
    if embeddings:
        draft.tie_embeddings(torch.nn.Embedding(config.vocab_size, config.hidden_size).to(dtype),
                             torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False).to(dtype))
    return save_draft(draft, tmp_path / folder, include_embeddings=embeddings)
