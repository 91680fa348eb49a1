"""Data parallel training under torchrun (gloo on CPU): two ranks with global-token loss normalisation train the
same draft as one process accumulating the same two sequences."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dspark.testbed.random_pair import tiny_target
from dspark.train.data import Example, write_examples

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)


def _start(args, tmp_path, nproc) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    cmd = (launcher if nproc > 1 else [sys.executable]) + ["-m", "dspark.cli", "train", "fit", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True)  # its own process group: a hang never outlives the test


def _fit(args, tmp_path, nproc, wait_for: Path | None = None):
    """Run `train fit`; with `wait_for`, send the launcher SIGTERM once that path exists (a preemption)."""
    proc = _start(args, tmp_path, nproc)
    try:
        while wait_for is not None and not wait_for.exists() and proc.poll() is None:
            time.sleep(0.2)
        if wait_for is not None:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:  # SIGTERM first: torchrun then stops its workers (they run in sessions of their own)
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if wait_for is None:
        assert proc.returncode == 0, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])
    assert proc.returncode != 0, out[-2000:]  # a preempted run is not a finished one
    return err


def _pair(tmp_path) -> list[str]:
    """A tiny target and four sequences on disk; the common `train fit` arguments for them (all but --steps)."""
    model = tiny_target("qwen3", seed=0, num_layers=3)
    model.save_pretrained(tmp_path / "target")
    gen = torch.Generator().manual_seed(0)
    lengths = [40, 28, 36, 32]  # different lengths: the global denominator differs from a per-rank mean
    write_examples([Example(str(i), tuple(torch.randint(0, 96, (n,), generator=gen).tolist()),
                            (0,) * 5 + (1,) * (n - 5)) for i, n in enumerate(lengths)], tmp_path / "data.jsonl")
    return ["--target", str(tmp_path / "target"), "--data", str(tmp_path / "data.jsonl"), "--num-anchors", "8",
            "--block-size", "4", "--markov-rank", "8", "--layers", "0,1", "--lr", "3e-3", "--mask-token-id", "96"]


def test_two_ranks_equal_one_process_accumulating_their_sequences(tmp_path):
    common = [*_pair(tmp_path), "--steps", "2"]
    two = _fit([*common, "--out", str(tmp_path / "ddp")], tmp_path, nproc=2)
    one = _fit([*common, "--grad-accum", "2", "--hidden-cache-gib", "1", "--out", str(tmp_path / "single")], tmp_path,
               nproc=1)  # the memoised hidden states change nothing
    assert abs(two["final_loss"] - one["final_loss"]) < 1e-5
    a = load_file(tmp_path / "ddp" / "final" / "model.safetensors")
    b = load_file(tmp_path / "single" / "final" / "model.safetensors")
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4)


def test_sigterm_to_torchrun_stops_both_ranks_at_one_checkpointed_step_and_resume_finishes(tmp_path):
    common = _pair(tmp_path)
    out = tmp_path / "ddp"
    err = _fit([*common, "--steps", "100000", "--save-every", "1", "--out", str(out)], tmp_path, nproc=2,
               wait_for=out / "latest")  # SIGTERM once the first checkpoint exists; the run never ends by itself
    assert "SIGTERM" in err
    stopped = int((out / "latest").read_text().strip().split("-")[-1])  # the step both ranks stopped after
    assert stopped >= 1 and not (out / "final").exists()
    done = _fit([*common, "--steps", str(stopped + 2), "--resume", "--out", str(out)], tmp_path, nproc=2)
    assert done["steps"] == stopped + 2 and (out / "final" / "model.safetensors").is_file()
