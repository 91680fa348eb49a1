"""A draft config for a given HF target: copy the target's layer geometry (as the DSpark paper does), pick evenly
spread capture layers, and reserve a mask token. Only arithmetic on configs."""
from __future__ import annotations

from dspark.config import DraftConfig, RopeConfig

# draft kinds by name: (block layout, DSpark heads). unanchored = the DSpark heads on the DFlash layout (speculators'
# sample_from_anchor false)
DRAFT_MODES = {"dspark": ("dspark", True), "dflash": ("dflash", False), "unanchored": ("dflash", True)}


def mode_name(config: DraftConfig) -> str:
    """The DRAFT_MODES name of a draft config."""
    return next(name for name, kind in DRAFT_MODES.items() if kind == (config.mode, config.has_heads))


def spread_layer_ids(num_target_layers: int, count: int) -> tuple[int, ...]:
    """`count` capture layers spread over 1 … N−3 (e.g. 36 layers, 5 ids -> 1, 9, 17, 25, 33)."""
    if count == 1:
        return (max(0, (num_target_layers - 2) // 2),)
    span = num_target_layers - 4
    return tuple(sorted({int(1 + i * span / (count - 1) + 0.5) for i in range(count)}))


def draft_config_from_target(hf_config, *, num_layers: int = 2, block_size: int = 7, target_layers: int = 5,
                             layer_ids: tuple[int, ...] | None = None, markov_rank: int = 256,
                             markov_head_type: str = "vanilla", mask_token_id: int | None = None,
                             mode: str = "dspark", heads: bool | None = None) -> DraftConfig:
    """Draft layers copy the target's hidden size, heads, head_dim, FFN width, norm eps and RoPE. `heads`: the Markov
    and confidence heads (default: in "dspark" mode only; with "dflash" mode, the DFlash-aligned DSpark variant)."""
    c = hf_config.get_text_config() if hasattr(hf_config, "get_text_config") else hf_config
    attention_heads = int(c.num_attention_heads)
    n = int(c.num_hidden_layers)
    rope = getattr(c, "rope_parameters", None) or {"rope_theta": getattr(c, "rope_theta", 10000.0)}
    rope = {k: v for k, v in dict(rope).items() if k in RopeConfig.__dataclass_fields__ or k == "type"}
    bare = not (mode == "dspark" if heads is None else heads)  # no Markov / confidence head (DFlash)
    return DraftConfig(
        hidden_size=int(c.hidden_size), num_hidden_layers=num_layers, num_attention_heads=attention_heads,
        num_key_value_heads=int(getattr(c, "num_key_value_heads", None) or attention_heads),
        head_dim=int(getattr(c, "head_dim", None) or int(c.hidden_size) // attention_heads),
        intermediate_size=int(c.intermediate_size), vocab_size=int(c.vocab_size), block_size=block_size,
        target_layer_ids=layer_ids or spread_layer_ids(n, target_layers),
        mask_token_id=int(mask_token_id if mask_token_id is not None else int(c.vocab_size) - 1),
        num_target_layers=n, markov_rank=0 if bare else markov_rank, markov_head_type=markov_head_type,
        enable_confidence_head=not bare, confidence_head_with_markov=not bare,
        rms_norm_eps=float(getattr(c, "rms_norm_eps", 1e-6)),
        max_position_embeddings=int(getattr(c, "max_position_embeddings", 4096)),
        rope=RopeConfig.from_dict(rope), mode=mode,
    )
