"""The in-memory draft checkpoint every layout converts to and from, and the options a conversion takes.

A `DraftCheckpoint` holds the draft's config, its tensors under dspark's own (DeepSpec) names exactly as stored,
and the few layout facts `DraftConfig` does not model (`extras`). Reading and writing files lives in the layout
modules; this module only defines the shapes they exchange.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dspark.config import DraftConfig

# Layout names, as `dspark export --layout` spells them.
NATIVE, DEEPSPEC, SPECFORGE, SPECULATORS, DFLASH = "native", "deepspec", "specforge", "speculators", "dflash"
LAYOUTS = (NATIVE, DEEPSPEC, SPECFORGE, SPECULATORS, DFLASH)

# Keys of `DraftCheckpoint.extras` (kept in the native config under "dspark_extras" so round trips keep them):
#   num_anchors            DeepSpec's training anchors per sequence (Qwen3DSparkModel requires the field)
#   confidence_head_alpha  SpecForge's confidence-loss weight
#   verifier               {"name_or_path": str | None, "architectures": [str]} for speculators_config.verifier
EXTRA_KEYS = ("num_anchors", "confidence_head_alpha", "verifier")


@dataclass(frozen=True)
class DraftCheckpoint:
    config: DraftConfig
    tensors: dict[str, torch.Tensor]  # dspark / DeepSpec names, dtypes and bytes as stored
    extras: dict[str, Any] = field(default_factory=dict)
    layout: str = NATIVE  # the layout it was read from


@dataclass(frozen=True)
class ConvertOptions:
    """What a conversion may need besides the draft itself.

    `target`: the target model folder (or its config.json): gives `num_target_layers` when a layout does not store
    it, the verifier recorded in a speculators export, and the embedding / LM head that DeepSpec and speculators
    exports carry. `verifier`: the verifier name_or_path to record instead of the target's path.
    `num_anchors`: DeepSpec's training anchor count to write (default: the imported value, else 512).
    `drop_embeddings`: on import, leave out the stored copies of the target's embedding / LM head.
    `int8`: write the native folder's matrices as int8 with per-row scales (`dspark.formats.compact`; ~1.9× smaller
    than bf16, for shipping; engines' layouts stay in the draft's own dtype).
    """

    target: Path | None = None
    verifier: str | None = None
    num_anchors: int | None = None
    drop_embeddings: bool = False
    int8: bool = False
