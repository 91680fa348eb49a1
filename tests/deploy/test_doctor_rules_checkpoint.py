"""Each checkpoint-versus-engine rule fires on a draft / target / context that does not fit the launch,
and stays quiet on one that does; drafts are written as config.json folders in the three layouts."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from test_doctor_support import doctor, sglang, trtllm, trtllm_options, vllm, write_draft, write_target, rule_severities

from dspark.deploy.checkpoint_facts import DFLASH, DSPARK, read_draft

SPECULATORS = {"architectures": ["DSparkSpeculator"], "speculators_model_type": "dspark", "target_layer_ids": None,
               "aux_hidden_state_layer_ids": [8, 24, 52, 68, 84], "sample_from_anchor": True}
SPECFORGE = {"architectures": ["DSparkDraftModel"], "target_layer_ids": None, "mask_token_id": None,
             "dflash_config": {"projector_type": "dspark", "mask_token_id": 163824,
                               "target_layer_ids": [7, 23, 51, 67, 83], "markov_rank": 256}}


def draft(**fields) -> Callable[[object], dict]:
    return lambda tmp: {"draft": str(write_draft(tmp / "draft", **fields))}


def draft_and_target(draft_fields: dict, target_fields: dict) -> Callable[[object], dict]:
    return lambda tmp: {"draft": str(write_draft(tmp / "draft", **draft_fields)),
                        "target_config": str(write_target(tmp / "target", **target_fields) / "config.json")}


@dataclass(frozen=True)
class Case:
    rule: str
    severity: str
    command: Callable[[], str]
    request: Callable[[object], dict]


DSPARK_SGLANG_FLAGS = ("--speculative-dspark-block-size", "--speculative-num-draft-tokens",
                       "--speculative-dspark-sps-table-path")
DFLASH_SGLANG = {"--speculative-algorithm": "DFLASH", "--speculative-draft-attention-backend": "flashinfer"}

FIRING = [
    Case("CK-ALGORITHM", "error", lambda: sglang(set_={"--speculative-algorithm": "EAGLE3"}, drop=DSPARK_SGLANG_FLAGS),
         draft()),
    Case("CK-ALGORITHM", "error", lambda: sglang(drop=("--speculative-algorithm",)), draft()),
    Case("CK-ANCHOR-LAYOUT", "error", lambda: sglang(), draft(dspark_mode="dflash")),
    Case("CK-ANCHOR-LAYOUT", "error", lambda: vllm(spec={"method": "dspark"}), draft(sample_from_anchor=False)),
    Case("CK-ANCHOR-LAYOUT", "error", lambda: vllm(spec={"method": "dflash", "num_speculative_tokens": 6}), draft()),
    Case("CK-HEADS-DROPPED", "error", lambda: vllm(spec={"method": "dflash", "num_speculative_tokens": 6}),
         draft(sample_from_anchor=False)),  # write_draft's default carries markov_rank 256 and a confidence head
    Case("CK-LAYER-ID-BASE", "error", lambda: sglang(), draft(**SPECULATORS)),
    Case("CK-LAYER-ID-BASE", "error", lambda: vllm(), draft(aux_hidden_state_layer_ids=[7, 23, 51, 67, 83])),
    Case("CK-LAYOUT-ENGINE", "error", lambda: sglang(), draft(**SPECFORGE)),
    Case("CK-LAYOUT-ENGINE", "error", lambda: trtllm(), lambda tmp: {**draft(**SPECFORGE)(tmp),
                                                                      "llm_api_options": trtllm_options()}),
    Case("CK-LAYOUT-ENGINE", "warning", lambda: vllm(), draft(architectures=["Mystery"], target_layer_ids=None)),
    Case("CK-LAYER-ID-RANGE", "error", lambda: sglang(), draft_and_target({}, {"num_hidden_layers": 60})),
    Case("CK-LAYER-ID-RANGE", "warning", lambda: sglang(), draft_and_target({}, {"num_hidden_layers": 84})),
    Case("CK-MASK-TOKEN", "error", lambda: sglang(), draft_and_target({}, {"vocab_size": 151936})),
    Case("CK-MASK-TOKEN", "warning", lambda: sglang(), draft(mask_token_id=None)),
    Case("CK-CONTEXT-RANGE", "error", lambda: sglang(), draft(max_position_embeddings=65536, rope_parameters=None)),
    Case("CK-CONTEXT-RANGE", "error", lambda: vllm(),
         draft(rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 65536})),
    Case("CK-CONTEXT-RANGE", "error", lambda: sglang(drop=("--context-length",)),
         lambda tmp: {**draft(max_position_embeddings=65536, rope_parameters=None)(tmp), "context": 200_000}),
    Case("CK-HIDDEN-SIZE", "error", lambda: sglang(), draft_and_target({"target_hidden_size": 4096}, {})),
]

QUIET = [
    Case("CK-ALGORITHM", "", lambda: sglang(), draft()),
    Case("CK-ANCHOR-LAYOUT", "", lambda: sglang(set_=DFLASH_SGLANG, drop=DSPARK_SGLANG_FLAGS),
         draft(dspark_mode="dflash")),
    Case("CK-ANCHOR-LAYOUT", "", lambda: vllm(spec={"method": "dflash", "num_speculative_tokens": 6}),
         draft(sample_from_anchor=False)),
    Case("CK-HEADS-DROPPED", "", lambda: vllm(spec={"method": "dflash", "num_speculative_tokens": 6}),
         draft(sample_from_anchor=False, markov_rank=0, enable_confidence_head=False,
               confidence_head_with_markov=False)),
    Case("CK-HEADS-DROPPED", "", lambda: sglang(), draft()),  # an anchored DSpark draft under DSPARK
    Case("CK-LAYER-ID-BASE", "", lambda: vllm(), draft(**SPECULATORS)),
    Case("CK-LAYER-ID-BASE", "", lambda: vllm(), draft(aux_hidden_state_layer_ids=[8, 24, 52, 68, 84])),
    Case("CK-LAYOUT-ENGINE", "", lambda: vllm(), draft(**SPECFORGE)),
    Case("CK-LAYER-ID-RANGE", "", lambda: sglang(), draft_and_target({}, {"num_hidden_layers": 93})),
    Case("CK-MASK-TOKEN", "", lambda: sglang(), draft_and_target({}, {"vocab_size": 163840})),
    Case("CK-CONTEXT-RANGE", "", lambda: sglang(set_={"--context-length": "65536"}),
         draft(max_position_embeddings=65536, rope_parameters=None)),
    Case("CK-CONTEXT-RANGE", "", lambda: sglang(), draft()),
    Case("CK-HIDDEN-SIZE", "", lambda: sglang(), draft_and_target({"target_hidden_size": 7168}, {})),
]


@pytest.mark.parametrize("case", FIRING, ids=lambda c: f"{c.rule}-{c.severity}")
def test_checkpoint_rule_fires_with_its_severity(case: Case, tmp_path) -> None:
    assert case.severity in rule_severities(case, tmp_path)


@pytest.mark.parametrize("case", QUIET, ids=lambda c: c.rule)
def test_checkpoint_rule_is_quiet_on_a_fitting_draft(case: Case, tmp_path) -> None:
    assert rule_severities(case, tmp_path) == []


def test_draft_layouts_are_read_into_hf_layer_ids(tmp_path) -> None:
    speculators = read_draft(str(write_draft(tmp_path / "a", **SPECULATORS)))
    specforge = read_draft(str(write_draft(tmp_path / "b", **SPECFORGE)))
    deepspec = read_draft(str(write_draft(tmp_path / "c") / "config.json"))
    assert (speculators.layout, specforge.layout, deepspec.layout) == ("speculators", "specforge", "deepspec")
    for facts in (speculators, specforge, deepspec):
        assert facts.target_layer_ids == (7, 23, 51, 67, 83)
        assert facts.anchor_layout == DSPARK
    assert specforge.mask_token_id == 163824 and specforge.markov_rank == 256
    assert deepspec.position_range == 1_048_576


def test_dflash_alignment_is_read_from_each_convention(tmp_path) -> None:
    assert read_draft(str(write_draft(tmp_path / "a", dspark_mode="dflash"))).anchor_layout == DFLASH
    assert read_draft(str(write_draft(tmp_path / "b", **{**SPECULATORS, "sample_from_anchor": False}))
                      ).anchor_layout == DFLASH
    assert read_draft(str(write_draft(tmp_path / "c", architectures=["DFlashDraftModel"], target_layer_ids=None,
                                      dflash_config={"target_layer_ids": [1, 9]}))).anchor_layout == DFLASH


def test_yarn_range_is_capped_by_factor_times_original(tmp_path) -> None:
    facts = read_draft(str(write_draft(tmp_path / "d", rope_parameters={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 65536})))
    assert facts.position_range == 262_144


def test_draft_path_in_the_command_is_read_when_it_is_a_local_folder(tmp_path) -> None:
    folder = write_draft(tmp_path / "local-draft", dspark_mode="dflash")
    report = doctor(sglang(set_={"--speculative-draft-model-path": str(folder)}))
    assert "CK-ANCHOR-LAYOUT" in report.rule_ids()
    assert f"draft:{folder}" in report.checked


def test_missing_draft_folder_is_a_clear_input_error(tmp_path) -> None:
    with pytest.raises(ValueError, match="neither a preset"):
        doctor(sglang(), draft=str(tmp_path / "nope"))
