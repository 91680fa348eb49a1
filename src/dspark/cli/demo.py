"""`dspark demo`: SmolLM2-135M-Instruct + its DSpark draft on the CPU; prints the per-suite table and one JSON line.

Parsing and printing only; the work is in `dspark.demo`. Exit status: 0 lossless, 1 not lossless, 2 setup error.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys

# Batch-1 decoding of a 135M model is many small ops: extra intra-op threads buy little and collapse when another
# process shares the cores, so the demo uses at most this many.
MAX_THREADS = 4


def register(parser: argparse.ArgumentParser) -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads (below): idle threads sleep, not spin
    from dspark.assets import DRAFT_ENV
    from dspark.demo import SCHEDULES, DemoOptions

    defaults = DemoOptions()
    parser.add_argument("--prompts", type=int, default=defaults.prompts_per_suite,
                        help=f"held-out prompts per suite (default {defaults.prompts_per_suite})")
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens,
                        help=f"tokens generated per prompt at most (default {defaults.max_new_tokens})")
    parser.add_argument("--draft", help=f"draft folder (default: ${DRAFT_ENV}, else the draft shipped in the package)")
    parser.add_argument("--suites", default=",".join(defaults.suites),
                        help=f"comma-separated subset of {','.join(defaults.suites)} (default: all three)")
    parser.add_argument("--schedule", choices=SCHEDULES, default=defaults.schedule,
                        help="algorithm1: the confidence head and a round-cost table measured here choose how many "
                             "drafts each round verifies (default); none: every block verified whole")
    parser.add_argument("--draft-vocab", type=int, metavar="K",
                        help="the draft scores only the K tokens SmolLM2 writes most (FR-Spec; the counts ship beside "
                             "the draft): default 16384 when they do, 0 for all 49,152; verification stays full, so "
                             "outputs stay lossless")
    parser.add_argument("--threads", type=int, help=f"torch CPU threads (default: half the CPU cores, 1 to {MAX_THREADS})")


def _threads(requested: int | None) -> int:
    if requested is not None:
        if requested < 1:
            raise ValueError("--threads must be >= 1")
        return requested
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores // 2, MAX_THREADS))


def _table(runs: list, max_new_tokens: int, schedule: str):
    """One column per suite, one row per measure (so the 7 positions fit an 80-column terminal)."""
    from rich import box
    from rich.table import Table

    from dspark.demo import MODEL_NAME, SUITES

    block = runs[0].max_drafts if runs else 0
    scheduled = "Algorithm 1" if schedule == "algorithm1" else "whole blocks"
    table = Table(title=f"{MODEL_NAME} + DSpark draft: block {block} ({scheduled}), T=0, CPU fp32, "
                        f"≤{max_new_tokens} new tokens",
                  caption="accepted at position k: share of the rounds that reached slot k (all earlier drafts accepted) "
                          "that accepted it, – where none did; tok/s: decode, after each prompt's first token; "
                          "speedup: plain / speculative decode time",
                  box=box.SIMPLE_HEAD)
    table.add_column("")
    for run in runs:
        table.add_column(f"{run.suite} ({SUITES[run.suite]})", justify="right")
    per_pos = [run.per_position() for run in runs]
    rows = [("prompts", [str(r.prompts) for r in runs]),
            ("verify rounds", [str(r.stats.rounds) for r in runs]),
            ("drafts verified / round", [f"{r.drafts_per_round:.2f}" for r in runs]),
            ("mean τ", [f"[bold]{r.stats.mean_acceptance_length:.2f}[/]" for r in runs]),
            *((f"accepted at position {k + 1}", ["–" if p[k] is None else f"{p[k]:.2f}" for p in per_pos])
              for k in range(block)),
            ("speculative tok/s", [f"{r.speculative_tokens_per_s:.1f}" for r in runs]),
            ("plain tok/s", [f"{r.plain_tokens_per_s:.1f}" for r in runs]),
            ("speedup", [f"[bold]{r.speedup:.2f}×[/]" for r in runs]),
            ("lossless", ["yes" if r.lossless else "[bold red]NO[/]" for r in runs])]
    for label, cells in rows:
        table.add_row(label, *cells, end_section=label in ("mean τ", f"accepted at position {block}"))
    return table


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from dspark.demo import (MODEL_NAME, SUITES, DemoOptions, DemoSetupError, load_demo, measure_round_costs,
                             run_demo, summary)

    console = Console()
    try:
        options = DemoOptions(args.prompts, args.max_new_tokens, args.draft,
                              tuple(s.strip() for s in args.suites.split(",") if s.strip()), schedule=args.schedule,
                              draft_vocab=args.draft_vocab)
        threads = _threads(args.threads)
        import torch
        from transformers.utils import logging as hf_logging

        torch.set_num_threads(threads)
        hf_logging.disable_progress_bar()  # the rich status line says what is loading
        # the GGUF conversion draws its own tqdm bar and warnings on stderr: keep them out of the status line
        with console.status("checking what the demo needs…") as status, contextlib.redirect_stderr(io.StringIO()):
            setup = load_demo(options, on_stage=status.update)
    except (DemoSetupError, ValueError, OSError) as err:
        print(f"dspark demo: error: {err}", file=sys.stderr)
        return 2
    vocab = (f"drafting from the {setup.draft_vocab:,} most frequent tokens (FR-Spec; --draft-vocab 0: all)"
             if setup.draft_vocab else "drafting from the whole vocabulary")
    console.print(f"{MODEL_NAME} (target, fp32) + DSpark draft from {setup.draft_path}, {threads} CPU threads, "
                  f"{vocab}; each prompt is generated speculatively, then plainly, and the outputs are compared")
    switching = [plan.describe() for plan in setup.layout.values() if len(set(plan.calls)) > 1]
    if switching:
        console.print("GEMM calls timed at load, by rows (plain decoding uses the same): " + "; ".join(switching))
    with console.status("measuring round costs on this machine (Algorithm 1's table)…"):
        scheduling = measure_round_costs(setup, options)
    schedule = "none" if scheduling is None else "algorithm1"  # a draft without a confidence head has no choice
    costs_ms = {} if scheduling is None else scheduling.table(1).latency_ms()
    if costs_ms:
        console.print("round cost (draft block + verify) by verify width: "
                      + ", ".join(f"{w}: {ms:.0f} ms" for w, ms in costs_ms.items()))
    columns = (TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("τ {task.fields[tau]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        tasks = {suite: progress.add_task(f"{suite} ({SUITES[suite]})", total=len(prompts), tau="–", start=False)
                 for suite, prompts in setup.prompts.items()}
        runs = run_demo(setup, options, scheduling, on_suite=lambda suite: progress.start_task(tasks[suite]),
                        on_prompt=lambda suite, stats: progress.update(
                            tasks[suite], advance=1, tau=f"{stats.mean_acceptance_length:.2f}"))
    console.print(_table(runs, options.max_new_tokens, schedule))
    result = summary(runs)
    verdict = ("lossless: every speculative output equals plain greedy decoding token for token" if result["lossless"]
               else "NOT LOSSLESS: a speculative output differs from plain greedy decoding")
    console.print(f"overall mean τ {result['mean_tau']:.2f}, speedup {result['speedup']:.2f}×; {verdict}")
    print(json.dumps({"model": MODEL_NAME, "draft": str(setup.draft_path), "threads": threads,
                      "max_new_tokens": options.max_new_tokens, "schedule": schedule, "draft_vocab": setup.draft_vocab,
                      "round_cost_ms": costs_ms, **result}), flush=True)
    return 0 if result["lossless"] else 1
