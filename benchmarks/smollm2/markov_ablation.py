"""How much of a SmolLM2 draft's held-out acceptance comes from its Markov head, slot by slot? (CPU, fp32)

Greedy replay τ (`dspark.bench.replay`: the exact rounds of greedy speculative decoding) on the held-out code and math
prompts: the draft as trained; with the Markov bias at the first drafted slot toggled (on for a draft trained without
it, off otherwise); with the bias at every slot scaled by each of --scales (0: the backbone alone; run 17 asked whether
the trained strength, 1, is the best one held-out). Everything else, the confidence head included, is unchanged. A
diagnostic, not a product path: it wraps the loaded draft's Markov head. Prints a table and ends with one JSON line.

    python benchmarks/smollm2/markov_ablation.py --draft <draft folder> --eval-prompts stage_d/eval_prompts.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).parent))

from dspark import Target, load_smollm2  # noqa: E402
from dspark.bench.replay import replay_greedy  # noqa: E402
from dspark.engine.stats import GenerationStats  # noqa: E402
from dspark.formats.native import load_draft  # noqa: E402
from dspark.train.data import render_prompt  # noqa: E402
from train_draft import greedy_continuations, load_prompts_record  # noqa: E402

class BiasScale:
    """The head's `step` with its bias multiplied by `scale` (0: the backbone alone). The first-slot setting needs no
    wrapper: it is the draft's own `markov_first_slot` option."""

    def __init__(self, step):
        self.step, self.scale = step, 1.0

    def __call__(self, prev: torch.Tensor, hidden: torch.Tensor, state):
        bias, state = self.step(prev, hidden, state)  # [N, V]
        return bias * self.scale, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draft", type=Path, required=True, help="a DSpark-headed draft folder (vanilla Markov head)")
    parser.add_argument("--eval-prompts", type=Path, required=True, help="build_eval_prompts.py's JSONL")
    parser.add_argument("--per-suite", type=int, default=20)
    parser.add_argument("--max-new", type=int, default=128)
    parser.add_argument("--scales", default="0", help="comma-separated factors for the bias at every slot (default 0)")
    args = parser.parse_args()
    model, tok = load_smollm2()
    draft = load_draft(args.draft)
    if draft.markov_head is None:
        raise SystemExit(f"{args.draft} has no Markov head: nothing to ablate")
    gamma = draft.config.num_draft_tokens
    ablated = BiasScale(draft.markov_head.step)
    draft.markov_head.step = ablated  # the instance attribute shadows the method for this draft only
    trained = draft.config
    first = "no bias at the first slot" if trained.markov_first_slot else "bias at the first slot too"
    settings = [("trained", trained.markov_first_slot, 1.0), (first, not trained.markov_first_slot, 1.0),
                *((f"bias × {float(a):g}", trained.markov_first_slot, float(a)) for a in args.scales.split(","))]
    target = Target(model, draft.config.target_layer_ids)
    records = [json.loads(line) for line in args.eval_prompts.read_text().splitlines() if line.strip()]
    rows = {}
    for suite in ("code", "math"):
        prompts = [render_prompt(load_prompts_record(r), tok) for r in records if r["suite"] == suite]
        prompts = prompts[: args.per_suite]
        conts = greedy_continuations(model, tok, prompts, args.max_new)
        for setting, first_slot, scale in settings:
            draft.config = trained.replace(markov_first_slot=first_slot)
            ablated.scale = scale
            stats = GenerationStats((), ())
            for prompt, cont in zip(prompts, conts):
                stats = stats.merge(replay_greedy(target, draft, prompt, cont))
            rows[f"{suite}/{setting}"] = {"tau": stats.mean_acceptance_length, "rounds": stats.rounds,
                                          "per_position": stats.per_position(gamma)}
            print(f"{suite:5s} {setting:26s} τ {stats.mean_acceptance_length:.3f}  acceptance by slot "
                  + " ".join(f"{a:.2f}" for a in stats.per_position(gamma)), flush=True)
    print(json.dumps({"draft": str(args.draft), "per_suite": args.per_suite, "max_new": args.max_new, "rows": rows}))


if __name__ == "__main__":
    main()
