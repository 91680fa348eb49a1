"""The target sharded over the ranks (`train fit --target-parallel fsdp`, gloo on CPU): two ranks, each holding half
of every target layer, train the same draft as one process with the whole target accumulating the same sequences;
the flag refuses a run it cannot serve."""
from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file
from test_train_distributed import _fit, _pair  # the torchrun launcher and the tiny pair of the DDP tests
from torch import nn

from dspark.cli import main
from dspark.config import ConfigError
from dspark.testbed.random_pair import tiny_target
from dspark.train.target_parallel import check_target_parallel, shardable_layers


@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied-embeddings"])
def test_two_ranks_with_a_sharded_target_equal_one_process_with_the_whole_target(tmp_path, tied):
    common = [*_pair(tmp_path), "--steps", "3"]
    if tied:  # the embedding is the LM head: one tensor, whole on each rank, that the draft shares
        model = tiny_target("qwen3", seed=0, num_layers=3)
        model.config.tie_word_embeddings, model.lm_head.weight = True, model.model.embed_tokens.weight
        model.save_pretrained(tmp_path / "target")
    sharded = _fit([*common, "--target-parallel", "fsdp", "--out", str(tmp_path / "fsdp")], tmp_path, nproc=2)
    one = _fit([*common, "--grad-accum", "2", "--out", str(tmp_path / "single")], tmp_path, nproc=1)
    assert abs(sharded["final_loss"] - one["final_loss"]) < 1e-5
    a = load_file(tmp_path / "fsdp" / "final" / "model.safetensors")
    b = load_file(tmp_path / "single" / "final" / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4)


def test_target_parallel_without_torchrun_is_refused_before_loading_anything(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    code = main(["train", "fit", "--target", str(tmp_path / "absent"), "--data", str(tmp_path / "data.jsonl"),
                 "--out", str(tmp_path / "out"), "--target-parallel", "fsdp"])
    assert code == 2
    assert "torchrun" in capsys.readouterr().err


@pytest.mark.parametrize("world, online, cache, words", [
    (1, True, 0, "world size 1"),
    (2, False, 0, "--hidden"),
    (2, True, 1 << 30, "--hidden-cache-gib"),
])
def test_target_parallel_refuses_runs_it_cannot_serve(world, online, cache, words):
    with pytest.raises(ConfigError, match=words):
        check_target_parallel("fsdp", world, online, cache)


def test_no_target_parallel_accepts_any_run():
    check_target_parallel("none", 1, online=False, hidden_cache_bytes=1 << 30)


class _NoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = type("Config", (), {})()
        self.body = nn.Linear(4, 4)


def test_an_architecture_without_decoder_layers_is_refused_by_name():
    with pytest.raises(ConfigError, match="_NoLayers"):
        shardable_layers(_NoLayers())


def test_a_quantized_target_is_refused():
    model = _NoLayers()
    model.config.quantization_config = {"quant_method": "fp8"}
    with pytest.raises(ConfigError, match="dequantize"):
        shardable_layers(model)
