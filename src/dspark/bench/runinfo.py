"""Who, where and when: the dspark version, git commit, device and library versions recorded with every result.

Reads the environment only (git is asked read-only, with a short timeout); it measures nothing.
"""
from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from dspark.bench.results import RunInfo

_CHECKOUT = Path(__file__).resolve().parents[3]  # src/dspark/bench -> the repository root of a source checkout


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def _git(*args: str) -> str | None:
    if not (_CHECKOUT / "src" / "dspark").is_dir() or not (_CHECKOUT / ".git").exists():
        return None  # an installed copy, not a source checkout: there is no commit to name
    try:
        done = subprocess.run(["git", "--no-optional-locks", "-C", str(_CHECKOUT), *args], capture_output=True,
                              text=True, timeout=10)  # read-only: no index refresh, no lock taken
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit() -> tuple[str, bool | None]:
    """(commit hash or "unknown", whether the checkout has uncommitted changes or None if unknown)."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return "unknown", None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return commit, None if status is None else bool(status)


def device_name(device: str) -> str:
    """A readable name for a torch device string ("cuda:0" -> "NVIDIA H200", "cpu" -> "cpu (x86_64, 2 threads)")."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"{device} ({platform.machine() or 'unknown'}, {torch.get_num_threads()} threads)"


def collect_run_info(command: str, device: str) -> RunInfo:
    commit, dirty = git_commit()
    return RunInfo(dspark_version=_version("dspark"), commit=commit, device=device_name(device), command=command,
                   created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   python=platform.python_version() or sys.version.split()[0], torch=_version("torch"),
                   transformers=_version("transformers"), dirty=dirty)
