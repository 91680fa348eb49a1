"""Atomic writes of benchmark outputs (results JSON, report Markdown, PNG plots), on top of the checkpoint writer's
`atomic_write` (temp file in the same folder, then rename): a reader never sees a half-written file.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dspark.formats.native import atomic_write


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, lambda tmp: Path(tmp).write_bytes(data))
    return target


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, data: Any) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
