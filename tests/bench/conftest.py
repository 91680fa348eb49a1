"""Fixtures for the bench tests: a byte-level tokenizer built here, and a tiny random target + draft saved as folders.

The models are untrained (τ ≈ 1); the tests check the measuring machinery, not a speedup.
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
VOCAB = 260  # 256 bytes + 3 special tokens + 1 id left for the draft's mask token
BLOCK = 4


def byte_tokenizer(chat_template: bool = True):
    """A byte-level BPE without merges: one token per UTF-8 byte, plus <|im_start|>, <|im_end|> (EOS), <|endoftext|>."""
    from tokenizers import Tokenizer, decoders, models
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(ByteLevel.alphabet()))}
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        vocab[special] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>",
                                        additional_special_tokens=["<|im_start|>", "<|endoftext|>"])
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return byte_tokenizer()


@pytest.fixture(scope="session")
def tiny_pair():
    """(Target, draft) in memory: a 3-layer random Qwen3 and a 2-layer random DSpark draft with block 4."""
    from dspark.model.target import Target
    from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target

    model = tiny_target("qwen3", vocab_size=VOCAB, hidden_size=64, num_layers=3, seed=0)
    model.config.max_position_embeddings = 2048  # the byte tokenizer makes prompts long
    config = draft_config_for(model, block_size=BLOCK)
    draft = random_draft(config, seed=0)
    return Target(model, config.target_layer_ids), draft


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory, tiny_pair, tokenizer):
    """(target folder with tokenizer, draft folder) on disk, as `--target` / `--draft` take them."""
    from dspark.formats.native import save_draft

    target, draft = tiny_pair
    root = tmp_path_factory.mktemp("models")
    target.model.save_pretrained(root / "target")
    tokenizer.save_pretrained(root / "target")
    save_draft(draft, root / "draft")
    return root / "target", root / "draft"


@pytest.fixture(scope="session")
def counted_draft(tmp_path_factory, model_dirs):
    """A copy of the draft folder with token counts beside it (`dspark train token-counts`), for --draft-vocab."""
    import shutil

    import torch

    from dspark.formats.token_counts import TOKEN_COUNTS_NAME, save_token_counts

    folder = tmp_path_factory.mktemp("counted") / "draft"
    shutil.copytree(model_dirs[1], folder)
    save_token_counts(torch.arange(260), folder / TOKEN_COUNTS_NAME)
    return folder
