"""`dspark launch` writes correct SGLang / vLLM / TensorRT-LLM launches, and every one passes the doctor."""
from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_doctor_support import doctor, write_draft, write_target

from dspark.deploy.cmdline import parse_commands
from dspark.deploy.launch import LaunchError, LaunchRequest, plan_launch


def plan(engine: str, **kw):
    return plan_launch(LaunchRequest(engine=engine, draft=kw.pop("draft", "kimi-k3-dspark"),
                                     target=kw.pop("target", "kimi-k3"), **kw))


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_every_generated_launch_passes_the_doctor_from_its_text(engine: str, nodes: int, tmp_path,
                                                                 monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the TRT-LLM script's here-document must be what the doctor reads
    result = plan(engine, nodes=nodes)
    assert result.report.exit_status == 0
    report = doctor(result.script)  # fresh: facts resolved from the paths in the text, options from the heredoc
    assert report.errors == ()
    assert f"command:{engine}" in report.checked and "draft:preset:kimi-k3-dspark" in report.checked


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
@pytest.mark.parametrize("gpus,context", [(4, 131072), (8, 262144), (1, 32768)])
def test_generated_launch_passes_the_doctor_for_local_checkpoints(engine, gpus, context, tmp_path) -> None:
    draft = write_draft(tmp_path / "draft")
    target = write_target(tmp_path / "target")
    result = plan(engine, draft=str(draft), target=str(target), gpus_per_node=gpus, context=context,
                  config_path=str(tmp_path / "opts.yaml"))
    report = doctor(result.script, draft=str(draft), target_config=str(target), context=context)
    assert report.errors == ()


def test_sglang_seed_command_has_every_flag_the_issue_names() -> None:
    result = plan("sglang", nodes=2)
    [cmd] = parse_commands(result.script)  # one script for every node, told apart by $NODE_RANK
    expected = {"speculative-algorithm": "DSPARK", "speculative-dspark-block-size": "7",
                "speculative-num-draft-tokens": "8", "speculative-draft-attention-backend": "trtllm_mha",
                "tp-size": "16", "dcp-size": "8", "nnodes": "2", "chunked-prefill-size": "8192",
                "max-running-requests": "64", "cuda-graph-max-bs-decode": "64", "context-length": "1048576",
                "speculative-draft-model-path": "RadixArk/Kimi-K3-DSpark", "model-path": "moonshotai/Kimi-K3"}
    assert {k: cmd.get(k) for k in expected} == expected
    assert cmd.switch("trust-remote-code") and cmd.get("dist-init-addr") == "$HEAD_IP:50000"
    assert cmd.get("node-rank") == "$NODE_RANK"
    assert not cmd.has("pp-size")


def test_vllm_command_carries_the_dspark_speculative_config() -> None:
    cmd = parse_commands(plan("vllm", nodes=2).script)[0]
    assert json.loads(cmd.get("speculative-config")) == {
        "method": "dspark", "model": "RadixArk/Kimi-K3-DSpark", "num_speculative_tokens": 7}
    assert (cmd.get("tensor-parallel-size"), cmd.get("decode-context-parallel-size")) == ("16", "8")
    assert cmd.switch("enable-chunked-prefill") and cmd.get("distributed-executor-backend") == "ray"
    assert cmd.positionals == ("moonshotai/Kimi-K3",)


def test_trtllm_script_writes_the_dspark_decoding_config_it_serves() -> None:
    result = plan("trtllm", nodes=2, sps_table="/tables/k3.json")
    spec = result.llm_api_options["speculative_config"]
    assert spec == {"decoding_type": "DSpark", "speculative_model": "RadixArk/Kimi-K3-DSpark", "max_draft_len": 7,
                    "block_size": 7, "mask_token_id": 163824, "target_layer_ids": [7, 23, 51, 67, 83],
                    "markov_rank": 256, "markov_head_type": "vanilla", "attention_backend": "TRTLLM",
                    "enable_confidence_scheduling": True, "confidence_cost_table_path": "/tables/k3.json"}
    assert yaml.safe_load(result.yaml_text) == result.llm_api_options
    cmd = parse_commands(result.script)[0]
    assert cmd.get("extra-llm-api-options") == "dspark_trtllm.yaml" and cmd.get("tp-size") == "16"
    assert "trtllm-llmapi-launch" in cmd.argv and result.report.findings == ()


def test_sps_table_switches_sglang_to_compact_ragged_verify() -> None:
    result = plan("sglang", sps_table="/tables/k3.json")
    cmd = parse_commands(result.script)[0]
    assert cmd.env == {"SGLANG_RAGGED_VERIFY_MODE": "compact"}
    assert cmd.get("speculative-dspark-sps-table-path") == "/tables/k3.json"
    assert "SG-DSPARK-NO-SPS-TABLE" not in result.report.rule_ids()


def test_dflash_aligned_draft_gets_the_dflash_method(tmp_path) -> None:
    draft = write_draft(tmp_path / "dflash", dspark_mode="dflash", block_size=16, markov_rank=0,
                        enable_confidence_head=False, confidence_head_with_markov=False)  # a plain DFlash draft
    sg = parse_commands(plan("sglang", draft=str(draft)).script)[0]
    assert (sg.get("speculative-algorithm"), sg.get("speculative-dflash-block-size")) == ("DFLASH", "16")
    assert sg.get("speculative-draft-attention-backend") == "flashinfer" and not sg.has("dcp-size")
    vl = parse_commands(plan("vllm", draft=str(draft)).script)[0]
    assert json.loads(vl.get("speculative-config"))["num_speculative_tokens"] == 15
    with pytest.raises(LaunchError, match="DFlash-aligned"):
        plan("trtllm", draft=str(draft))


def test_context_beyond_the_draft_range_is_refused_with_the_doctor_finding(tmp_path) -> None:
    draft = write_draft(tmp_path / "short", max_position_embeddings=65536, rope_parameters=None)
    with pytest.raises(LaunchError, match="CK-CONTEXT-RANGE"):
        plan("sglang", draft=str(draft), context=131072)
    assert plan("sglang", draft=str(draft)).layout.context == 65536  # default: the smaller range


@pytest.mark.parametrize("kw,message", [
    ({"nodes": 0}, "--nodes must be at least 1"),
    ({"dcp_size": 3}, "must divide the TP size 8"),
    ({"engine": "tgi"}, "unknown engine"),
    ({"draft": "no-such-draft"}, "neither a preset"),
])
def test_bad_requests_get_one_clear_error(kw, message) -> None:
    engine = kw.pop("engine", "sglang")
    with pytest.raises(LaunchError if "preset" not in message else ValueError, match=message):
        plan(engine, **kw)


def test_parallel_layout_defaults() -> None:
    assert (plan("sglang", gpus_per_node=1).layout.dcp, plan("sglang").layout.dcp) == (1, 8)
    assert plan("trtllm").layout.dcp == 1
    big = plan("sglang", max_running_requests=2048)
    assert big.layout.chunk == 16384 and big.report.exit_status == 0  # fits 2048 x 8 verify tokens


@settings(max_examples=60, deadline=None)
@given(engine=st.sampled_from(["sglang", "vllm", "trtllm"]), nodes=st.integers(1, 4),
       gpus=st.sampled_from([1, 2, 4, 8]), running=st.integers(1, 1024),
       context=st.one_of(st.none(), st.integers(1024, 1_048_576)), sps=st.booleans())
def test_any_valid_request_plans_a_launch_the_doctor_accepts(engine, nodes, gpus, running, context, sps) -> None:
    result = plan(engine, nodes=nodes, gpus_per_node=gpus, max_running_requests=running, context=context,
                  sps_table="/t/sps.json" if sps else None)
    assert result.report.errors == ()
    assert result.layout.tp == nodes * gpus and result.layout.tp % result.layout.dcp == 0
    assert result.layout.chunk >= running * 8  # a full verify batch fits the prefill / step budget


def test_presets_come_from_the_project_config_and_need_a_path_without_a_public_repo() -> None:
    with pytest.raises(LaunchError, match="pass --draft-path"):
        plan("vllm", draft="qwen3-8b-dspark", target="qwen3-8b", gpus_per_node=1)
    result = plan("vllm", draft="qwen3-8b-dspark", target="qwen3-8b", gpus_per_node=1, draft_path="/ckpt/q3-dspark")
    cmd = parse_commands(result.script)[0]
    assert cmd.positionals == ("Qwen/Qwen3-8B",) and not cmd.has("trust-remote-code")
    assert json.loads(cmd.get("speculative-config"))["model"] == "/ckpt/q3-dspark"
    assert result.layout.context == 40960 and result.report.errors == ()
