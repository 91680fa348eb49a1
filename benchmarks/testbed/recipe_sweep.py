"""One variant of a draft-training recipe sweep on the CPU testbed (issue #3 follow-ups). An experiment, not a feature.

Trains one testbed draft (the default `DraftRecipe`: 2 layers, block 7, 3 target layers, Markov rank 32, batch 4 ×
64 anchors) with the given learning rate, initialisation, loss weights, mode (dspark, dflash, or unanchored: the DSpark
heads and loss on the DFlash block layout), steps and seed, on regenerated data
cached in --work (default: <tmp>/ab), and prints one JSON line: held-out greedy τ (replay) and the conditional acceptance per slot, and
with --sampled also τ at temperature 1 (speculative sampling, one seed per prompt). --reuse evaluates the draft saved
by an earlier run of the same NAME instead of training it again.
One variant per process (1 thread), so two run side by side on two cores:

    python benchmarks/testbed/recipe_sweep.py NAME [--lr 3e-3] [--init none|first|last] [--mode dspark|dflash|unanchored]
        [--ce 0.1 --l1 0.9] [--steps 240] [--layers 2] [--seed 0] [--heldout 16] [--sampled] [--reuse]
        [--markov-head vanilla|gated|rnn] [--dflash-l1]

Sweeps run with it: learning rate × initialisation (`../results/testbed_lr_sweep/`) and CE / L1 weights against
the DFlash-mode baseline (`../results/testbed_loss_weights/`).
"""
import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

torch.set_num_threads(1)
from dspark import Target, load_draft
from dspark.config import GenerationConfig, TrainConfig
from dspark.engine.generate import generate
from dspark.engine.stats import GenerationStats
from dspark.formats.native import save_draft
from dspark.model.draft import DSparkDraft
from dspark.testbed.draft_build import (
    DraftRecipe,
    heldout_or_train_examples,
    heldout_tau,
    new_draft,
)
from dspark.testbed.target_build import build_target, load_target
from dspark.train.data import Prompt, read_examples
from dspark.train.hidden import OnlineHiddenStates
from dspark.train.regenerate import regenerate
from dspark.train.trainer import train


def copy_target_layers(model, draft: DSparkDraft, init: str) -> None:
    """Initialise the draft's decoder layers (and final norm) from the target's first or last layers."""
    layers, n, k = model.model.layers, len(model.model.layers), len(draft.layers)
    source = {"none": [], "first": list(range(k)), "last": list(range(n - k, n))}[init]
    with torch.no_grad():
        for j, i in enumerate(source):
            t, d = layers[i], draft.layers[j]
            for name in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
                getattr(d.self_attn, name).weight.copy_(getattr(t.self_attn, name).weight)
            for name in ("gate_proj", "up_proj", "down_proj"):
                getattr(d.mlp, name).weight.copy_(getattr(t.mlp, name).weight)
            d.input_layernorm.weight.copy_(t.input_layernorm.weight)
            d.post_attention_layernorm.weight.copy_(t.post_attention_layernorm.weight)
        if source:
            draft.norm.weight.copy_(model.model.norm.weight)


def sampled_tau(tdir: Path, draft_dir: Path, count: int, max_new_tokens: int = 64) -> GenerationStats:
    """Speculative sampling at temperature 1 on the held-out prompts (seed i for prompt i)."""
    model, _ = load_target(tdir)
    draft = load_draft(draft_dir)
    target = Target(model, draft.config.target_layer_ids)
    _, examples = heldout_or_train_examples(tdir, "heldout", count, DraftRecipe().prompt_tokens, 0)
    stats = GenerationStats((), ())
    for i, example in enumerate(examples):
        config = GenerationConfig(max_new_tokens=max_new_tokens, temperature=1.0, seed=i, eos_token_ids=())  # no EOS
        stats = stats.merge(generate(target, draft, list(example.prompt_ids), config).stats)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--init", default="none", choices=("none", "first", "last"))
    parser.add_argument("--mode", default="dspark", choices=("dspark", "dflash", "unanchored"),
                        help="unanchored: the DSpark heads and loss on the DFlash block layout")
    parser.add_argument("--ce", type=float, default=0.1, help="DSpark CE weight (DFlash mode: CE 1.0 only, unless "
                        "--dflash-l1)")
    parser.add_argument("--l1", type=float, default=0.9, help="DSpark L1 weight")
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--layers", type=int, default=2, help="draft layers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--heldout", type=int, default=16, help="held-out prompts for τ")
    parser.add_argument("--sampled", action="store_true", help="also measure τ at temperature 1")
    parser.add_argument("--markov-head", default="vanilla", choices=("vanilla", "gated", "rnn"),
                        help="unanchored: the Markov head (dspark.model.heads)")
    parser.add_argument("--dflash-l1", action="store_true",
                        help="dflash: train on --ce CE + --l1 L1 (the DSpark loss without its confidence term) instead "
                        "of CE alone: does the L1 term or the heads make DSpark's sampled acceptance?")
    parser.add_argument("--reuse", action="store_true", help="evaluate WORK/NAME from an earlier run; no training")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ab",
                        help="folder for the regenerated data and the trained drafts")
    args = parser.parse_args()
    if args.mode != "unanchored" and args.markov_head != "vanilla":
        parser.error("--markov-head is for --mode unanchored")
    if args.dflash_l1 and args.mode != "dflash":
        parser.error("--dflash-l1 is for --mode dflash")

    r = DraftRecipe()
    tdir = build_target()
    model, tok = load_target(tdir)
    args.work.mkdir(parents=True, exist_ok=True)
    data = args.work / "data.jsonl"
    if not data.is_file():
        _, cut = heldout_or_train_examples(tdir, "train", r.prompts, r.prompt_tokens, 0)
        regenerate(model, tok, [Prompt(f"{e.path}@{e.start}", text=e.prompt) for e in cut], data, batch_size=64,
                   max_new_tokens=r.response_tokens, max_length=512, progress=False)
    examples = read_examples(data)
    layout = "dspark" if args.mode == "dspark" else "dflash"
    r = replace(r, num_layers=args.layers)
    draft = new_draft(model, tok, replace(r, mode=layout, seed=args.seed))
    if args.mode == "unanchored":  # the same draft with the Markov and confidence heads (seeded again)
        torch.manual_seed(args.seed)
        draft = DSparkDraft(draft.config.replace(markov_rank=r.markov_rank, enable_confidence_head=True,
                                                 confidence_head_with_markov=True, markov_head_type=args.markov_head))
        draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    config = draft.config
    copy_target_layers(model, draft, args.init)
    common = dict(steps=args.steps, batch_size=r.batch_size, num_anchors=r.num_anchors, lr=args.lr, seed=args.seed,
                  max_length=512)
    if args.mode == "dflash":
        recipe = TrainConfig(ce_weight=args.ce, l1_weight=args.l1, confidence_weight=0.0, **common) \
            if args.dflash_l1 else TrainConfig.dflash(**common)
    else:
        recipe = TrainConfig(ce_weight=args.ce, l1_weight=args.l1, **common)
    began = time.time()
    out = args.work / args.name
    if not args.reuse:
        train(draft, OnlineHiddenStates(Target(model, config.target_layer_ids), examples), recipe, progress=False)
        save_draft(draft, out)
    stats = heldout_tau(tdir, out, count=args.heldout)
    sampled = {}
    if args.sampled:
        t1 = sampled_tau(tdir, out, args.heldout)
        sampled = {"tau_t1": round(t1.mean_acceptance_length, 3),
                   "per_position_t1": [round(a, 3) for a in t1.per_position(r.block_size)]}
    print(json.dumps({"variant": args.name, "mode": args.mode, "markov_head": config.markov_head_type,
                      "layers": args.layers, "lr": args.lr,
                      "init": args.init, "ce": recipe.ce_weight, "l1": recipe.l1_weight, "steps": args.steps, "seed": args.seed,
                      "train_s": round(time.time() - began), "heldout": args.heldout,
                      "tau": round(stats.mean_acceptance_length, 3),
                      "per_position": [round(a, 3) for a in stats.per_position(r.block_size)], **sampled}), flush=True)


if __name__ == "__main__":
    main()
