"""Doctor rules for TensorRT-LLM launches: `trtllm-serve` plus its LLM-API options YAML with a
`DSparkDecodingConfig` under `speculative_config`.

Cited: the `DSparkDecodingConfig` API reference (nvidia.github.io/TensorRT-LLM/llm-api/reference/
DSparkDecodingConfig.html, stable and 1.4.0rc1/rc4), TensorRT-LLM `tensorrt_llm/_torch/speculative/
dspark.py` (`_lazy_init`: max_draft_len must equal the draft's block size) and `dspark_planner.py`
(a flat cost table degenerates to verify-all), and the `trtllm-serve` CLI reference.
"""
from __future__ import annotations

from dspark.deploy.doctor_context import DoctorContext
from dspark.deploy.engine_flags import TRTLLM_DSPARK_ATTENTION_BACKENDS, TRTLLM_DSPARK_MARKOV_HEADS
from dspark.deploy.findings import ERROR, WARNING, Finding, Rule

API = "TensorRT-LLM DSparkDecodingConfig API reference"
DEFAULT_MAX_NUM_TOKENS = 8192  # trtllm-serve --max_num_tokens default (CLI reference)

OPTIONS = Rule(
    "TR-NO-SPEC-CONFIG", ERROR, "no speculative_config reaches trtllm-serve",
    "trtllm-serve CLI reference: speculative decoding is configured only through the LLM-API options file "
    f"(--extra_llm_api_options / --config) holding speculative_config ({API}: decoding_type DSpark); without it "
    "the target decodes alone.")
DRAFT_LEN = Rule(
    "TR-MAX-DRAFT-LEN", ERROR, "max_draft_len differs from the draft's block size",
    "TensorRT-LLM tensorrt_llm/_torch/speculative/dspark.py `_lazy_init`: max_draft_len must equal the draft's "
    f"block_size ({API}: block_size, max_draft_len).")
FIELDS = Rule(
    "TR-DRAFT-FIELDS", ERROR, "DSparkDecodingConfig fields contradict the draft checkpoint",
    f"{API}: mask_token_id, target_layer_ids, block_size, markov_rank and markov_head_type configure the "
    "engine's DSpark worker (markov_head_type: Literal['vanilla','gated','rnn']); values other than the "
    "checkpoint's feed it the wrong features or mask embedding.")
ATTENTION = Rule(
    "TR-ATTENTION-BACKEND", ERROR, "draft attention backend not valid or slow",
    f"{API}: attention_backend is Literal['VANILLA','TRTLLM'] (stable; default VANILLA) and adds 'AUTO', "
    "'CUTEDSL' in 1.4.0rc1; VANILLA is the unfused reference path.")
CONFIDENCE = Rule(
    "TR-NO-COST-TABLE", WARNING, "no confidence scheduling cost table: verify-all",
    f"{API} 1.4.0rc4: enable_confidence_scheduling (default False) with confidence_cost_table_path; "
    "tensorrt_llm/_torch/speculative/dspark_planner.py: a flat cost model 'degenerates to verify-all'.")
CHUNKED = Rule(
    "TR-CHUNKED-PREFILL", ERROR, "chunked prefill off with prompts longer than max_num_tokens",
    "TensorRT-LLM TorchLlmArgs API reference: enable_chunked_prefill (default False); without it a prompt must "
    f"fit one step of max_num_tokens (trtllm-serve CLI reference: default {DEFAULT_MAX_NUM_TOKENS}), so longer "
    "prompts are rejected.")
GRAPHS = Rule(
    "TR-CUDA-GRAPH", WARNING, "CUDA graphs off or smaller than the batch",
    "TensorRT-LLM TorchLlmArgs API reference: cuda_graph_config (CudaGraphConfig: max_batch_size, "
    "enable_padding); null runs the PyTorch backend eagerly; batches above its max_batch_size are not graphed.")

RULES = (OPTIONS, DRAFT_LEN, FIELDS, ATTENTION, CONFIDENCE, CHUNKED, GRAPHS)


def _spec(ctx: DoctorContext) -> tuple[dict, list[Finding]]:
    options = ctx.llm_api_options
    if ctx.llm_api_options_error:
        return {}, [OPTIONS.fire("speculative decoding is off", "fix or regenerate the YAML (`dspark launch "
                                 "--engine trtllm`)", ctx.llm_api_options_error)]
    if options is None:
        return {}, [OPTIONS.fire("speculative decoding is off: the target decodes alone",
                                 "pass the YAML from `dspark launch --engine trtllm` with --extra_llm_api_options "
                                 "(and to the doctor with --llm-api-options)", "no LLM-API options file")]
    spec = options.get("speculative_config")
    if not isinstance(spec, dict):
        return {}, [OPTIONS.fire("speculative decoding is off: the target decodes alone",
                                 "add a speculative_config block with decoding_type: DSpark",
                                 "no speculative_config in the options")]
    return spec, []


def _draft_fields(ctx: DoctorContext, spec: dict) -> list[Finding]:
    out: list[Finding] = []
    block = spec.get("block_size") or (ctx.draft.block_size if ctx.draft else None)
    if spec.get("max_draft_len") is None or (block and spec.get("max_draft_len") != block):
        out.append(DRAFT_LEN.fire("startup fails, or the DSpark block is cut short",
                                  f"set max_draft_len: {block or 'the draft block_size'}",
                                  f"max_draft_len {spec.get('max_draft_len')}, block_size {block}"))
    head = spec.get("markov_head_type")
    if head is not None and head not in TRTLLM_DSPARK_MARKOV_HEADS:
        out.append(FIELDS.fire(f"markov_head_type {head!r} fails validation at startup",
                               f"use one of {', '.join(TRTLLM_DSPARK_MARKOV_HEADS)}", f"markov_head_type: {head}"))
    draft = ctx.draft
    if draft is None:
        return out
    pairs = {"mask_token_id": draft.mask_token_id, "block_size": draft.block_size,
             "target_layer_ids": list(draft.target_layer_ids) if draft.target_layer_ids else None,
             "markov_rank": draft.markov_rank, "markov_head_type": draft.markov_head_type}
    for key, want in pairs.items():
        have = spec.get(key)
        if have is not None and want is not None and (list(have) if isinstance(have, (list, tuple)) else have) != want:
            out.append(FIELDS.fire(f"{key} {have} overrides the checkpoint's {want}: acceptance collapses",
                                   f"set {key}: {want} (or leave it out)", f"{key}: {have} vs draft {want}"))
    return out


def _kernels_and_schedule(ctx: DoctorContext, spec: dict) -> list[Finding]:
    out: list[Finding] = []
    backend = spec.get("attention_backend")
    if backend is not None and backend not in TRTLLM_DSPARK_ATTENTION_BACKENDS:
        out.append(ATTENTION.fire("the options fail validation at startup",
                                  "use attention_backend: TRTLLM", f"attention_backend {backend}"))
    elif backend in (None, "VANILLA"):
        out.append(ATTENTION.fire("the draft runs on the unfused VANILLA attention path (stable default)",
                                  "set attention_backend: TRTLLM", f"attention_backend {backend or '(default)'}",
                                  severity=WARNING))
    table = spec.get("confidence_cost_table_path") or spec.get("confidence_sps_table_path")
    if not spec.get("enable_confidence_scheduling") or not table:
        out.append(CONFIDENCE.fire("every round verifies the full block: no scheduling gain under load",
                                   "profile a cost table (tensorrt_llm dspark_sps_profiler) and set "
                                   "enable_confidence_scheduling: true, confidence_cost_table_path: FILE",
                                   f"enable_confidence_scheduling {spec.get('enable_confidence_scheduling')}, "
                                   f"table {table}"))
    return out


def _runtime(ctx: DoctorContext) -> list[Finding]:
    cmd, options = ctx.command, ctx.llm_api_options or {}
    out: list[Finding] = []
    chunked = options.get("enable_chunked_prefill") is True or cmd.switch("enable-chunked-prefill") is True
    tokens = cmd.get_int("max-num-tokens") or options.get("max_num_tokens") or DEFAULT_MAX_NUM_TOKENS
    context = ctx.context_length
    if not chunked and context and context > tokens:
        out.append(CHUNKED.fire(f"prompts longer than {tokens} tokens cannot be scheduled (context {context:,})",
                                "set enable_chunked_prefill: true in the options YAML",
                                f"enable_chunked_prefill {options.get('enable_chunked_prefill')}, max_num_tokens "
                                f"{tokens}"))
    batch = cmd.get_int("max-batch-size") or options.get("max_batch_size")
    if "cuda_graph_config" in options and options["cuda_graph_config"] is None:
        out.append(GRAPHS.fire("every decode step runs eagerly", "set cuda_graph_config: {enable_padding: true, "
                               "max_batch_size: N}", "cuda_graph_config: null"))
    elif isinstance(options.get("cuda_graph_config"), dict) and batch:
        graph_bs = options["cuda_graph_config"].get("max_batch_size")
        if graph_bs is not None and graph_bs < batch:
            out.append(GRAPHS.fire(f"batches above {graph_bs} requests run eagerly",
                                   f"set cuda_graph_config.max_batch_size: {batch}",
                                   f"cuda_graph_config.max_batch_size {graph_bs} < max_batch_size {batch}"))
    return out


def check(ctx: DoctorContext) -> list[Finding]:
    """TensorRT-LLM rules (command + LLM-API options)."""
    if ctx.engine != "trtllm":
        return []
    spec, found = _spec(ctx)
    if spec:
        found += _draft_fields(ctx, spec) + _kernels_and_schedule(ctx, spec)
    return found + _runtime(ctx)
