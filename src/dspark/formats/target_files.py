"""What a conversion reads from the target model folder: its shape facts and its embedding / LM head tensors.

Only `config.json` and the two shared tensors are read (safetensors lets us skip every other weight), so pointing
at a multi-terabyte target is cheap. It does not load the target model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from dspark.config import DraftConfig
from dspark.formats.native import CheckpointError
from dspark.formats.tensors import read_some

EMBED_NAMES = ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight", "embed_tokens.weight",
               "language_model.model.embed_tokens.weight")
LM_HEAD_NAMES = ("lm_head.weight", "language_model.lm_head.weight", "model.lm_head.weight")


@dataclass(frozen=True)
class TargetInfo:
    folder: Path
    num_hidden_layers: int
    hidden_size: int
    vocab_size: int
    architectures: tuple[str, ...]
    tie_word_embeddings: bool


def _folder(path: Path) -> Path:
    return path.parent if path.name == "config.json" else path


def read_target(path: str | Path) -> TargetInfo:
    """Facts from the target's config.json (multimodal configs: their `text_config`)."""
    folder = _folder(Path(path))
    file = folder / "config.json"
    if not file.is_file():
        raise CheckpointError(f"--target {path}: no config.json there; pass the target model folder")
    try:
        raw = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{file}: not valid JSON ({err})") from None
    look = {**raw, **(raw.get("text_config") or {})}
    try:
        return TargetInfo(folder=folder, num_hidden_layers=int(look["num_hidden_layers"]),
                          hidden_size=int(look["hidden_size"]), vocab_size=int(look["vocab_size"]),
                          architectures=tuple(raw.get("architectures") or ()),
                          tie_word_embeddings=bool(look.get("tie_word_embeddings", False)))
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{file}: not a causal-LM config (missing or bad {err})") from None


def check_target_fits(config: DraftConfig, info: TargetInfo) -> None:
    """Refuse a --target the draft was not trained for (another width, vocabulary or depth)."""
    theirs = (info.hidden_size, info.vocab_size, info.num_hidden_layers)
    ours = (config.hidden_size, config.vocab_size, config.num_target_layers)
    if theirs != ours:
        raise CheckpointError(f"--target {info.folder}: hidden {theirs[0]}, vocab {theirs[1]}, {theirs[2]} layers; the "
                              f"draft was trained for hidden {ours[0]}, vocab {ours[1]}, {ours[2]} layers: pass the "
                              f"target this draft belongs to")


def target_embeddings(info: TargetInfo) -> dict[str, torch.Tensor]:
    """The target's `embed_tokens.weight` and `lm_head.weight` (the embedding again if the target ties them)."""
    found = read_some(info.folder, EMBED_NAMES + LM_HEAD_NAMES)
    embed = next((found[n] for n in EMBED_NAMES if n in found), None)
    head = next((found[n] for n in LM_HEAD_NAMES if n in found), None)
    if head is None and info.tie_word_embeddings:
        head = embed
    if embed is None or head is None:
        missing = "embedding" if embed is None else "LM head"
        raise CheckpointError(f"{info.folder}: the target's {missing} was not found (looked for "
                              f"{EMBED_NAMES if embed is None else LM_HEAD_NAMES})")
    return {"embed_tokens.weight": embed, "lm_head.weight": head}
