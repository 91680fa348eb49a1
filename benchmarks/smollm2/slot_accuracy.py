"""Teacher-forced argmax accuracy per draft slot: where a draft's greedy acceptance is won or lost.

For every anchor of the target's greedy continuation of held-out prompts, each slot k of the block predicts token
p+1+k with the true tokens before it (teacher forcing, as in training). The accuracy of the argmax per slot is shown
for the DSpark draft with and without its Markov bias, and for a DFlash-mode draft. Greedy acceptance is the product
of these along a block (with the draft's own tokens as `prev`), so slot 0 gates everything after it. CPU, fp32.
Prints a table and ends with one JSON line. Analysis only: no timing, nothing is trained.

    python benchmarks/smollm2/slot_accuracy.py --draft src/dspark/assets/smollm2-135m-instruct-dspark \
        --dflash-draft stage_c/dflash --prompts stage_d/eval_prompts.jsonl --suite code,math --limit 20 \
        [--also LABEL=DRAFT_FOLDER ...]      # more DSpark drafts on the same continuations, rows named LABEL
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dspark import Target  # noqa: E402
from dspark.engine.batch import prepare_pair  # noqa: E402
from dspark.formats.native import load_draft  # noqa: E402
from dspark.model.block_forward import draft_forward  # noqa: E402
from dspark.model.blocks import build_blocks  # noqa: E402
from dspark.train.data import Prompt, render_prompt  # noqa: E402


@torch.inference_mode()
def slot_hits(model, draft, sequence: torch.Tensor, prompt_len: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """sequence [1, S] (prompt + greedy continuation) -> {variant: (hits [γ], counts [γ])} over every anchor."""
    target = Target(model, draft.config.target_layer_ids)
    prepare_pair(target, draft)
    cfg = draft.config
    features = target.forward(sequence).features  # [1, S, m·d]
    anchors = torch.arange(prompt_len, sequence.shape[1] - 1)[None]  # [1, N]
    mask = torch.zeros_like(sequence)
    mask[:, prompt_len:] = 1
    blocks = build_blocks(sequence, mask, anchors, torch.ones_like(anchors, dtype=torch.bool), cfg.block_size,
                          cfg.mask_token_id, mode=cfg.mode)
    hidden = draft_forward(draft, features, blocks).hidden[0]  # [N, γ, d]
    base = draft.base_logits(hidden).float()  # [N, γ, V]
    gamma = base.shape[1]
    offsets = anchors[0, :, None] + 1 + torch.arange(gamma)  # [N, γ] positions predicted
    valid = offsets < sequence.shape[1]
    truth = sequence[0, offsets.clamp(max=sequence.shape[1] - 1)]  # [N, γ]
    variants = {cfg.mode: base}
    if draft.markov_head is not None:
        prev = torch.cat([sequence[0, anchors[0]][:, None], truth[:, :-1]], dim=1)  # [N, γ] true previous tokens
        variants = {"dspark": base + draft.markov_head.teacher_forced(prev, hidden).float(),
                    "dspark, no Markov bias": base}
    return {name: (((logits.argmax(-1) == truth) & valid).sum(0), valid.sum(0)) for name, logits in variants.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default=None, help="SmolLM2 HF folder (default: dspark.load_smollm2's cache)")
    parser.add_argument("--draft", required=True)
    parser.add_argument("--dflash-draft", required=True)
    parser.add_argument("--prompts", type=Path, required=True, help="JSONL of {suite, messages} records")
    parser.add_argument("--suite", default="code,math")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--also", action="append", default=[], metavar="LABEL=FOLDER",
                        help="another DSpark draft to score on the same continuations (repeatable)")
    args = parser.parse_args()
    extra = [item.split("=", 1) for item in args.also]
    if any(len(pair) != 2 or not pair[0] for pair in extra):
        raise SystemExit("--also takes LABEL=DRAFT_FOLDER")
    from transformers import AutoTokenizer, LlamaForCausalLM

    from dspark.formats import smollm2

    folder = args.target or smollm2.smollm2_path()
    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    drafts = [("", load_draft(args.draft)), ("", load_draft(args.dflash_draft))]
    drafts += [(label, load_draft(folder)) for label, folder in extra]
    records = [json.loads(line) for line in args.prompts.read_text().splitlines() if line.strip()]
    table = {}
    for suite in args.suite.split(","):
        totals: dict[str, list[torch.Tensor]] = {}
        for record in [r for r in records if r["suite"] == suite][: args.limit]:
            prompt = Prompt(record["id"], messages=tuple((m["role"], m["content"]) for m in record["messages"]))
            ids = render_prompt(prompt, tok)
            with torch.inference_mode():
                out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                     max_new_tokens=args.max_new_tokens, do_sample=False,
                                     pad_token_id=tok.pad_token_id)[0]  # [S]
            for label, draft in drafts:
                for name, (hits, counts) in slot_hits(model, draft, out[None], len(ids)).items():
                    name = name.replace("dspark", label, 1) if label else name
                    acc = totals.setdefault(name, [torch.zeros(7), torch.zeros(7)])
                    acc[0][: len(hits)] += hits
                    acc[1][: len(counts)] += counts
        for name, (hits, counts) in totals.items():
            row = [round(float(h / c), 3) if c else None for h, c in zip(hits, counts)]
            table[f"{suite}/{name}"] = row
            print(f"{suite:6s} {name:24s} " + " ".join("   –  " if x is None else f"{x:.3f}" for x in row))
    print(json.dumps({"slot_accuracy": table, "limit": args.limit, "max_new_tokens": args.max_new_tokens}))


if __name__ == "__main__":
    main()
