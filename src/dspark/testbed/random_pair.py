"""Tiny randomly initialised targets (Qwen3, Llama, DeepSeek-V3 MLA+MoE) and drafts that fit them.

For tests and the smoke demo: the models are untrained, so acceptance is low; they exercise every code path.
Trained targets live in the rest of `testbed/`.
"""
from __future__ import annotations

import torch
from torch import nn

from dspark.config import DraftConfig
from dspark.model.draft import DSparkDraft

ARCHITECTURES = ("qwen3", "llama", "deepseek_v3", "qwen2", "mistral")


def tiny_target(arch: str = "qwen3", vocab_size: int = 97, hidden_size: int = 64, num_layers: int = 4,
                seed: int = 0) -> nn.Module:
    """A random fp32 HF causal LM of the given family, in eval mode."""
    import transformers as tf

    common = dict(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_layers,
                  num_attention_heads=4, intermediate_size=2 * hidden_size, max_position_embeddings=512,
                  tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if arch == "qwen3":
        config = tf.Qwen3Config(num_key_value_heads=2, head_dim=hidden_size // 4, **common)
        cls = tf.Qwen3ForCausalLM
    elif arch == "llama":
        config = tf.LlamaConfig(num_key_value_heads=2, **common)
        cls = tf.LlamaForCausalLM
    elif arch == "qwen2":  # q/k/v biases; sliding-window attention from layer 2 on (window 8, so tests reach it)
        config = tf.Qwen2Config(num_key_value_heads=2, use_sliding_window=True, sliding_window=8, max_window_layers=2,
                                **common)
        cls = tf.Qwen2ForCausalLM
    elif arch == "mistral":  # sliding-window attention in every layer (window 8)
        config = tf.MistralConfig(num_key_value_heads=2, sliding_window=8, **common)
        cls = tf.MistralForCausalLM
    elif arch == "deepseek_v3":  # MLA attention + routed/shared experts: the Kimi K2 family's architecture
        config = tf.DeepseekV3Config(
            num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
            v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
            first_k_dense_replace=1, n_group=1, topk_group=1, **common)
        cls = tf.DeepseekV3ForCausalLM
    else:
        raise ValueError(f"unknown architecture {arch!r}; choose one of {ARCHITECTURES}")
    torch.manual_seed(seed)
    model = cls(config).eval()
    if arch == "deepseek_v3":  # random router weights are zero-initialised in some versions: make routing real
        for module in model.modules():
            if hasattr(module, "e_score_correction_bias") and hasattr(module, "weight"):
                nn.init.normal_(module.weight, std=0.5)
    return model


def draft_config_for(target: nn.Module, layer_ids: tuple[int, ...] | None = None, block_size: int = 4,
                     markov_head_type: str = "vanilla", markov_rank: int = 8, num_layers: int = 2,
                     mode: str = "dspark") -> DraftConfig:
    """A small draft config that fits `target` (same hidden size and vocabulary)."""
    cfg = target.config
    n = int(cfg.num_hidden_layers)
    ids = layer_ids if layer_ids is not None else tuple(sorted({0, max(0, n // 2 - 1), max(0, n - 2)}))
    vocab = int(target.get_output_embeddings().weight.shape[0])
    dflash = mode == "dflash"
    return DraftConfig(
        hidden_size=int(cfg.hidden_size), num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=2 * int(cfg.hidden_size), vocab_size=vocab, block_size=block_size,
        target_layer_ids=ids, mask_token_id=vocab - 1, num_target_layers=n,
        markov_rank=0 if dflash else markov_rank, markov_head_type=markov_head_type,
        enable_confidence_head=not dflash, confidence_head_with_markov=not dflash,
        max_position_embeddings=int(getattr(cfg, "max_position_embeddings", 512)), mode=mode,
    )


def random_draft(config: DraftConfig, seed: int = 0, scale: float = 1.0) -> DSparkDraft:
    """A random draft; `scale` multiplies the Markov/confidence weights to make their effect visible."""
    torch.manual_seed(seed)
    draft = DSparkDraft(config).eval()
    with torch.no_grad():
        for name, p in draft.named_parameters():
            if name.startswith(("markov_head", "confidence_head")):
                p.mul_(scale)
    return draft
