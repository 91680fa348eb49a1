"""The engine's Triton kernels run on the CPU through Triton's interpreter, in two subprocesses (the interpreter is
chosen when a kernel is defined, so it cannot be switched on inside this process): `interpreted_checks.py` prints the
facts the tests here assert, in two halves that run side by side."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="Triton is a dev dependency on Linux x86-64 (pyproject [dev])")


@pytest.fixture(scope="session")
def facts() -> dict:
    script = Path(__file__).with_name("interpreted_checks.py")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    halves = [subprocess.Popen([sys.executable, str(script), part], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for part in ("a", "b")]  # side by side: 2 cores
    facts = {}
    for half in halves:
        out, err = half.communicate(timeout=900)
        assert half.returncode == 0, err[-3000:]
        facts.update(json.loads(out.strip().splitlines()[-1]))
    return facts
