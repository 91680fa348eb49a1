"""Each vLLM, TensorRT-LLM and parallel-layout doctor rule fires on a launch with the one setting it is
about, and stays quiet on the nearest correct launch."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from test_doctor_support import doctor, sglang, trtllm, trtllm_options, vllm, rule_severities


@dataclass(frozen=True)
class Case:
    rule: str
    severity: str
    command: Callable[[], str]
    request: Callable[[object], dict] = field(default=lambda tmp: {})


def opts(spec: dict | None = None, **top) -> Callable[[object], dict]:
    return lambda tmp: {"llm_api_options": trtllm_options(spec, **top)}


def opts_file(text: str) -> Callable[[object], dict]:
    def build(tmp) -> dict:
        path = tmp / "opts.yaml"
        path.write_text(text, encoding="utf-8")
        return {"llm_api_options_path": str(path)}
    return build


FIRING = [
    Case("VL-SPEC-CONFIG-JSON", "error", lambda: vllm(raw_spec='{method: dspark')),
    Case("VL-TP-IN-SPEC-CONFIG", "error", lambda: vllm(spec={"tensor_parallel_size": 8})),
    Case("VL-DRAFT-TP", "error", lambda: vllm(spec={"draft_tensor_parallel_size": 4})),
    Case("VL-NUM-SPEC-TOKENS", "error", lambda: vllm(spec={"num_speculative_tokens": 5})),
    Case("VL-NUM-SPEC-TOKENS", "error", lambda: vllm(spec={"num_speculative_tokens": None})),
    Case("VL-NUM-SPEC-TOKENS", "warning", lambda: vllm(spec={"num_speculative_tokens": 9})),
    Case("VL-BATCHED-TOKENS", "error", lambda: vllm(set_={"--no-enable-chunked-prefill": None},
                                                    drop=("--enable-chunked-prefill",))),
    Case("VL-BATCHED-BELOW-VERIFY", "warning", lambda: vllm(set_={"--max-num-batched-tokens": "256"})),
    Case("VL-BATCHED-BELOW-VERIFY", "error", lambda: vllm(set_={"--max-num-batched-tokens": "4"})),
    Case("VL-EAGER", "warning", lambda: vllm(set_={"--enforce-eager": None})),
    Case("VL-EAGER", "warning", lambda: vllm(set_={"--compilation-config": '{"cudagraph_mode": "NONE"}'})),
    Case("VL-EAGER", "error", lambda: vllm(spec={"enable_adaptive_verification": True},
                                           set_={"--enforce-eager": None})),
    Case("TR-NO-SPEC-CONFIG", "error", lambda: trtllm()),
    Case("TR-NO-SPEC-CONFIG", "error", lambda: trtllm(), opts_file("enable_chunked_prefill: true\n")),
    Case("TR-NO-SPEC-CONFIG", "error", lambda: trtllm(), opts_file("speculative_config: [unclosed\n")),
    Case("TR-MAX-DRAFT-LEN", "error", lambda: trtllm(), opts({"max_draft_len": 5})),
    Case("TR-DRAFT-FIELDS", "error", lambda: trtllm(), opts({"mask_token_id": 0})),
    Case("TR-DRAFT-FIELDS", "error", lambda: trtllm(), opts({"target_layer_ids": [8, 24, 52, 68, 84]})),
    Case("TR-DRAFT-FIELDS", "error", lambda: trtllm(),
         opts({"markov_head_type": "lstm", "speculative_model": "/models/unknown-draft"})),
    Case("TR-ATTENTION-BACKEND", "error", lambda: trtllm(), opts({"attention_backend": "FLASHINFER"})),
    Case("TR-ATTENTION-BACKEND", "warning", lambda: trtllm(), opts({"attention_backend": "VANILLA"})),
    Case("TR-NO-COST-TABLE", "warning", lambda: trtllm(), opts({"enable_confidence_scheduling": None})),
    Case("TR-NO-COST-TABLE", "warning", lambda: trtllm(), opts({"confidence_cost_table_path": None})),
    Case("TR-CHUNKED-PREFILL", "error", lambda: trtllm(), opts(enable_chunked_prefill=False)),
    Case("TR-CUDA-GRAPH", "warning", lambda: trtllm(), opts(cuda_graph_config=None)),
    Case("TR-CUDA-GRAPH", "warning", lambda: trtllm(), opts(cuda_graph_config={"max_batch_size": 32})),
    Case("PAR-DCP-DIVIDES-TP", "error", lambda: sglang(set_={"--dcp-size": "3"})),
    Case("PAR-DCP-DIVIDES-TP", "error", lambda: vllm(set_={"-dcp": "3"}, drop=("--decode-context-parallel-size",))),
    Case("PAR-DCP-A2A-WITHOUT-DCP", "error", lambda: sglang(set_={"--dcp-comm-backend": "a2a"}, drop=("--dcp-size",))),
    Case("PAR-DCP-A2A-WITHOUT-DCP", "error", lambda: vllm(set_={"--dcp-comm-backend": "a2a"},
                                                          drop=("--decode-context-parallel-size",))),
    Case("PAR-DCP-PREFILL-GRAPHS", "info", lambda: sglang()),
    Case("PAR-PP-WITH-SPEC", "error", lambda: sglang(set_={"--pp-size": "2"})),
    Case("PAR-PP-WITH-SPEC", "error", lambda: vllm(set_={"-pp": "2"})),
    Case("PAR-PP-WITH-SPEC", "error", lambda: trtllm(set_={"--pp_size": "2"}), opts()),
]

QUIET = [
    Case("VL-SPEC-CONFIG-JSON", "", lambda: vllm()),
    Case("VL-TP-IN-SPEC-CONFIG", "", lambda: vllm(spec={"draft_tensor_parallel_size": 8})),
    Case("VL-DRAFT-TP", "", lambda: vllm(spec={"draft_tensor_parallel_size": 1})),
    Case("VL-NUM-SPEC-TOKENS", "", lambda: vllm(spec={"num_speculative_tokens": 7})),
    Case("VL-BATCHED-TOKENS", "", lambda: vllm(set_={"--no-enable-chunked-prefill": None, "--max-model-len": "8192"},
                                               drop=("--enable-chunked-prefill",))),
    Case("VL-BATCHED-BELOW-VERIFY", "", lambda: vllm(set_={"--max-num-batched-tokens": "512"})),
    Case("VL-EAGER", "", lambda: vllm(set_={"--compilation-config": '{"cudagraph_mode": "FULL_AND_PIECEWISE"}'})),
    Case("TR-NO-SPEC-CONFIG", "", lambda: trtllm(), opts()),
    Case("TR-MAX-DRAFT-LEN", "", lambda: trtllm(), opts()),
    Case("TR-DRAFT-FIELDS", "", lambda: trtllm(), opts({"mask_token_id": None})),
    Case("TR-ATTENTION-BACKEND", "", lambda: trtllm(), opts({"attention_backend": "CUTEDSL"})),
    Case("TR-NO-COST-TABLE", "", lambda: trtllm(), opts()),
    Case("TR-CHUNKED-PREFILL", "", lambda: trtllm(set_={"--max_seq_len": "8192"}), opts(enable_chunked_prefill=False)),
    Case("TR-CUDA-GRAPH", "", lambda: trtllm(), opts(cuda_graph_config={"max_batch_size": 64})),
    Case("PAR-DCP-DIVIDES-TP", "", lambda: sglang(set_={"--dcp-size": "4"})),
    Case("PAR-DCP-A2A-WITHOUT-DCP", "", lambda: sglang(set_={"--dcp-comm-backend": "a2a"})),
    Case("PAR-DCP-PREFILL-GRAPHS", "", lambda: sglang(drop=("--dcp-size",))),
    Case("PAR-PP-WITH-SPEC", "", lambda: sglang(set_={"--pp-size": "1"})),
]


@pytest.mark.parametrize("case", FIRING, ids=lambda c: f"{c.rule}-{c.severity}")
def test_engine_rule_fires_with_its_severity(case: Case, tmp_path) -> None:
    assert case.severity in rule_severities(case, tmp_path)


@pytest.mark.parametrize("case", QUIET, ids=lambda c: c.rule)
def test_engine_rule_is_quiet_on_the_correct_launch(case: Case, tmp_path) -> None:
    assert rule_severities(case, tmp_path) == []


def test_good_vllm_and_trtllm_commands_have_no_findings() -> None:
    assert doctor(vllm()).findings == ()
    assert doctor(trtllm(), llm_api_options=trtllm_options()).findings == ()


def test_vllm_num_spec_tokens_fix_names_the_block_size() -> None:
    finding = next(f for f in doctor(vllm(spec={"num_speculative_tokens": 5})).findings
                   if f.rule == "VL-NUM-SPEC-TOKENS")
    assert '"num_speculative_tokens": 7' in finding.fix and "garbled" in finding.what


def test_trtllm_options_are_read_from_the_file_the_command_names(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "opts.yaml").write_text(json.dumps(trtllm_options({"max_draft_len": 6})), encoding="utf-8")
    rules = doctor(trtllm()).rule_ids()
    assert "TR-MAX-DRAFT-LEN" in rules and "TR-NO-SPEC-CONFIG" not in rules


def test_dcp_fix_suggests_a_divisor_of_tp() -> None:
    finding = next(f for f in doctor(sglang(set_={"--dcp-size": "3"})).findings if f.rule == "PAR-DCP-DIVIDES-TP")
    assert "e.g. 2" in finding.fix
