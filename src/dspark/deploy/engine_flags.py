"""Flag spellings, aliases and defaults of the SGLang, vLLM and TensorRT-LLM launchers.

One table per engine, used both to write launch commands and to read them back. Names are stored
without leading dashes and with `_` turned into `-` (vLLM and trtllm-serve accept either). Facts come
from the engines' public sources:

- SGLang `python/sglang/srt/server_args.py` (`ServerArgs` fields become `--field-name`, plus declared
  aliases) and `python/sglang/srt/arg_groups/speculative_hook.py` (`_handle_dspark`, `_handle_dflash`).
- vLLM `vllm/engine/arg_utils.py` / `vllm/config/{parallel,scheduler,speculative}.py`.
- TensorRT-LLM `trtllm-serve` CLI reference and the `DSparkDecodingConfig` API page.

It holds no checks and no command building.
"""
from __future__ import annotations

from dataclasses import dataclass

ENGINES = ("sglang", "vllm", "trtllm")


@dataclass(frozen=True)
class EngineFlags:
    """How one engine's launcher spells its options."""

    engine: str
    aliases: dict[str, str]  # alias -> canonical name
    booleans: frozenset[str]  # canonical names that take no value
    negations: dict[str, str]  # "--no-x" style name -> canonical name it switches off


def normalize_flag(token: str) -> str:
    """`--Tensor_Parallel_Size` / `-tp` -> `tensor-parallel-size` / `tp` (no dashes in front, `_` -> `-`)."""
    return token.lstrip("-").replace("_", "-").lower()


SGLANG = EngineFlags(
    engine="sglang",
    aliases={
        "model": "model-path",
        "tp": "tp-size", "tensor-parallel-size": "tp-size",
        "dp": "dp-size", "data-parallel-size": "dp-size",
        "pp": "pp-size", "pipeline-parallel-size": "pp-size",
        "ep": "ep-size", "expert-parallel-size": "ep-size",
        "decode-context-parallel-size": "dcp-size", "dcp": "dcp-size",
        "attention-context-parallel-size": "attn-cp-size",
        "speculative-draft-model": "speculative-draft-model-path",
        "speculative-dflash-draft-window-size": "speculative-draft-window-size",
        # deprecated aliases that are still accepted (server_args.py, CUDA graph flags)
        "cuda-graph-max-bs": "cuda-graph-max-bs-decode",
        "cuda-graph-bs": "cuda-graph-bs-decode",
    },
    booleans=frozenset({
        "trust-remote-code", "enable-dp-attention", "enable-dp-lm-head", "enable-mixed-chunk",
        "disable-cuda-graph", "disable-decode-cuda-graph", "disable-prefill-cuda-graph",
        "disable-cuda-graph-padding", "enable-torch-compile", "enable-metrics",
        "enable-metrics-for-all-schedulers", "disable-overlap-schedule", "disable-radix-cache",
        "speculative-dspark-align-verify-tokens-to-graph-tier", "speculative-use-rejection-sampling",
        "enable-multi-layer-eagle", "speculative-adaptive", "speculative-skip-dp-mlp-sync",
        "enable-hierarchical-cache", "enable-cache-report", "enable-deterministic-inference",
        "skip-server-warmup", "enable-prefill-cp", "dcp-replicate-q-proj", "enable-unified-memory",
        "disable-piecewise-cuda-graph", "enforce-piecewise-cuda-graph", "enable-breakable-cuda-graph",
        "enable-profile-cuda-graph", "enable-cudagraph-gc", "debug-cuda-graph", "enable-dynamic-chunking",
        "enable-mfu-metrics", "enable-tp-lm-head-all-to-all", "enable-dp-attention-local-control-broadcast",
        "enable-two-batch-overlap", "enable-eplb", "enable-expert-distribution-metrics",
        "disable-shared-experts-fusion", "enable-nan-detection", "enable-p2p-check",
    }),
    negations={"no-dcp-replicate-q-proj": "dcp-replicate-q-proj"},
)

VLLM = EngineFlags(
    engine="vllm",
    aliases={
        "tp": "tensor-parallel-size",
        "pp": "pipeline-parallel-size",
        "dp": "data-parallel-size",
        "dpl": "data-parallel-size-local",
        "dcp": "decode-context-parallel-size",
        "pcp": "prefill-context-parallel-size",
        "ep": "enable-expert-parallel",
        "o": "compilation-config",
        "sc": "speculative-config",
    },
    booleans=frozenset({
        "trust-remote-code", "enable-chunked-prefill", "enforce-eager", "enable-expert-parallel",
        "enable-prefix-caching", "disable-log-requests", "enable-auto-tool-choice", "headless",
        "async-scheduling", "enable-force-include-usage", "disable-custom-all-reduce", "enable-dbo",
        "disable-log-stats", "enable-eplb", "enable-log-requests",
    }),
    negations={
        "no-enable-chunked-prefill": "enable-chunked-prefill",
        "no-enable-prefix-caching": "enable-prefix-caching",
        "no-async-scheduling": "async-scheduling",
        "no-trust-remote-code": "trust-remote-code",
    },
)

TRTLLM = EngineFlags(
    engine="trtllm",
    aliases={"config": "extra-llm-api-options", "model": "model-path"},
    booleans=frozenset({"trust-remote-code", "enable-chunked-prefill", "disable-gc"}),
    negations={},
)

FLAGS: dict[str, EngineFlags] = {"sglang": SGLANG, "vllm": VLLM, "trtllm": TRTLLM}

# --- SGLang facts ------------------------------------------------------------------------------------
# server_args.py module constant DRAFT_ATTENTION_BACKEND_CHOICES; speculative_hook.py
# `_resolve_dflash_draft_attention_backend` falls back to flashinfer (triton on ROCm) for anything else.
SGLANG_DRAFT_ATTENTION_BACKENDS = ("flashinfer", "fa3", "fa4", "triton", "ascend", "trtllm_mha")
# server_args.py: these target backends disable CUDA graphs.
SGLANG_GRAPHLESS_ATTENTION_BACKENDS = ("torch_native", "flex_attention")
# speculative_hook.py `_handle_*`: "Max running requests is reset to 48 for speculative decoding".
SGLANG_SPEC_DEFAULT_MAX_RUNNING = 48
# sglang.srt.speculative.dspark_components.dspark_config.DEFAULT_DSPARK_GAMMA
SGLANG_DEFAULT_DSPARK_GAMMA = 7
# speculative_hook.py `_handle_dflash`: block size falls back to 16 when the draft config has none.
SGLANG_DEFAULT_DFLASH_BLOCK = 16
# server_args.py `--dcp-comm-backend` choices; a2a / fi_a2a require dcp > 1.
SGLANG_DCP_A2A_BACKENDS = ("a2a", "fi_a2a")
# Ragged-verify mode env var read by `sglang.srt.speculative.ragged_verify.read_ragged_verify_mode`.
SGLANG_RAGGED_VERIFY_ENV = "SGLANG_RAGGED_VERIFY_MODE"

# --- vLLM facts --------------------------------------------------------------------------------------
# vllm/config/scheduler.py: max_num_seqs default 128, max_num_batched_tokens class fallback 2048.
VLLM_DEFAULT_MAX_NUM_SEQS = 128
VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
# vllm/config/speculative.py `dcp_comm_backend` choices; a2a requires dcp > 1 (config/parallel.py).
VLLM_DCP_A2A_BACKENDS = ("a2a",)

# --- TensorRT-LLM facts ------------------------------------------------------------------------------
# DSparkDecodingConfig.attention_backend: stable Literal['VANILLA','TRTLLM'], 1.4.0rc1 adds AUTO, CUTEDSL.
TRTLLM_DSPARK_ATTENTION_BACKENDS = ("AUTO", "VANILLA", "TRTLLM", "CUTEDSL")
TRTLLM_DSPARK_MARKOV_HEADS = ("vanilla", "gated", "rnn")
