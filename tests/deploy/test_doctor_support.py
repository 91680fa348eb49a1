"""Shared builders for the doctor / launch tests: known-good launch commands per engine (each then
edited by one flag to make a rule fire), draft config folders in the three layouts, and a `doctor` call.

The good commands are the seed's deployment (Kimi K3 + Kimi-K3-DSpark, TP8 + DCP8, trtllm_mha draft
attention, chunked prefill); the draft / target paths match the presets, so the doctor knows their facts.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from dspark.deploy.doctor import DoctorRequest, diagnose
from dspark.deploy.findings import DoctorReport

TARGET = "moonshotai/Kimi-K3"
DRAFT = "RadixArk/Kimi-K3-DSpark"

SGLANG_GOOD = {
    "--model-path": TARGET, "--trust-remote-code": None, "--tp-size": "8", "--dcp-size": "8",
    "--speculative-algorithm": "DSPARK", "--speculative-draft-model-path": DRAFT,
    "--speculative-dspark-block-size": "7", "--speculative-num-draft-tokens": "8",
    "--speculative-draft-attention-backend": "trtllm_mha", "--speculative-dspark-sps-table-path": "sps.json",
    "--chunked-prefill-size": "8192", "--max-running-requests": "64", "--cuda-graph-max-bs": "64",
    "--context-length": "1048576", "--enable-metrics": None,
}
SGLANG_ENV = {"SGLANG_RAGGED_VERIFY_MODE": "compact"}

VLLM_SPEC = {"method": "dspark", "model": DRAFT, "num_speculative_tokens": 7}
VLLM_GOOD = {
    "--trust-remote-code": None, "--tensor-parallel-size": "8", "--decode-context-parallel-size": "8",
    "--enable-chunked-prefill": None, "--max-num-batched-tokens": "8192", "--max-num-seqs": "64",
    "--max-model-len": "1048576",
}

TRTLLM_OPTIONS = {
    "speculative_config": {
        "decoding_type": "DSpark", "speculative_model": DRAFT, "max_draft_len": 7, "block_size": 7,
        "mask_token_id": 163824, "target_layer_ids": [7, 23, 51, 67, 83], "markov_rank": 256,
        "markov_head_type": "vanilla", "attention_backend": "TRTLLM", "enable_confidence_scheduling": True,
        "confidence_cost_table_path": "cost.json",
    },
    "enable_chunked_prefill": True,
    "cuda_graph_config": {"enable_padding": True, "max_batch_size": 64},
}
TRTLLM_GOOD = {"--backend": "pytorch", "--tp_size": "8", "--max_batch_size": "64", "--max_num_tokens": "8192",
               "--max_seq_len": "1048576", "--extra_llm_api_options": "opts.yaml"}


def _flags(base: dict, set_: dict | None, drop: tuple) -> str:
    flags = {k: v for k, v in base.items() if k not in drop}
    flags.update(set_ or {})
    return " ".join(k if v is None else f"{k} {shlex.quote(str(v))}" for k, v in flags.items())


def sglang(set_: dict | None = None, drop: tuple = (), env: dict | None = None) -> str:
    """The good SGLang command with flags changed (`set_`) or removed (`drop`)."""
    env = SGLANG_ENV if env is None else env
    prefix = " ".join(f"{k}={v}" for k, v in env.items())
    return f"{prefix} python -m sglang.launch_server {_flags(SGLANG_GOOD, set_, drop)}".strip()


def vllm(spec: dict | None = None, set_: dict | None = None, drop: tuple = (), raw_spec: str | None = None) -> str:
    """The good vLLM command; `spec` updates the --speculative-config JSON (None values delete keys)."""
    config = {**VLLM_SPEC, **(spec or {})}
    config = {k: v for k, v in config.items() if v is not None}
    text = raw_spec if raw_spec is not None else json.dumps(config)
    return f"vllm serve {TARGET} --speculative-config {shlex.quote(text)} {_flags(VLLM_GOOD, set_, drop)}"


def trtllm(set_: dict | None = None, drop: tuple = ()) -> str:
    """The good trtllm-serve command (its options come from `trtllm_options`)."""
    return f"trtllm-serve {TARGET} {_flags(TRTLLM_GOOD, set_, drop)}"


def trtllm_options(spec: dict | None = None, **top) -> dict:
    """TRTLLM_OPTIONS with speculative_config keys changed (None deletes) and top-level keys replaced."""
    merged = {**TRTLLM_OPTIONS["speculative_config"], **(spec or {})}
    options = {**TRTLLM_OPTIONS, "speculative_config": {k: v for k, v in merged.items() if v is not None}}
    options.update(top)
    return options


def doctor(command: str | None = None, **request) -> DoctorReport:
    return diagnose(DoctorRequest(command_text=command, **request))


def write_draft(folder: Path, **fields) -> Path:
    """A DeepSpec-layout draft config.json (Kimi-K3-DSpark values) with `fields` overriding; None deletes."""
    config = {
        "architectures": ["Qwen3DSparkModel"], "block_size": 7, "target_layer_ids": [7, 23, 51, 67, 83],
        "mask_token_id": 163824, "markov_rank": 256, "markov_head_type": "vanilla", "enable_confidence_head": True,
        "confidence_head_with_markov": True, "num_hidden_layers": 5, "hidden_size": 7168, "vocab_size": 163840,
        "max_position_embeddings": 1048576,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 16.0,
                            "original_max_position_embeddings": 65536},
    }
    config.update(fields)
    config = {k: v for k, v in config.items() if v is not None}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def write_target(folder: Path, **fields) -> Path:
    """A Kimi-K3-like target config.json with `fields` overriding."""
    config = {"architectures": ["KimiK3ForConditionalGeneration"], "num_hidden_layers": 93, "hidden_size": 7168,
              "vocab_size": 163840, "max_position_embeddings": 1048576}
    config.update(fields)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def rule_severities(case, tmp_path) -> list[str]:
    """Severities of the findings of `case.rule` for a test case with `command()` and `request(tmp_path)`."""
    report = doctor(case.command(), **case.request(tmp_path))
    return [f.severity for f in report.findings if f.rule == case.rule]
