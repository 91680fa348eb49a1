"""The DeepSpec layout (`Qwen3DSparkModel`): what DeepSpec, SGLang's `DSPARK`, vLLM's `dspark` and TensorRT-LLM's
DSpark load.

Facts (deepseek-ai/DeepSpec, deepspec/modeling/dspark/qwen3/{config,modeling}.py): config.json is the target's
Qwen3 config with `architectures ["Qwen3DSparkModel"]`, `num_hidden_layers` (draft depth), `num_target_layers`,
`block_size`, `mask_token_id`, `target_layer_ids` (Hugging Face base), `num_anchors`, `layer_types`,
`tie_word_embeddings false`, `enable_confidence_head`, `confidence_head_with_markov`, `markov_rank`,
`markov_head_type`; `Qwen3DSparkModel.__init__` asserts the first five DSpark fields exist. The model owns
`embed_tokens` / `lm_head` (frozen copies of the target's) and loads them from the file, so an export carries them.
vLLM treats a missing `sample_from_anchor` as true for this architecture; exports write it explicitly.
DSpark anchor layout only: DFlash-mode drafts go to the `dflash` layout.
"""
from __future__ import annotations

from typing import Any

import torch

from dspark.config import DraftConfig
from dspark.formats.checkpoint import ConvertOptions, DraftCheckpoint
from dspark.formats.fields import (AmbiguousCheckpointError, agreed, build_config, check_layer_base,
                                   qwen3_layer_fields, required, resolve_qwen3, target_layer_count)
from dspark.formats.native import CheckpointError
from dspark.formats.tensors import EMBEDDING_TENSORS, dtype_name, has_embeddings

ARCHITECTURE = "Qwen3DSparkModel"
NOT_IMPORTED: tuple[str, ...] = ()  # tensors of this layout that are not part of a dspark draft
DEFAULT_NUM_ANCHORS = 512  # DeepSpec's training default anchors per sequence (design.md §4)


def embeddings_for(checkpoint: DraftCheckpoint, options: ConvertOptions, layout: str) -> dict[str, torch.Tensor]:
    """The embedding / LM head an export must carry: the draft's own copies, else the target's (--target)."""
    if has_embeddings(checkpoint.tensors, "the draft"):
        return {name: checkpoint.tensors[name] for name in EMBEDDING_TENSORS}
    if options.target is None:
        raise CheckpointError(f"the {layout} layout stores copies of the target's embed_tokens and lm_head and this "
                              f"draft has none: pass --target with the target model folder")
    from dspark.formats.target_files import read_target, target_embeddings

    found = target_embeddings(read_target(options.target))
    want = (checkpoint.config.vocab_size, checkpoint.config.hidden_size)
    for name, tensor in found.items():
        if tuple(tensor.shape) != want:
            raise CheckpointError(f"--target {options.target}: its {name} has shape {tuple(tensor.shape)}, the draft "
                                  f"needs {want}; pass the target this draft was trained for")
    return found


def export_files(checkpoint: DraftCheckpoint, options: ConvertOptions) -> tuple[dict[str, Any], dict]:
    config = checkpoint.config
    if config.mode != "dspark":
        raise CheckpointError("Qwen3DSparkModel is DSpark-aligned (slot k predicts x[p+k+1]); this is a DFlash-mode "
                              "draft: export it with --layout dflash (or --layout speculators)")
    tensors = {**checkpoint.tensors, **embeddings_for(checkpoint, options, "DeepSpec")}
    num_anchors = options.num_anchors or checkpoint.extras.get("num_anchors") or DEFAULT_NUM_ANCHORS
    data = {
        "architectures": [ARCHITECTURE],
        **qwen3_layer_fields(config, dtype_name(tensors)),
        "block_size": config.block_size,
        "target_layer_ids": list(config.target_layer_ids),
        "num_target_layers": config.num_target_layers,
        "mask_token_id": config.mask_token_id,
        "num_anchors": int(num_anchors),
        "sample_from_anchor": True,
        "markov_rank": config.markov_rank,
        "markov_head_type": config.markov_head_type,
        "enable_confidence_head": config.enable_confidence_head,
        "confidence_head_with_markov": config.confidence_head_with_markov,
    }
    return data, tensors


def _mode(raw: dict[str, Any], where: str) -> str:
    mode = raw.get("dspark_mode", "dspark")
    anchor = raw.get("sample_from_anchor")
    if mode not in ("dspark", "dflash"):
        raise CheckpointError(f"{where}: dspark_mode {mode!r} is neither 'dspark' nor 'dflash'")
    if anchor is not None and bool(anchor) != (mode == "dspark"):
        raise AmbiguousCheckpointError(
            "sample_from_anchor", f"{where}: the anchor layout is ambiguous: sample_from_anchor {anchor} contradicts "
                                  f"{ARCHITECTURE} (dspark_mode {mode!r}); a draft trained the other way would serve "
                                  f"with acceptance near 1.0")
    return mode


def parse_config(raw: dict[str, Any], options: ConvertOptions, where: str) -> tuple[DraftConfig, dict[str, Any]]:
    """The draft config and extras of a DeepSpec config.json; refuses what would be a guess."""
    arch = list(raw.get("architectures") or [])
    if ARCHITECTURE not in arch:
        raise CheckpointError(f"{where}: architectures {arch} is not {ARCHITECTURE} (Gemma4 DSpark drafts are not "
                              f"supported)")
    mode = _mode(raw, where)
    qwen3 = resolve_qwen3(raw, where)
    ids = required(agreed(raw, "target_layer_ids", ("target_layer_ids", "dflash_config.target_layer_ids",
                                                    "dspark_target_layer_ids"), where),
                   "target_layer_ids", where, "the draft's input features depend on it")
    check_layer_base(ids, agreed(raw, "aux_hidden_state_layer_ids",
                                 ("aux_hidden_state_layer_ids", "eagle_aux_hidden_state_layer_ids"), where),
                     "aux_hidden_state_layer_ids", where)
    rank = int(required(agreed(raw, "markov_rank", ("markov_rank", "dspark_markov_rank"), where), "markov_rank",
                        where, f"{ARCHITECTURE} requires it"))
    confidence = bool(required(agreed(raw, "enable_confidence_head", ("enable_confidence_head",), where),
                               "enable_confidence_head", where, f"{ARCHITECTURE} requires it"))
    dspark = {
        "mode": mode,
        "block_size": required(agreed(raw, "block_size", ("block_size", "dspark_block_size",
                                                          "dflash_config.block_size"), where),
                               "block_size", where, "engines size the verify width from it"),
        "target_layer_ids": ids,
        "mask_token_id": required(agreed(raw, "mask_token_id", ("mask_token_id", "dflash_config.mask_token_id",
                                                                "dspark_noise_token_id"), where),
                                  "mask_token_id", where, "every non-anchor slot embeds it"),
        "num_target_layers": target_layer_count(agreed(raw, "num_target_layers", ("num_target_layers",), where),
                                                options, where),
        "markov_rank": rank,
        "markov_head_type": required(agreed(raw, "markov_head_type", ("markov_head_type",), where),
                                     "markov_head_type", where, "three head types share one tensor name set")
        if rank else "vanilla",
        "enable_confidence_head": confidence,
        "confidence_head_with_markov": required(agreed(raw, "confidence_head_with_markov",
                                                       ("confidence_head_with_markov",), where),
                                                "confidence_head_with_markov", where, "it changes the head's input")
        if confidence else False,
    }
    anchors = raw.get("num_anchors")
    return build_config(qwen3, dspark, where), ({"num_anchors": anchors} if anchors is not None else {})

