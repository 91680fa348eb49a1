"""Learning rate x initialisation sweep for a short draft training run, on the CPU testbed (issue #3 follow-up).

Why: the shipped SmolLM2 draft was trained 850 steps at lr 6e-4 and reached τ ≈ 1.5. This asks, on a target we can
train here, whether a short run is held back by the learning rate or by the random initialisation of the draft
layers (copying the target's first or last decoder layers into them, as EAGLE-style drafts often do).
One variant per call (a fresh process each, 1 thread, regenerated data cached in /tmp/ab):

    python benchmarks/testbed/lr_init_sweep.py NAME LR none|first|last STEPS

Prints one JSON line: held-out greedy τ (16 prompts, replay) of the trained draft. An experiment, not a feature.
"""
import json
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
from dspark import Target
from dspark.config import TrainConfig
from dspark.formats.native import save_draft
from dspark.model.draft import DSparkDraft
from dspark.testbed.draft_build import (
    DraftRecipe,
    heldout_or_train_examples,
    heldout_tau,
)
from dspark.testbed.target_build import build_target, load_target
from dspark.train.data import Prompt, read_examples
from dspark.train.hidden import OnlineHiddenStates
from dspark.train.recipe import draft_config_from_target
from dspark.train.regenerate import regenerate
from dspark.train.trainer import train

variant, lr, init, steps = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r = DraftRecipe()
tdir = build_target()
model, tok = load_target(tdir)
Path("/tmp/ab").mkdir(exist_ok=True)
data = Path("/tmp/ab/data.jsonl")
if not data.is_file():
    _, cut = heldout_or_train_examples(tdir, "train", r.prompts, r.prompt_tokens, 0)
    regenerate(model, tok, [Prompt(f"{e.path}@{e.start}", text=e.prompt) for e in cut], data, batch_size=64,
               max_new_tokens=r.response_tokens, max_length=512, progress=False)
examples = read_examples(data)
config = draft_config_from_target(model.config, num_layers=r.num_layers, block_size=r.block_size,
                                  target_layers=r.target_layers, markov_rank=r.markov_rank,
                                  mask_token_id=tok.convert_tokens_to_ids("<|mask|>"))
torch.manual_seed(0)
draft = DSparkDraft(config)
draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
layers = model.model.layers
n = len(layers)
src = {"none": [], "first": list(range(r.num_layers)), "last": list(range(n - r.num_layers, n))}[init]
with torch.no_grad():
    for j, i in enumerate(src):
        t, d = layers[i], draft.layers[j]
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
            getattr(d.self_attn, name).weight.copy_(getattr(t.self_attn, name).weight)
        for name in ("gate_proj", "up_proj", "down_proj"):
            getattr(d.mlp, name).weight.copy_(getattr(t.mlp, name).weight)
        d.input_layernorm.weight.copy_(t.input_layernorm.weight)
        d.post_attention_layernorm.weight.copy_(t.post_attention_layernorm.weight)
    if src:
        draft.norm.weight.copy_(model.model.norm.weight)
began = time.time()
res = train(draft, OnlineHiddenStates(Target(model, config.target_layer_ids), examples),
            TrainConfig(steps=steps, batch_size=r.batch_size, num_anchors=r.num_anchors, lr=lr, seed=0, max_length=512),
            progress=False)
out = Path(f"/tmp/ab/{variant}")
save_draft(draft, out)
stats = heldout_tau(tdir, out, count=16)
print(json.dumps({"variant": variant, "lr": lr, "init": init, "steps": steps, "train_s": round(time.time() - began),
                  "tau": round(stats.mean_acceptance_length, 3), "n_target_layers": n}), flush=True)
