"""The byte-level BPE: deterministic, exact round trips on code, the EOS and mask tokens where promised."""
from __future__ import annotations

import pytest
from testbed_tiny import SMALL_CORPUS

from dspark.testbed.corpus import heldout_documents, train_documents
from dspark.testbed.tokenizer import EOS_TOKEN, MASK_TOKEN, encode_documents, train_tokenizer

TRICKY = ["def f(a,\tb):\n    return a  \n", "s = 'ünïcødé ✓ 中文'\n", "\n\n\n        x = {'k': [1, 2]}\r\n", " "]


@pytest.fixture(scope="module")
def texts():
    return [d.text for d in train_documents(SMALL_CORPUS)]


@pytest.fixture(scope="module")
def tokenizer(texts):
    return train_tokenizer(texts, vocab_size=400)


def test_training_twice_gives_the_same_tokenizer(texts, tokenizer):
    again = train_tokenizer(texts, vocab_size=400)
    assert again.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()
    assert len(tokenizer) == 400


def test_round_trips_held_out_code_and_odd_strings_exactly(tokenizer):
    docs = [d.text for d in heldout_documents(SMALL_CORPUS)] + TRICKY
    for text, ids in zip(docs, encode_documents(tokenizer, docs)):
        assert tokenizer.decode(ids) == text
    assert tokenizer.decode(tokenizer("x  =  1\n")["input_ids"]) == "x  =  1\n"


def test_special_tokens_have_fixed_ids_and_never_come_from_plain_code(tokenizer):
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == (EOS_TOKEN, 0)
    assert tokenizer.pad_token_id == 0
    assert (tokenizer.mask_token, tokenizer.mask_token_id) == (MASK_TOKEN, 1)
    ids = encode_documents(tokenizer, [d.text for d in heldout_documents(SMALL_CORPUS)])
    assert all(i >= 2 for doc in ids for i in doc)
    assert tokenizer("x = 1")["input_ids"] == encode_documents(tokenizer, ["x = 1"])[0]  # no BOS/EOS added


def test_saved_tokenizer_loads_back_with_the_same_ids(tokenizer, tmp_path):
    from transformers import AutoTokenizer

    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "class A:\n    def f(self):\n        return [i for i in range(3)]\n"
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert (loaded.eos_token_id, loaded.mask_token_id) == (0, 1)
    assert loaded.decode(loaded(text)["input_ids"]) == text


def test_vocab_too_small_for_bytes_is_refused(texts):
    with pytest.raises(ValueError, match="at least"):
        train_tokenizer(texts[:1], vocab_size=100)
