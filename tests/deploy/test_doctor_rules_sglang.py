"""Each SGLang doctor rule fires on a launch with the one setting it is about, and stays quiet on the
nearest correct launch (the seed's Kimi-K3 + DSpark command, edited by one flag)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from test_doctor_support import doctor, sglang, write_draft, rule_severities

DSPARK_FLAGS = ("--speculative-dspark-block-size", "--speculative-num-draft-tokens",
                "--speculative-dspark-sps-table-path")


def dflash_cmd(**set_) -> str:
    """The good command switched to DFLASH (flashinfer draft attention, block 7)."""
    flags = {"--speculative-algorithm": "DFLASH", "--speculative-draft-attention-backend": "flashinfer",
             "--speculative-dflash-block-size": "7"}
    flags.update(set_)
    return sglang(set_=flags, drop=DSPARK_FLAGS, env={})


def dflash_draft(tmp, **fields) -> dict:
    return {"draft": str(write_draft(tmp / "dflash-draft", dspark_mode="dflash", **fields))}


@dataclass(frozen=True)
class Case:
    rule: str
    severity: str
    command: Callable[[], str]
    request: Callable[[object], dict] = field(default=lambda tmp: {})


FIRING = [
    Case("SG-DRAFT-ATTN-MISSING", "warning", lambda: sglang(drop=("--speculative-draft-attention-backend",))),
    Case("SG-DRAFT-ATTN-UNUSABLE", "error",
         lambda: sglang(set_={"--speculative-draft-attention-backend": "flashmla"})),
    Case("SG-DRAFT-ATTN-UNUSABLE", "error",
         lambda: dflash_cmd(**{"--speculative-draft-attention-backend": "trtllm_mha"}), lambda tmp: dflash_draft(tmp)),
    Case("SG-TRTLLM-MHA-TOPK", "error",
         lambda: sglang(set_={"--speculative-algorithm": "EAGLE3", "--attention-backend": "trtllm_mha",
                              "--speculative-eagle-topk": "4", "--speculative-num-steps": "3"}, drop=DSPARK_FLAGS)),
    Case("SG-TRTLLM-MHA-TOPK", "warning", lambda: sglang(set_={"--speculative-eagle-topk": "4"})),
    Case("SG-CHUNKED-PREFILL-OFF", "error", lambda: sglang(set_={"--chunked-prefill-size": "-1"})),
    Case("SG-CHUNKED-PREFILL-OFF", "warning",
         lambda: sglang(set_={"--chunked-prefill-size": "-1", "--model-path": "/models/unknown"},
                        drop=("--context-length",))),
    Case("SG-CHUNK-BELOW-VERIFY", "warning", lambda: sglang(set_={"--chunked-prefill-size": "256"})),
    Case("SG-CHUNK-BELOW-VERIFY", "error", lambda: sglang(set_={"--chunked-prefill-size": "4"})),
    Case("SG-CHUNK-PAGE-ALIGN", "error", lambda: sglang(set_={"--page-size": "64", "--chunked-prefill-size": "8200"})),
    Case("SG-MIXED-CHUNK-OFF", "warning", lambda: sglang(set_={"--enable-mixed-chunk": None})),
    Case("SG-DP-ATTN-CHUNK-DIVIDED", "warning",
         lambda: sglang(set_={"--enable-dp-attention": None, "--dp-size": "8", "--enable-dp-lm-head": None})),
    Case("SG-DP-ATTN-CHUNK-DIVIDED", "error",
         lambda: sglang(set_={"--enable-dp-attention": None, "--dp-size": "8", "--enable-dp-lm-head": None,
                              "--chunked-prefill-size": "32"})),
    Case("SG-MAX-RUNNING-UNSET", "warning", lambda: sglang(drop=("--max-running-requests", "--cuda-graph-max-bs"))),
    Case("SG-CUDA-GRAPH-OFF", "warning", lambda: sglang(set_={"--disable-cuda-graph": None})),
    Case("SG-CUDA-GRAPH-OFF", "warning", lambda: sglang(set_={"--attention-backend": "torch_native"})),
    Case("SG-CUDA-GRAPH-OFF", "warning",
         lambda: sglang(set_={"--cuda-graph-config": '{"decode": {"backend": "disabled"}}'})),
    Case("SG-CUDA-GRAPH-MAX-BS", "warning", lambda: sglang(set_={"--cuda-graph-max-bs": "32"})),
    Case("SG-SPEC-OFF", "error", lambda: sglang(drop=("--speculative-algorithm",))),
    Case("SG-DSPARK-NUM-DRAFT-TOKENS", "error", lambda: sglang(set_={"--speculative-num-draft-tokens": "7"})),
    Case("SG-DSPARK-BLOCK-SIZE", "error",
         lambda: sglang(set_={"--speculative-dspark-block-size": "9", "--speculative-num-draft-tokens": "10"})),
    Case("SG-DSPARK-NO-SPS-TABLE", "warning", lambda: sglang(drop=("--speculative-dspark-sps-table-path",))),
    Case("SG-DSPARK-SPS-TABLE-NOOP", "warning", lambda: sglang(env={"SGLANG_RAGGED_VERIFY_MODE": "static"})),
    Case("SG-DSPARK-GRAPH-TIER-NOOP", "warning",
         lambda: sglang(set_={"--speculative-dspark-align-verify-tokens-to-graph-tier": None}, env={})),
    Case("SG-DSPARK-DP-ATTENTION", "error", lambda: sglang(set_={"--enable-dp-attention": None, "--dp-size": "8"})),
    Case("SG-DFLASH-DP-ATTENTION", "error", lambda: dflash_cmd(**{"--enable-dp-attention": None}),
         lambda tmp: dflash_draft(tmp)),
    Case("SG-DFLASH-BLOCK-SIZE", "error",
         lambda: dflash_cmd(**{"--speculative-dflash-block-size": "16", "--speculative-num-draft-tokens": "8"}),
         lambda tmp: dflash_draft(tmp)),
]

QUIET = [
    Case("SG-DRAFT-ATTN-MISSING", "", lambda: sglang()),
    Case("SG-DRAFT-ATTN-UNUSABLE", "", lambda: sglang(set_={"--speculative-draft-attention-backend": "fa3"})),
    Case("SG-DRAFT-ATTN-UNUSABLE", "", lambda: dflash_cmd(**{"--speculative-draft-attention-backend": "trtllm_mha"}),
         lambda tmp: dflash_draft(tmp, layer_types=["sliding_attention"] * 5)),
    Case("SG-TRTLLM-MHA-TOPK", "",
         lambda: sglang(set_={"--speculative-algorithm": "EAGLE3", "--attention-backend": "trtllm_mha",
                              "--speculative-eagle-topk": "1", "--speculative-num-steps": "3"}, drop=DSPARK_FLAGS)),
    Case("SG-CHUNKED-PREFILL-OFF", "",
         lambda: sglang(set_={"--chunked-prefill-size": "-1", "--context-length": "8192"})),
    Case("SG-CHUNK-BELOW-VERIFY", "", lambda: sglang(set_={"--chunked-prefill-size": "512"})),
    Case("SG-CHUNK-PAGE-ALIGN", "", lambda: sglang(set_={"--page-size": "64", "--chunked-prefill-size": "8192"})),
    Case("SG-MIXED-CHUNK-OFF", "", lambda: sglang()),
    Case("SG-DP-ATTN-CHUNK-DIVIDED", "", lambda: sglang(set_={"--enable-dp-attention": None, "--dp-size": "1"})),
    Case("SG-MAX-RUNNING-UNSET", "", lambda: sglang()),
    Case("SG-CUDA-GRAPH-OFF", "", lambda: sglang(set_={"--attention-backend": "fa3"})),
    Case("SG-CUDA-GRAPH-MAX-BS", "", lambda: sglang(set_={"--cuda-graph-max-bs": "64"})),
    Case("SG-SPEC-OFF", "", lambda: sglang()),
    Case("SG-DSPARK-NUM-DRAFT-TOKENS", "", lambda: sglang(drop=("--speculative-num-draft-tokens",))),
    Case("SG-DSPARK-BLOCK-SIZE", "", lambda: sglang()),
    Case("SG-DSPARK-NO-SPS-TABLE", "", lambda: sglang()),
    Case("SG-DSPARK-SPS-TABLE-NOOP", "", lambda: sglang(env={"SGLANG_RAGGED_VERIFY_MODE": "cap-accept"})),
    Case("SG-DSPARK-GRAPH-TIER-NOOP", "",
         lambda: sglang(set_={"--speculative-dspark-align-verify-tokens-to-graph-tier": None})),
    Case("SG-DSPARK-DP-ATTENTION", "",
         lambda: sglang(set_={"--enable-dp-attention": None, "--dp-size": "8", "--enable-dp-lm-head": None})),
    Case("SG-DFLASH-DP-ATTENTION", "", lambda: dflash_cmd(), lambda tmp: dflash_draft(tmp)),
    Case("SG-DFLASH-BLOCK-SIZE", "",
         lambda: dflash_cmd(**{"--speculative-num-draft-tokens": "7"}), lambda tmp: dflash_draft(tmp)),
]


@pytest.mark.parametrize("case", FIRING, ids=lambda c: f"{c.rule}-{c.severity}")
def test_sglang_rule_fires_with_its_severity(case: Case, tmp_path) -> None:
    assert case.severity in rule_severities(case, tmp_path)


@pytest.mark.parametrize("case", QUIET, ids=lambda c: c.rule)
def test_sglang_rule_is_quiet_on_the_correct_launch(case: Case, tmp_path) -> None:
    assert rule_severities(case, tmp_path) == []


def test_good_seed_command_has_no_error_or_warning() -> None:
    report = doctor(sglang())
    assert report.exit_status == 0
    assert [f.rule for f in report.findings] == ["PAR-DCP-PREFILL-GRAPHS"]


def test_num_draft_tokens_message_names_the_right_value() -> None:
    finding = next(f for f in doctor(sglang(set_={"--speculative-num-draft-tokens": "7"})).findings
                   if f.rule == "SG-DSPARK-NUM-DRAFT-TOKENS")
    assert "must be 8" in finding.what and "--speculative-num-draft-tokens 8" in finding.fix
    assert "speculative_hook.py" in finding.why


def test_dp_attention_reports_the_divided_chunk_size() -> None:
    report = doctor(sglang(set_={"--enable-dp-attention": None, "--dp-size": "4", "--enable-dp-lm-head": None}))
    finding = next(f for f in report.findings if f.rule == "SG-DP-ATTN-CHUNK-DIVIDED")
    assert "chunks of 2048 tokens, not 8192" in finding.what
    assert "--chunked-prefill-size 32768" in finding.fix
