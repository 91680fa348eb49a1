"""Native checkpoints: exact round trips, strict validation that names the offending tensor/field, no pickle."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from dspark import DSparkDraft, load_draft, save_draft
from dspark.config import preset
from dspark.formats.native import CheckpointError, config_from_dict, config_to_dict


@pytest.mark.parametrize("name", ["tiny", "tiny-gated", "tiny-rnn", "tiny-dflash"])
def test_save_then_load_is_bit_identical_and_keeps_the_config(name, tmp_path):
    draft = DSparkDraft(preset(name))
    save_draft(draft, tmp_path / "d")
    loaded = load_draft(tmp_path / "d")
    assert loaded.config == draft.config
    for (k, a), (k2, b) in zip(draft.state_dict().items(), loaded.state_dict().items()):
        assert k == k2 and torch.equal(a, b)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["config.json", "model.safetensors"]


def test_load_draft_puts_every_parameter_in_the_requested_dtype(tmp_path):
    draft = DSparkDraft(preset("tiny"))
    save_draft(draft, tmp_path / "d")
    loaded = load_draft(tmp_path / "d", dtype=torch.bfloat16)
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    assert loaded.rotary.inv_freq.dtype == torch.float32  # RoPE frequencies stay fp32
    for (k, a), b in zip(draft.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a.to(torch.bfloat16), b), k


def test_config_dict_round_trip_for_presets():
    for name in ("kimi-k3-dspark", "qwen3-8b-dspark", "tiny-rnn"):
        cfg = preset(name)
        assert config_from_dict(json.loads(json.dumps(config_to_dict(cfg)))) == cfg


def test_embeddings_are_left_out_by_default_and_kept_on_request(tmp_path):
    draft = DSparkDraft(preset("tiny"), with_embeddings=True)
    save_draft(draft, tmp_path / "a")
    save_draft(draft, tmp_path / "b", include_embeddings=True)
    assert "embed_tokens.weight" not in load_file(tmp_path / "a" / "model.safetensors")
    assert load_draft(tmp_path / "a").embed_tokens is None
    loaded = load_draft(tmp_path / "b")
    assert torch.equal(loaded.lm_head.weight, draft.lm_head.weight) and not loaded.lm_head.weight.requires_grad


def test_shape_mismatch_names_the_tensor(tmp_path):
    save_draft(DSparkDraft(preset("tiny")), tmp_path / "d")
    tensors = load_file(tmp_path / "d" / "model.safetensors")
    tensors["layers.1.mlp.up_proj.weight"] = torch.zeros(3, 3)
    save_file(tensors, tmp_path / "d" / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"layers\.1\.mlp\.up_proj\.weight.*\(3, 3\)"):
        load_draft(tmp_path / "d")


def test_missing_tensor_and_missing_field_are_named(tmp_path):
    save_draft(DSparkDraft(preset("tiny")), tmp_path / "d")
    tensors = load_file(tmp_path / "d" / "model.safetensors")
    del tensors["fc.weight"]
    save_file(tensors, tmp_path / "d" / "model.safetensors")
    with pytest.raises(CheckpointError, match="fc.weight"):
        load_draft(tmp_path / "d")
    raw = json.loads((tmp_path / "d" / "config.json").read_text())
    del raw["block_size"]
    (tmp_path / "d" / "config.json").write_text(json.dumps(raw))
    with pytest.raises(CheckpointError, match="block_size"):
        load_draft(tmp_path / "d")


def test_bad_configs_are_refused_with_the_field_named(tmp_path):
    raw = config_to_dict(preset("tiny"))
    with pytest.raises(CheckpointError, match="target_layer_ids"):
        config_from_dict({**raw, "target_layer_ids": [4, 2]})
    with pytest.raises(CheckpointError, match="speculators"):
        config_from_dict({**raw, "speculators_model_type": "dspark"})
    with pytest.raises(CheckpointError, match="not a draft folder"):
        load_draft(tmp_path / "nothing")


def test_no_pickle_anywhere_in_the_package():
    import pathlib

    import dspark

    root = pathlib.Path(dspark.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "torch.load(" not in text and "import pickle" not in text, path


def test_written_files_are_readable_by_others_like_any_normal_file(tmp_path):
    import os
    import stat

    save_draft(DSparkDraft(preset("tiny")), tmp_path / "d")
    mode = stat.S_IMODE(os.stat(tmp_path / "d" / "config.json").st_mode)
    assert mode == 0o666 & ~_current_umask()


def _current_umask() -> int:
    import os

    current = os.umask(0)
    os.umask(current)
    return current
