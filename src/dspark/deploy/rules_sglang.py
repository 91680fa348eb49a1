"""Doctor rules for SGLang launches: draft attention backend, chunked prefill, running-request cap, CUDA graphs.

Each rule cites the SGLang source that implements the behaviour (`server_args.py` for flag defaults and
the resolution pipeline, `arg_groups/speculative_hook.py` for the per-algorithm handlers). DSPARK /
DFLASH specifics (verify width, block size, SPS table, DP attention) are in `rules_sglang_spec.py`.
"""
from __future__ import annotations

import json

from dspark.deploy.doctor_context import DoctorContext
from dspark.deploy.engine_flags import (
    SGLANG_DRAFT_ATTENTION_BACKENDS,
    SGLANG_GRAPHLESS_ATTENTION_BACKENDS,
    SGLANG_SPEC_DEFAULT_MAX_RUNNING,
)
from dspark.deploy.findings import ERROR, WARNING, Finding, Rule
from dspark.deploy.sglang_geometry import max_running, verify_width

HOOK = "SGLang python/sglang/srt/arg_groups/speculative_hook.py"
ARGS = "SGLang python/sglang/srt/server_args.py"
LONG_PREFILL = 16384  # SGLang --max-prefill-tokens default (server_args.py)

DRAFT_ATTN_MISSING = Rule(
    "SG-DRAFT-ATTN-MISSING", WARNING, "draft attention backend not set",
    f"{HOOK} `_resolve_dflash_draft_attention_backend`: an omitted --speculative-draft-attention-backend makes "
    "the draft use the target's resolved attention backend, or flashinfer (triton on ROCm) when that is None; "
    "nothing but a log line tells you which kernel the draft got.")
DRAFT_ATTN_UNUSABLE = Rule(
    "SG-DRAFT-ATTN-UNUSABLE", ERROR, "draft attention backend unusable for this draft",
    f"{HOOK} `_resolve_dflash_draft_attention_backend`: a value outside {', '.join(SGLANG_DRAFT_ATTENTION_BACKENDS)} "
    "(DRAFT_ATTENTION_BACKEND_CHOICES in server_args.py), or trtllm_mha for a DFLASH draft whose layers are "
    "not all sliding_attention and that is not is_causal, is replaced by flashinfer/triton with only a warning.")
TRTLLM_MHA_TOPK = Rule(
    "SG-TRTLLM-MHA-TOPK", ERROR, "trtllm_mha with topk > 1",
    f"{HOOK} `_handle_eagle_family`: 'trtllm_mha backend only supports topk = 1 for speculative decoding' "
    "(startup ValueError); DSPARK/DFLASH force topk to 1 with a warning.")
CHUNKED_OFF = Rule(
    "SG-CHUNKED-PREFILL-OFF", ERROR, "chunked prefill disabled with long contexts",
    f"{ARGS}: --chunked-prefill-size -1 disables chunking, so each prompt is prefilled in one forward pass, "
    "while `_handle_gpu_memory_settings` reserves activation memory for only max(chunked_prefill_size, 2048) "
    "tokens; a long prompt then runs out of memory or stalls every decode for the whole prefill.")
CHUNK_VERIFY = Rule(
    "SG-CHUNK-BELOW-VERIFY", WARNING, "chunked prefill size too small for the verify width",
    f"{ARGS} `_handle_gpu_memory_settings`: activation memory is reserved for max(chunked_prefill_size, 2048) "
    "tokens, but one verify pass processes running requests x speculative_num_draft_tokens tokens.")
CHUNK_PAGE = Rule(
    "SG-CHUNK-PAGE-ALIGN", ERROR, "chunked prefill size not a multiple of the page size",
    f"{ARGS}: `chunked_prefill_size % page_size == 0` is asserted at startup.")
MIXED_CHUNK = Rule(
    "SG-MIXED-CHUNK-OFF", WARNING, "--enable-mixed-chunk is switched off under speculation",
    f"{HOOK}: every speculative handler sets enable_mixed_chunk = False and logs a warning; check_server_args "
    "in server_args.py asserts it stays off with any speculative algorithm.")
DP_CHUNK = Rule(
    "SG-DP-ATTN-CHUNK-DIVIDED", WARNING, "DP attention divides the chunked prefill size",
    f"{ARGS}: with --enable-dp-attention, chunked_prefill_size //= dp_size ('DP attention is enabled. chunked "
    "prefill size is adjusted from X to Y').")
MAX_RUNNING = Rule(
    "SG-MAX-RUNNING-UNSET", WARNING, "--max-running-requests unset: capped at 48",
    f"{HOOK}: with any speculative algorithm an unset --max-running-requests becomes "
    f"{SGLANG_SPEC_DEFAULT_MAX_RUNNING} ('Max running requests is reset to 48 for speculative decoding').")
CUDA_GRAPH_OFF = Rule(
    "SG-CUDA-GRAPH-OFF", WARNING, "decode CUDA graphs disabled",
    f"{ARGS}: --disable-cuda-graph, --disable-decode-cuda-graph, --cuda-graph-backend-decode disabled, a "
    "cuda-graph-config with decode disabled, or the torch_native / flex_attention backends make every decode "
    "step run eagerly (the log shows `cuda graph: False`).")
CUDA_GRAPH_BS = Rule(
    "SG-CUDA-GRAPH-MAX-BS", WARNING, "CUDA graph max batch below the running-request limit",
    f"{ARGS}: decode graphs are captured only up to --cuda-graph-max-bs(-decode); larger batches run eagerly.")
SPEC_OFF = Rule(
    "SG-SPEC-OFF", ERROR, "draft given without a speculative algorithm",
    f"{ARGS}: the draft is loaded only when --speculative-algorithm is set; without it "
    "--speculative-draft-model-path is ignored and the server decodes one token per step.")

RULES = (DRAFT_ATTN_MISSING, DRAFT_ATTN_UNUSABLE, TRTLLM_MHA_TOPK, CHUNKED_OFF, CHUNK_VERIFY, CHUNK_PAGE,
         MIXED_CHUNK, DP_CHUNK, MAX_RUNNING, CUDA_GRAPH_OFF, CUDA_GRAPH_BS, SPEC_OFF)


def _draft_backend(ctx: DoctorContext) -> list[Finding]:
    cmd, method = ctx.command, ctx.method
    if method not in ("dspark", "dflash"):
        return []
    backend = cmd.get("speculative-draft-attention-backend")
    suggested = "trtllm_mha" if method == "dspark" else "flashinfer"
    if backend is None:
        target = cmd.get("attention-backend") or "the auto-selected target backend"
        return [DRAFT_ATTN_MISSING.fire(
            f"the {method.upper()} draft runs on {target} (or flashinfer/triton), not the kernel you meant; on the "
            "seed's Kimi-K3 DSpark deployment this is the 'forgot trtllm_mha' slowdown",
            f"add --speculative-draft-attention-backend {suggested}",
            "no --speculative-draft-attention-backend")]
    if backend not in SGLANG_DRAFT_ATTENTION_BACKENDS:
        return [DRAFT_ATTN_UNUSABLE.fire(
            f"SGLang replaces draft attention backend {backend!r} by flashinfer (triton on ROCm) and only logs it",
            f"use one of {', '.join(SGLANG_DRAFT_ATTENTION_BACKENDS)}, e.g. {suggested}",
            f"--speculative-draft-attention-backend {backend}")]
    if backend == "trtllm_mha" and method == "dflash":
        draft = ctx.draft
        if draft is None:
            return [DRAFT_ATTN_UNUSABLE.fire(
                "trtllm_mha is kept for DFLASH only if every draft layer is sliding_attention or the draft is "
                "is_causal; without the draft's config this cannot be confirmed",
                "pass --draft so the doctor can check, or use --speculative-draft-attention-backend flashinfer",
                "--speculative-draft-attention-backend trtllm_mha", severity=WARNING)]
        sliding = bool(draft.layer_types) and set(draft.layer_types) == {"sliding_attention"}
        if not (sliding or draft.is_causal):
            return [DRAFT_ATTN_UNUSABLE.fire(
                "SGLang falls back from trtllm_mha to flashinfer for this non-causal, full-attention DFLASH draft",
                "use --speculative-draft-attention-backend flashinfer (or fa3 on Hopper)",
                f"layer_types={list(draft.layer_types or [])}, is_causal={draft.is_causal}")]
    return []


def _topk(ctx: DoctorContext) -> list[Finding]:
    cmd = ctx.command
    topk = cmd.get_int("speculative-eagle-topk")
    if topk is None or topk <= 1:
        return []
    names = ("attention-backend", "decode-attention-backend", "prefill-attention-backend",
             "speculative-draft-attention-backend")
    users = [n for n in names if cmd.get(n) == "trtllm_mha"]
    if not users:
        return []
    if ctx.method in ("dspark", "dflash"):
        return [TRTLLM_MHA_TOPK.fire(
            f"{ctx.method.upper()} overrides --speculative-eagle-topk {topk} to 1 with a warning",
            "drop --speculative-eagle-topk (DSPARK/DFLASH draft a single chain)",
            f"--speculative-eagle-topk {topk} with trtllm_mha", severity=WARNING)]
    return [TRTLLM_MHA_TOPK.fire(
        "the server refuses to start: trtllm_mha supports only topk = 1",
        "set --speculative-eagle-topk 1, or use fa3/flashinfer/triton for tree drafting",
        f"--speculative-eagle-topk {topk} with --{users[0]} trtllm_mha")]


def _chunked_prefill(ctx: DoctorContext) -> list[Finding]:
    cmd = ctx.command
    out: list[Finding] = []
    chunk = cmd.get_int("chunked-prefill-size")
    context = ctx.context_length
    if chunk is not None and chunk <= 0:
        if context is None:
            out.append(CHUNKED_OFF.fire(
                "every prompt is prefilled in one pass; long prompts can run out of memory and stall decoding",
                "pass --context so the doctor can judge, or set --chunked-prefill-size 8192",
                f"--chunked-prefill-size {chunk}", severity=WARNING))
        elif context > LONG_PREFILL:
            out.append(CHUNKED_OFF.fire(
                f"a {context:,}-token prompt ({ctx.context_source}) is prefilled in one forward pass with activation "
                "memory reserved for 2,048 tokens: out-of-memory, or every running request stalls for the prefill",
                "set --chunked-prefill-size 8192 (a multiple of the page size, at least the verify width)",
                f"--chunked-prefill-size {chunk}, context {context:,}"))
        return out
    if chunk is not None and ctx.speculative:
        width, running = verify_width(cmd, ctx.draft), max_running(cmd, ctx.speculative)
        if width and chunk < width:
            out.append(CHUNK_VERIFY.fire(
                f"a chunk of {chunk} tokens cannot hold one verify pass of {width} tokens",
                f"raise --chunked-prefill-size to at least {max(8192, width)}",
                f"--chunked-prefill-size {chunk}, verify width {width}", severity=ERROR))
        elif width and chunk < running * width:
            out.append(CHUNK_VERIFY.fire(
                f"a full verify batch ({running} requests x {width} tokens = {running * width}) exceeds the "
                f"{max(chunk, 2048)}-token activation reserve: out-of-memory risk at full load",
                f"raise --chunked-prefill-size to {running * width} or more, or lower --max-running-requests",
                f"--chunked-prefill-size {chunk}, {running} x {width}"))
    page = cmd.get_int("page-size")
    if chunk is not None and chunk > 0 and page and page > 1 and chunk % page:
        out.append(CHUNK_PAGE.fire(
            f"startup fails: chunked_prefill_size {chunk} is not a multiple of page_size {page}",
            f"use --chunked-prefill-size {chunk // page * page or page}",
            f"--chunked-prefill-size {chunk} --page-size {page}"))
    return out


def _mixed_chunk_and_dp(ctx: DoctorContext) -> list[Finding]:
    cmd = ctx.command
    out: list[Finding] = []
    if ctx.speculative and cmd.switch("enable-mixed-chunk"):
        out.append(MIXED_CHUNK.fire(
            "--enable-mixed-chunk is silently turned off: prefill chunks no longer share batches with decodes",
            "drop --enable-mixed-chunk (it cannot be combined with speculative decoding)",
            "--enable-mixed-chunk"))
    dp = cmd.get_int("dp-size") or 1
    if cmd.switch("enable-dp-attention") and dp > 1:
        chunk = cmd.get_int("chunked-prefill-size")
        if chunk is None or chunk > 0:
            given = chunk if chunk is not None else 8192
            effective = given // dp
            width = verify_width(cmd, ctx.draft) if ctx.speculative else None
            too_small = bool(width and effective < width)
            label = "" if chunk is not None else " (auto value on 80-160 GB GPUs)"
            out.append(DP_CHUNK.fire(
                f"each DP rank prefills chunks of {effective} tokens, not {given}{label}"
                + (f", smaller than the {width}-token verify width" if too_small else ""),
                f"set --chunked-prefill-size {given * dp} to keep {given} tokens per rank",
                f"--enable-dp-attention --dp-size {dp}", severity=ERROR if too_small else WARNING))
    return out


def _decode_graph_disabled(cmd) -> str | None:
    for flag in ("disable-cuda-graph", "disable-decode-cuda-graph"):
        if cmd.switch(flag):
            return f"--{flag}"
    if (cmd.get("cuda-graph-backend-decode") or "").lower() == "disabled":
        return "--cuda-graph-backend-decode disabled"
    raw = cmd.get("cuda-graph-config")
    if raw:
        try:
            decode = json.loads(raw).get("decode") or {}
        except (ValueError, AttributeError):
            decode = {}
        if isinstance(decode, dict) and str(decode.get("backend", "")).lower() == "disabled":
            return "--cuda-graph-config decode backend disabled"
    for flag in ("attention-backend", "decode-attention-backend"):
        if cmd.get(flag) in SGLANG_GRAPHLESS_ATTENTION_BACKENDS:
            return f"--{flag} {cmd.get(flag)}"
    return None


def _running_and_graphs(ctx: DoctorContext) -> list[Finding]:
    cmd = ctx.command
    out: list[Finding] = []
    if ctx.speculative and cmd.get_int("max-running-requests") is None:
        out.append(MAX_RUNNING.fire(
            f"the server admits at most {SGLANG_SPEC_DEFAULT_MAX_RUNNING} concurrent requests; the rest queue, "
            "capping throughput far below what the GPUs can serve",
            "set --max-running-requests explicitly (e.g. 64-256, sized to your KV cache)",
            "no --max-running-requests"))
    disabled = _decode_graph_disabled(cmd)
    if disabled:
        out.append(CUDA_GRAPH_OFF.fire(
            "every decode and verify step runs eagerly: launch overhead dominates small batches",
            "remove the flag; keep decode CUDA graphs on (use --cuda-graph-max-bs to bound capture memory)",
            disabled))
    graph_bs = cmd.get_int("cuda-graph-max-bs-decode")
    running = max_running(cmd, ctx.speculative)
    if not disabled and graph_bs is not None and running is not None and graph_bs < running:
        out.append(CUDA_GRAPH_BS.fire(
            f"batches of {graph_bs + 1}-{running} running requests decode eagerly (`cuda graph: False`)",
            f"set --cuda-graph-max-bs {running}",
            f"--cuda-graph-max-bs {graph_bs} < max running {running}"))
    if not ctx.speculative and cmd.get("speculative-draft-model-path"):
        out.append(SPEC_OFF.fire(
            "the draft is never loaded; the server decodes one token per step",
            "add --speculative-algorithm DSPARK (or DFLASH for a DFlash-aligned draft)",
            f"--speculative-draft-model-path {cmd.get('speculative-draft-model-path')}"))
    return out


def check(ctx: DoctorContext) -> list[Finding]:
    """All SGLang launch rules in this module."""
    if ctx.engine != "sglang":
        return []
    found: list[Finding] = []
    for part in (_draft_backend, _topk, _chunked_prefill, _mixed_chunk_and_dp, _running_and_graphs):
        found.extend(part(ctx))
    return found

