"""Row-major, column-major and timed ("auto") weight layouts on the CPU (`dspark.engine.cpu_layout`): SmolLM2-135M-
Instruct + the shipped draft in fp32, the demo's prompts. Per layout: a one-row engine's round latency by verify width
(draft block + verify of 1 token = the anchor alone … 8 = anchor + 7 drafts; `BatchEngine.measure_step_costs`), the
draft block's latency (propose per round of a generation, `profile_engine_rounds`), and decode tokens/s of plain and
DSpark decoding with the speedup. The layouts alternate (row, col, auto, row, …) and each figure is the median over
the passes, so drift of the machine hits all alike; "auto" is the plan the demo's loader timed, printed first.
Every speculative run is checked token for token against plain greedy decoding.

    python benchmarks/cpu/layout_cpu.py [--passes 2] [--prompts 2] [--max-new-tokens 96] [--threads 1] [--out DIR]

Prints a table and one JSON line (also written to DIR/layout_cpu.json). A benchmark, not a test.
"""
from __future__ import annotations

import json
import os
import statistics

import torch

from dspark.bench.round_profile import profile_engine_rounds
from dspark.bench.runinfo import device_name, git_commit
from dspark.config import GenerationConfig
from dspark.demo import timed_generate
from dspark.engine.batch import engine_for
from dspark.engine.cpu_layout import plan_cpu_layout
from dspark.files import write_json
from warm_demo import demo_parser, warm_demo


def one_pass(setup, config: GenerationConfig, first: list[int]) -> dict:
    engine = engine_for(setup.target, setup.draft, [first], config.max_new_tokens, max_batch=1)
    widths = engine.measure_step_costs(1, (1, 2, 4, 8), repeats=9, context=len(first)).latency_ms()
    row = {"round_ms": widths, "draft_block_ms": profile_engine_rounds(engine, [first], config).propose_ms}
    for name, draft in (("plain", None), ("dspark", setup.draft)):
        tokens = seconds = 0.0
        runs = []
        for prompts in setup.prompts.values():
            for prompt in prompts:
                run = timed_generate(setup.target, draft, prompt, config)
                runs.append(run.tokens)
                tokens, seconds = tokens + max(0, len(run.tokens) - 1), seconds + run.decode_seconds
        row[f"{name}_tokens_per_s"] = tokens / seconds
        row[f"{name}_outputs"] = runs
    row["lossless"] = row.pop("dspark_outputs") == row.pop("plain_outputs")
    return row


def main() -> None:
    parser = demo_parser(__doc__, prompts=2, out="benchmarks/results/cpu_layout")
    parser.add_argument("--passes", type=int, default=2, help="passes per layout, alternating")
    args = parser.parse_args()
    setup, config, first = warm_demo(args.prompts, args.max_new_tokens, args.threads)
    modules = (setup.target.model, setup.draft)
    timed = os.environ.get("DSPARK_CPU_LAYOUT", "auto") == "auto"  # else `load_demo` fixed a layout instead
    plans = setup.layout if timed else plan_cpu_layout(*modules, layout="auto")
    for plan in plans.values():
        print(f"auto plan {plan.describe()}", flush=True)
    passes: dict[str, list[dict]] = {"row": [], "col": [], "auto": []}
    for k in range(args.passes):
        for layout in passes:
            if layout == "auto":
                plan_cpu_layout(*modules, plans=plans)  # the plan timed above, applied again without timing
            else:
                plan_cpu_layout(*modules, layout=layout)
            passes[layout].append(one_pass(setup, config, first))
            print(f"pass {k + 1} {layout}: {passes[layout][-1]}", flush=True)
    rows = {}
    for layout, runs in passes.items():
        rows[layout] = {
            "round_ms": {w: statistics.median(r["round_ms"][w] for r in runs) for w in runs[0]["round_ms"]},
            "draft_block_ms": statistics.median(r["draft_block_ms"] for r in runs),
            "plain_tokens_per_s": statistics.median(r["plain_tokens_per_s"] for r in runs),
            "dspark_tokens_per_s": statistics.median(r["dspark_tokens_per_s"] for r in runs),
            "lossless": all(r["lossless"] for r in runs)}
        rows[layout]["speedup"] = rows[layout]["dspark_tokens_per_s"] / rows[layout]["plain_tokens_per_s"]
    print(f"{'layout':6s} {'rnd 1':>7s} {'rnd 2':>7s} {'rnd 4':>7s} {'rnd 8':>7s} {'draft':>7s} {'plain/s':>8s} "
          f"{'dspark/s':>8s} {'speedup':>7s} lossless")
    for layout, r in rows.items():
        f = r["round_ms"]
        print(f"{layout:6s} {f[1]:7.1f} {f[2]:7.1f} {f[4]:7.1f} {f[8]:7.1f} {r['draft_block_ms']:7.1f} "
              f"{r['plain_tokens_per_s']:8.2f} {r['dspark_tokens_per_s']:8.2f} {r['speedup']:6.2f}× {r['lossless']}")
    commit, dirty = git_commit()
    result = {"device": device_name("cpu"), "torch": torch.__version__, "commit": commit, "dirty": dirty,
              "command": "python benchmarks/cpu/layout_cpu.py "
              f"--passes {args.passes} --prompts {args.prompts} --max-new-tokens {args.max_new_tokens} "
              f"--threads {args.threads}", "draft": str(setup.draft_path), "context_tokens": len(first),
              "auto_plan": {"x".join(map(str, shape)): plan.describe() for shape, plan in plans.items()},
              "rows": rows}
    write_json(args.out / "layout_cpu.json", result)  # atomically, creating the folder
    print(json.dumps(result))


if __name__ == "__main__":
    main()
