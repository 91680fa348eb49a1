"""Native checkpoints: a folder with `config.json` + `model.safetensors`, DeepSpec-compatible names and fields.

`load_draft` also reads the two layouts the official tools write with the same tensor names: DeepSpec's
`Qwen3DSparkModel` (which stores copies of the target's embedding and LM head) and SpecForge's `DSparkDraftModel`
(fields nested in `dflash_config`, no embedding / LM head). Loading validates config and every tensor's shape and
names the offending one. No pickle anywhere. Other layouts (speculators) are converted by `dspark import`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from dspark.config import ConfigError, DraftConfig, RopeConfig
from dspark.files import atomic_write, write_json  # noqa: F401  (re-exported for the formats package)
from dspark.formats.compact import read_weight_file
from dspark.formats.layout import CONFIG_NAME, EMBEDDING_TENSORS, WEIGHTS_NAME, CheckpointError
from dspark.formats.tensors import check_tensors, has_embeddings, write_tensors
from dspark.model.draft import DSparkDraft

__all__ = ["CONFIG_NAME", "EMBEDDING_TENSORS", "WEIGHTS_NAME", "CheckpointError", "atomic_write", "config_from_dict",
           "config_to_dict", "load_draft", "read_config", "read_raw_config", "save_draft", "write_json"]


def config_to_dict(config: DraftConfig) -> dict[str, Any]:
    """DeepSpec-compatible config.json contents (Qwen3 layer fields + DSpark fields)."""
    return {
        "architectures": ["Qwen3DSparkModel"],
        "model_type": "qwen3",
        "dspark_mode": config.mode,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": config.head_dim,
        "vocab_size": config.vocab_size,
        "rms_norm_eps": config.rms_norm_eps,
        "max_position_embeddings": config.max_position_embeddings,
        "rope_parameters": config.rope.to_dict(),
        "hidden_act": "silu",
        "attention_bias": False,
        "tie_word_embeddings": False,
        "layer_types": ["full_attention"] * config.num_hidden_layers,
        "block_size": config.block_size,
        "target_layer_ids": list(config.target_layer_ids),
        "num_target_layers": config.num_target_layers,
        "mask_token_id": config.mask_token_id,
        "markov_rank": config.markov_rank,
        "markov_head_type": config.markov_head_type,
        "enable_confidence_head": config.enable_confidence_head,
        "confidence_head_with_markov": config.confidence_head_with_markov,
    }


def _require(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d or d[key] is None:
        raise CheckpointError(f"{where}: required field {key!r} is missing")
    return d[key]


def _check_removed_options(raw: dict[str, Any], where: str) -> None:
    """Refuse config keys of removed options. `markov_first_slot: true` is what every draft does and is ignored;
    `false` (no Markov bias at the first drafted slot) is an option dspark does not have."""
    if "markov_first_slot" in raw and not raw["markov_first_slot"]:
        raise CheckpointError(f"{where}: markov_first_slot is false, an option that was removed from dspark (the Markov "
                              "bias now applies at every drafted slot); retrain this draft without it")


def config_from_dict(raw: dict[str, Any], where: str = CONFIG_NAME) -> DraftConfig:
    """Parse a native / DeepSpec / SpecForge draft config; refuse what would be a guess."""
    arch = list(raw.get("architectures") or [])
    if "speculators_model_type" in raw:
        raise CheckpointError(f"{where}: this is a vLLM speculators checkpoint; convert it with `dspark import`")
    dspark = dict(raw)
    if "DSparkDraftModel" in arch or "DFlashDraftModel" in arch:
        nested = _require(raw, "dflash_config", where)
        if nested.get("projector_type", "dspark") != "dspark" and "DSparkDraftModel" in arch:
            raise CheckpointError(f"{where}: dflash_config.projector_type {nested.get('projector_type')!r} is not 'dspark'")
        dspark.update(nested)
        if "DFlashDraftModel" in arch:
            dspark.update(dspark_mode="dflash", markov_rank=0, enable_confidence_head=False)
    elif arch and not any("DSpark" in a for a in arch):
        raise CheckpointError(f"{where}: architectures {arch} is not a DSpark draft (expected Qwen3DSparkModel, "
                              f"DSparkDraftModel or DFlashDraftModel)")
    if dspark.get("hidden_act", "silu") != "silu" or dspark.get("attention_bias", False):
        raise CheckpointError(f"{where}: only SwiGLU (hidden_act 'silu') layers without attention bias are supported")
    rope = dspark.get("rope_parameters") or dspark.get("rope_scaling") or {}
    if "rope_theta" not in rope and "rope_theta" in dspark:
        rope = {**rope, "rope_theta": dspark["rope_theta"]}
    _check_removed_options(dspark, where)
    heads = int(_require(dspark, "num_attention_heads", where))
    markov_rank = int(dspark.get("markov_rank", 0) or 0)
    try:
        return DraftConfig(
            hidden_size=int(_require(dspark, "hidden_size", where)),
            num_hidden_layers=int(_require(dspark, "num_hidden_layers", where)),
            num_attention_heads=heads,
            num_key_value_heads=int(dspark.get("num_key_value_heads") or heads),
            head_dim=int(dspark.get("head_dim") or int(dspark["hidden_size"]) // heads),
            intermediate_size=int(_require(dspark, "intermediate_size", where)),
            vocab_size=int(_require(dspark, "vocab_size", where)),
            block_size=int(_require(dspark, "block_size", where)),
            target_layer_ids=tuple(_require(dspark, "target_layer_ids", where)),
            mask_token_id=int(_require(dspark, "mask_token_id", where)),
            num_target_layers=int(_require(dspark, "num_target_layers", where)),
            markov_rank=markov_rank,
            markov_head_type=str(dspark.get("markov_head_type") or "vanilla"),
            enable_confidence_head=bool(dspark.get("enable_confidence_head", False)),
            confidence_head_with_markov=bool(dspark.get("confidence_head_with_markov", False)) and markov_rank > 0,
            rms_norm_eps=float(dspark.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(dspark.get("max_position_embeddings", 40960)),
            rope=RopeConfig.from_dict(rope),
            mode=str(dspark.get("dspark_mode", "dspark")),
        )
    except ConfigError as err:
        raise CheckpointError(f"{where}: {err}") from None


def save_draft(draft: DSparkDraft, path: str | Path, include_embeddings: bool = False, int8: bool = False) -> Path:
    """Write `config.json` + `model.safetensors` into folder `path` (created if needed), each file atomically.
    The target's embedding / LM head are left out unless `include_embeddings` (they are shared and frozen).
    `int8`: matrices stored as int8 with per-row scales (`dspark.formats.compact`), read back in the draft's dtype."""
    if draft.draft_vocab is not None:  # its copied rows are an inference-time view, not part of the draft
        raise ValueError("this draft drafts from a reduced vocabulary (restrict_draft_vocab); save the full draft: "
                         "restrict_draft_vocab(draft, None) first")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    write_tensors(path, {name: t for name, t in draft.state_dict().items()
                         if include_embeddings or name not in EMBEDDING_TENSORS}, int8)
    write_json(path / CONFIG_NAME, config_to_dict(draft.config))
    return path


def read_raw_config(folder: str | Path) -> dict[str, Any]:
    """The config.json of a checkpoint folder as a dict, with a clear error when it is not one."""
    file = Path(folder) / CONFIG_NAME
    if not file.is_file():
        raise CheckpointError(f"{folder} is not a draft folder: {CONFIG_NAME} is missing")
    try:
        raw = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{file}: not valid JSON ({err})") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{file}: not a JSON object")
    return raw


def read_config(path: str | Path) -> DraftConfig:
    return config_from_dict(read_raw_config(path), str(Path(path) / CONFIG_NAME))


def load_draft(path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> DSparkDraft:
    """Load a draft folder (native, DeepSpec or SpecForge layout), validating every tensor."""
    path = Path(path)
    config = read_config(path)
    weights = path / WEIGHTS_NAME
    if not weights.is_file():
        raise CheckpointError(f"{path}: {WEIGHTS_NAME} is missing")
    tensors = read_weight_file(weights)

    check_tensors(config, tensors, str(weights))
    with torch.device("meta"):
        draft = DSparkDraft(config, with_embeddings=has_embeddings(tensors, str(weights)))
    draft = draft.to_empty(device=device).to(dtype)  # parameters in `dtype` (load_state_dict keeps theirs)
    draft.load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=True)
    draft.rotary.reset_parameters()  # its frequencies are not in the file: recompute them off the meta device
    if draft.embed_tokens is not None:
        draft.tie_embeddings(draft.embed_tokens, draft.lm_head)  # freeze
    calibration = path / "calibration.json"  # STS temperatures for the confidence head, if fitted
    draft.sts_temperatures = (torch.tensor(json.loads(calibration.read_text())["sts_temperatures"])
                              if calibration.is_file() else None)
    return draft.eval()
