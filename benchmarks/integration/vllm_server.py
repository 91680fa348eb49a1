"""A vLLM OpenAI-compatible server on 127.0.0.1 for the benchmark scripts: start it (CPU build, float32, eager, in its
own process group, offline), wait until it answers /health, stop it and everything it started."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx


def start_server(python: str, model: Path, port: int, work: Path, log: Path,
                 extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """`python -m vllm.entrypoints.openai.api_server` for `model`, its output in `log`; `extra`: more arguments."""
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "VLLM_CACHE_ROOT": str(work / "vllm-cache")}
    command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--dtype", "float32", "--enforce-eager", "--max-model-len", "512", *extra]
    with log.open("w") as handle:
        return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_healthy(base: str, server: subprocess.Popen, log: Path, timeout: float) -> float:
    """Seconds until `base`/health answers 200; raises with the log's last lines if the server exits first."""
    began = time.time()
    while time.time() - began < timeout:
        if server.poll() is not None:
            raise RuntimeError(f"vLLM exited with status {server.returncode}; last log lines:\n"
                               + "\n".join(log.read_text().splitlines()[-25:]))
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return time.time() - began
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise RuntimeError(f"vLLM did not become healthy within {timeout:.0f} s (log: {log})")


def stop_server(server: subprocess.Popen) -> None:
    """SIGTERM our server's process group (started with a new session), then SIGKILL what is left."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
