"""What engines and the doctor read from our exports: the conformance drafts import and still reproduce DeepSpec's
decoding, and every export states its layout, anchor layout and layer ids the way `dspark doctor` reads them."""
from __future__ import annotations

import json

import pytest

from dspark import GenerationConfig, Target, generate
from dspark.config import preset
from dspark.deploy.checkpoint_facts import DFLASH, DSPARK, read_draft
from dspark.deploy.launch import LaunchRequest, plan_launch
from dspark.formats.checkpoint import ConvertOptions
from dspark.formats.convert import export_draft, import_draft
from dspark.formats.native import load_draft, save_draft
from dspark.testbed.random_pair import random_draft
from formats_support import CONFORMANCE, TARGET_DIR

WITH_TARGET = ConvertOptions(target=TARGET_DIR)


@pytest.mark.parametrize("variant", ["vanilla", "gated", "rnn"])
def test_conformance_deepspec_drafts_import_with_their_conventions(variant, tmp_path):
    reference = json.loads((CONFORMANCE / "deepspec" / variant / "draft" / "config.json").read_text())
    report = import_draft(CONFORMANCE / "deepspec" / variant / "draft", tmp_path / "native")
    assert report.source_layout == "deepspec" and report.mode == "dspark"
    assert list(report.target_layer_ids) == reference["target_layer_ids"]
    assert report.mask_token_id == reference["mask_token_id"] and report.block_size == reference["block_size"]


@pytest.mark.parametrize("variant", ["gated", "rnn"])
def test_conformance_specforge_configs_import_with_the_deepspec_weights(variant, tmp_path):
    # the fixture stores SpecForge weights only for vanilla: the others are DeepSpec's minus embed_tokens / lm_head
    folder = tmp_path / "specforge"
    folder.mkdir()
    (folder / "config.json").write_text((CONFORMANCE / "specforge" / variant / "draft" / "config.json").read_text())
    from safetensors.torch import load_file, save_file

    weights = load_file(CONFORMANCE / "deepspec" / variant / "draft" / "model.safetensors")
    save_file({k: v for k, v in weights.items() if k not in ("embed_tokens.weight", "lm_head.weight")},
              folder / "model.safetensors")
    report = import_draft(folder, tmp_path / "native")
    deepspec = import_draft(CONFORMANCE / "deepspec" / variant / "draft", tmp_path / "deepspec")
    assert report.source_layout == "specforge"
    assert (report.target_layer_ids, report.mask_token_id, report.parameters) == \
        (deepspec.target_layer_ids, deepspec.mask_token_id, deepspec.parameters)


def test_imported_specforge_draft_reproduces_deepspecs_greedy_decoding(conformance_target, tmp_path):
    import_draft(CONFORMANCE / "specforge" / "vanilla" / "draft", tmp_path / "native")
    record = json.loads((CONFORMANCE / "deepspec" / "vanilla" / "inference.json").read_text())["thr0"]
    draft = load_draft(tmp_path / "native")
    target = Target(conformance_target, draft.config.target_layer_ids)
    prompt, new = record["output_ids"][: record["prompt_len"]], 12  # the first rounds are enough to tell
    result = generate(target, draft, prompt, GenerationConfig(max_new_tokens=new))
    assert result.tokens == record["output_ids"][record["prompt_len"]:][:new]
    rounds = len(result.stats.acceptance_lengths) - 1  # the last round is capped at max_new_tokens
    assert rounds >= 3 and list(result.stats.acceptance_lengths[:rounds]) == record["acceptance_lengths"][:rounds]


@pytest.mark.parametrize("layout, doctor_layout, anchor", [
    ("deepspec", "deepspec", DSPARK), ("specforge", "specforge", DSPARK), ("speculators", "speculators", DSPARK)])
def test_dspark_exports_read_back_unambiguously_by_the_doctor(tmp_path, layout, doctor_layout, anchor):
    export_draft(CONFORMANCE / "deepspec" / "gated" / "draft", tmp_path / "out", layout, WITH_TARGET)
    facts = read_draft(str(tmp_path / "out"))
    assert (facts.layout, facts.anchor_layout, facts.target_layer_ids, facts.block_size, facts.mask_token_id) == \
        (doctor_layout, anchor, (-1, 1, 4), 4, 96)
    assert facts.problems == ()


@pytest.mark.parametrize("layout", ["dflash", "speculators"])
def test_dflash_exports_read_back_as_dflash_aligned(tmp_path, layout):
    src = save_draft(random_draft(preset("tiny-dflash").replace(num_target_layers=6)), tmp_path / "native")
    export_draft(src, tmp_path / "out", layout, WITH_TARGET)
    facts = read_draft(str(tmp_path / "out"))
    assert facts.anchor_layout == DFLASH and facts.target_layer_ids == (0, 2, 4) and facts.problems == ()


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
def test_deepspec_export_gets_a_launch_command_with_no_doctor_error(tmp_path, engine):
    export_draft(CONFORMANCE / "deepspec" / "vanilla" / "draft", tmp_path / "out", "deepspec", WITH_TARGET)
    plan = plan_launch(LaunchRequest(engine=engine, draft=str(tmp_path / "out"), target=str(TARGET_DIR),
                                     gpus_per_node=1))
    assert not [f for f in plan.report.findings if f.severity == "error"]


def test_speculators_export_gets_a_vllm_launch_with_no_doctor_finding(tmp_path):
    export_draft(CONFORMANCE / "deepspec" / "rnn" / "draft", tmp_path / "out", "speculators", WITH_TARGET)
    plan = plan_launch(LaunchRequest(engine="vllm", draft=str(tmp_path / "out"), target=str(TARGET_DIR),
                                     gpus_per_node=1))
    assert not [f for f in plan.report.findings if f.severity == "error"]
    assert '"method": "dspark"' in plan.script


def test_export_is_deterministic_byte_for_byte(tmp_path):
    src = CONFORMANCE / "deepspec" / "rnn" / "draft"
    export_draft(src, tmp_path / "a", "speculators", WITH_TARGET)
    export_draft(src, tmp_path / "b", "speculators", WITH_TARGET)
    for name in ("config.json", "model.safetensors"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
