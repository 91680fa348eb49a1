"""Read a local Hugging Face `config.json` into a `ModelSpec` (no download, no transformers import).

Understood layouts: dense GQA/MHA (Llama, Qwen2/3, Mistral), MLA (DeepSeek-V2/V3, Kimi K2), MoE (DeepSeek,
Qwen-MoE, Mixtral: routed + shared experts, dense-first layers), sliding-window layers (`layer_types`), and
hybrid linear attention (Qwen3-Next Gated DeltaNet via `layer_types` / `full_attention_interval`, Kimi
Linear KDA via `linear_attn_config`). Multimodal wrappers are read through `text_config`; native DSpark draft
configs go to `dspark.plan.drafts`. The weights' storage comes from `quantization_config` / `torch_dtype`.
Vision towers and MTP modules are not counted.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dspark.plan.blocks import (
    embeddings,
    gated_deltanet,
    gqa_attention,
    kda_attention,
    mla_attention,
    norms,
    recurrent_state_bytes,
    routed_experts,
    router,
    swiglu,
)
from dspark.plan.drafts import draft_config_from_json, draft_spec, is_draft_config
from dspark.plan.errors import PlanError
from dspark.plan.spec import OTHER, KvLayout, ModelSpec, TensorGroup


def read_config(path: str | Path) -> dict[str, Any]:
    """The parsed config.json at `path` (a file, or a folder holding config.json)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise PlanError(f"no config.json at {path}; pass a preset name or a folder / file with an HF config.json")
    try:
        raw = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise PlanError(f"cannot read {p} as JSON ({err}); pass a valid HF config.json") from None
    if not isinstance(raw, dict):
        raise PlanError(f"{p} is not a JSON object; pass an HF config.json")
    return raw


def _need(cfg: dict[str, Any], key: str, where: str) -> int:
    if cfg.get(key) is None:
        raise PlanError(f"{where} lacks {key!r}; the planner needs hidden_size, num_hidden_layers, "
                        "num_attention_heads and vocab_size (or pass a preset name)")
    return int(cfg[key])


def _layer_kinds(cfg: dict[str, Any], layers: int) -> list[str]:
    """One of full / sliding / linear / kda / mla per layer."""
    attn = "mla" if cfg.get("kv_lora_rank") else "full"
    lac = cfg.get("linear_attn_config")
    if isinstance(lac, dict) and lac.get("kda_layers"):
        kda = {int(i) - 1 for i in lac["kda_layers"]}  # Kimi Linear lists 1-based layer ids
        return ["kda" if i in kda else attn for i in range(layers)]
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        table = {"full_attention": attn, "sliding_attention": "sliding", "chunked_attention": "sliding",
                 "linear_attention": "linear"}
        unknown = sorted({t for t in types if t not in table})
        if unknown:
            raise PlanError(f"config.json layer_types has {unknown}; supported: {', '.join(table)}")
        return [table[t] for t in types]
    interval = cfg.get("full_attention_interval")
    if interval:
        return [attn if (i + 1) % int(interval) == 0 else "linear" for i in range(layers)]
    return [attn] * layers


def _moe_layers(cfg: dict[str, Any], layers: int, experts: int) -> list[bool]:
    if not experts:
        return [False] * layers
    first_dense = int(cfg.get("first_k_dense_replace") or 0)
    freq = int(cfg.get("moe_layer_freq") or cfg.get("decoder_sparse_step") or 1)
    only_mlp = {int(i) for i in cfg.get("mlp_only_layers") or []}
    return [i >= first_dense and i % freq == 0 and i not in only_mlp for i in range(layers)]


def _storage(cfg: dict[str, Any]) -> tuple[str, str | None]:
    """(default quant, routed-expert quant) from quantization_config / torch_dtype."""
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    base = {"float16": "F16", "float32": "F32"}.get(dtype, "BF16")
    q = cfg.get("quantization_config") or {}
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        return "FP8", None
    if method == "mxfp4":
        return base, "MXFP4"
    if method in ("awq", "gptq"):
        return ("INT4_W4A16_G32" if int(q.get("group_size", 128)) == 32 else "INT4_W4A16"), None
    if method == "compressed-tensors":
        for group in (q.get("config_groups") or {}).values():
            w = group.get("weights") or {}
            bits, kind, size = int(w.get("num_bits", 16)), str(w.get("type", "int")), int(w.get("group_size") or 0)
            name = {(4, "float", 16): "NVFP4", (4, "float", 32): "MXFP4", (4, "int", 32): "INT4_W4A16_G32"}.get(
                (bits, kind, size), {4: "INT4_W4A16", 8: "FP8" if kind == "float" else "INT8"}.get(bits, base))
            if any("expert" in str(t) for t in group.get("targets") or []):
                return base, name
            return name, None
    return base, None


def spec_from_config(raw: dict[str, Any], name: str = "config.json") -> ModelSpec:
    """The planner's view of the model an HF config.json describes."""
    if is_draft_config(raw):
        return draft_spec(draft_config_from_json(raw), name=name)
    cfg = {**raw, **(raw.get("text_config") or {})}
    d = _need(cfg, "hidden_size", name)
    layers = _need(cfg, "num_hidden_layers", name)
    heads = _need(cfg, "num_attention_heads", name)
    vocab = _need(cfg, "vocab_size", name)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or d // heads)
    tied = bool(cfg.get("tie_word_embeddings", False))
    model_type = str(cfg.get("model_type", ""))
    kinds = _layer_kinds(cfg, layers)
    count = {k: kinds.count(k) for k in ("full", "sliding", "linear", "kda", "mla")}

    tensors: tuple[TensorGroup, ...] = embeddings(vocab, d, tied) + norms("layers.input_layernorm", d, layers) \
        + norms("layers.post_attention_layernorm", d, layers) + norms("norm", d, 1)
    gqa_layers = count["full"] + count["sliding"]
    tensors += gqa_attention("attn", d, heads, kv_heads, head_dim, gqa_layers, qk_norm=model_type.startswith("qwen3"),
                             bias=bool(cfg.get("attention_bias", model_type == "qwen2")),
                             gated_q=model_type == "qwen3_next")
    if count["mla"]:
        tensors += mla_attention("mla", d, heads, int(cfg.get("q_lora_rank") or 0), int(cfg["kv_lora_rank"]),
                                 int(cfg.get("qk_nope_head_dim", 128)), int(cfg.get("qk_rope_head_dim", 64)),
                                 int(cfg.get("v_head_dim", 128)), count["mla"])
    gqa_dim = head_dim if gqa_layers else 0
    kv = {"full_layers": count["full"], "window_layers": count["sliding"], "kv_heads": kv_heads if gqa_layers else 0,
          "k_head_dim": gqa_dim, "v_head_dim": gqa_dim, "window": int(cfg.get("sliding_window") or 0),
          "mla_layers": count["mla"],
          "mla_latent": int(cfg.get("kv_lora_rank") or 0) + int(cfg.get("qk_rope_head_dim") or 0)}
    if count["linear"]:
        kh, kd = int(cfg.get("linear_num_key_heads", 16)), int(cfg.get("linear_key_head_dim", 128))
        vh, vd = int(cfg.get("linear_num_value_heads", 32)), int(cfg.get("linear_value_head_dim", 128))
        conv = int(cfg.get("linear_conv_kernel_dim", 4))
        tensors += gated_deltanet("linear_attn", d, kh, kd, vh, vd, count["linear"], conv)
        kv.update(linear_layers=count["linear"],
                  linear_state_bytes=recurrent_state_bytes(vh, kd, vd, 2 * kh * kd + vh * vd, conv))
    if count["kda"]:
        lac = cfg["linear_attn_config"]
        kh, kd = int(lac.get("num_heads", heads)), int(lac.get("head_dim", 128))
        conv = int(lac.get("short_conv_kernel_size", 4))
        tensors += kda_attention("kda", d, kh, kd, count["kda"], conv)
        kv.update(linear_layers=count["kda"], linear_state_bytes=recurrent_state_bytes(kh, kd, kd, 3 * kh * kd, conv))

    experts = int(cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
    moe = _moe_layers(cfg, layers, experts)
    n_moe = sum(moe)
    inter = int(cfg.get("intermediate_size") or 0)
    moe_inter = int(cfg.get("moe_intermediate_size") or inter)
    n_shared = int(cfg.get("n_shared_experts") or cfg.get("num_shared_experts") or 0)
    shared = int(cfg.get("shared_expert_intermediate_size") or n_shared * moe_inter)
    tensors += swiglu("dense.mlp", d, inter, layers - n_moe)
    if n_moe:
        tensors += router("moe", d, experts, n_moe, correction_bias=cfg.get("topk_method") == "noaux_tc")
        tensors += routed_experts("moe", d, moe_inter, experts, n_moe) + swiglu("moe.shared_experts", d, shared, n_moe)
        if cfg.get("shared_expert_intermediate_size"):  # Qwen-MoE gates its shared expert with a 1-row linear
            tensors += (TensorGroup("moe.shared_expert_gate", OTHER, (1, d), n_moe),)
    quant, expert_quant = _storage(cfg)
    return ModelSpec(
        name=name, role="target", hidden=d, layers=layers, vocab=vocab,
        max_context=int(cfg.get("max_position_embeddings") or 0), tensors=tensors, kv=KvLayout(**kv),
        attention_heads=heads, kv_heads=kv_heads if gqa_layers else 0, moe_experts=experts if n_moe else 0,
        moe_top_k=int(cfg.get("num_experts_per_tok") or cfg.get("num_experts_per_token") or 0),
        default_quant=quant, default_expert_quant=expert_quant,
        tied_embeddings=tied, trust_remote_code="auto_map" in raw,
        source=f"config.json ({model_type or 'unknown model_type'})",
    )
