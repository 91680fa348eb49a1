"""Atomic file writes: a temp file in the same folder, then a rename, so a reader never sees a half-written file.

Pure standard library (the planner and the CLI use it without importing torch).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable


def atomic_write(path: str | Path, write: Callable[[str], None], mode: int | None = None) -> Path:
    """Call `write(tmp_path)` and move the result onto `path` (optionally with permission bits `mode`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())  # mkstemp makes 0600 files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_bytes(path: str | Path, data: bytes, mode: int | None = None) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data), mode)


def write_text(path: str | Path, text: str, mode: int | None = None) -> Path:
    return write_bytes(path, text.encode("utf-8"), mode)


def write_json(path: str | Path, data: Any) -> Path:
    return write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
