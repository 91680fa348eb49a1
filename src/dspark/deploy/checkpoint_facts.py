"""What deployment needs to know about a draft or target checkpoint, read from its `config.json`.

Reads plain JSON (no torch, no transformers) in the three draft layouts the engines load:

- DeepSpec (`architectures: ["Qwen3DSparkModel"]`): fields at the top level; what SGLang's `DSPARK`,
  vLLM's `dspark` and TensorRT-LLM's DSpark load (SpecForge `scripts/gates/normalize_dflash_export.py`).
- SpecForge (`DSparkDraftModel` / `DFlashDraftModel`): `mask_token_id`, `target_layer_ids` and the head
  fields nested in `dflash_config` (SpecForge `configs/qwen3-8b-dspark.json`).
- speculators (`speculators_model_type`): `aux_hidden_state_layer_ids` name a layer's *input*, i.e. our
  id + 1, and the Qwen3 fields sit in `transformer_layer_config` (speculators `models/dspark/config.py`).

Layer ids are returned in the Hugging Face convention (id i = output of decoder layer i). Anything
ambiguous is recorded as a `problem`, never guessed. It does not judge engine compatibility.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass


class CheckpointError(ValueError):
    """A config.json that cannot be read."""


DSPARK = "dspark"  # anchor layout: slot k predicts x_{p+k+1} ("sample from anchor")
DFLASH = "dflash"  # anchor layout: slot 0 predicts nothing, slot k predicts x_{p+k}


@dataclass(frozen=True)
class DraftFacts:
    """Serving-relevant facts of a draft checkpoint (None = the config does not say)."""

    source: str
    layout: str  # "deepspec" | "specforge" | "speculators" | "unknown"
    anchor_layout: str  # DSPARK | DFLASH
    block_size: int | None
    target_layer_ids: tuple[int, ...] | None
    mask_token_id: int | None
    hidden_size: int | None = None
    target_hidden_size: int | None = None
    vocab_size: int | None = None
    num_hidden_layers: int | None = None
    max_position_embeddings: int | None = None
    rope_type: str | None = None
    rope_factor: float | None = None
    rope_original_max: int | None = None
    markov_rank: int | None = None
    markov_head_type: str | None = None
    enable_confidence_head: bool | None = None
    layer_types: tuple[str, ...] | None = None
    is_causal: bool | None = None
    problems: tuple[str, ...] = ()

    @property
    def position_range(self) -> int | None:
        """Positions the draft's RoPE covers: max_position_embeddings, capped by YaRN's factor x original."""
        if self.max_position_embeddings is None:
            return None
        if self.rope_type == "yarn" and self.rope_factor and self.rope_original_max:
            return min(self.max_position_embeddings, int(self.rope_factor * self.rope_original_max))
        return self.max_position_embeddings


@dataclass(frozen=True)
class TargetFacts:
    """Serving-relevant facts of a target model's config.json."""

    source: str
    num_hidden_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    max_position_embeddings: int | None
    architectures: tuple[str, ...] = ()


def load_config_json(path: str) -> dict:
    """`path` is a checkpoint folder or its config.json; raise CheckpointError with what to do."""
    file = os.path.join(path, "config.json") if os.path.isdir(path) else path
    if not os.path.isfile(file):
        raise CheckpointError(f"no config.json at {path!r}; pass a checkpoint folder or its config.json")
    try:
        with open(file, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read {file}: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{file} is not a JSON object")
    return data


def _int(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rope(cfg: dict) -> tuple[str | None, float | None, int | None]:
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        return None, None, None
    kind = rope.get("rope_type") or rope.get("type")
    factor = rope.get("factor")
    return kind, (float(factor) if isinstance(factor, (int, float)) else None), _int(
        rope.get("original_max_position_embeddings"))


def _layout(cfg: dict) -> str:
    arch = tuple(cfg.get("architectures") or ())
    if cfg.get("speculators_model_type"):
        return "speculators"
    if isinstance(cfg.get("dflash_config"), dict):
        return "specforge"
    if any(a.endswith("DSparkModel") for a in arch) or "target_layer_ids" in cfg:
        return "deepspec"
    return "unknown"


def _anchor_layout(cfg: dict, layout: str, nested: dict) -> str:
    if cfg.get("dspark_mode") == DFLASH:
        return DFLASH
    if "sample_from_anchor" in cfg:
        return DSPARK if cfg["sample_from_anchor"] else DFLASH
    if layout == "speculators":
        return DFLASH if cfg.get("speculators_model_type") == "dflash" else DSPARK
    arch = " ".join(cfg.get("architectures") or ())
    if "DFlash" in arch and nested.get("projector_type") != "dspark":
        return DFLASH
    return DSPARK


def draft_facts_from_dict(cfg: dict, source: str) -> DraftFacts:
    """DraftFacts of a draft config already loaded as a dict."""
    layout = _layout(cfg)
    nested = cfg.get("dflash_config") if isinstance(cfg.get("dflash_config"), dict) else {}
    inner = cfg.get("transformer_layer_config") if isinstance(cfg.get("transformer_layer_config"), dict) else {}
    look = {**inner, **nested, **cfg}  # top level wins
    problems: list[str] = []

    ours = look.get("target_layer_ids")
    aux = look.get("aux_hidden_state_layer_ids")
    ids: tuple[int, ...] | None = None
    if ours is not None:
        ids = tuple(int(i) for i in ours)
        if aux is not None and tuple(int(i) - 1 for i in aux) != ids:
            problems.append(f"target_layer_ids {list(ids)} and aux_hidden_state_layer_ids {list(aux)} disagree "
                            "(aux ids must be target_layer_ids + 1); the layer-id base is ambiguous")
    elif aux is not None:
        if layout == "speculators":
            ids = tuple(int(i) - 1 for i in aux)
        else:
            problems.append("aux_hidden_state_layer_ids without speculators_model_type: cannot tell whether the "
                            "ids name layer inputs (vLLM) or outputs (Hugging Face)")
    if ids is not None and list(ids) != sorted(set(ids)):
        problems.append(f"target_layer_ids {list(ids)} are not strictly increasing")

    kind, factor, original = _rope(look)
    layer_types = look.get("layer_types")
    return DraftFacts(
        source=source,
        layout=layout,
        anchor_layout=_anchor_layout(cfg, layout, nested),
        block_size=_int(look.get("block_size")),
        target_layer_ids=ids,
        mask_token_id=_int(look.get("mask_token_id")),
        hidden_size=_int(look.get("hidden_size")),
        target_hidden_size=_int(look.get("target_hidden_size")),
        vocab_size=_int(look.get("vocab_size")),
        num_hidden_layers=_int(look.get("num_hidden_layers")),
        max_position_embeddings=_int(look.get("max_position_embeddings")),
        rope_type=kind,
        rope_factor=factor,
        rope_original_max=original,
        markov_rank=_int(look.get("markov_rank")),
        markov_head_type=look.get("markov_head_type"),
        enable_confidence_head=look.get("enable_confidence_head"),
        layer_types=tuple(layer_types) if isinstance(layer_types, list) else None,
        is_causal=look.get("is_causal") if isinstance(look.get("is_causal"), bool) else None,
        problems=tuple(problems),
    )


def read_draft(path: str) -> DraftFacts:
    """DraftFacts of the draft checkpoint folder (or config.json) at `path`."""
    return draft_facts_from_dict(load_config_json(path), source=path)


def target_facts_from_dict(cfg: dict, source: str) -> TargetFacts:
    """TargetFacts of a target config dict (multimodal configs: the `text_config` part)."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    look = {**cfg, **text}
    return TargetFacts(
        source=source,
        num_hidden_layers=_int(look.get("num_hidden_layers")),
        hidden_size=_int(look.get("hidden_size")),
        vocab_size=_int(look.get("vocab_size")),
        max_position_embeddings=_int(look.get("max_position_embeddings")),
        architectures=tuple(cfg.get("architectures") or ()),
    )


def read_target(path: str) -> TargetFacts:
    """TargetFacts of the target checkpoint folder (or config.json) at `path`."""
    return target_facts_from_dict(load_config_json(path), source=path)
