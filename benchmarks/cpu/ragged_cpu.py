"""Ragged vs rectangle verify in the batched engine on the CPU: SmolLM2-135M-Instruct + the shipped draft, tokens/s of
plain decoding and of DSpark under each scheduling rule, both verify shapes in one process, alternating, repeated.

    python benchmarks/cpu/ragged_cpu.py [--prompts 6] [--concurrency 16] [--max-new-tokens 64] [--repeats 3]
                                        [--threads 2] [--out DIR]

A rectangle verify runs every row over the widest row's width; a ragged one computes only each row's anchor and
scheduled drafts (projections, MLP, LM head), with Algorithm 1 choosing each row's length on a cost by total tokens.
Each shape measures its own round-cost tables first. Every run is checked token for token against plain greedy
decoding. Prints a table (medians over the repeats) and one JSON line (also DIR/ragged_cpu.json). A benchmark, not a
test: timings on a shared 2-core machine vary by ~10 % from run to run, so compare rows of one run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from dspark.bench.runinfo import device_name, git_commit
from dspark.config import GenerationConfig
from dspark.engine.batch import BatchEngine
from dspark.engine.batch_schedule import Scheduling
from dspark.files import write_json
from warm_demo import warm_demo

RULES = ("none", "threshold", "algorithm1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=6, help="prompts per suite (code, chat, math)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=0.3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu_ragged"))
    args = parser.parse_args()
    setup, config, _ = warm_demo(args.prompts, args.max_new_tokens, args.threads)
    prompts = [p for suite in setup.prompts.values() for p in suite]
    length = max(map(len, prompts)) + args.max_new_tokens + setup.draft.config.num_draft_tokens + 1
    levels = sorted({min(2 ** k, args.concurrency) for k in range(args.concurrency.bit_length() + 1)})
    plain = BatchEngine(setup.target, None, args.concurrency, length)
    reference = [r.tokens for r in plain.generate(prompts, config)]
    engines, tables = {}, {}
    for shape in ("rectangle", "ragged"):
        engines[shape] = BatchEngine(setup.target, setup.draft, args.concurrency, length, ragged=shape == "ragged")
        tables[shape] = engines[shape].round_cost_tables(levels)
        print(f"{shape} round costs (ms) at batch {args.concurrency}:",
              {t: round(1000 / tables[shape][args.concurrency](t), 1) for t in range(1, 9)}, flush=True)
    runs: dict[str, list[dict]] = {"plain": []}
    for repeat in range(args.repeats):
        runs["plain"].append(timed(plain, prompts, config, None, reference))
        for shape in (("rectangle", "ragged") if repeat % 2 == 0 else ("ragged", "rectangle")):
            for rule in RULES:
                run_config = GenerationConfig(**{**config.__dict__, "confidence_threshold":
                                                 args.threshold if rule == "threshold" else 0.0})
                scheduling = Scheduling(rule, tables[shape] if rule == "algorithm1" else None)
                runs.setdefault(f"{shape}/{rule}", []).append(
                    timed(engines[shape], prompts, run_config, scheduling, reference))
        print(f"repeat {repeat + 1}/{args.repeats}:",
              {k: round(v[-1]["tokens_per_s"], 1) for k, v in runs.items()}, flush=True)
    base = statistics.median(r["tokens_per_s"] for r in runs["plain"])
    rows = {name: {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in rs),
                   "each": [round(r["tokens_per_s"], 2) for r in rs],
                   "tau": rs[0]["tau"], "drafts_per_round": rs[0]["drafts_per_round"],
                   "lossless": all(r["lossless"] for r in rs)} for name, rs in runs.items()}
    print(f"\nC = {args.concurrency}, {len(prompts)} prompts × {args.max_new_tokens} tokens, medians of "
          f"{args.repeats}")
    print(f"{'method':<24}{'tok/s':>8}{'speedup':>9}{'τ':>7}{'drafts verified/round':>23}  lossless")
    for name, row in rows.items():
        row["speedup"] = row["tokens_per_s"] / base
        print(f"{name:<24}{row['tokens_per_s']:>8.2f}{row['speedup']:>8.2f}×{row['tau']:>7.2f}"
              f"{row['drafts_per_round']:>23.2f}  {row['lossless']}")
    commit, dirty = git_commit()
    result = {"benchmark": "ragged_cpu", "device": device_name("cpu"), "torch": torch.__version__, "commit": commit,
              "dirty": dirty, "threads": args.threads,
              "concurrency": args.concurrency, "prompts": len(prompts), "max_new_tokens": args.max_new_tokens,
              "repeats": args.repeats, "threshold": args.threshold,
              "round_costs_ms": {shape: {str(b): {str(t): 1000 / table(t) for t in range(1, 9)}
                                         for b, table in tables[shape].items()} for shape in tables},
              "rows": rows}
    write_json(args.out / "ragged_cpu.json", result)
    print(json.dumps({"results": str(args.out / "ragged_cpu.json"),
                      "speedups": {k: round(v["speedup"], 3) for k, v in rows.items()}}))


def timed(engine: BatchEngine, prompts: list[list[int]], config: GenerationConfig, scheduling: Scheduling | None,
          reference: list[list[int]]) -> dict:
    """One timed generation of every prompt: new tokens per second of wall time (prefills included), τ, drafts
    verified per round, and whether every output equals plain greedy decoding."""
    began = time.perf_counter()
    results = engine.generate(prompts, config, scheduling)
    seconds = time.perf_counter() - began
    rounds = sum(r.stats.rounds for r in results)
    accepted = sum(sum(r.stats.accepted_counts) for r in results)
    return {"tokens_per_s": sum(len(r.tokens) for r in results) / seconds,
            "tau": (accepted + rounds) / max(rounds, 1),
            "drafts_per_round": sum(sum(r.stats.proposed_counts) for r in results) / max(rounds, 1),
            "lossless": [r.tokens for r in results] == reference}


if __name__ == "__main__":
    main()
