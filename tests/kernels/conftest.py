"""The engine's Triton kernels run on the CPU through Triton's interpreter, in one subprocess (the interpreter is
chosen when a kernel is defined, so it cannot be switched on inside this process): `interpreted_checks.py` prints the
facts the tests here assert."""
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
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
