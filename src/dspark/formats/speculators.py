"""The vLLM speculators layout (`speculators_model_type` "dspark" / "dflash").

Facts (vllm-project/speculators 0.9.0 models/{dflash,dspark}/{config,core}.py, and what its `save_pretrained`
writes; vLLM 0.32 transformers_utils/configs/speculators/algos.py): `architectures` ["DSparkDraftModel"] or
["DFlashDraftModel"], `speculators_model_type`, `speculators_version`, `transformer_layer_config` (the Qwen3 layer
fields; vLLM uses it as the draft's HF config), `draft_vocab_size`, `block_size`, `target_hidden_size`,
`aux_hidden_state_layer_ids` (vLLM base: the *input* of layer a, i.e. dspark id + 1; vLLM's updater sets
target_layer_ids = aux − 1), `mask_token_id`, `sliding_window_non_causal`, `sample_from_anchor`, the DSpark head
fields, and `speculators_config {algorithm, proposal_methods [{proposal_type "greedy", speculative_tokens,
verifier_accept_k, accept_tolerance}], default_proposal_method, verifier {name_or_path, architectures}}`.
Weights: DeepSpec's names; full-vocabulary drafts store no embed_tokens / lm_head (reloaded from the verifier).

Ambiguities refused: a DSpark config without `sample_from_anchor` (speculators defaults it to true, vLLM's
updater to false), without `markov_rank` / `enable_confidence_head` / `confidence_head_with_markov` (speculators
defaults them on, vLLM reads them as off), without `block_size` or `mask_token_id`, a `speculative_tokens` that does
not match the block, and a `transformer_layer_config` without `head_dim` where Qwen3Config's default (speculators)
and hidden / heads (vLLM) differ. Exports write every one of them, and `sliding_window_non_causal` true, because
vLLM turns `false` into `dflash_config.causal` for every layer of a DFlash draft.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from dspark.config import DraftConfig
from dspark.formats.checkpoint import ConvertOptions, DraftCheckpoint
from dspark.formats.fields import (MISSING, AmbiguousCheckpointError, agreed, build_config, check_layer_base,
                                   lookup, qwen3_layer_fields, required, resolve_qwen3, target_layer_count)
from dspark.formats.native import CheckpointError
from dspark.formats.tensors import EMBEDDING_TENSORS, dtype_name

SPECULATORS_VERSION = "0.9.0"  # the release whose files these exports match
ARCHITECTURES = {"dspark": "DSparkDraftModel", "dflash": "DFlashDraftModel"}
NOT_IMPORTED = ("verifier_lm_head.weight", "verifier_norm.weight", "t2d", "d2t")  # training-only / identity maps


def _verifier(checkpoint: DraftCheckpoint, options: ConvertOptions) -> dict[str, Any]:
    if options.target is not None:
        from dspark.formats.target_files import read_target

        info = read_target(options.target)
        return {"name_or_path": options.verifier or str(info.folder.resolve()),
                "architectures": list(info.architectures)}
    if options.verifier is not None:
        return {"name_or_path": options.verifier,
                "architectures": list((checkpoint.extras.get("verifier") or {}).get("architectures") or [])}
    if checkpoint.extras.get("verifier"):
        return dict(checkpoint.extras["verifier"])
    raise CheckpointError("the speculators layout records its verifier (the target) in speculators_config.verifier, "
                          "which vLLM serves and speculators loads the embedding from: pass --target with the target "
                          "model folder (or --verifier with its name)")


def export_files(checkpoint: DraftCheckpoint, options: ConvertOptions) -> tuple[dict[str, Any], dict]:
    config = checkpoint.config
    algorithm = "dspark" if config.has_heads else "dflash"  # DSpark heads on either block layout
    tensors = {k: v for k, v in checkpoint.tensors.items() if k not in EMBEDDING_TENSORS}
    data: dict[str, Any] = {
        "architectures": [ARCHITECTURES[algorithm]],
        "speculators_model_type": algorithm,
        "speculators_version": SPECULATORS_VERSION,
        "transformer_layer_config": qwen3_layer_fields(config, dtype_name(tensors)),
        "draft_vocab_size": config.vocab_size,
        "block_size": config.block_size,
        "target_hidden_size": config.hidden_size,
        "aux_hidden_state_layer_ids": [i + 1 for i in config.target_layer_ids],
        "mask_token_id": config.mask_token_id,
        "sliding_window_non_causal": True,
        "sample_from_anchor": config.mode == "dspark",
    }
    if algorithm == "dspark":
        data.update(markov_rank=config.markov_rank, markov_head_type=config.markov_head_type,
                    enable_confidence_head=config.enable_confidence_head,
                    confidence_head_with_markov=config.confidence_head_with_markov)
    data["speculators_config"] = {
        "algorithm": algorithm,
        "default_proposal_method": "greedy",
        "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": config.num_draft_tokens,
                              "verifier_accept_k": 1, "accept_tolerance": 0.0}],
        "verifier": _verifier(checkpoint, options),
    }
    data["dtype"] = dtype_name(tensors)
    return data, tensors


def _explicit(raw: dict[str, Any], field: str, where: str, why: str) -> Any:
    return required(agreed(raw, field, (field,), where), field, where, why)


def _layer_fields(raw: dict[str, Any], where: str) -> dict[str, Any]:
    layer = raw.get("transformer_layer_config")
    if not isinstance(layer, dict):
        raise CheckpointError(f"{where}: transformer_layer_config is missing; it holds the draft's layer shapes")
    qwen3 = resolve_qwen3(layer, where)
    natural = int(qwen3["hidden_size"]) // int(qwen3["num_attention_heads"])
    if "head_dim" not in layer and int(qwen3["head_dim"]) != natural:
        raise AmbiguousCheckpointError(
            "transformer_layer_config.head_dim", f"{where}: transformer_layer_config.head_dim is missing: speculators "
                                                 f"reads {qwen3['head_dim']} (Qwen3Config default), vLLM reads "
                                                 f"{natural} (hidden_size / num_attention_heads); add the trained "
                                                 f"value")
    return qwen3


def _mode_and_heads(raw: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    if kind == "dflash":
        anchor = raw.get("sample_from_anchor", False)  # speculators and vLLM both default DFlash to false
        return {"mode": "dflash" if not anchor else "dspark", "markov_rank": 0, "markov_head_type": "vanilla",
                "enable_confidence_head": False, "confidence_head_with_markov": False}
    why = "speculators and vLLM default it differently"
    anchor = bool(_explicit(raw, "sample_from_anchor", where, why + " (true vs false)"))
    rank = int(_explicit(raw, "markov_rank", where, why))
    confidence = bool(_explicit(raw, "enable_confidence_head", where, why))
    heads = {"markov_rank": rank,
             "markov_head_type": raw.get("markov_head_type") or "vanilla",
             "enable_confidence_head": confidence,
             "confidence_head_with_markov": bool(_explicit(raw, "confidence_head_with_markov", where, why))
             if confidence else False}
    return {"mode": "dspark" if anchor else "dflash", **heads}  # sample_from_anchor false: the DFlash block layout


def _check_sizes(raw: dict[str, Any], qwen3: dict[str, Any], where: str) -> None:
    vocab, hidden = int(qwen3["vocab_size"]), int(qwen3["hidden_size"])
    draft_vocab = raw.get("draft_vocab_size")
    if draft_vocab is not None and int(draft_vocab) != vocab:
        raise CheckpointError(f"{where}: draft_vocab_size {draft_vocab} differs from vocab_size {vocab}: drafts "
                              f"with their own vocabulary (d2t / t2d maps) are not supported by dspark")
    target_hidden = raw.get("target_hidden_size")
    if target_hidden is not None and int(target_hidden) != hidden:
        raise CheckpointError(f"{where}: target_hidden_size {target_hidden} differs from hidden_size {hidden}; "
                              f"dspark drafts read target features of their own width")


def _block_size(raw: dict[str, Any], mode: str, where: str) -> int:
    block = int(_explicit(raw, "block_size", where, "speculators would assume 8"))
    tokens = lookup(raw, "speculators_config.proposal_methods")
    proposed = tokens[0].get("speculative_tokens") if isinstance(tokens, list) and tokens else None
    per_block = block if mode == "dspark" else block - 1
    if proposed is not None and int(proposed) != per_block:
        raise AmbiguousCheckpointError(
            "speculators_config.proposal_methods[0].speculative_tokens",
            f"{where}: speculators_config.proposal_methods[0].speculative_tokens {proposed} does not match "
            f"block_size {block} with sample_from_anchor "
            f"{mode == 'dspark'} (a block proposes {per_block}); the block size or anchor layout is ambiguous")
    return block


def _layer_count(raw: dict[str, Any], options: ConvertOptions, where: str) -> int:
    """num_target_layers: stored, else --target, else the recorded verifier when it is a local folder."""
    stored = agreed(raw, "num_target_layers", ("num_target_layers", "transformer_layer_config.num_target_layers"),
                    where)
    verifier = lookup(raw, "speculators_config.verifier.name_or_path")
    if stored is MISSING and options.target is None and verifier is not MISSING:
        if (Path(verifier) / "config.json").is_file():
            options = ConvertOptions(target=Path(verifier))
    return target_layer_count(stored, options, where)


def parse_config(raw: dict[str, Any], options: ConvertOptions, where: str) -> tuple[DraftConfig, dict[str, Any]]:
    """The draft config and extras (the verifier) of a speculators config.json; refuses what would be a guess."""
    kind = raw.get("speculators_model_type")
    if kind not in ARCHITECTURES:
        raise CheckpointError(f"{where}: speculators_model_type {kind!r} is not a DSpark or DFlash draft "
                              f"(expected one of {sorted(ARCHITECTURES)})")
    qwen3 = _layer_fields(raw, where)
    _check_sizes(raw, qwen3, where)
    aux = _explicit(raw, "aux_hidden_state_layer_ids", where, "it names the target layers the draft reads")
    ids = [int(a) - 1 for a in aux]
    stated = agreed(raw, "target_layer_ids", ("target_layer_ids", "dflash_config.target_layer_ids",
                                              "transformer_layer_config.target_layer_ids"), where)
    if stated is not MISSING:
        check_layer_base(list(stated), aux, "aux_hidden_state_layer_ids", where)
    heads = _mode_and_heads(raw, kind, where)
    dspark = {**heads,
              "block_size": _block_size(raw, heads["mode"], where),
              "target_layer_ids": ids,
              "mask_token_id": _explicit(raw, "mask_token_id", where, "every non-anchor slot embeds it"),
              "num_target_layers": _layer_count(raw, options, where)}
    verifier = lookup(raw, "speculators_config.verifier")
    extras = {"verifier": {"name_or_path": verifier.get("name_or_path"),
                           "architectures": list(verifier.get("architectures") or [])}} \
        if isinstance(verifier, dict) else {}
    return build_config(qwen3, dspark, where), extras
