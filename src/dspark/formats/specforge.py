"""The SpecForge layout (`DSparkDraftModel`, DSpark fields nested in `dflash_config`).

Facts (sgl-project/SpecForge, configs/qwen3-8b-dspark.json, specforge/modeling/draft/dspark.py): a Qwen3 config
with `architectures ["DSparkDraftModel"]`, `auto_map {"AutoModel": "dspark.DSparkDraftModel"}`, top-level
`block_size` and `num_target_layers`, and `dflash_config` holding `attention_mode` ("gqa" needs fewer KV heads than
query heads, "mha" equal counts), `projector_type "dspark"`, `markov_rank`, `markov_head_type`,
`enable_confidence_head`, `confidence_head_alpha`, `confidence_head_with_markov`, `mask_token_id`,
`target_layer_ids`. SpecForge's own defaults for absent head fields (rank 0, no confidence head unless alpha > 0,
no Markov input to it) are what its loader builds, so they are applied, not guessed. Weights carry DeepSpec's names
without embed_tokens / lm_head (the target's are used). SpecForge writes DFlash-mode drafts as `DFlashDraftModel`,
which the `dflash` module handles. Its `target_layer_ids` fallback (`build_target_layer_ids`) is a guess, so a
config without them is refused.
"""
from __future__ import annotations

from typing import Any

from dspark.config import DraftConfig
from dspark.formats.checkpoint import ConvertOptions, DraftCheckpoint
from dspark.formats.fields import (MISSING, AmbiguousCheckpointError, agreed, build_config, check_layer_base,
                                   qwen3_layer_fields, required, resolve_qwen3, target_layer_count)
from dspark.formats.native import CheckpointError
from dspark.formats.tensors import EMBEDDING_TENSORS, dtype_name

ARCHITECTURE = "DSparkDraftModel"
NOT_IMPORTED: tuple[str, ...] = ()  # tensors of this layout that are not part of a dspark draft


def _attention_mode(heads: int, kv_heads: int) -> str:
    return "mha" if heads == kv_heads else "gqa"


def export_files(checkpoint: DraftCheckpoint, options: ConvertOptions) -> tuple[dict[str, Any], dict]:
    config = checkpoint.config
    if config.mode != "dspark":
        raise CheckpointError("internal: DFlash-mode drafts use the DFlashDraftModel layout (dflash module)")
    tensors = {k: v for k, v in checkpoint.tensors.items() if k not in EMBEDDING_TENSORS}
    alpha = checkpoint.extras.get("confidence_head_alpha")
    if alpha is None:
        alpha = 1.0 if config.enable_confidence_head else 0.0
    data = {
        "architectures": [ARCHITECTURE],
        "auto_map": {"AutoModel": "dspark.DSparkDraftModel"},
        **qwen3_layer_fields(config, dtype_name(tensors)),
        "block_size": config.block_size,
        "num_target_layers": config.num_target_layers,
        "dflash_config": {
            "attention_mode": _attention_mode(config.num_attention_heads, config.num_key_value_heads),
            "projector_type": "dspark",
            "markov_rank": config.markov_rank,
            "markov_head_type": config.markov_head_type,
            "enable_confidence_head": config.enable_confidence_head,
            "confidence_head_alpha": float(alpha),
            "confidence_head_with_markov": config.confidence_head_with_markov,
            "mask_token_id": config.mask_token_id,
            "target_layer_ids": list(config.target_layer_ids),
        },
    }
    return data, tensors


def _field(raw: dict[str, Any], name: str, where: str) -> Any:
    return agreed(raw, name, (f"dflash_config.{name}", name), where)


def _check_attention_mode(raw: dict[str, Any], qwen3: dict[str, Any], where: str) -> None:
    given = _field(raw, "attention_mode", where)
    heads, kv_heads = int(qwen3["num_attention_heads"]), int(qwen3["num_key_value_heads"])
    if given is not MISSING and str(given).lower() != _attention_mode(heads, kv_heads):
        raise AmbiguousCheckpointError(
            "dflash_config.attention_mode", f"{where}: dflash_config.attention_mode {given!r} does not fit "
                                            f"{heads} query / {kv_heads} KV heads (SpecForge: 'gqa' needs fewer KV "
                                            f"heads, 'mha' equal counts)")


def parse_config(raw: dict[str, Any], options: ConvertOptions, where: str) -> tuple[DraftConfig, dict[str, Any]]:
    """The draft config and extras of a SpecForge DSparkDraftModel config.json; refuses what would be a guess."""
    arch = list(raw.get("architectures") or [])
    if ARCHITECTURE not in arch or not isinstance(raw.get("dflash_config"), dict):
        raise CheckpointError(f"{where}: not a SpecForge DSpark config (architectures {arch}, needs {ARCHITECTURE} "
                              f"with a dflash_config object)")
    projector = _field(raw, "projector_type", where)
    if projector is not MISSING and projector != "dspark":
        raise CheckpointError(f"{where}: dflash_config.projector_type {projector!r} is not 'dspark'")
    if raw.get("sample_from_anchor") is False:
        raise AmbiguousCheckpointError("sample_from_anchor", f"{where}: sample_from_anchor false contradicts "
                                                             f"{ARCHITECTURE}, which samples from the anchor")
    qwen3 = resolve_qwen3(raw, where)
    _check_attention_mode(raw, qwen3, where)
    ids = required(_field(raw, "target_layer_ids", where), "dflash_config.target_layer_ids", where,
                   "SpecForge would fall back to evenly spaced layers, which may not be the trained ones")
    check_layer_base(ids, agreed(raw, "aux_hidden_state_layer_ids", ("aux_hidden_state_layer_ids",
                                                                     "eagle_aux_hidden_state_layer_ids"), where),
                     "aux_hidden_state_layer_ids", where)
    rank = _field(raw, "markov_rank", where)
    rank = 0 if rank is MISSING else int(rank)
    alpha = _field(raw, "confidence_head_alpha", where)
    alpha = 0.0 if alpha is MISSING else float(alpha)
    confidence = _field(raw, "enable_confidence_head", where)
    confidence = alpha > 0.0 if confidence is MISSING else bool(confidence)
    head_type = _field(raw, "markov_head_type", where)
    with_markov = _field(raw, "confidence_head_with_markov", where)
    dspark = {
        "mode": "dspark",
        "block_size": required(agreed(raw, "block_size", ("block_size", "dflash_config.block_size"), where),
                               "block_size", where, "engines size the verify width from it"),
        "target_layer_ids": ids,
        "mask_token_id": required(_field(raw, "mask_token_id", where), "dflash_config.mask_token_id", where,
                                  "every non-anchor slot embeds it"),
        "num_target_layers": target_layer_count(agreed(raw, "num_target_layers", ("num_target_layers",), where),
                                                options, where),
        "markov_rank": rank,
        "markov_head_type": "vanilla" if head_type is MISSING else head_type,
        "enable_confidence_head": confidence,
        "confidence_head_with_markov": False if with_markov is MISSING else bool(with_markov),
    }
    return build_config(qwen3, dspark, where), {"confidence_head_alpha": alpha}
