"""Files shipped inside the package, and the one place that knows where they are.

`SMOLLM2_DRAFT` is the DSpark draft trained for SmolLM2-135M-Instruct (a native draft folder: `config.json`,
`model.safetensors` in bf16 without the embeddings it shares with the target, `calibration.json`, a card
`README.md`). `smollm2_draft()` resolves the folder to use: an explicit path, else `$DSPARK_SMOLLM2_DRAFT`, else the
shipped one. Nothing here loads weights.
"""
from __future__ import annotations

import os
from pathlib import Path

SMOLLM2_DRAFT = Path(__file__).resolve().parent / "smollm2-135m-instruct-dspark"
DRAFT_ENV = "DSPARK_SMOLLM2_DRAFT"  # overrides SMOLLM2_DRAFT (for a draft you trained yourself)


class MissingAsset(FileNotFoundError):
    """A draft folder that should be there is not; the message says how to point at one."""


def smollm2_draft(override: str | Path | None = None) -> Path:
    """The SmolLM2 draft folder: `override`, else `$DSPARK_SMOLLM2_DRAFT`, else the shipped `SMOLLM2_DRAFT`."""
    chosen = override or os.environ.get(DRAFT_ENV) or SMOLLM2_DRAFT
    folder = Path(chosen).expanduser()
    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        where = ("--draft" if override else f"${DRAFT_ENV}" if os.environ.get(DRAFT_ENV) else "the package")
        raise MissingAsset(f"no SmolLM2 draft at {folder} (from {where}): the folder needs config.json and "
                           f"model.safetensors; set {DRAFT_ENV}=PATH (or `dspark demo --draft PATH`) to a draft "
                           f"folder")
    return folder


def has_smollm2_draft(override: str | Path | None = None) -> bool:
    """Whether `smollm2_draft(override)` would find a draft folder."""
    try:
        smollm2_draft(override)
    except MissingAsset:
        return False
    return True
