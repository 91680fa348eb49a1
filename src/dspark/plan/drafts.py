"""The tensor inventory of a DSpark / DFlash draft, built from its `dspark.config.DraftConfig`.

The draft's trainable tensors are `fc` (m·d → d), `hidden_norm`, per layer q/k/v/o + q_norm/k_norm +
gate/up/down + two RMSNorms, the final `norm`, the Markov head (W1 = Embedding(V, r), W2 = Linear(r, V), plus
the gated / RNN extras) and the confidence head Linear(d (+ r) → 1). It reuses the target's embed_tokens and
lm_head: those are `shared_tensors`, counted only when the draft runs without its target.

For `kimi-k3-dspark` this gives 2,249,290,081 parameters, 2,249,195,520 of them in matrices (the Q8_0 GGUF of
RadixArk/Kimi-K3-DSpark has 38 Q8_0 and 24 F32 tensors: lucebox-hub docs/K3_DSPARK_DRAFT_PROVENANCE.md).
"""
from __future__ import annotations

from dspark.config import PRESET_REPOS, PRESETS, DraftConfig, preset
from dspark.plan.blocks import gqa_attention, norms, swiglu
from dspark.plan.errors import PlanError
from dspark.plan.spec import EMBED, EMBED_LIKE, OTHER, OUTPUT, SMALL, KvLayout, ModelSpec, TensorGroup

def _head_tensors(cfg: DraftConfig) -> tuple[TensorGroup, ...]:
    d, r, v = cfg.hidden_size, cfg.markov_rank, cfg.vocab_size
    groups: list[TensorGroup] = []
    if r:
        groups += [TensorGroup("markov_head.markov_w1", EMBED_LIKE, (v, r)),
                   TensorGroup("markov_head.markov_w2", OTHER, (v, r))]
        if cfg.markov_head_type == "gated":
            groups += [TensorGroup("markov_head.gate_proj", OTHER, (r, d + r)),
                       TensorGroup("markov_head.gate_proj.bias", SMALL, (r,))]
        elif cfg.markov_head_type == "rnn":
            groups += [TensorGroup("markov_head.joint_proj", OTHER, (3 * r, 2 * r + d)),
                       TensorGroup("markov_head.joint_proj.bias", SMALL, (3 * r,))]
    if cfg.enable_confidence_head:
        width = d + (r if cfg.confidence_head_with_markov else 0)
        # A one-row head: every converter keeps it in high precision (F32 in the published GGUF).
        groups += [TensorGroup("confidence_head.proj", SMALL, (1, width)),
                   TensorGroup("confidence_head.proj.bias", SMALL, (1,))]
    return tuple(groups)


def draft_spec(cfg: DraftConfig, name: str = "draft", repo: str = "") -> ModelSpec:
    """The planner's view of a draft described by `cfg`."""
    d, n = cfg.hidden_size, cfg.num_hidden_layers
    tensors = (
        (TensorGroup("fc", OTHER, (d, cfg.feature_size)),)
        + norms("hidden_norm", d, 1)
        + gqa_attention("layers.self_attn", d, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, n,
                        qk_norm=True)
        + swiglu("layers.mlp", d, cfg.intermediate_size, n)
        + norms("layers.input_layernorm", d, n)
        + norms("layers.post_attention_layernorm", d, n)
        + norms("norm", d, 1)
        + _head_tensors(cfg)
    )
    shared = (TensorGroup("target.embed_tokens", EMBED, (cfg.vocab_size, d)),
              TensorGroup("target.lm_head", OUTPUT, (cfg.vocab_size, d)))
    kv = KvLayout(full_layers=n, kv_heads=cfg.num_key_value_heads, k_head_dim=cfg.head_dim, v_head_dim=cfg.head_dim)
    return ModelSpec(
        name=name, role="draft", hidden=d, layers=n, vocab=cfg.vocab_size, max_context=cfg.max_position_embeddings,
        tensors=tensors, kv=kv, attention_heads=cfg.num_attention_heads, kv_heads=cfg.num_key_value_heads,
        shared_tensors=shared, block_size=cfg.num_draft_tokens, hf_repo=repo,
        source="dspark.config preset; shapes of RadixArk/Kimi-K3-DSpark derived from its exact parameter count",
        notes=("embed_tokens and lm_head are the target's (shared, not stored in the draft)",
               "the draft caches K/V of the target's context: one slot per target token"),
    )


def draft_preset(name: str) -> ModelSpec:
    """A draft from `dspark.config.PRESETS` (kimi-k3-dspark, qwen3-8b-dspark, ...)."""
    if name not in PRESETS:
        raise PlanError(f"unknown draft preset {name!r}; known drafts: {', '.join(PRESETS)}")
    return draft_spec(preset(name), name=name, repo=PRESET_REPOS.get(name, ""))


def is_draft_config(raw: dict) -> bool:
    """Whether a config.json describes a DSpark/DFlash draft (it names target layers and a block size)."""
    return "block_size" in raw and ("target_layer_ids" in raw or "dflash_config" in raw or "dspark_config" in raw)


def draft_config_from_json(raw: dict) -> DraftConfig:
    """A `DraftConfig` from a native draft config.json (the fields listed in design §6)."""
    sub = raw.get("dspark_config") or raw.get("dflash_config") or {}
    merged = {**raw, **sub}
    try:
        ids = tuple(merged["target_layer_ids"])
        return DraftConfig(
            hidden_size=int(merged["hidden_size"]), num_hidden_layers=int(merged["num_hidden_layers"]),
            num_attention_heads=int(merged["num_attention_heads"]),
            num_key_value_heads=int(merged.get("num_key_value_heads", merged["num_attention_heads"])),
            head_dim=int(merged.get("head_dim") or merged["hidden_size"] // merged["num_attention_heads"]),
            intermediate_size=int(merged["intermediate_size"]), vocab_size=int(merged["vocab_size"]),
            block_size=int(merged["block_size"]), target_layer_ids=ids,
            mask_token_id=int(merged.get("mask_token_id", 0)),
            num_target_layers=int(merged.get("num_target_layers", max(ids) + 2)),
            markov_rank=int(merged.get("markov_rank", 0)),
            markov_head_type=str(merged.get("markov_head_type", "vanilla")),
            enable_confidence_head=bool(merged.get("enable_confidence_head", False)),
            confidence_head_with_markov=bool(merged.get("confidence_head_with_markov", False)),
            max_position_embeddings=int(merged.get("max_position_embeddings", 40960)),
            mode=str(merged.get("mode") or ("dspark" if merged.get("markov_rank") or "dspark_config" in raw
                                            else "dflash")),
        )
    except KeyError as missing:
        raise PlanError(f"draft config.json lacks {missing}; it needs the Qwen3 layer fields plus block_size and "
                        "target_layer_ids") from None
    except ValueError as bad:  # ConfigError is a ValueError
        raise PlanError(f"draft config.json is inconsistent: {bad}") from None
