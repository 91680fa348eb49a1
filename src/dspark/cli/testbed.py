"""`dspark testbed target`: build (or reuse) the tiny testbed target and print its card.

Parsing and printing only: the work is `dspark.testbed.target_build`. Bad input (a `ValueError` such as
`TestbedError` or `RecipeError`) prints one line and exits 2.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="testbed_command", metavar="{target,draft}")
    parser.set_defaults(testbed_help=parser.format_help())
    t = sub.add_parser("target", help="train the tiny Qwen3 target on the Python standard library (about 1–2 "
                                      "minutes on 2 CPU cores), or reuse the cached one")
    t.add_argument("--out", help="write a fresh target into this new folder instead of the cache")
    t.add_argument("--steps", type=int, help="training steps (default: the recipe's, 200); changes the cache key")
    t.add_argument("--cache-dir", help="cache folder (default $DSPARK_CACHE/testbed or ~/.cache/dspark/testbed)")
    t.add_argument("--threads", type=int, help="torch CPU threads for training (default: torch's choice)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    d = sub.add_parser("draft", help="regenerate data with the testbed target, train a draft on it (about a minute) "
                                     "and measure greedy τ on held-out files")
    d.add_argument("--mode", choices=("dspark", "dflash"), default="dspark")
    d.add_argument("--steps", type=int, default=240)
    d.add_argument("--block-size", type=int, default=7)
    d.add_argument("--eval-prompts", type=int, default=24)


def _progress(quiet: bool):
    """(on_step, on_stage, close) callbacks drawing a tqdm bar on stderr."""
    if quiet:
        return None, None, lambda: None
    from tqdm.auto import tqdm

    state: dict = {}

    def on_stage(message: str) -> None:
        close()
        print(f"testbed: {message}", file=sys.stderr, flush=True)

    def on_step(log) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = state["bar"] = tqdm(total=log.steps, desc="training target", unit="step", file=sys.stderr)
        bar.set_postfix(loss=f"{log.loss:.3f}", tok_s=f"{log.tokens / max(log.seconds, 1e-9):,.0f}")
        bar.update(1)

    def close() -> None:
        if state.get("bar") is not None:
            state.pop("bar").close()

    return on_step, on_stage, close


def _summary(path: Path, card: dict, cached: bool) -> dict:
    return {
        "path": str(path), "cached": cached, "key": card["key"],
        "parameters": card["model"]["parameters"], "vocab_size": card["tokenizer"]["vocab_size"],
        "eos_token_id": card["tokenizer"]["eos_token_id"], "mask_token_id": card["tokenizer"]["mask_token_id"],
        "train_files": len(card["corpus"]["train_files"]), "heldout_files": len(card["corpus"]["heldout_files"]),
        "steps": card["training"]["steps"], "train_seconds": card["training"]["seconds"],
        "tokens_per_second": card["training"]["tokens_per_second"],
        "final_train_loss": card["training"]["losses"][-1], "heldout_loss": card["heldout"]["loss"],
        "heldout_perplexity": card["heldout"]["perplexity"], "heldout_top1": card["heldout"]["top1"],
    }


def _print_table(summary: dict, card: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dspark testbed target", show_header=False)
    rows = [
        ("folder", summary["path"] + ("  (cached)" if summary["cached"] else "")),
        ("model", f"Qwen3ForCausalLM, {summary['parameters']:,} parameters, vocab {summary['vocab_size']} "
                  f"(EOS {summary['eos_token_id']}, mask {summary['mask_token_id']})"),
        ("corpus", f"{summary['train_files']} train / {summary['heldout_files']} held-out stdlib files "
                   f"(Python {card['corpus']['python']})"),
        ("training", f"{summary['steps']} steps, {summary['train_seconds']:.1f} s, "
                     f"{summary['tokens_per_second']:,.0f} tokens/s, final loss {summary['final_train_loss']:.3f}"),
        ("held-out", f"loss {summary['heldout_loss']:.3f} nats/token, perplexity {summary['heldout_perplexity']:.1f}, "
                     f"top-1 {summary['heldout_top1']:.1%}"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console = Console()
    console.print(table)
    for sample in card["samples"][:2]:
        console.print(f"[bold]{sample['path']}[/bold] greedy continuation:", highlight=False)
        console.print(repr(sample["prompt"][-80:]) + " → " + repr(sample["greedy"]), highlight=False, markup=False)


def _run_target(args: argparse.Namespace) -> int:
    from dspark.testbed.recipe import TargetRecipe
    from dspark.testbed.target_build import build_target, is_built, read_card, target_path, write_target

    recipe = TargetRecipe() if args.steps is None else TargetRecipe().replace(steps=args.steps)
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    on_step, on_stage, close = _progress(args.quiet or args.json)
    try:
        if args.out:
            cached = False
            path = write_target(args.out, recipe, on_step, on_stage, args.threads)
        else:
            cached = is_built(target_path(args.cache_dir, recipe))
            path = build_target(args.cache_dir, recipe, on_step, on_stage, args.threads)
    finally:
        close()
    card = read_card(path)
    summary = _summary(path, card, cached)
    if args.json:
        print(json.dumps(summary))
    else:
        _print_table(summary, card)
    return 0


def _run_draft(args: argparse.Namespace) -> int:
    from dspark.testbed.draft_build import DraftRecipe, build_draft, heldout_tau
    from dspark.testbed.target_build import build_target

    target = build_target()
    draft = build_draft(target, DraftRecipe(mode=args.mode, steps=args.steps, block_size=args.block_size))
    stats = heldout_tau(target, draft, count=args.eval_prompts)
    per_pos = stats.per_position(args.block_size)
    print(f"draft {draft}\nheld-out greedy τ {stats.mean_acceptance_length:.3f} over {stats.rounds} rounds; "
          "per position " + " ".join(f"{a:.2f}" for a in per_pos))
    print(json.dumps({"draft": str(draft), "mode": args.mode, "mean_tau": stats.mean_acceptance_length,
                      "per_position": per_pos, "histogram": stats.histogram(args.block_size + 1)}))
    return 0


def run(args: argparse.Namespace) -> int:
    # Let idle OpenMP threads sleep instead of spinning: on a shared 2-core machine spinning threads make torch
    # several times slower (measured 7.0 → 1.05 s per training step under load). Only effective before torch
    # is imported, which is the case here; it never changes results.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    commands = {"target": _run_target, "draft": _run_draft}
    if args.testbed_command not in commands:
        print(args.testbed_help, file=sys.stderr)
        return 2
    try:
        return commands[args.testbed_command](args)
    except ValueError as err:  # TestbedError, RecipeError, CorpusError
        print(f"dspark testbed {args.testbed_command}: error: {err}", file=sys.stderr)
        return 2
