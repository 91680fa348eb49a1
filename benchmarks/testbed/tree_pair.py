"""The testbed's same-budget pair (the default DSpark draft and its DFlash-mode twin, as the end-to-end test trains
them) verified as the block's chain and as trees: held-out greedy τ per draft and shape. An experiment, not a feature.

    python benchmarks/testbed/tree_pair.py [--prompts 24] [--max-new-tokens 64] [--shapes 15/4,31/8]
                                           [--score-temperatures 1,0.5,0.25] [--out FILE]

Both drafts come from the testbed cache (`build_target`, `build_draft`: trained on first use, ~3 minutes each on 2
cores). Decoding runs through `BatchEngine` (8 rows, fp32, greedy, so every output is the target's own); τ = committed
tokens per verify round over all prompts. Prints a table and one JSON line.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from dspark import Target, load_draft
from dspark.config import GenerationConfig
from dspark.engine.batch import BatchEngine
from dspark.engine.tree import TreeShape
from dspark.testbed.draft_build import DraftRecipe, build_draft, heldout_or_train_examples
from dspark.testbed.target_build import build_target, load_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--shapes", default="15/4,31/8", help="tree shapes nodes/beam, comma-separated")
    parser.add_argument("--score-temperatures", default="1,0.5,0.25", help="TreeShape.score_temperature values")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(2)
    target_dir = build_target(threads=2)
    model, _ = load_target(target_dir)
    _, examples = heldout_or_train_examples(target_dir, "heldout", args.prompts, 48, 0)
    prompts = [list(e.prompt_ids) for e in examples]
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, eos_token_ids=())  # every prompt runs its budget
    shapes = [None] + [TreeShape(*map(int, s.split("/")), score_temperature=float(t))
                       for t in args.score_temperatures.split(",") for s in args.shapes.split(",")]
    rows, plain = [], None
    for mode in ("dspark", "dflash"):
        draft = load_draft(build_draft(target_dir, DraftRecipe(mode=mode), progress=False))
        target = Target(model, draft.config.target_layer_ids)
        for shape in shapes:
            results = BatchEngine(target, draft, max_batch=8, max_length=256, tree=shape).generate(prompts, config)
            tokens = [r.tokens for r in results]
            plain = plain or tokens  # every run must commit the same greedy tokens
            rounds = sum(r.stats.rounds for r in results)
            accepted = sum(sum(r.stats.accepted_counts) for r in results)
            label = "chain" if shape is None else f"{shape.nodes}/{shape.beam} T{shape.score_temperature:g}"
            rows.append({"draft": mode, "shape": label,
                         "tau": (accepted + rounds) / rounds, "rounds": rounds, "same_tokens": tokens == plain})
    print(f"{'draft':>7} {'verify':>12} {'τ':>6} {'rounds':>7}")
    for row in rows:
        print(f"{row['draft']:>7} {row['shape']:>12} {row['tau']:>6.3f} {row['rounds']:>7}")
    for shape in sorted({r["shape"] for r in rows}, key=[r["shape"] for r in rows].index):
        spark, flash = (next(r["tau"] for r in rows if r["draft"] == m and r["shape"] == shape)
                        for m in ("dspark", "dflash"))
        print(f"DSpark / DFlash τ, {shape}: {spark / flash:.3f}")
    report = {"prompts": len(prompts), "max_new_tokens": args.max_new_tokens, "rows": rows}
    if args.out:
        from dspark.files import write_json

        write_json(args.out, report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
