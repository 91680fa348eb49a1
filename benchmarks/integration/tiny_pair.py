"""Build the small target + drafts the integration suite serves, and record dspark's own acceptance on them.

`python benchmarks/integration/tiny_pair.py --work DIR` (project venv) writes into DIR:
  target/             a random float32 Qwen3 (hidden 128, 4 layers, 4 heads × head_dim 32: a head size vLLM's CPU
                      attention accepts), saved with save_pretrained, plus a word-level tokenizer (token i = "<t{i}>")
                      built with the `tokenizers` library so vLLM can serve it
  draft-dflash/       a DFlash-mode draft (block 4 → 3 drafts per round) briefly fitted to the target's own greedy
                      continuations, so it is partly right (non-trivial acceptance); native layout
  draft-dspark/       a DSpark draft (vanilla Markov head + confidence head), random: for the vLLM config/weights check
  draft-dspark-gated/ the same with a gated Markov head (vLLM 0.32's Qwen3DSparkModel has only the vanilla one)
  prompts.json        the evaluation prompts (token ids): prefixes of the fitted sequences
  ours.json           dspark's engine on those prompts, greedy: tokens and the per-round acceptance lengths of an
                      uncapped run (max_new_tokens + block), so other engines' last-round overshoot can be matched
Nothing here depends on the other engines. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import record  # noqa: E402

VOCAB, HIDDEN, LAYERS, HEAD_DIM = 512, 128, 4, 32
LAYER_IDS = (0, 1, 2)
BLOCK = 4
MASK_TOKEN = VOCAB - 1
PROMPTS, PROMPT_LEN, NEW_TOKENS = 6, 12, 48
TRAIN_SEQS, TRAIN_PROMPT, TRAIN_NEW = 48, 8, 56


def _tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"<t{i}>": i for i in range(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<t0>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<t0>", eos_token="<t0>", pad_token="<t0>").save_pretrained(
        folder)


def _draft_config(mode: str, markov_head_type: str = "vanilla"):
    from dspark.config import DraftConfig

    dflash = mode == "dflash"
    return DraftConfig(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=HEAD_DIM, intermediate_size=2 * HIDDEN, vocab_size=VOCAB, block_size=BLOCK,
                       target_layer_ids=LAYER_IDS, mask_token_id=MASK_TOKEN, num_target_layers=LAYERS,
                       markov_rank=0 if dflash else 16, markov_head_type=markov_head_type,
                       enable_confidence_head=not dflash,
                       confidence_head_with_markov=not dflash, max_position_embeddings=512, mode=mode)


def _greedy_continuations(model, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    with torch.no_grad():
        return model.generate(prompts, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              pad_token_id=0, eos_token_id=None)


def _fit(draft, target, sequences: torch.Tensor, prompt_len: int, steps: int, seed: int) -> float:
    from dspark.model.block_forward import draft_forward, teacher_logits
    from dspark.model.blocks import build_blocks, sample_anchors
    from dspark.train.loss import dspark_loss

    mask = torch.zeros_like(sequences)
    mask[:, prompt_len:] = 1
    with torch.no_grad():
        out = target.forward(sequences)
    features, last_hidden = out.features.clone(), out.last_hidden.clone()
    params = [p for p in draft.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    tau = 0.0
    for step in range(steps):
        rows = torch.randperm(sequences.shape[0], generator=generator)[:8]
        anchors, keep = sample_anchors(mask[rows], 16, generator)
        blocks = build_blocks(sequences[rows], mask[rows], anchors, keep, BLOCK, MASK_TOKEN, mode=draft.config.mode)
        outputs = draft_forward(draft, features[rows], blocks)
        teacher = teacher_logits(target.lm_head, last_hidden[rows], blocks)
        terms = dspark_loss(outputs.logits, teacher, blocks.target_ids, outputs.confidence_logits,
                            blocks.loss_weights, blocks.eval_mask)
        optimizer.zero_grad()
        terms.total.backward()
        optimizer.step()
        tau = float(terms.tau)
    return tau


def main(argv: list[str] | None = None) -> int:
    from dspark import GenerationConfig, Target, generate
    from dspark.formats.native import save_draft
    from dspark.testbed.random_pair import random_draft, tiny_target

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=150, help="fitting steps for the DFlash draft")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    began = time.time()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)

    model = tiny_target("qwen3", vocab_size=VOCAB, hidden_size=HIDDEN, num_layers=LAYERS, seed=args.seed)
    model.save_pretrained(work / "target")
    _tokenizer(work / "target")

    generator = torch.Generator().manual_seed(args.seed + 1)
    train_prompts = torch.randint(1, VOCAB - 1, (TRAIN_SEQS, TRAIN_PROMPT), generator=generator)
    sequences = _greedy_continuations(model, train_prompts, TRAIN_NEW)
    target = Target(model, LAYER_IDS)
    draft = random_draft(_draft_config("dflash"), seed=args.seed)
    draft.tie_embeddings(target.embed_tokens, target.lm_head)
    train_tau = _fit(draft, target, sequences, TRAIN_PROMPT, args.steps, args.seed)
    draft.eval()
    save_draft(draft, work / "draft-dflash")
    save_draft(random_draft(_draft_config("dspark"), seed=args.seed + 2, scale=4.0), work / "draft-dspark")
    gated = random_draft(_draft_config("dspark", "gated"), seed=args.seed + 3, scale=4.0)
    save_draft(gated, work / "draft-dspark-gated")

    # Prefixes of sequences the draft was fitted on: there it is often right, which makes acceptance non-trivial.
    prompts = sequences[:PROMPTS, :PROMPT_LEN].tolist()
    (work / "prompts.json").write_text(json.dumps(prompts))
    runs = []
    for prompt in prompts:
        capped = generate(target, draft, prompt, GenerationConfig(max_new_tokens=NEW_TOKENS))
        uncapped = generate(target, draft, prompt, GenerationConfig(max_new_tokens=NEW_TOKENS + BLOCK))
        runs.append({"prompt": prompt, "tokens": capped.tokens,
                     "acceptance_lengths": list(capped.stats.acceptance_lengths),
                     "uncapped_tokens": uncapped.tokens,
                     "uncapped_acceptance_lengths": list(uncapped.stats.acceptance_lengths)})
    taus = [t for run in runs for t in run["acceptance_lengths"]]
    summary = {"work": str(work), "target": {"vocab": VOCAB, "hidden": HIDDEN, "layers": LAYERS, "head_dim": HEAD_DIM},
               "draft_dflash": {"block_size": BLOCK, "target_layer_ids": list(LAYER_IDS), "fit_steps": args.steps,
                                "train_analytic_tau": round(train_tau, 3)},
               "max_new_tokens": NEW_TOKENS, "mean_acceptance_length": round(sum(taus) / len(taus), 3),
               "runs": runs, "seconds": round(time.time() - began, 1)}
    (work / "ours.json").write_text(json.dumps(summary, indent=1))
    brief = {k: v for k, v in summary.items() if k != "runs"}
    record("dspark_engine", {"check": "dspark_engine", **summary})
    print(json.dumps(brief))
    return 0


if __name__ == "__main__":
    sys.exit(main())
