"""Prompt / continuation examples cut from held-out files, for evaluating drafts and targets on unseen code.

Each held-out file is tokenized whole; up to `per_file` windows of `prompt_tokens + continuation_tokens` tokens are
taken from it, evenly spread over the file and never overlapping (a short file gives fewer or none). The prompt
is the window's first `prompt_tokens` tokens and the continuation the rest: the reference text, which a greedy
target need not reproduce. Deterministic for a given corpus and tokenizer. Generates nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from dspark.testbed.card import read_card
from dspark.testbed.corpus import CorpusSpec, Document, heldout_documents
from dspark.testbed.tokenizer import encode_documents


@dataclass(frozen=True)
class CodeExample:
    path: str  # held-out file, relative to the stdlib root
    start: int  # token offset of the prompt in the file
    prompt_ids: tuple[int, ...]
    continuation_ids: tuple[int, ...]
    prompt: str
    continuation: str


def window_starts(num_tokens: int, window: int, per_file: int) -> list[int]:
    """Up to `per_file` non-overlapping window starts, evenly spread over `num_tokens` tokens (first at 0)."""
    count = min(per_file, num_tokens // window)
    if count <= 0:
        return []
    if count == 1:
        return [0]
    stride = (num_tokens - window) // (count - 1)
    return [i * stride for i in range(count)]


def make_examples(tokenizer, documents: Sequence[Document], prompt_tokens: int = 64,
                  continuation_tokens: int = 64, per_file: int = 2,
                  max_examples: int | None = None) -> list[CodeExample]:
    """Examples from `documents` in their order (see the module docstring)."""
    if prompt_tokens < 1 or continuation_tokens < 0 or per_file < 1:
        raise ValueError("need prompt_tokens >= 1, continuation_tokens >= 0 and per_file >= 1")
    window = prompt_tokens + continuation_tokens
    out: list[CodeExample] = []
    for doc, ids in zip(documents, encode_documents(tokenizer, [d.text for d in documents])):
        for start in window_starts(len(ids), window, per_file):
            prompt = tuple(ids[start:start + prompt_tokens])
            continuation = tuple(ids[start + prompt_tokens:start + window])
            out.append(CodeExample(doc.path, start, prompt, continuation,
                                   tokenizer.decode(list(prompt)), tokenizer.decode(list(continuation))))
            if max_examples is not None and len(out) >= max_examples:
                return out
    return out


def heldout_examples(target_dir: str | Path, prompt_tokens: int = 64, continuation_tokens: int = 64,
                     per_file: int = 2, max_examples: int | None = None) -> list[CodeExample]:
    """Examples from the held-out files of a built testbed target (its tokenizer and its recorded corpus rule)."""
    from transformers import AutoTokenizer

    card = read_card(target_dir)
    spec = CorpusSpec(**card["recipe"]["corpus"])
    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    return make_examples(tokenizer, heldout_documents(spec), prompt_tokens, continuation_tokens, per_file,
                         max_examples)
