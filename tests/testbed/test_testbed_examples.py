"""Held-out prompt / continuation examples: from held-out files only, exact token windows, deterministic."""
from __future__ import annotations

import pytest

from dspark.testbed.corpus import Document
from dspark.testbed.examples import heldout_examples, make_examples, window_starts
from dspark.testbed.target_build import read_card


def test_window_starts_are_evenly_spread_and_never_overlap():
    assert window_starts(100, 30, 3) == [0, 35, 70]
    assert window_starts(100, 30, 5) == [0, 35, 70]  # at most num_tokens // window windows
    assert window_starts(29, 30, 2) == []
    assert window_starts(64, 32, 1) == [0]


def test_heldout_examples_come_from_heldout_files_with_exact_lengths(tiny_target):
    examples = heldout_examples(tiny_target, prompt_tokens=16, continuation_tokens=8, per_file=2)
    held = set(read_card(tiny_target)["corpus"]["heldout_files"])
    assert examples and {e.path for e in examples} <= held
    assert all(len(e.prompt_ids) == 16 and len(e.continuation_ids) == 8 for e in examples)
    assert heldout_examples(tiny_target, 16, 8, 2) == examples
    assert len(heldout_examples(tiny_target, 16, 8, 2, max_examples=3)) == 3


def test_prompt_and_continuation_are_consecutive_tokens_of_the_file(tiny_target):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_target))
    text = "def f(x):\n    return x + 1\n" * 20
    (ex, *_) = make_examples(tokenizer, [Document("m.py", text)], prompt_tokens=10, continuation_tokens=5)
    ids = tokenizer(text)["input_ids"]
    assert ex.start == 0 and list(ex.prompt_ids + ex.continuation_ids) == ids[:15]
    assert text.startswith(ex.prompt + ex.continuation)
    with pytest.raises(ValueError, match="prompt_tokens"):
        make_examples(tokenizer, [], prompt_tokens=0)
