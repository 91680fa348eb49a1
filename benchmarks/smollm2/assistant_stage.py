"""The `assistant` stage of train_draft.py: a 2-layer autoregressive assistant for transformers' assisted generation
(a peer in the speed benchmark), cut from SmolLM2 itself and fine-tuned on the regenerated responses.

It trains and writes the assistant; it does not benchmark it (benchmarks/speed/throughput_h200.py does).
"""
from __future__ import annotations

import copy
import random
import shutil
import time
from pathlib import Path

import torch


def train_assistant(model, examples: list, folder: Path, out: Path, seconds: float, batch: int) -> dict:
    """SmolLM2's own embeddings (frozen, tied) + its first two layers + final norm, fine-tuned with next-token loss on
    `examples` (dspark.train.data examples: input_ids + loss_mask) for `seconds`, on the target's device. Writes the
    trained layers without the embeddings (bf16) and the config into `folder`, copies both to `out`, and returns
    steps, seconds, first / last loss and tokens/s."""
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    device = next(model.parameters()).device
    cfg = copy.deepcopy(model.config)
    cfg.num_hidden_layers = 2
    assistant = LlamaForCausalLM(cfg)
    state = {k: v.float() for k, v in model.state_dict().items()
             if not k.startswith("model.layers.") or int(k.split(".")[2]) < 2}
    assistant.load_state_dict(state, strict=False)
    assistant.tie_weights()
    assistant = assistant.to(device).train()
    assistant.model.embed_tokens.weight.requires_grad_(False)
    params = [p for p in assistant.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.0)
    rng = random.Random(0)
    began, steps, tokens, losses = time.perf_counter(), 0, 0, []
    while time.perf_counter() - began < seconds:
        chunk = rng.sample(examples, min(batch, len(examples)))
        width = max(len(e.input_ids) for e in chunk)
        ids = torch.tensor([list(e.input_ids) + [0] * (width - len(e.input_ids)) for e in chunk],
                           device=device)  # [b, S]
        labels = torch.tensor([[t if m else -100 for t, m in zip(e.input_ids, e.loss_mask)]
                               + [-100] * (width - len(e.input_ids)) for e in chunk], device=device)  # [b, S]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss = assistant(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps, tokens = steps + 1, tokens + int((labels != -100).sum())
        losses.append(float(loss))
    seconds_used = time.perf_counter() - began
    folder.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in assistant.state_dict().items()
               if k not in ("model.embed_tokens.weight", "lm_head.weight")}
    save_file(weights, str(folder / "model.safetensors"))
    cfg.save_pretrained(folder)
    shutil.copy(folder / "model.safetensors", out / "assistant.safetensors")
    shutil.copy(folder / "config.json", out / "assistant-config.json")
    return {"steps": steps, "seconds": seconds_used, "loss_first": sum(losses[:10]) / max(1, len(losses[:10])),
            "loss_last": sum(losses[-10:]) / max(1, len(losses[-10:])), "tokens_per_s": tokens / seconds_used}
