"""The table of named target models (Kimi K3 and friends) as tensor inventories, with the public facts they rest on.

This is the only target table: `dspark plan` and `dspark launch` / `dspark doctor` read it. Draft presets are
`dspark.config.PRESETS` (with `PRESET_REPOS`), turned into inventories by `dspark.plan.drafts`; local config.json
files go through `hf_config`.
Every figure below cites its public source; "assumed" marks the few shapes no source gives.
"""
from __future__ import annotations

from collections.abc import Callable

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
from dspark.plan.spec import OTHER, KvLayout, ModelSpec, TensorGroup


def _layer_norms(d: int, layers: int) -> tuple[TensorGroup, ...]:
    return norms("layers.input_layernorm", d, layers) + norms("layers.post_attention_layernorm", d, layers) \
        + norms("norm", d, 1)


def kimi_k3() -> ModelSpec:
    """Moonshot Kimi K3: 2.8T total / ~104B active, 93 layers = 69 KDA + 24 gated MLA (NoPE), 1M context.

    Sources: NeMo AutoModel Kimi K3 page (2.8T / 104B, 1,048,576 context); JustVugg/colibri docs/kimi_k3.md
    (96 heads, KDA head dim 128, MLA q_lora 1536 / kv_lora 512 / nope 128 + 64 / v 128, sigmoid output gates,
    896 routed experts top-16 in a 7168->3584 latent with GLU intermediate 3072, 2 fused shared experts of
    intermediate 6144, layer 0 dense, routed experts in MXFP4 (17.55 MB each), the rest BF16, checkpoint
    ~1.56 TB); FareedKhan-dev/kimi-k3-in-c docs/ARCHITECTURE.md (vocab 163,840; dense trunk 108.81 GB,
    embed + norm + lm_head 4.70 GB). Assumed: the dense layer-0 MLP uses K2's intermediate 18432; the
    AttnRes mixing weights and the <1B vision tower are left out. MLA latent 576 elements per token per layer.
    """
    d, heads, kda, mla, moe = 7168, 96, 69, 24, 92
    tensors = (
        embeddings(163_840, d, tied=False)
        + _layer_norms(d, 93)
        + kda_attention("kda", d, heads, 128, kda, conv_kernel=4)
        + mla_attention("mla", d, heads, 1536, 512, 128, 64, 128, mla, output_gate=True)
        + swiglu("layers.0.mlp", d, 18_432, 1)
        + router("moe", d, 896, moe, correction_bias=True)
        + (TensorGroup("moe.latent_down", OTHER, (3584, d), moe), TensorGroup("moe.latent_up", OTHER, (d, 3584), moe))
        + routed_experts("moe", 3584, 3072, 896, moe)
        + swiglu("moe.shared_experts", d, 6144, moe)
    )
    kv = KvLayout(mla_layers=mla, mla_latent=512 + 64, linear_layers=kda,
                  linear_state_bytes=recurrent_state_bytes(heads, 128, 128, 3 * heads * 128, 4))
    return ModelSpec(
        name="kimi-k3", role="target", hidden=d, layers=93, vocab=163_840, max_context=1_048_576, tensors=tensors,
        kv=kv, attention_heads=heads, moe_experts=896, moe_top_k=16, default_quant="BF16",
        default_expert_quant="MXFP4", hf_repo="moonshotai/Kimi-K3", trust_remote_code=True,
        source="NeMo AutoModel Kimi K3 page; colibri docs/kimi_k3.md; kimi-k3-in-c ARCHITECTURE.md",
        notes=("routed experts ship in MXFP4 (QAT), everything else in BF16",
               "KDA state: 96 x 128 x 128 fp32 per layer per sequence, plus the short-conv tail"),
    )


def _deepseek_like(name: str, heads: int, experts: int, top_k: int, dense_layers: int, vocab: int, ctx: int,
                   quant: str, expert_quant: str | None, repo: str, source: str) -> ModelSpec:
    d, layers = 7168, 61
    moe = layers - dense_layers
    tensors = (
        embeddings(vocab, d, tied=False) + _layer_norms(d, layers)
        + mla_attention("mla", d, heads, 1536, 512, 128, 64, 128, layers)
        + swiglu("dense.mlp", d, 18_432, dense_layers)
        + router("moe", d, experts, moe, correction_bias=True)
        + routed_experts("moe", d, 2048, experts, moe)
        + swiglu("moe.shared_experts", d, 2048, moe)
    )
    return ModelSpec(
        name=name, role="target", hidden=d, layers=layers, vocab=vocab, max_context=ctx, tensors=tensors,
        kv=KvLayout(mla_layers=layers, mla_latent=576), attention_heads=heads, moe_experts=experts,
        moe_top_k=top_k, default_quant=quant, default_expert_quant=expert_quant, hf_repo=repo, source=source,
        trust_remote_code=repo.startswith("moonshotai/"),  # Moonshot's Kimi checkpoints ship their modeling code
    )


def kimi_k2() -> ModelSpec:
    """Kimi K2-Instruct: 1.04T / 32B active, 61 layers (1 dense), 64 heads MLA, 384 experts top-8, FP8 blocks.

    Source: MoonshotAI/Kimi-K2 config (via tenstorrent tt-metal config_adapter.py and hf-model-inspector).
    """
    return _deepseek_like("kimi-k2", 64, 384, 8, 1, 163_840, 131_072, "FP8", None, "moonshotai/Kimi-K2-Instruct",
                          "MoonshotAI Kimi-K2 config.json; deploy_guidance.md")


def kimi_k2_thinking() -> ModelSpec:
    """Kimi K2-Thinking: the K2 backbone with native INT4 QAT routed experts (group 32), 256K context.

    Source: unsloth/Kimi-K2-Thinking docs/deploy_guidance.md (INT4 W4A16, group 32, routed experts only).
    """
    return _deepseek_like("kimi-k2-thinking", 64, 384, 8, 1, 163_840, 262_144, "BF16", "INT4_W4A16_G32",
                          "moonshotai/Kimi-K2-Thinking", "Kimi-K2-Thinking deploy_guidance.md")


def deepseek_v3() -> ModelSpec:
    """DeepSeek-V3: 671B / 37B active, 61 layers (3 dense), 128 heads MLA, 256 experts top-8, FP8 blocks.

    Source: deepseek-ai/DeepSeek-V3 config.json (the 14B multi-token-prediction module is not counted).
    """
    return _deepseek_like("deepseek-v3", 128, 256, 8, 3, 129_280, 163_840, "FP8", None, "deepseek-ai/DeepSeek-V3",
                          "deepseek-ai/DeepSeek-V3 config.json")


def _dense_gqa(name: str, d: int, layers: int, heads: int, kv_heads: int, head_dim: int, inter: int, vocab: int,
               ctx: int, tied: bool, qk_norm: bool, repo: str, source: str) -> ModelSpec:
    tensors = (embeddings(vocab, d, tied) + _layer_norms(d, layers)
               + gqa_attention("attn", d, heads, kv_heads, head_dim, layers, qk_norm=qk_norm)
               + swiglu("mlp", d, inter, layers))
    kv = KvLayout(full_layers=layers, kv_heads=kv_heads, k_head_dim=head_dim, v_head_dim=head_dim)
    return ModelSpec(name=name, role="target", hidden=d, layers=layers, vocab=vocab, max_context=ctx, tensors=tensors,
                     kv=kv, attention_heads=heads, kv_heads=kv_heads, tied_embeddings=tied, hf_repo=repo, source=source)


def qwen3_8b() -> ModelSpec:
    """Qwen3-8B: 36 layers, 32 q / 8 kv heads of 128, FFN 12288, vocab 151,936, untied (Qwen/Qwen3-8B config)."""
    return _dense_gqa("qwen3-8b", 4096, 36, 32, 8, 128, 12_288, 151_936, 40_960, False, True, "Qwen/Qwen3-8B",
                      "Qwen/Qwen3-8B config.json")


def llama31_8b() -> ModelSpec:
    """Llama-3.1-8B: 32 layers, 32 q / 8 kv heads, FFN 14336, vocab 128,256 (8,030,261,248 parameters)."""
    return _dense_gqa("llama-3.1-8b", 4096, 32, 32, 8, 128, 14_336, 128_256, 131_072, False, False,
                      "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B config.json")


def qwen3_next_80b() -> ModelSpec:
    """Qwen3-Next-80B-A3B: 48 layers, every 4th gated full attention (16 q / 2 kv x 256), the rest Gated
    DeltaNet (16 k-heads x 128, 32 v-heads x 128), 512 experts top-10 of 512 + 1 shared (Qwen config.json)."""
    d, layers, full = 2048, 48, 12
    linear = layers - full
    tensors = (
        embeddings(151_936, d, tied=False) + _layer_norms(d, layers)
        + gqa_attention("full_attn", d, 16, 2, 256, full, qk_norm=True, gated_q=True)
        + gated_deltanet("linear_attn", d, 16, 128, 32, 128, linear, conv_kernel=4)
        + router("moe", d, 512, layers)
        + routed_experts("moe", d, 512, 512, layers)
        + swiglu("moe.shared_expert", d, 512, layers)
        + (TensorGroup("moe.shared_expert_gate", OTHER, (1, d), layers),)
    )
    kv = KvLayout(full_layers=full, kv_heads=2, k_head_dim=256, v_head_dim=256, linear_layers=linear,
                  linear_state_bytes=recurrent_state_bytes(32, 128, 128, 2 * 16 * 128 + 32 * 128, 4))
    return ModelSpec(name="qwen3-next-80b-a3b", role="target", hidden=d, layers=layers, vocab=151_936,
                     max_context=262_144, tensors=tensors, kv=kv, attention_heads=16, kv_heads=2, moe_experts=512,
                     moe_top_k=10, hf_repo="Qwen/Qwen3-Next-80B-A3B-Instruct",
                     source="Qwen/Qwen3-Next-80B-A3B-Instruct config.json")


TARGET_PRESETS: dict[str, Callable[[], ModelSpec]] = {
    "kimi-k3": kimi_k3,
    "kimi-k2": kimi_k2,
    "kimi-k2-thinking": kimi_k2_thinking,
    "deepseek-v3": deepseek_v3,
    "qwen3-8b": qwen3_8b,
    "llama-3.1-8b": llama31_8b,
    "qwen3-next-80b-a3b": qwen3_next_80b,
}
