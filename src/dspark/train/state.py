"""Training checkpoints without pickle: the draft (native format), optimiser and scheduler state, RNG states and the
data position, in safetensors + JSON. Resuming from one reproduces the uninterrupted run's losses.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from dspark.formats.native import EMBEDDING_TENSORS, WEIGHTS_NAME, atomic_write, read_config, save_draft, write_json
from dspark.model.draft import DSparkDraft

STATE_TENSORS = "trainer_state.safetensors"
STATE_JSON = "trainer_state.json"
LATEST = "latest"


@dataclass(frozen=True)
class Position:
    step: int  # optimiser steps done
    consumed: int  # sequences consumed (global, across ranks)


def save_checkpoint(folder: Path, draft: DSparkDraft, optimizer: torch.optim.Optimizer, scheduler, position: Position,
                    config_json: dict) -> Path:
    """Write checkpoint-{step}/ and point `latest` at it (each file atomic; `latest` last)."""
    ckpt = folder / f"checkpoint-{position.step:07d}"
    save_draft(draft, ckpt / "draft")
    opt = optimizer.state_dict()
    tensors = {f"optim.{pid}.{name}": value.detach().cpu().contiguous()
               for pid, state in opt["state"].items() for name, value in state.items() if torch.is_tensor(value)}
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    atomic_write(ckpt / STATE_TENSORS, lambda tmp: save_file(tensors, tmp))
    sched = {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}
    write_json(ckpt / STATE_JSON, {"position": asdict(position), "param_groups": opt["param_groups"],
                                   "scheduler": sched, "train_config": config_json})
    atomic_write(folder / LATEST, lambda tmp: Path(tmp).write_text(ckpt.name + "\n"))
    return ckpt


def latest_checkpoint(folder: Path) -> Path | None:
    pointer = folder / LATEST
    return folder / pointer.read_text().strip() if pointer.is_file() else None


def load_checkpoint(ckpt: Path, draft: DSparkDraft, optimizer: torch.optim.Optimizer, scheduler) -> Position:
    """Restore everything `save_checkpoint` wrote into live objects; returns the data position."""
    saved = read_config(ckpt / "draft")
    if (saved.mode, saved.has_heads) != (draft.config.mode, draft.config.has_heads):
        # the two layouts share every tensor name and shape: only the config tells them apart
        raise ValueError(f"{ckpt}: the checkpoint's draft is mode {saved.mode!r} with heads={saved.has_heads}, this "
                         f"run's is mode {draft.config.mode!r} with heads={draft.config.has_heads}; resume with the "
                         f"same mode as the run that wrote it")
    shape = ("num_hidden_layers", "hidden_size", "block_size", "markov_rank", "markov_head_type", "target_layer_ids")
    differ = [f"{f} {getattr(saved, f)} (this run: {getattr(draft.config, f)})" for f in shape
              if getattr(saved, f) != getattr(draft.config, f)]
    if differ:
        raise ValueError(f"{ckpt}: the checkpoint's draft differs from this run's in {', '.join(differ)}; resume with "
                         f"the draft settings of the run that wrote it")
    weights = load_file(str(ckpt / "draft" / WEIGHTS_NAME))
    missing, unexpected = draft.load_state_dict(weights, strict=False)
    if unexpected or set(missing) - set(EMBEDDING_TENSORS):
        raise ValueError(f"{ckpt}: checkpoint does not fit this draft (missing {missing}, unexpected {unexpected})")
    meta = json.loads((ckpt / STATE_JSON).read_text())
    tensors = load_file(str(ckpt / STATE_TENSORS))
    state: dict[int, dict] = {}
    for name, value in tensors.items():
        if name.startswith("optim."):
            _, pid, key = name.split(".", 2)
            state.setdefault(int(pid), {})[key] = value
    groups = meta["param_groups"]
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    optimizer.load_state_dict({"state": state, "param_groups": groups})
    scheduler.load_state_dict({**meta["scheduler"], "lr_lambdas": [None] * len(groups)})
    torch.set_rng_state(tensors["rng.cpu"])
    cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("rng.cuda."))]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    return Position(**meta["position"])
