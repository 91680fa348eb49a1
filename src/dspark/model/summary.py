"""Size facts of a draft config, computed on the meta device (no memory is allocated).

Parameter count excludes the token embedding and LM head, which the draft shares with its target.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from dspark.config import DraftConfig
from dspark.model.draft import DSparkDraft, count_parameters


@dataclass(frozen=True)
class DraftSummary:
    parameters: int
    bf16_weight_bytes: int
    kv_bytes_per_token_bf16: int  # draft context K/V per token: 2 · layers · kv_heads · head_dim · 2 bytes
    parameters_by_part: dict[str, int]


def summarize(config: DraftConfig) -> DraftSummary:
    with torch.device("meta"):
        draft = DSparkDraft(config)
    parts: dict[str, int] = {}
    for name, p in draft.named_parameters():
        part = "layers" if name.startswith("layers.") else name.split(".")[0]
        parts[part] = parts.get(part, 0) + p.numel()
    total = count_parameters(draft)
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * 2
    return DraftSummary(total, 2 * total, kv, parts)
