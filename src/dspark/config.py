"""Frozen configuration dataclasses: the draft architecture (with named presets) and generation settings.

This module only describes shapes and settings; it builds no tensors and imports no torch.
Training settings live with the trainer (issue "Training").
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

MARKOV_HEAD_TYPES = ("vanilla", "gated", "rnn")
DRAFT_MODES = ("dspark", "dflash")


class ConfigError(ValueError):
    """A configuration that cannot work; the message says which field and what to do."""


@dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding parameters in transformers-5 terms (`rope_parameters`)."""

    rope_theta: float = 10000.0
    rope_type: str = "default"  # "default" or "yarn"
    factor: float | None = None  # YaRN scale factor
    original_max_position_embeddings: int | None = None  # YaRN pre-extension context
    beta_fast: float | None = None
    beta_slow: float | None = None
    attention_factor: float | None = None
    truncate: bool = True

    def __post_init__(self) -> None:
        if self.rope_type not in ("default", "yarn"):
            raise ConfigError(f"rope_type {self.rope_type!r} is not supported; use 'default' or 'yarn'")
        if self.rope_type == "yarn" and (self.factor is None or self.original_max_position_embeddings is None):
            raise ConfigError("YaRN needs both 'factor' and 'original_max_position_embeddings' in rope_parameters")

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and not (k == "truncate" and v)}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "RopeConfig":
        d = dict(d or {})
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known - {"type", "mscale", "mscale_all_dim", "partial_rotary_factor"}
        if unknown:
            raise ConfigError(f"unsupported rope_parameters keys {sorted(unknown)}")
        if "type" in d and "rope_type" not in d:
            d["rope_type"] = d["type"]
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class DraftConfig:
    """The DSpark draft: a Qwen3-style KV-injection backbone plus Markov and confidence heads.

    `block_size` (γ) is the number of block slots. In "dspark" mode slot k predicts x_{p+k+1} (sample from anchor), so
    a block proposes γ drafts; in "dflash" mode slot 0 predicts nothing and slot k predicts x_{p+k} (γ−1 drafts).
    The mode is the block layout only: a DFlash-mode draft usually has no Markov or confidence head (DFlash), and one
    with them is a DSpark draft on the DFlash layout (speculators' `sample_from_anchor: false`).
    """

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    block_size: int
    target_layer_ids: tuple[int, ...]
    mask_token_id: int
    num_target_layers: int
    markov_rank: int = 256
    markov_head_type: str = "vanilla"
    enable_confidence_head: bool = True
    confidence_head_with_markov: bool = True
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 40960
    rope: RopeConfig = field(default_factory=RopeConfig)
    mode: str = "dspark"

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_layer_ids", tuple(int(i) for i in self.target_layer_ids))
        if not self.enable_confidence_head:  # the flag means nothing without the head: normalise it
            object.__setattr__(self, "confidence_head_with_markov", False)
        if self.mode not in DRAFT_MODES:
            raise ConfigError(f"mode must be one of {DRAFT_MODES}, got {self.mode!r}")
        if self.block_size < 1 or (self.mode == "dflash" and self.block_size < 2):
            raise ConfigError(f"block_size {self.block_size} is too small for mode {self.mode!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError("num_attention_heads must be a multiple of num_key_value_heads (GQA)")
        ids = self.target_layer_ids
        if not ids:
            raise ConfigError("target_layer_ids is empty; name at least one target layer to capture")
        if any(b <= a for a, b in zip(ids, ids[1:])):
            raise ConfigError(f"target_layer_ids must strictly increase, got {list(ids)}")
        if ids[0] < -1 or ids[-1] >= self.num_target_layers - 1:
            raise ConfigError(
                f"target_layer_ids {list(ids)} must lie in [-1, {self.num_target_layers - 2}] for a "
                f"{self.num_target_layers}-layer target (HF convention; the final layer is post-norm and never used)"
            )
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise ConfigError(f"mask_token_id {self.mask_token_id} is outside the vocabulary [0, {self.vocab_size})")
        if self.markov_rank < 0:
            raise ConfigError("markov_rank must be >= 0 (0 disables the Markov head)")
        if self.markov_rank and self.markov_head_type not in MARKOV_HEAD_TYPES:
            raise ConfigError(f"markov_head_type must be one of {MARKOV_HEAD_TYPES}, got {self.markov_head_type!r}")
        if self.enable_confidence_head and self.confidence_head_with_markov and not self.markov_rank:
            raise ConfigError("confidence_head_with_markov needs a Markov head (markov_rank > 0)")

    @property
    def has_heads(self) -> bool:
        """A Markov or confidence head: the DSpark heads, on either block layout."""
        return bool(self.markov_rank or self.enable_confidence_head)

    @property
    def num_draft_tokens(self) -> int:
        """How many draft tokens one block proposes (γ for DSpark, γ−1 for DFlash)."""
        return self.block_size if self.mode == "dspark" else self.block_size - 1

    @property
    def feature_size(self) -> int:
        """Width of the concatenated target features that feed `fc`."""
        return self.hidden_size * len(self.target_layer_ids)

    def replace(self, **changes: Any) -> "DraftConfig":
        return replace(self, **changes)


@dataclass(frozen=True)
class GenerationConfig:
    """How to generate. temperature 0 is greedy; max_drafts 0 turns drafting off (plain autoregressive decoding).
    eos_token_ids None stops at the target's own EOS ids (its generation config, as HF `generate` does); () never
    stops early."""

    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    eos_token_ids: tuple[int, ...] | None = None  # None: the target's EOS ids; (): none
    max_drafts: int | None = None  # drafts verified per round at most: None the draft's whole block; 0 no drafting
    confidence_threshold: float = 0.0  # cut the block at the first slot whose confidence falls below this

    def __post_init__(self) -> None:
        if self.eos_token_ids is not None:
            object.__setattr__(self, "eos_token_ids", tuple(int(t) for t in self.eos_token_ids))
        if self.max_new_tokens < 0:
            raise ConfigError("max_new_tokens must be >= 0")
        if self.temperature < 0:
            raise ConfigError("temperature must be >= 0 (0 means greedy)")
        if not 0 < self.top_p <= 1:
            raise ConfigError("top_p must be in (0, 1]")
        if self.top_k < 0:
            raise ConfigError("top_k must be >= 0 (0 disables top-k)")
        if self.max_drafts is not None and self.max_drafts < 0:
            raise ConfigError("max_drafts must be >= 0 (0 turns drafting off)")
        if not 0 <= self.confidence_threshold <= 1:
            raise ConfigError("confidence_threshold must be in [0, 1]")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


# --- presets ---------------------------------------------------------------------------------------------------

def _kimi_k3_dspark() -> DraftConfig:
    # RadixArk/Kimi-K3-DSpark as described in design.md §7 (2,249,290,081 trainable parameters).
    return DraftConfig(
        hidden_size=7168, num_hidden_layers=5, num_attention_heads=64, num_key_value_heads=16, head_dim=112,
        intermediate_size=11776, vocab_size=163840, block_size=7, target_layer_ids=(7, 23, 51, 67, 83),
        mask_token_id=163824, num_target_layers=93, markov_rank=256, markov_head_type="vanilla",
        enable_confidence_head=True, confidence_head_with_markov=True, rms_norm_eps=1e-5,
        max_position_embeddings=1_048_576,
        rope=RopeConfig(rope_theta=10000.0, rope_type="yarn", factor=16.0, original_max_position_embeddings=65536),
    )


def _qwen3_8b_dspark() -> DraftConfig:
    # The DSpark paper's Qwen3-8B draft: 5 layers copied from the Qwen3-8B config, block 7, layers [1, 9, 17, 25, 33].
    return DraftConfig(
        hidden_size=4096, num_hidden_layers=5, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        intermediate_size=12288, vocab_size=151936, block_size=7, target_layer_ids=(1, 9, 17, 25, 33),
        mask_token_id=151669, num_target_layers=36, markov_rank=256, markov_head_type="vanilla",
        rms_norm_eps=1e-6, max_position_embeddings=40960, rope=RopeConfig(rope_theta=1_000_000.0),
    )


def _tiny(markov_head_type: str = "vanilla") -> DraftConfig:
    # For tests: fits a 6-layer, hidden-64, vocab-97 target like the conformance fixtures.
    return DraftConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, vocab_size=97, block_size=4, target_layer_ids=(0, 2, 4), mask_token_id=96,
        num_target_layers=6, markov_rank=8, markov_head_type=markov_head_type, max_position_embeddings=256,
    )


PRESETS = {
    "kimi-k3-dspark": _kimi_k3_dspark,
    "qwen3-8b-dspark": _qwen3_8b_dspark,
    "tiny": _tiny,
    "tiny-gated": lambda: _tiny("gated"),
    "tiny-rnn": lambda: _tiny("rnn"),
    "tiny-dflash": lambda: _tiny().replace(mode="dflash", markov_rank=0, enable_confidence_head=False),
    "tiny-unanchored": lambda: _tiny().replace(mode="dflash"),  # DSpark heads on the DFlash block layout
}


# Published checkpoints of the presets that have one (the path a launch command loads by default).
PRESET_REPOS = {"kimi-k3-dspark": "RadixArk/Kimi-K3-DSpark"}


def preset(name: str) -> DraftConfig:
    """A named draft preset (see `PRESETS`)."""
    try:
        return PRESETS[name]()
    except KeyError:
        raise ConfigError(f"unknown draft preset {name!r}; known presets: {', '.join(PRESETS)}") from None


@dataclass(frozen=True)
class TrainConfig:
    """Draft training settings (DeepSpec defaults where they apply: lr 6e-4, cosine, 4 % warmup, clip 1.0,
    512 anchors per sequence, loss 0.1 CE + 0.9 L1 + 1.0 confidence BCE with exp(−k/4) slot weights)."""

    steps: int = 1000  # optimiser steps
    lr: float = 6e-4
    warmup_ratio: float = 0.04
    min_lr_ratio: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0
    batch_size: int = 1  # sequences per micro-batch (right-padded)
    grad_accum: int = 1  # micro-batches per optimiser step (per rank)
    num_anchors: int = 512
    max_length: int = 2048
    seed: int = 0
    ce_weight: float = 0.1
    l1_weight: float = 0.9
    confidence_weight: float = 1.0
    decay: float = 4.0
    log_every: int = 1
    save_every: int = 0  # 0: only at the end
    bf16: bool | None = None  # None: bf16 autocast on CUDA, fp32 elsewhere
    loss_backend: str = "eager"  # or a torch.compile backend ("inductor" fuses the vocabulary-wide loss on GPU)
    attention: str = "auto"  # block attention: "sdpa" (dense mask), "flex" (block mask), "auto" (flex on CUDA)
    group_by_length: int = 0  # > 0: micro-batches of similar lengths, sorted in windows of this many (train/order.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(self.betas))
        if min(self.steps, self.batch_size, self.grad_accum, self.num_anchors) < 1:
            raise ConfigError("steps, batch_size, grad_accum and num_anchors must be >= 1")
        if self.group_by_length < 0:
            raise ConfigError("group_by_length must be >= 0 (0: a plain random order)")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError("warmup_ratio must be in [0, 1)")
        if self.lr <= 0:
            raise ConfigError("lr must be > 0")
        if self.attention not in ("auto", "sdpa", "flex"):
            raise ConfigError(f"attention must be auto, sdpa or flex, got {self.attention!r}")

    @classmethod
    def dflash(cls, **kw: Any) -> "TrainConfig":
        """The DFlash baseline objective: CE only."""
        return cls(ce_weight=1.0, l1_weight=0.0, confidence_weight=0.0, **kw)
