"""Config fields every layout shares: read them without guessing, build the DraftConfig, write the Qwen3 part.

A field may sit in several places of one config (top level, `dflash_config`, `transformer_layer_config`); the
places must agree or the checkpoint is refused with an `AmbiguousCheckpointError` that names the field. The Qwen3
layer fields are resolved the way the Hugging Face loaders that read these files resolve them: keys a file leaves
out take the Qwen3Config class defaults (speculators stores a diff against them). Tensors are not touched here.
"""
from __future__ import annotations

from typing import Any

from dspark.config import ConfigError, DraftConfig, RopeConfig
from dspark.formats.checkpoint import ConvertOptions
from dspark.formats.native import CheckpointError, config_to_dict

MISSING = object()

# Qwen3 layer fields a draft config carries; resolved through transformers' Qwen3Config.
QWEN3_INPUT_KEYS = (
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "vocab_size", "rms_norm_eps", "max_position_embeddings", "rope_parameters", "rope_scaling", "rope_theta",
    "hidden_act", "attention_bias", "layer_types", "use_sliding_window", "sliding_window", "max_window_layers",
    "tie_word_embeddings",
)


class AmbiguousCheckpointError(CheckpointError):
    """A checkpoint whose conventions cannot be read without a guess; `field` names the culprit."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def lookup(config: dict[str, Any], dotted: str) -> Any:
    """config["a"]["b"] for "a.b"; MISSING where any part is absent or null."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or node.get(part) is None:
            return MISSING
        node = node[part]
    return node


def agreed(config: dict[str, Any], field: str, places: tuple[str, ...], where: str) -> Any:
    """The value of `field` found at the dotted `places`; MISSING if none holds it; refuse if they disagree."""
    found = [(place, value) for place in places if (value := lookup(config, place)) is not MISSING]
    distinct = {repr(value) for _, value in found}
    if len(distinct) > 1:
        listing = ", ".join(f"{place}={value!r}" for place, value in found)
        raise AmbiguousCheckpointError(field, f"{where}: {field} is ambiguous: {listing} disagree; fix the config so "
                                              f"they match (or keep one) and import again")
    return found[0][1] if found else MISSING


def required(value: Any, field: str, where: str, why: str) -> Any:
    """`value` unless MISSING; else refuse, naming the field and why it cannot be assumed."""
    if value is MISSING:
        raise AmbiguousCheckpointError(field, f"{where}: {field} is missing and cannot be assumed ({why}); add it to "
                                              f"the config and import again")
    return value


def resolve_qwen3(fields: dict[str, Any], where: str) -> dict[str, Any]:
    """The Qwen3 layer fields as a Hugging Face loader sees them (class defaults filled in)."""
    from transformers import Qwen3Config

    model_type = fields.get("model_type", "qwen3")
    if model_type != "qwen3":
        raise CheckpointError(f"{where}: model_type {model_type!r}: dspark drafts are Qwen3-style layers (q/k norms); "
                              f"a {model_type} draft cannot be imported")
    given = {k: fields[k] for k in QWEN3_INPUT_KEYS if k in fields}
    try:
        resolved = Qwen3Config(**given).to_dict()
    except (TypeError, ValueError, KeyError) as err:
        raise CheckpointError(f"{where}: the Qwen3 layer fields do not form a valid config ({err})") from None
    layer_types = resolved.get("layer_types") or []
    if any(kind != "full_attention" for kind in layer_types):
        window = resolved.get("sliding_window")
        raise CheckpointError(f"{where}: layer_types {layer_types} use sliding-window attention (window {window}); "
                              f"dspark drafts attend to the full context, so this draft would behave differently")
    return resolved


DSPARK_KEYS = ("dspark_mode", "block_size", "target_layer_ids", "num_target_layers", "mask_token_id", "markov_rank",
               "markov_head_type", "enable_confidence_head", "confidence_head_with_markov")


def build_config(qwen3: dict[str, Any], dspark: dict[str, Any], where: str) -> DraftConfig:
    """A DraftConfig from resolved Qwen3 layer fields plus explicit DSpark fields (every one given)."""
    if qwen3.get("hidden_act", "silu") != "silu" or qwen3.get("attention_bias", False):
        raise CheckpointError(f"{where}: only SwiGLU (hidden_act 'silu') layers without attention bias are supported")
    try:
        return DraftConfig(
            hidden_size=int(qwen3["hidden_size"]), num_hidden_layers=int(qwen3["num_hidden_layers"]),
            num_attention_heads=int(qwen3["num_attention_heads"]),
            num_key_value_heads=int(qwen3["num_key_value_heads"]), head_dim=int(qwen3["head_dim"]),
            intermediate_size=int(qwen3["intermediate_size"]), vocab_size=int(qwen3["vocab_size"]),
            rms_norm_eps=float(qwen3["rms_norm_eps"]), max_position_embeddings=int(qwen3["max_position_embeddings"]),
            rope=RopeConfig.from_dict(qwen3.get("rope_parameters")),
            block_size=int(dspark["block_size"]), target_layer_ids=tuple(int(i) for i in dspark["target_layer_ids"]),
            mask_token_id=int(dspark["mask_token_id"]), num_target_layers=int(dspark["num_target_layers"]),
            markov_rank=int(dspark["markov_rank"]), markov_head_type=str(dspark["markov_head_type"]).lower(),
            enable_confidence_head=bool(dspark["enable_confidence_head"]),
            confidence_head_with_markov=bool(dspark["confidence_head_with_markov"]),
            mode=str(dspark["mode"]),
        )
    except ConfigError as err:
        raise CheckpointError(f"{where}: {err}") from None


def target_layer_count(value: Any, options: ConvertOptions, where: str) -> int:
    """num_target_layers from the config, else from --target; refuse if neither says."""
    if value is not MISSING:
        return int(value)
    if options.target is not None:
        from dspark.formats.target_files import read_target

        return read_target(options.target).num_hidden_layers
    raise AmbiguousCheckpointError("num_target_layers", f"{where}: num_target_layers is not stored; pass --target "
                                                        f"with the target model folder so it can be read from there")


def check_layer_base(ids: list[int], aux: Any, aux_field: str, where: str) -> None:
    """Refuse a config that also names the layers in vLLM's base (aux = id + 1) and disagrees with `ids`."""
    if aux is not MISSING and [int(i) for i in aux] != [int(i) + 1 for i in ids]:
        raise AmbiguousCheckpointError(
            "target_layer_ids", f"{where}: the layer-id base is ambiguous: target_layer_ids {list(ids)} (Hugging Face "
                                f"base, output of layer i) and {aux_field} {list(aux)} (vLLM base, input of layer i = "
                                f"id + 1) disagree; keep the one the draft was trained with and import again")


def qwen3_layer_fields(config: DraftConfig, dtype: str) -> dict[str, Any]:
    """The Qwen3 layer part of a foreign config (architectures and DSpark fields are the layout's business)."""
    fields = {k: v for k, v in config_to_dict(config).items() if k not in DSPARK_KEYS and k != "architectures"}
    fields.update(dtype=dtype, use_sliding_window=False, sliding_window=None)
    return fields
