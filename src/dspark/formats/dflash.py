"""The z-lab DFlash layout (`DFlashDraftModel`): what the `dflash` package, SpecForge's DFlash and vLLM's `dflash`
method load. For DFlash-mode drafts only (slot 0 predicts nothing, slot k predicts x[p+k]).

Facts (z-lab/dflash dflash/model.py; SpecForge configs/qwen3-8b-dflash.json; vLLM 0.32
model_executor/models/qwen3_dflash.py): a Qwen3 config with `architectures ["DFlashDraftModel"]`,
`auto_map {"AutoModel": "dflash.DFlashDraftModel"}`, top-level `block_size` and `num_target_layers`, and
`dflash_config {mask_token_id, target_layer_ids}` with Hugging Face layer ids (dflash reads
`hidden_states[id + 1]`; vLLM captures aux layer id + 1). Weights: `layers.*`, `norm`, `fc`, `hidden_norm`; the
target's embedding / LM head are shared, never stored. vLLM makes a layer causal when `is_causal` or
`dflash_config.causal` says so, or when it is a sliding-window layer; dspark drafts are bidirectional in the block,
so such configs are refused. z-lab and SpecForge fall back to evenly spaced layers when `target_layer_ids` is
absent; that is a guess, so it is refused too.
"""
from __future__ import annotations

from typing import Any

from dspark.config import DraftConfig
from dspark.formats.checkpoint import ConvertOptions, DraftCheckpoint
from dspark.formats.fields import (MISSING, AmbiguousCheckpointError, agreed, build_config, check_layer_base,
                                   lookup, qwen3_layer_fields, required, resolve_qwen3, target_layer_count)
from dspark.formats.native import CheckpointError
from dspark.formats.tensors import EMBEDDING_TENSORS, dtype_name

ARCHITECTURE = "DFlashDraftModel"
NOT_IMPORTED: tuple[str, ...] = ()  # tensors of this layout that are not part of a dspark draft


def export_files(checkpoint: DraftCheckpoint, options: ConvertOptions) -> tuple[dict[str, Any], dict]:
    config = checkpoint.config
    if config.mode != "dflash":
        raise CheckpointError("DFlashDraftModel is DFlash-aligned (slot 0 predicts nothing) and has no Markov or "
                              "confidence head; this is a DSpark draft: export it with --layout deepspec, specforge "
                              "or speculators")
    if config.has_heads:
        raise CheckpointError("DFlashDraftModel has no Markov or confidence head, and this DFlash-aligned draft has "
                              "them (a DSpark draft with sample_from_anchor false): export it with --layout "
                              "speculators, which keeps them")
    tensors = {k: v for k, v in checkpoint.tensors.items() if k not in EMBEDDING_TENSORS}
    data = {
        "architectures": [ARCHITECTURE],
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        **qwen3_layer_fields(config, dtype_name(tensors)),
        "block_size": config.block_size,
        "num_target_layers": config.num_target_layers,
        "target_hidden_size": config.hidden_size,
        "dflash_config": {"mask_token_id": config.mask_token_id, "target_layer_ids": list(config.target_layer_ids)},
    }
    return data, tensors


def _refuse_causal_or_anchor(raw: dict[str, Any], where: str) -> None:
    for field in ("is_causal", "dflash_config.causal"):
        if lookup(raw, field) is True:
            raise CheckpointError(f"{where}: {field} is true: this DFlash draft attends causally inside the block, "
                                  f"dspark drafts bidirectionally, so it would draft differently")
    if lookup(raw, "dflash_config.use_swa") is True:
        raise CheckpointError(f"{where}: dflash_config.use_swa is true: sliding-window drafts are not supported")
    projector = lookup(raw, "dflash_config.projector_type")
    if projector is not MISSING and projector != "dflash":
        raise AmbiguousCheckpointError(
            "dflash_config.projector_type", f"{where}: the anchor layout is ambiguous: {ARCHITECTURE} (DFlash-aligned) "
                                            f"with dflash_config.projector_type {projector!r}; export it again with "
                                            f"the architecture that matches how it was trained")
    anchor = agreed(raw, "sample_from_anchor", ("sample_from_anchor", "dflash_config.sample_from_anchor"), where)
    if anchor is True:
        raise AmbiguousCheckpointError(
            "sample_from_anchor", f"{where}: the anchor layout is ambiguous: sample_from_anchor true, but the dflash "
                                  f"package always drafts {ARCHITECTURE} DFlash-aligned (slot 0 predicts nothing)")


def parse_config(raw: dict[str, Any], options: ConvertOptions, where: str) -> tuple[DraftConfig, dict[str, Any]]:
    """The draft config of a DFlashDraftModel config.json (no extras); refuses what would be a guess."""
    arch = list(raw.get("architectures") or [])
    if ARCHITECTURE not in arch or not isinstance(raw.get("dflash_config"), dict):
        raise CheckpointError(f"{where}: not a DFlash config (architectures {arch}, needs {ARCHITECTURE} with a "
                              f"dflash_config object)")
    _refuse_causal_or_anchor(raw, where)
    qwen3 = resolve_qwen3(raw, where)
    ids = required(agreed(raw, "target_layer_ids", ("dflash_config.target_layer_ids", "target_layer_ids"), where),
                   "dflash_config.target_layer_ids", where,
                   "dflash would fall back to evenly spaced layers, which may not be the trained ones")
    check_layer_base(ids, agreed(raw, "aux_hidden_state_layer_ids", ("aux_hidden_state_layer_ids",
                                                                     "eagle_aux_hidden_state_layer_ids"), where),
                     "aux_hidden_state_layer_ids", where)
    hidden = agreed(raw, "target_hidden_size", ("target_hidden_size",), where)
    if hidden is not MISSING and int(hidden) != int(qwen3["hidden_size"]):
        raise CheckpointError(f"{where}: target_hidden_size {hidden} differs from hidden_size {qwen3['hidden_size']}; "
                              f"dspark drafts read target features of their own width")
    dspark = {
        "mode": "dflash",
        "block_size": required(agreed(raw, "block_size", ("block_size", "dflash_config.block_size"), where),
                               "block_size", where, "it fixes which slots predict which tokens"),
        "target_layer_ids": ids,
        "mask_token_id": required(agreed(raw, "mask_token_id", ("dflash_config.mask_token_id", "mask_token_id"),
                                         where), "dflash_config.mask_token_id", where,
                                  "every non-anchor slot embeds it"),
        "num_target_layers": target_layer_count(agreed(raw, "num_target_layers", ("num_target_layers",), where),
                                                options, where),
        "markov_rank": 0, "markov_head_type": "vanilla", "enable_confidence_head": False,
        "confidence_head_with_markov": False,
    }
    return build_config(qwen3, dspark, where), {}
