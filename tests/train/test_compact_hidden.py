"""The compact hidden-state store: it keeps exactly the rows training reads, trains to the full-precision losses within
its storage precision, its size is known before capture, and a reader refuses an index that disagrees with its shards.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from dspark import Target
from dspark.cli import main
from dspark.config import TrainConfig
from dspark.model.draft import DSparkDraft
from dspark.testbed.random_pair import draft_config_for, tiny_target
from dspark.train.compact_hidden import (
    CompactHiddenStates,
    CompactStoreError,
    capture_compact,
    decode_rows,
    encode_rows,
)
from dspark.train.compact_layout import INDEX_NAME, valid_anchors
from dspark.train.data import Example, write_examples
from dspark.train.hidden import OfflineHiddenStates, OnlineHiddenStates
from dspark.train.trainer import train

CONFIG = TrainConfig(steps=4, lr=3e-3, num_anchors=8, batch_size=2, warmup_ratio=0.25, save_every=0)
# prompt, response, a second turn, trailing unsupervised tokens, an example without any anchor
MASKS = [(0,) * 6 + (1,) * 14 + (0,) * 5 + (1,) * 10 + (0,) * 5, (0,) * 6 + (1,) * 34,
         (0,) * 10 + (1,) * 20 + (0,) * 10, (0,) * 40, (0,) * 3 + (1,) * 30 + (0,) * 7]


@pytest.fixture(scope="module")
def pair():
    model = tiny_target("qwen3", seed=0, num_layers=3)
    cfg = draft_config_for(model, layer_ids=(0, 1), block_size=4)
    gen = torch.Generator().manual_seed(0)
    examples = [Example(str(i), tuple(torch.randint(0, 96, (len(m),), generator=gen).tolist()), m)
                for i, m in enumerate(MASKS)]
    return model, cfg, Target(model, cfg.target_layer_ids), examples


def _draft(model, cfg):
    torch.manual_seed(1)
    draft = DSparkDraft(cfg)
    draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    return draft


@pytest.fixture(scope="module")
def online_losses(pair):
    model, cfg, target, examples = pair
    return [m.loss for m in train(_draft(model, cfg), OnlineHiddenStates(target, examples), CONFIG,
                                  progress=False).history]


def test_the_store_keeps_the_context_before_the_last_anchor_and_the_final_hidden_at_each_anchor(pair, tmp_path):
    _, _, target, examples = pair
    capture_compact(target, examples, tmp_path, "float32", shard_bytes=20_000, progress=False)
    store = CompactHiddenStates(tmp_path, (0, 1))
    online = OnlineHiddenStates(target, examples)
    assert len(store.index["shards"]) > 1 and store.lengths() == [40] * 5
    for i, mask in enumerate(MASKS):
        got, want = store.get(i), online.get(i)
        anchors = valid_anchors(mask)
        last = anchors[-1] if anchors else 0
        assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.loss_mask, want.loss_mask)
        torch.testing.assert_close(got.features[0, :last], want.features[0, :last], rtol=0, atol=0)
        assert not got.features[0, last:].any()  # never read: no block sees past its anchor
        torch.testing.assert_close(got.last_hidden[0, anchors], want.last_hidden[0, anchors], rtol=0, atol=0)
        others = [p for p in range(40) if p not in anchors]
        assert not got.last_hidden[0, others].any()  # read only with loss weight 0
    entries = store.index["sequences"]
    assert [e["context_rows"] for e in entries] == [33, 38, 28, 0, 31]
    assert [e["teacher_rows"] for e in entries] == [13 + 9, 33, 19, 0, 29]


@pytest.mark.slow
def test_a_float32_compact_store_trains_to_exactly_the_online_losses(pair, online_losses, tmp_path):
    model, cfg, target, examples = pair
    capture_compact(target, examples, tmp_path, "float32", shard_bytes=20_000, progress=False)
    source = OfflineHiddenStates(tmp_path, cfg.target_layer_ids)  # fit --hidden opens either store
    losses = [m.loss for m in train(_draft(model, cfg), source, CONFIG, progress=False).history]
    assert losses == pytest.approx(online_losses, abs=1e-6)  # the rows left out never reach the loss


# Loss tolerances, relative, each half the largest relative rounding of one stored element: bf16 keeps 8 significant
# bits (2⁻⁹ ≈ 2e-3, so tight: 1e-3); fp8 e4m3 with a scale per row keeps 4 (2⁻⁴ ≈ 6e-2, so looser: 3e-2). The loss
# averages many elements whose rounding errors do not line up, so it moves by less than one element's rounding.
@pytest.mark.slow
@pytest.mark.parametrize("dtype, rel", [("bfloat16", 1e-3), ("float8_e4m3fn", 3e-2)])
def test_bf16_and_fp8_stores_train_to_the_online_losses_within_their_storage_precision(pair, online_losses, tmp_path,
                                                                                       dtype, rel):
    model, cfg, target, examples = pair
    capture_compact(target, examples, tmp_path, dtype, progress=False)
    losses = [m.loss for m in train(_draft(model, cfg), CompactHiddenStates(tmp_path, cfg.target_layer_ids), CONFIG,
                                    progress=False).history]
    assert losses == pytest.approx(online_losses, rel=rel)
    assert losses != online_losses  # the store really is lossy: the comparison measures something


def test_fp8_rows_round_trip_within_e4m3_precision_whatever_their_magnitude():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, 64, generator=gen) * torch.logspace(-4, 4, 6)[:, None, None]
    x[0, 0] = 0.0  # an all-zero row stays zero
    q, scale = encode_rows(x, "float8_e4m3fn")
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (6, 3) and scale.dtype == torch.float32
    back = decode_rows(q, scale)
    assert torch.isfinite(back).all() and not back[0, 0].any()
    amax = x.abs().amax(-1, keepdim=True)
    # normal numbers round to 3 mantissa bits (2⁻⁴ relative); the smallest, subnormal ones to 2⁻⁹ of 448 / row max
    assert ((back - x).abs() <= 2**-4 * x.abs() + amax * 2**-9 / 448 + 1e-30).all()
    assert torch.equal(decode_rows(*encode_rows(x, "bfloat16")), x.bfloat16().float())


@pytest.fixture
def cli_files(pair, tmp_path):
    model, _, _, examples = pair
    model.save_pretrained(tmp_path / "target")
    write_examples(examples * 4, tmp_path / "data.jsonl")
    return tmp_path


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_the_estimate_matches_the_bytes_written_within_5_percent(cli_files, capsys, dtype):
    common = ["train", "capture", "--target", str(cli_files / "target"), "--data", str(cli_files / "data.jsonl"),
              "--layers", "0,1", "--dtype", dtype, "--out", str(cli_files / "hs")]
    assert main([*common, "--estimate"]) == 0
    line, last = capsys.readouterr().out.strip().splitlines()
    assert not (cli_files / "hs").exists()  # the estimate writes nothing
    estimate = json.loads(last)["estimate"]
    assert "20 sequences" in line and estimate["sequences"] == 20 and estimate["tokens"] == 800
    assert main(common) == 0
    written = sum(f.stat().st_size for f in (cli_files / "hs").iterdir())
    assert estimate["total_bytes"] == pytest.approx(written, rel=0.05)
    index = json.loads((cli_files / "hs" / INDEX_NAME).read_text())
    assert index["total_bytes"] + (cli_files / "hs" / INDEX_NAME).stat().st_size == written
    assert estimate["total_bytes"] < estimate["full_float32_bytes"] / (2.5 if dtype == "bf16" else 4.5)


def test_the_estimate_arithmetic_imports_no_torch(cli_files):
    code = ("import sys, json; from dspark.train.compact_layout import estimate_rows, iter_data_rows, "
            f"target_hidden_size; e = estimate_rows(iter_data_rows({str(cli_files / 'data.jsonl')!r}), 2, "
            f"target_hidden_size({str(cli_files / 'target')!r}), 'fp8'); "
            "print(json.dumps([e.sequences, sorted(m for m in ('torch', 'safetensors', 'transformers') "
            "if m in sys.modules)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == [20, []]


def _break(folder, how: str) -> None:
    index = json.loads((folder / INDEX_NAME).read_text())
    shard = folder / index["shards"][0]["name"]
    if how == "shard grew":
        shard.write_bytes(shard.read_bytes() + b"\0" * 8)
    elif how == "shard missing":
        shard.unlink()
    elif how == "shard rows":  # the index counts a feature row the shard does not hold
        index["shards"][0]["context_rows"] += 1
        index["shards"][0]["bytes"] = shard.stat().st_size
    elif how == "sequence rows":  # the shard adds up, but this sequence's rows are not what its loss mask reads
        index["sequences"][0]["context_rows"] -= 1
    (folder / INDEX_NAME).write_text(json.dumps(index))


@pytest.mark.parametrize("how", ["shard grew", "shard missing", "shard rows", "sequence rows"])
def test_a_reader_refuses_a_store_whose_index_does_not_match_its_shards(pair, tmp_path, how):
    _, _, target, examples = pair
    capture_compact(target, examples, tmp_path, "bfloat16", shard_bytes=20_000, progress=False)
    _break(tmp_path, how)
    with pytest.raises(CompactStoreError, match="does not match its shards .* capture again"):
        store = CompactHiddenStates(tmp_path)
        store.get(0)


def test_a_reader_refuses_another_draft_s_layers_and_an_unfinished_capture(pair, tmp_path):
    _, _, target, examples = pair
    capture_compact(target, examples[:2], tmp_path, "bfloat16", progress=False)
    with pytest.raises(ValueError, match="capture again with the draft's target_layer_ids"):
        OfflineHiddenStates(tmp_path, (0, 2))
    (tmp_path / INDEX_NAME).unlink()  # shards without an index: the capture did not finish
    with pytest.raises(FileNotFoundError, match="capture hidden states first"):
        CompactHiddenStates(tmp_path)


def test_padded_batches_from_the_store_line_up_with_single_sequences(pair, tmp_path):
    from dspark.train.hidden_batch import get_batch

    _, _, target, examples = pair
    capture_compact(target, examples, tmp_path, "bfloat16", progress=False)
    store = CompactHiddenStates(tmp_path)
    batch = get_batch(store, [1, 3])
    assert batch.features.shape == (2, 40, 2 * 64) and batch.last_hidden.shape == (2, 40, 64)
    assert torch.equal(batch.features[1], store.get(3).features[0]) and not batch.features[1].any()
