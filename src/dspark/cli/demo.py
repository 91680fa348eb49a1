"""`dspark demo`: run the embedded demo and print τ, per-position acceptance and the lossless check."""
from __future__ import annotations

import argparse
import json


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompts", type=int, default=4, help="how many prompts to generate from")
    parser.add_argument("--max-new-tokens", type=int, default=48)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from dspark.demo import run_demo

    console = Console()
    with console.status("generating (speculative and plain, same target)…"):
        result = run_demo(args.prompts, args.max_new_tokens)
    stats = result.stats
    table = Table(title="DSpark demo — tiny random target + draft (untrained: τ ≈ 1 is expected)")
    for col in ("rounds", "mean τ", "acceptance rate", "spec tok/s", "plain tok/s", "lossless"):
        table.add_column(col)
    table.add_row(str(stats.rounds), f"{stats.mean_acceptance_length:.3f}", f"{stats.acceptance_rate:.3f}",
                  f"{result.speculative_tokens_per_s:.1f}", f"{result.plain_tokens_per_s:.1f}",
                  "yes" if result.lossless else "NO")
    console.print(table)
    per_pos = stats.per_position(result.block_size)
    console.print("per-position acceptance: " + "  ".join(f"{k + 1}:{a:.2f}" for k, a in enumerate(per_pos)))
    print(json.dumps({"mean_tau": stats.mean_acceptance_length, "per_position": per_pos,
                      "histogram": stats.histogram(result.block_size + 1), "lossless": result.lossless}))
    return 0 if result.lossless else 1
