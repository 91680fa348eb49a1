"""Shared plumbing of the integration scripts: run the dspark CLI, and record a result with its command and commit.

Results go to benchmarks/results/integration/result.json, one entry per check under "checks": the check's own JSON plus
the exact command line, the git commit of the checkout (and whether it had uncommitted changes), the host's Python and
the time it ran. Set DSPARK_RESULTS to write elsewhere.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(os.environ.get("DSPARK_RESULTS", REPO / "benchmarks" / "results" / "integration"))
PROJECT_PYTHON = REPO / ".venv" / "bin" / "python"


def dspark_cli(*args: str, python: str | Path | None = None) -> None:
    """`dspark ARGS` with the given interpreter (default: this one if it has dspark, else the project venv's)."""
    if python is None:
        try:
            import dspark  # noqa: F401

            python = sys.executable
        except ImportError:
            python = PROJECT_PYTHON
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run([str(python), "-m", "dspark.cli", *args], check=True, stdout=subprocess.DEVNULL, env=env)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()


def record(name: str, result: dict) -> Path:
    """Write the result with provenance (atomically) and return its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {"command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
            "commit": _git("rev-parse", "HEAD"), "uncommitted_changes": bool(_git("status", "--porcelain")),
            "python": platform.python_version(), "machine": f"{platform.machine()} CPU, {os.cpu_count()} cores",
            "ran_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **result}
    path = RESULTS / "result.json"
    merged = json.loads(path.read_text()) if path.exists() else {}
    merged.setdefault("checks", {})[name] = data
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(merged, indent=1) + "\n")
    os.replace(tmp, path)
    return path
