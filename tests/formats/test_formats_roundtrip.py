"""Round trips between dspark's native folder and every engine layout are exact: same DraftConfig, same tensor
names, dtypes and bytes."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from formats_support import CONFORMANCE, TARGET_DIR, make_native
from dspark.config import RopeConfig, preset
from dspark.formats.checkpoint import ConvertOptions
from dspark.formats.convert import export_draft, import_draft, read_checkpoint
from dspark.formats.native import load_draft, read_config, save_draft
from dspark.testbed.random_pair import random_draft

WITH_TARGET = ConvertOptions(target=TARGET_DIR)


def _same_tensors(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("layout", ["deepspec", "specforge", "speculators"])
@pytest.mark.parametrize("name", ["tiny", "tiny-gated", "tiny-rnn"])
def test_dspark_draft_round_trips_exactly_through_each_engine_layout(tmp_path, layout, name):
    src = make_native(tmp_path, name, embeddings=layout == "deepspec")
    export_draft(src, tmp_path / "out", layout, WITH_TARGET)
    import_draft(tmp_path / "out", tmp_path / "back", WITH_TARGET)
    assert read_config(tmp_path / "back") == read_config(src)
    assert _same_tensors(load_file(tmp_path / "back" / "model.safetensors"), load_file(src / "model.safetensors"))


@pytest.mark.parametrize("layout", ["dflash", "specforge", "speculators"])
def test_dflash_mode_draft_round_trips_exactly(tmp_path, layout):
    src = make_native(tmp_path, "tiny-dflash")
    export_draft(src, tmp_path / "out", layout, WITH_TARGET)
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["architectures"] == ["DFlashDraftModel"]
    import_draft(tmp_path / "out", tmp_path / "back", WITH_TARGET)
    assert read_config(tmp_path / "back") == read_config(src)
    assert _same_tensors(load_file(tmp_path / "back" / "model.safetensors"), load_file(src / "model.safetensors"))


def test_dspark_heads_on_the_dflash_layout_round_trip_through_speculators_as_sample_from_anchor_false(tmp_path):
    src = make_native(tmp_path, "tiny-unanchored")
    export_draft(src, tmp_path / "out", "speculators", WITH_TARGET)
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["architectures"] == ["DSparkDraftModel"] and written["sample_from_anchor"] is False
    assert written["markov_rank"] == 8 and written["enable_confidence_head"] is True
    assert written["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == written["block_size"] - 1
    import_draft(tmp_path / "out", tmp_path / "back", WITH_TARGET)
    assert read_config(tmp_path / "back") == read_config(src)
    assert _same_tensors(load_file(tmp_path / "back" / "model.safetensors"), load_file(src / "model.safetensors"))


def test_bfloat16_weights_keep_their_dtype_and_bits(tmp_path):
    src = make_native(tmp_path, "tiny-gated", dtype=torch.bfloat16)
    export_draft(src, tmp_path / "out", "speculators", WITH_TARGET)
    stored = load_file(tmp_path / "out" / "model.safetensors")
    assert {t.dtype for t in stored.values()} == {torch.bfloat16}
    assert json.loads((tmp_path / "out" / "config.json").read_text())["dtype"] == "bfloat16"
    import_draft(tmp_path / "out", tmp_path / "back")
    assert _same_tensors(load_file(tmp_path / "back" / "model.safetensors"), load_file(src / "model.safetensors"))


def test_yarn_rope_and_long_range_survive_every_layout(tmp_path):
    config = preset("tiny").replace(max_position_embeddings=4096, rope=RopeConfig(
        rope_theta=10000.0, rope_type="yarn", factor=16.0, original_max_position_embeddings=256))
    src = save_draft(random_draft(config), tmp_path / "native")
    for layout in ("deepspec", "specforge", "speculators"):
        export_draft(src, tmp_path / layout, layout, WITH_TARGET)
        assert read_checkpoint(tmp_path / layout, WITH_TARGET).config == config, layout


def test_deepspec_export_carries_the_target_embeddings_it_needs(tmp_path):
    src = make_native(tmp_path, "tiny")
    export_draft(src, tmp_path / "out", "deepspec", WITH_TARGET)
    stored = load_file(tmp_path / "out" / "model.safetensors")
    target = load_file(TARGET_DIR / "model.safetensors")
    assert torch.equal(stored["embed_tokens.weight"], target["model.embed_tokens.weight"])
    assert torch.equal(stored["lm_head.weight"], target["lm_head.weight"])
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    # Qwen3DSparkModel.__init__ asserts these exist (DeepSpec qwen3/modeling.py)
    for field in ("target_layer_ids", "mask_token_id", "num_anchors", "enable_confidence_head", "markov_rank"):
        assert field in config
    assert config["sample_from_anchor"] is True and "dspark_mode" not in config


def test_speculators_export_shifts_layer_ids_to_the_vllm_base_and_records_the_verifier(tmp_path):
    src = make_native(tmp_path, "tiny-rnn")
    export_draft(src, tmp_path / "out", "speculators", WITH_TARGET)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["aux_hidden_state_layer_ids"] == [1, 3, 5]  # tiny's target_layer_ids (0, 2, 4) + 1
    assert config["speculators_model_type"] == "dspark" and config["sample_from_anchor"] is True
    assert config["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 4
    assert config["speculators_config"]["verifier"]["architectures"] == ["Qwen3ForCausalLM"]
    assert config["transformer_layer_config"]["head_dim"] == 16 and "target_layer_ids" not in config


def test_conformance_deepspec_draft_round_trips_and_keeps_its_training_fields(tmp_path):
    src = CONFORMANCE / "deepspec" / "gated" / "draft"
    import_draft(src, tmp_path / "native")
    export_draft(tmp_path / "native", tmp_path / "again", "deepspec")
    before = json.loads((src / "config.json").read_text())
    after = json.loads((tmp_path / "again" / "config.json").read_text())
    for field in ("architectures", "block_size", "target_layer_ids", "num_target_layers", "mask_token_id",
                  "num_anchors", "markov_rank", "markov_head_type", "enable_confidence_head",
                  "confidence_head_with_markov",
                  "hidden_size", "num_hidden_layers", "head_dim", "rope_parameters", "max_position_embeddings"):
        assert after[field] == before[field], field
    assert _same_tensors(load_file(tmp_path / "again" / "model.safetensors"), load_file(src / "model.safetensors"))


def test_conformance_specforge_draft_round_trips_through_native(tmp_path):
    src = CONFORMANCE / "specforge" / "vanilla" / "draft"
    import_draft(src, tmp_path / "native")
    export_draft(tmp_path / "native", tmp_path / "again", "specforge")
    before = json.loads((src / "config.json").read_text())
    after = json.loads((tmp_path / "again" / "config.json").read_text())
    assert after["dflash_config"] == before["dflash_config"]
    assert after["architectures"] == before["architectures"] and after["block_size"] == before["block_size"]
    assert _same_tensors(load_file(tmp_path / "again" / "model.safetensors"), load_file(src / "model.safetensors"))


def test_imported_draft_loads_as_a_model_with_the_same_weights(tmp_path):
    src = CONFORMANCE / "deepspec" / "rnn" / "draft"
    import_draft(src, tmp_path / "native", ConvertOptions(drop_embeddings=True))
    draft = load_draft(tmp_path / "native")
    assert draft.embed_tokens is None  # the shared copies were dropped on request
    reference = load_file(src / "model.safetensors")
    assert torch.equal(draft.markov_head.joint_proj.weight, reference["markov_head.joint_proj.weight"])


def test_calibration_file_travels_with_the_draft(tmp_path):
    src = make_native(tmp_path, "tiny")
    (src / "calibration.json").write_text(json.dumps({"sts_temperatures": [1.0, 1.1, 1.2, 1.3]}))
    export_draft(src, tmp_path / "out", "specforge")
    assert json.loads((tmp_path / "out" / "calibration.json").read_text())["sts_temperatures"][3] == 1.3
