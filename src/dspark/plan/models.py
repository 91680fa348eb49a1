"""Resolve a model reference (a target preset, a draft preset, or a local config.json) to a `ModelSpec`.

Nothing here knows shapes; it only dispatches to `presets`, `drafts` and `hf_config`.
"""
from __future__ import annotations

from pathlib import Path

from dspark.config import PRESETS as DRAFT_PRESETS
from dspark.plan.drafts import draft_preset
from dspark.plan.errors import PlanError
from dspark.plan.hf_config import read_config, spec_from_config
from dspark.plan.presets import TARGET_PRESETS
from dspark.plan.spec import ModelSpec


def known_models() -> list[str]:
    return [*TARGET_PRESETS, *DRAFT_PRESETS]


def load_model(ref: str) -> ModelSpec:
    """`ref` is a preset name (`kimi-k3`, `kimi-k3-dspark`, `qwen3-8b` ...) or a path to an HF config.json."""
    key = ref.strip().lower()
    if key in TARGET_PRESETS:
        return TARGET_PRESETS[key]()
    if key in DRAFT_PRESETS:
        return draft_preset(key)
    path = Path(ref).expanduser()
    if path.exists():
        name = path.parent.name if path.is_file() else path.name
        return spec_from_config(read_config(path), name=name or str(path))
    raise PlanError(f"unknown model {ref!r}: not a preset ({', '.join(known_models())}) and no such path")
