"""The testbed target's recipe: corpus, tokenizer, model shape and training schedule, as one frozen dataclass.

The recipe (plus the fingerprint of the corpus texts it selects) is what the target cache is keyed by, so any
change here builds a new folder. This module only describes and hashes; `target_train` trains and `target_build`
writes the folder.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from dspark.testbed.corpus import CorpusSpec


class RecipeError(ValueError):
    """A testbed recipe field is out of range."""


@dataclass(frozen=True)
class TargetRecipe:
    """How the tiny testbed target is made. Defaults: ~1M parameters, 200 steps of 4,096 tokens (~820k tokens,
    under one epoch of the ~3 MB of code), about 75 s on 2 idle CPU cores in fp32.

    Chosen by sweeps at equal wall time (75 s, 2 threads): 3–4 layers beat 6, hidden 128 beat 96/160/192, lr 3e-3
    beat 2e-3 and 6e-3, short 64/128-token pieces beat whole 512-token rows, code without comments/docstrings
    beat raw files by ~0.5 nats/token."""

    corpus: CorpusSpec = field(default_factory=CorpusSpec)
    # tokenizer: byte-level BPE
    vocab_size: int = 2048
    # model: Qwen3ForCausalLM
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384
    context: int = 512  # max_position_embeddings
    tie_word_embeddings: bool = True
    rope_theta: float = 10000.0
    # training: AdamW, linear warmup then cosine decay to min_lr_ratio · lr, gradient clipping. Each step takes
    # batch_size packed rows of seq_len tokens; every long_every-th step trains on them whole (so all positions of
    # the context are seen), the others cut each row into short_seq_len pieces (cheaper attention, more sequences).
    seq_len: int = 512
    short_seq_len: int = 64
    long_every: int = 4
    batch_size: int = 8
    steps: int = 200
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 10
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    # evaluation: held-out sequences of seq_len tokens, spread over the held-out stream
    eval_sequences: int = 48

    def __post_init__(self) -> None:
        positive = ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size",
                    "context", "seq_len", "short_seq_len", "long_every", "batch_size", "steps", "eval_sequences")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise RecipeError(f"recipe field {name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise RecipeError(f"hidden_size ({self.hidden_size}) must divide by num_heads ({self.num_heads}) and "
                              f"num_heads by num_kv_heads ({self.num_kv_heads})")
        if self.seq_len > self.context:
            raise RecipeError(f"seq_len {self.seq_len} exceeds the model context {self.context}")
        if self.seq_len % self.short_seq_len:
            raise RecipeError(f"short_seq_len {self.short_seq_len} must divide seq_len {self.seq_len}")
        if self.warmup_steps < 0 or self.lr <= 0 or not 0 <= self.min_lr_ratio <= 1:
            raise RecipeError("need warmup_steps >= 0, lr > 0 and 0 <= min_lr_ratio <= 1")

    def replace(self, **changes: Any) -> "TargetRecipe":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TargetRecipe":
        data = dict(data)
        corpus = CorpusSpec(**data.pop("corpus", {}))
        return cls(corpus=corpus, **data)

    def digest(self) -> str:
        """SHA-256 of the recipe's canonical JSON."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()


def qwen3_config(recipe: TargetRecipe, vocab_size: int, eos_token_id: int):
    """The `Qwen3Config` of the target; `vocab_size` is the trained tokenizer's actual size."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab_size, hidden_size=recipe.hidden_size, num_hidden_layers=recipe.num_layers,
        num_attention_heads=recipe.num_heads, num_key_value_heads=recipe.num_kv_heads,
        head_dim=recipe.hidden_size // recipe.num_heads, intermediate_size=recipe.intermediate_size,
        max_position_embeddings=recipe.context, tie_word_embeddings=recipe.tie_word_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": recipe.rope_theta},
        bos_token_id=None, eos_token_id=eos_token_id, pad_token_id=eos_token_id,
        attention_dropout=0.0, use_cache=True)
