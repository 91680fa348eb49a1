"""Building and caching the target folder: contents, the card, reuse without retraining, atomic writes."""
from __future__ import annotations

import json
import os

import pytest
import torch
from testbed_tiny import TINY

from dspark.testbed import target_build
from dspark.testbed.corpus import split_of
from dspark.testbed.target_build import (CARD_NAME, TestbedError, build_target, default_cache_dir, load_target,
                                         read_card, target_path, write_target)


def test_target_folder_is_a_normal_hf_folder_with_a_card(tiny_target):
    names = {p.name for p in tiny_target.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", CARD_NAME} <= names
    card = read_card(tiny_target)
    assert card["recipe"] == TINY.to_dict()
    assert card["tokenizer"]["eos_token_id"] == 0 and card["tokenizer"]["mask_token_id"] == 1
    assert card["training"]["steps"] == 2 and len(card["training"]["losses"]) == 2
    train, held = card["corpus"]["train_files"], card["corpus"]["heldout_files"]
    assert train and held and not set(train) & set(held)
    assert {split_of(p) for p in held} == {"heldout"}
    assert card["heldout"]["perplexity"] == pytest.approx(2.718281828 ** card["heldout"]["loss"], rel=1e-6)
    assert len(card["samples"]) == 3 and all(s["prompt"] and s["reference"] for s in card["samples"])


def test_loaded_target_is_a_qwen3_with_the_recipe_shape(tiny_target):
    model, tokenizer = load_target(tiny_target)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.hidden_size == 32 and model.config.num_hidden_layers == 2
    assert model.config.vocab_size == len(tokenizer) == 320
    ids = torch.tensor([tokenizer("def f(x):\n    return x\n")["input_ids"]])
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], 320)


def test_second_build_reuses_the_cache_without_retraining(tiny_target, tiny_cache, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("the cached target was rebuilt")

    monkeypatch.setattr(target_build, "_assemble", no_training)
    before = (tiny_target / CARD_NAME).stat().st_mtime_ns
    assert build_target(tiny_cache, TINY) == tiny_target
    assert (tiny_target / CARD_NAME).stat().st_mtime_ns == before


def test_cache_key_follows_the_recipe_and_the_cache_dir_follows_the_environment(tiny_cache, monkeypatch, tmp_path):
    assert target_path(tiny_cache, TINY) == target_path(tiny_cache, TINY)
    assert target_path(tiny_cache, TINY) != target_path(tiny_cache, TINY.replace(steps=3))
    monkeypatch.setenv("DSPARK_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "testbed"
    assert target_path(None, TINY).parent == tmp_path / "testbed"
    monkeypatch.delenv("DSPARK_CACHE")
    assert default_cache_dir() == target_build.Path.home() / ".cache" / "dspark" / "testbed"


def test_a_failed_build_leaves_no_folder_and_no_temporary_files(tmp_path, monkeypatch):
    def half_written(folder, *args):
        (folder / "config.json").write_text("{}")
        raise RuntimeError("killed mid-build")

    monkeypatch.setattr(target_build, "_assemble", half_written)
    with pytest.raises(RuntimeError, match="killed"):
        build_target(tmp_path, TINY)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_write_target_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(TestbedError, match="not an empty folder"):
        write_target(tmp_path, TINY)
    with pytest.raises(TestbedError, match="not a built testbed target"):
        read_card(tmp_path)


def test_card_is_valid_json_written_last(tiny_target):
    card = json.loads((tiny_target / CARD_NAME).read_text())
    newest = max(os.stat(p).st_mtime_ns for p in tiny_target.iterdir())
    assert os.stat(tiny_target / CARD_NAME).st_mtime_ns == newest
    assert card["kind"] == "dspark-testbed-target"
