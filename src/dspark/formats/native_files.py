"""dspark's native folder as a `DraftCheckpoint`: read and write without going through a model (bit-exact).

The config is `dspark.formats.native.config_to_dict` plus, when a conversion carried them, the layout facts that
`DraftConfig` does not model under "dspark_extras" (see `checkpoint.EXTRA_KEYS`). Foreign layouts live in their
own modules; `dspark.formats.native.load_draft` reads these folders into a model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from dspark.formats.checkpoint import EXTRA_KEYS, NATIVE, DraftCheckpoint
from dspark.formats.native import (CONFIG_NAME, CheckpointError, config_from_dict, config_to_dict,  # noqa: F401
                                   read_raw_config, write_json)
from dspark.formats.tensors import check_tensors, read_tensors, write_tensors

EXTRAS_FIELD = "dspark_extras"


def is_native(raw: dict[str, Any]) -> bool:
    """Native configs are the DeepSpec architecture plus dspark's own `dspark_mode` field."""
    return "dspark_mode" in raw and "Qwen3DSparkModel" in (raw.get("architectures") or [])


def read_native(folder: Path, raw: dict[str, Any]) -> DraftCheckpoint:
    where = str(folder / CONFIG_NAME)
    config = config_from_dict(raw, where)
    extras = raw.get(EXTRAS_FIELD) or {}
    if not isinstance(extras, dict) or set(extras) - set(EXTRA_KEYS):
        raise CheckpointError(f"{where}: {EXTRAS_FIELD} must be an object with keys among {EXTRA_KEYS}")
    tensors = read_tensors(folder)
    check_tensors(config, tensors, str(folder))
    return DraftCheckpoint(config, tensors, dict(extras), NATIVE)


def write_native(checkpoint: DraftCheckpoint, folder: Path, int8: bool = False) -> None:
    data = config_to_dict(checkpoint.config)
    extras = {k: v for k, v in checkpoint.extras.items() if v is not None}
    if extras:
        data[EXTRAS_FIELD] = extras
    write_tensors(folder, checkpoint.tensors, int8)
    write_json(folder / CONFIG_NAME, data)


