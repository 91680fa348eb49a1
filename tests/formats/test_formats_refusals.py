"""Checkpoints whose conventions would have to be guessed are refused with a message that names the field."""
from __future__ import annotations

import json

import pytest

from dspark.formats.checkpoint import ConvertOptions
from dspark.formats.convert import detect_layout, export_draft, import_draft
from dspark.formats.fields import AmbiguousCheckpointError
from dspark.formats.native import CheckpointError
from formats_support import TARGET_DIR, make_native

WITH_TARGET = ConvertOptions(target=TARGET_DIR)


@pytest.fixture
def exported(tmp_path):
    """Factory: export a tiny draft to `layout`, apply `edit` to its config.json, return the folder."""

    def make(layout: str, edit, name: str = "tiny"):
        out = tmp_path / f"{layout}-{name}"
        export_draft(make_native(tmp_path, name, folder=f"src-{name}"), out, layout, WITH_TARGET, overwrite=True)
        config = json.loads((out / "config.json").read_text())
        edit(config)
        (out / "config.json").write_text(json.dumps(config))
        return out

    return make


def _refused(folder, tmp_path, field: str, options: ConvertOptions = ConvertOptions()) -> str:
    with pytest.raises(AmbiguousCheckpointError) as err:
        import_draft(folder, tmp_path / "imported", options)
    assert err.value.field == field
    assert field in str(err.value)
    return str(err.value)


def test_layer_ids_given_in_both_bases_that_disagree_are_refused(exported, tmp_path):
    folder = exported("deepspec", lambda c: c.update(aux_hidden_state_layer_ids=c["target_layer_ids"]))
    assert "layer-id base" in _refused(folder, tmp_path, "target_layer_ids")


def test_layer_ids_given_in_both_bases_that_agree_are_accepted(exported, tmp_path):
    folder = exported("deepspec", lambda c: c.update(aux_hidden_state_layer_ids=[i + 1 for i in c["target_layer_ids"]]))
    assert import_draft(folder, tmp_path / "ok").target_layer_ids == (0, 2, 4)


def test_speculators_target_layer_ids_that_are_not_aux_minus_one_are_refused(exported, tmp_path):
    folder = exported("speculators", lambda c: c.update(target_layer_ids=c["aux_hidden_state_layer_ids"]))
    _refused(folder, tmp_path, "target_layer_ids")


def test_speculators_dspark_without_sample_from_anchor_is_refused(exported, tmp_path):
    # speculators defaults it to true, vLLM's speculators updater to false: the anchor layout is ambiguous
    folder = exported("speculators", lambda c: c.pop("sample_from_anchor"))
    assert "default it differently" in _refused(folder, tmp_path, "sample_from_anchor")


@pytest.mark.parametrize("field", ["markov_rank", "enable_confidence_head", "block_size", "mask_token_id"])
def test_speculators_fields_with_conflicting_defaults_must_be_explicit(exported, tmp_path, field):
    _refused(exported("speculators", lambda c: c.pop(field)), tmp_path, field)


def test_speculative_tokens_that_do_not_match_the_block_are_refused(exported, tmp_path):
    def edit(c):
        c["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = c["block_size"] - 1

    _refused(exported("speculators", edit), tmp_path, "speculators_config.proposal_methods[0].speculative_tokens")


def test_missing_head_dim_that_speculators_and_vllm_read_differently_is_refused(exported, tmp_path):
    folder = exported("speculators", lambda c: c["transformer_layer_config"].pop("head_dim"))
    assert "vLLM reads 16" in _refused(folder, tmp_path, "transformer_layer_config.head_dim")


def test_speculators_without_layer_count_or_target_names_num_target_layers(exported, tmp_path):
    folder = exported("speculators", lambda c: c["speculators_config"]["verifier"].update(name_or_path="org/model"))
    _refused(folder, tmp_path, "num_target_layers")
    assert import_draft(folder, tmp_path / "ok", WITH_TARGET).target_layer_ids == (0, 2, 4)


def test_deepspec_with_sample_from_anchor_false_is_refused(exported, tmp_path):
    _refused(exported("deepspec", lambda c: c.update(sample_from_anchor=False)), tmp_path, "sample_from_anchor")


@pytest.mark.parametrize("field", ["block_size", "mask_token_id", "target_layer_ids"])
def test_deepspec_without_a_convention_field_is_refused(exported, tmp_path, field):
    _refused(exported("deepspec", lambda c: c.pop(field)), tmp_path, field)


def test_mask_token_stated_twice_with_different_values_is_refused(exported, tmp_path):
    folder = exported("specforge", lambda c: c.update(mask_token_id=c["dflash_config"]["mask_token_id"] - 1))
    assert "disagree" in _refused(folder, tmp_path, "mask_token_id")


def test_block_size_stated_twice_with_different_values_is_refused(exported, tmp_path):
    folder = exported("dflash", lambda c: c["dflash_config"].update(block_size=c["block_size"] + 1), "tiny-dflash")
    _refused(folder, tmp_path, "block_size")


def test_dflash_without_target_layer_ids_is_refused_not_spread_evenly(exported, tmp_path):
    folder = exported("dflash", lambda c: c["dflash_config"].pop("target_layer_ids"), "tiny-dflash")
    assert "evenly spaced" in _refused(folder, tmp_path, "dflash_config.target_layer_ids")


def test_dflash_architecture_with_a_dspark_projector_is_refused(exported, tmp_path):
    folder = exported("dflash", lambda c: c["dflash_config"].update(projector_type="dspark"), "tiny-dflash")
    _refused(folder, tmp_path, "dflash_config.projector_type")


def test_dflash_architecture_sampling_from_the_anchor_is_refused(exported, tmp_path):
    folder = exported("dflash", lambda c: c["dflash_config"].update(sample_from_anchor=True), "tiny-dflash")
    _refused(folder, tmp_path, "sample_from_anchor")


def test_specforge_attention_mode_that_does_not_fit_the_heads_is_refused(exported, tmp_path):
    folder = exported("specforge", lambda c: c["dflash_config"].update(attention_mode="mha"))
    _refused(folder, tmp_path, "dflash_config.attention_mode")


@pytest.mark.parametrize("edit, words", [
    (lambda c: c.update(layer_types=["sliding_attention"] * c["num_hidden_layers"], sliding_window=64), "sliding"),
    (lambda c: c["dflash_config"].update(causal=True), "causal"),
])
def test_dflash_drafts_that_attend_differently_are_refused(exported, tmp_path, edit, words):
    with pytest.raises(CheckpointError, match=words):
        import_draft(exported("dflash", edit, "tiny-dflash"), tmp_path / "imported")


def test_reduced_vocabulary_speculators_drafts_are_refused(exported, tmp_path):
    with pytest.raises(CheckpointError, match="draft_vocab_size"):
        import_draft(exported("speculators", lambda c: c.update(draft_vocab_size=32)), tmp_path / "imported",
                     WITH_TARGET)


def test_unknown_architecture_is_refused_with_the_supported_list():
    with pytest.raises(CheckpointError, match="Qwen3DSparkModel"):
        detect_layout({"architectures": ["LlamaForCausalLMEagle3"]})


def test_tensors_that_do_not_match_the_config_name_the_tensor(exported, tmp_path):
    folder = exported("specforge", lambda c: c["dflash_config"].update(markov_head_type="gated"))
    with pytest.raises(CheckpointError, match="markov_head.gate_proj"):
        import_draft(folder, tmp_path / "imported")


@pytest.mark.parametrize("layout", ["deepspec", "specforge"])
def test_dflash_mode_drafts_do_not_export_to_dspark_aligned_architectures(tmp_path, layout):
    if layout == "specforge":  # SpecForge's own layout for DFlash drafts is DFlashDraftModel
        export_draft(make_native(tmp_path, "tiny-dflash"), tmp_path / "out", layout)
        assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == ["DFlashDraftModel"]
        return
    with pytest.raises(CheckpointError, match="--layout dflash"):
        export_draft(make_native(tmp_path, "tiny-dflash"), tmp_path / "out", layout)


def test_dspark_drafts_do_not_export_to_the_dflash_layout(tmp_path):
    with pytest.raises(CheckpointError, match="DSpark draft"):
        export_draft(make_native(tmp_path, "tiny"), tmp_path / "out", "dflash")


def test_exports_that_need_the_target_say_so(tmp_path):
    with pytest.raises(CheckpointError, match="--target"):
        export_draft(make_native(tmp_path, "tiny"), tmp_path / "a", "deepspec")
    with pytest.raises(CheckpointError, match="--target"):
        export_draft(make_native(tmp_path, "tiny", folder="b-src"), tmp_path / "b", "speculators")


def test_output_folder_holding_a_checkpoint_is_not_overwritten_without_force(tmp_path):
    src = make_native(tmp_path, "tiny")
    export_draft(src, tmp_path / "out", "specforge")
    with pytest.raises(CheckpointError, match="--force"):
        export_draft(src, tmp_path / "out", "specforge")
    export_draft(src, tmp_path / "out", "specforge", overwrite=True)


def test_a_target_the_draft_was_not_trained_for_is_refused(tmp_path):
    from dspark.config import preset
    from dspark.formats.native import save_draft
    from dspark.testbed.random_pair import random_draft

    src = save_draft(random_draft(preset("tiny").replace(num_target_layers=8, target_layer_ids=(0, 2, 6))),
                     tmp_path / "native")
    with pytest.raises(CheckpointError, match="8 layers"):
        export_draft(src, tmp_path / "out", "deepspec", WITH_TARGET)


@pytest.mark.parametrize("layout", ["dflash", "specforge", "deepspec"])
def test_dspark_heads_on_the_dflash_layout_are_refused_where_the_layout_would_lose_them(tmp_path, layout):
    with pytest.raises(CheckpointError) as err:
        export_draft(make_native(tmp_path, "tiny-unanchored"), tmp_path / "out", layout, WITH_TARGET)
    assert "speculators" in str(err.value) or "DSpark" in str(err.value)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_removed_markov_first_slot_option_loads_when_true_and_is_refused_when_false(tmp_path):
    from dspark.formats.native import load_draft

    folder = make_native(tmp_path)
    raw = json.loads((folder / "config.json").read_text())
    assert "markov_first_slot" not in raw  # no longer written
    (folder / "config.json").write_text(json.dumps({**raw, "markov_first_slot": True}))
    assert load_draft(folder).config.block_size == raw["block_size"]  # true is what every draft does: ignored
    (folder / "config.json").write_text(json.dumps({**raw, "markov_first_slot": False}))
    with pytest.raises(CheckpointError, match="markov_first_slot is false.*removed.*retrain"):
        load_draft(folder)
    with pytest.raises(CheckpointError, match="markov_first_slot is false"):
        import_draft(folder, tmp_path / "imported")
