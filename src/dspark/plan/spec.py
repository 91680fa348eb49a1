"""What a planner needs to know about a model: its tensor inventory and its KV-cache layout.

`ModelSpec` lists tensors in groups (one group = the same tensor in every layer, or a stack of experts) with
a category that says how quantizers treat it, plus a `KvLayout` that says what each token and each sequence
costs in cache. Building specs lives in `blocks`, `presets` and `hf_config`; turning them into bytes lives in
`weights` and `kv`. This module holds only the data shapes and the parameter arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

# Tensor categories (how quantizers treat a tensor; the GGUF ones mirror llama.cpp's `tensor_category`).
EMBED = "embed"  # token embedding table
OUTPUT = "output"  # lm_head
ATTN_Q, ATTN_K, ATTN_V, ATTN_KV_B, ATTN_OUTPUT = "attn_q", "attn_k", "attn_v", "attn_kv_b", "attn_output"
ATTN_OTHER = "attn_other"  # MLA down-projections, output gates, KDA decay/beta projections
FFN_GATE, FFN_UP, FFN_DOWN = "ffn_gate", "ffn_up", "ffn_down"
ROUTER = "router"  # MoE gate: never quantized (llama.cpp skips ffn_gate_inp; HF quantizers ignore it)
OTHER = "other"  # any other linear (DSpark fc, MoE latent projections, Markov W2)
EMBED_LIKE = "embed_like"  # an embedding table that is not the token embedding (Markov W1)
SMALL = "small"  # norms, biases, conv1d, one-row heads: kept in high precision by every quantizer

CATEGORIES = (EMBED, OUTPUT, ATTN_Q, ATTN_K, ATTN_V, ATTN_KV_B, ATTN_OUTPUT, ATTN_OTHER, FFN_GATE, FFN_UP,
              FFN_DOWN, ROUTER, OTHER, EMBED_LIKE, SMALL)


@dataclass(frozen=True)
class TensorGroup:
    """`count` copies (usually one per layer) of a tensor of `shape`; `experts` > 1 makes each copy a 3-D stack.

    Matrices are (out_features, in_features) as in PyTorch; GGUF's row length `ne[0]` is `shape[-1]`.
    `routed` marks routed experts: each token reads only `top_k` of the `experts`.
    """

    name: str
    category: str
    shape: tuple[int, ...]
    count: int = 1
    experts: int = 1
    routed: bool = False

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown tensor category {self.category!r} for {self.name}")

    @property
    def params_per_copy(self) -> int:
        return prod(self.shape) * self.experts

    @property
    def params(self) -> int:
        return self.params_per_copy * self.count

    @property
    def row_length(self) -> int:
        return self.shape[-1]


@dataclass(frozen=True)
class KvLayout:
    """Per-token and per-sequence cache of one model.

    - `full_layers` GQA/MHA layers cache K (`k_head_dim`) and V (`v_head_dim`) for `kv_heads` heads per token;
      `window_layers` do the same but only for the last `window` tokens.
    - `mla_layers` cache one latent of `mla_latent` elements per token (kv_lora_rank + decoupled RoPE key).
    - `linear_layers` keep a fixed recurrent state of `linear_state_bytes` per layer per sequence, whatever
      the context (KDA / Gated DeltaNet / Mamba); it is stored in the engine's state dtype (fp32), not the KV dtype.
    """

    full_layers: int = 0
    kv_heads: int = 0
    k_head_dim: int = 0
    v_head_dim: int = 0
    window_layers: int = 0
    window: int = 0
    mla_layers: int = 0
    mla_latent: int = 0
    linear_layers: int = 0
    linear_state_bytes: int = 0

    @property
    def elements_per_token(self) -> int:
        """Cached elements per token of context in the unbounded (full and MLA) layers."""
        gqa = self.full_layers * self.kv_heads * (self.k_head_dim + self.v_head_dim)
        return gqa + self.mla_layers * self.mla_latent

    @property
    def window_elements_per_token(self) -> int:
        return self.window_layers * self.kv_heads * (self.k_head_dim + self.v_head_dim)


@dataclass(frozen=True)
class ModelSpec:
    """A target or a draft, as far as memory, bandwidth and cost are concerned."""

    name: str
    role: str  # "target" or "draft"
    hidden: int
    layers: int
    vocab: int
    max_context: int
    tensors: tuple[TensorGroup, ...]
    kv: KvLayout
    attention_heads: int = 0
    kv_heads: int = 0  # for llama.cpp's n_gqa rule; 0 when the model has no GQA layers
    moe_experts: int = 0
    moe_top_k: int = 0
    default_quant: str = "BF16"
    default_expert_quant: str | None = None  # routed experts stored differently (Kimi K3: MXFP4)
    shared_tensors: tuple[TensorGroup, ...] = ()  # a draft's borrowed target tensors (embed, lm_head)
    tied_embeddings: bool = False
    block_size: int = 0  # draft γ; 0 for a target
    hf_repo: str = ""
    trust_remote_code: bool = False  # the checkpoint ships its own modeling code (`auto_map`): engines need the flag
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def params(self) -> int:
        return sum(t.params for t in self.tensors)

    @property
    def routed_params(self) -> int:
        return sum(t.params for t in self.tensors if t.routed)

    @property
    def active_params(self) -> int:
        """Parameters one token touches: everything but the routed experts, plus top_k/experts of those."""
        dense = self.params - self.routed_params
        if not self.moe_experts:
            return dense
        return dense + round(self.routed_params * self.moe_top_k / self.moe_experts)

    @property
    def n_gqa(self) -> int:
        return self.attention_heads // self.kv_heads if self.kv_heads else 1

    def tensors_named(self, category: str) -> tuple[TensorGroup, ...]:
        return tuple(t for t in self.tensors if t.category == category)
