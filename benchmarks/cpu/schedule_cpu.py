"""Confidence scheduling at batch 1 on the CPU: SmolLM2-135M-Instruct + the shipped draft, decode tokens/s of plain
decoding vs DSpark with no scheduling, the threshold cut, and Algorithm 1 on a round-cost table measured here.

    python benchmarks/cpu/schedule_cpu.py [--prompts 4] [--max-new-tokens 96] [--threads 1] [--out DIR]

Prints the round-cost table, a per-suite table and one JSON line (also written to DIR/schedule_cpu.json). Every
speculative run is checked token for token against plain greedy decoding. A benchmark, not a test.
"""
from __future__ import annotations

import json

import torch

from dspark.bench.runinfo import device_name, git_commit
from dspark.config import GenerationConfig
from dspark.demo import timed_generate
from dspark.engine.batch import engine_for
from dspark.engine.schedule import Scheduling
from dspark.files import write_json
from warm_demo import demo_parser, warm_demo


def main() -> None:
    parser = demo_parser(__doc__, prompts=4, out="benchmarks/results/cpu_schedule")
    parser.add_argument("--thresholds", default="0.3,0.5")
    args = parser.parse_args()
    setup, base, first = warm_demo(args.prompts, args.max_new_tokens, args.threads)
    engine = engine_for(setup.target, setup.draft, [first], args.max_new_tokens, max_batch=1)  # a one-row engine
    cost = engine.measure_step_costs(1, repeats=7, context=len(first))  # whole rounds by verify width
    print("round cost (draft + verify) by verify width:",
          ", ".join(f"{w}: {ms:.1f} ms" for w, ms in cost.latency_ms().items()))
    methods = {"plain": (None, base, None), "dspark": (setup.draft, base, None)}
    for t in (float(x) for x in args.thresholds.split(",") if x):
        methods[f"threshold {t}"] = (setup.draft, GenerationConfig(**{**base.__dict__, "confidence_threshold": t}),
                                     None)
    methods["algorithm1"] = (setup.draft, base, Scheduling("algorithm1", cost))
    rows = {}
    for suite, prompts in setup.prompts.items():
        plain_tokens = []
        for name, (draft, config, table) in methods.items():
            tokens = decode = rounds = accepted = 0
            lossless = True
            for i, prompt in enumerate(prompts):
                run = timed_generate(setup.target, draft, prompt, config, table)
                if name == "plain":
                    plain_tokens.append(run.tokens)
                lossless &= run.tokens == plain_tokens[i]
                tokens, decode = tokens + max(0, len(run.tokens) - 1), decode + run.decode_seconds
                rounds, accepted = rounds + run.stats.rounds, accepted + sum(run.stats.accepted_counts)
            rows[f"{suite}/{name}"] = {"tokens_per_s": tokens / decode, "tau": (accepted + rounds) / max(rounds, 1),
                                       "lossless": lossless}
        plain = rows[f"{suite}/plain"]["tokens_per_s"]
        for name in methods:
            row = rows[f"{suite}/{name}"]
            row["speedup"] = row["tokens_per_s"] / plain
            print(f"{suite:5s} {name:14s} {row['tokens_per_s']:7.2f} tok/s  speedup {row['speedup']:.2f}x  "
                  f"τ {row['tau']:.2f}  lossless {row['lossless']}", flush=True)
    overall = {name: sum(rows[f"{s}/{name}"]["speedup"] for s in setup.prompts) / len(setup.prompts)
               for name in methods}
    commit, dirty = git_commit()
    result = {"device": device_name("cpu"), "torch": torch.__version__, "commit": commit, "dirty": dirty,
              "prompts_per_suite": args.prompts,
              "max_new_tokens": args.max_new_tokens, "draft": str(setup.draft_path),
              "round_cost_ms": cost.latency_ms(),
              "rows": rows, "mean_speedup": overall}
    write_json(args.out / "schedule_cpu.json", result)  # atomically, creating the folder
    print(json.dumps(result))


if __name__ == "__main__":
    main()
