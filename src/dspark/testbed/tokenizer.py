"""The testbed's byte-level BPE tokenizer, trained with the `tokenizers` library on the training files only.

Byte-level means every string round-trips exactly (no unknown tokens, whitespace and indentation preserved).
Special tokens come first: id 0 is `<|endoftext|>` (the EOS, also used as padding) and id 1 is `<|mask|>`, the
token a DSpark draft puts in the non-anchor slots of a block (its `mask_token_id`); the target never sees it in
training. The result is wrapped as a transformers `PreTrainedTokenizerFast`. This module does not train models.
"""
from __future__ import annotations

from typing import Iterable

EOS_TOKEN = "<|endoftext|>"
MASK_TOKEN = "<|mask|>"
SPECIAL_TOKENS = (EOS_TOKEN, MASK_TOKEN)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048, min_frequency: int = 2, max_length: int = 512):
    """Train a byte-level BPE on `texts` (deterministic for the same texts in the same order).

    Returns a `PreTrainedTokenizerFast` with eos/pad = `<|endoftext|>` and mask = `<|mask|>`.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 256 + len(SPECIAL_TOKENS) + 1:
        raise ValueError(f"vocab_size {vocab_size} is too small for a byte-level BPE: use at least "
                         f"{256 + len(SPECIAL_TOKENS) + 1} (256 bytes + special tokens + one merge)")
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(list(texts), trainer)
    return wrap(core, max_length)


def wrap(core, max_length: int = 512):
    """Wrap a `tokenizers.Tokenizer` as a `PreTrainedTokenizerFast` with the testbed's special tokens."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token=EOS_TOKEN, pad_token=EOS_TOKEN, mask_token=MASK_TOKEN,
        clean_up_tokenization_spaces=False, model_max_length=max_length)


def encode_documents(tokenizer, texts: Iterable[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens (callers add the EOS where documents end).

    Uses the Rust tokenizer directly: whole files are longer than the model context, which is fine here."""
    return [enc.ids for enc in tokenizer.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False)]
