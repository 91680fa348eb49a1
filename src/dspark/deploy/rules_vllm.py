"""Doctor rules for vLLM launches: the --speculative-config JSON, draft tensor parallelism, the number of
speculative tokens for dspark / dflash, batched-token limits, and eager execution.

Behaviour is cited from vLLM `vllm/config/speculative.py` (SpeculativeConfig), `vllm/config/scheduler.py`
(SchedulerConfig checks), `vllm/v1/spec_decode/dspark.py`, and `docs/features/speculative_decoding/`.
"""
from __future__ import annotations

import json

from dspark.deploy.doctor_context import DoctorContext
from dspark.deploy.engine_flags import VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, VLLM_DEFAULT_MAX_NUM_SEQS
from dspark.deploy.findings import ERROR, WARNING, Finding, Rule

SPEC = "vLLM vllm/config/speculative.py"
SCHED = "vLLM vllm/config/scheduler.py"

SPEC_JSON = Rule(
    "VL-SPEC-CONFIG-JSON", ERROR, "--speculative-config is not a JSON object",
    f"{SPEC}: --speculative-config is parsed as JSON into SpeculativeConfig; anything else stops startup.")
TP_IN_SPEC = Rule(
    "VL-TP-IN-SPEC-CONFIG", ERROR, "tensor_parallel_size inside the speculative config",
    f"{SPEC}: passing tensor_parallel_size in the speculative config raises '… not a valid argument … pass "
    "draft_tensor_parallel_size'.")
DRAFT_TP = Rule(
    "VL-DRAFT-TP", ERROR, "draft tensor parallel size is neither 1 nor the target's",
    f"{SPEC}: draft_tensor_parallel_size defaults to the target TP and must be 1 or equal to it.")
NUM_TOKENS = Rule(
    "VL-NUM-SPEC-TOKENS", ERROR, "num_speculative_tokens does not match the draft's block",
    "vLLM vllm/v1/spec_decode/dspark.py requires num_speculative_tokens >= the DSpark block size (fewer "
    "garbles the draft's block layout); a DSpark draft (sample_from_anchor) proposes block_size tokens, a "
    "DFlash draft block_size - 1 (speculators docs/user_guide/algorithms/dspark.md, dflash.md).")
CHUNKED = Rule(
    "VL-BATCHED-TOKENS", ERROR, "batched-token limit below the model length without chunked prefill",
    f"{SCHED}: without chunked prefill, max_num_batched_tokens < max_model_len and max_num_batched_tokens < "
    "max_num_seqs are startup errors (a prompt must fit one step).")
VERIFY_BUDGET = Rule(
    "VL-BATCHED-BELOW-VERIFY", WARNING, "token budget smaller than a full verify batch",
    f"{SCHED}: each step's token budget (max_num_batched_tokens, fallback {VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS}) "
    "includes every request's speculative tokens, so decodes that do not fit wait for the next step.")
EAGER = Rule(
    "VL-EAGER", WARNING, "CUDA graphs off (eager mode)",
    "vLLM --enforce-eager, speculative_config.enforce_eager or compilation_config cudagraph_mode NONE run every "
    "step eagerly; adaptive verification needs full cudagraphs and rejects --enforce-eager "
    "(docs/features/speculative_decoding/adaptive_verification.md).")
RULES = (SPEC_JSON, TP_IN_SPEC, DRAFT_TP, NUM_TOKENS, CHUNKED, VERIFY_BUDGET, EAGER)


def _spec_config(ctx: DoctorContext) -> list[Finding]:
    view = ctx.view
    out: list[Finding] = []
    if view.spec_config_error:
        out.append(SPEC_JSON.fire("vLLM exits at startup", "quote the JSON in single quotes: "
                                  "--speculative-config '{\"method\": \"dspark\", …}'", view.spec_config_error))
        return out
    spec = view.spec_config
    if not spec:
        return out
    if "tensor_parallel_size" in spec:
        out.append(TP_IN_SPEC.fire("vLLM exits at startup", "rename it to draft_tensor_parallel_size (1 or the "
                                   f"target TP {view.tp})", f"tensor_parallel_size={spec['tensor_parallel_size']}"))
    draft_tp = spec.get("draft_tensor_parallel_size")
    if draft_tp is not None and draft_tp not in (1, view.tp):
        out.append(DRAFT_TP.fire("vLLM exits at startup",
                                 f"set draft_tensor_parallel_size to 1 or {view.tp}, or leave it out",
                                 f"draft_tensor_parallel_size={draft_tp}, target TP {view.tp}"))
    return out


def _num_tokens(ctx: DoctorContext) -> list[Finding]:
    view, draft = ctx.view, ctx.draft
    if view.method not in ("dspark", "dflash") or view.spec_config_error:
        return []
    k = view.spec_config.get("num_speculative_tokens")
    block = draft.block_size if draft else None
    want = None if block is None else (block if view.method == "dspark" else block - 1)
    if k is None:
        return [NUM_TOKENS.fire(
            f"vLLM has no n_predict to default to for {view.method} and stops at startup",
            f"add \"num_speculative_tokens\": {want if want is not None else 'the draft block size'}",
            "no num_speculative_tokens")]
    if want is None:
        return []
    if view.method == "dspark" and k < block:
        return [NUM_TOKENS.fire(
            f"the DSpark block of {block} is served with {k} speculative tokens: garbled drafts, acceptance collapses",
            f"set \"num_speculative_tokens\": {block}", f"num_speculative_tokens={k}, draft block_size {block}")]
    if k != want:
        return [NUM_TOKENS.fire(
            f"{k} speculative tokens for a {view.method} draft of block {block}: slots past the trained block are "
            "verified for nothing" if k > want else f"only {k} of the draft's {want} proposals are used",
            f"set \"num_speculative_tokens\": {want}", f"num_speculative_tokens={k}, draft block_size {block}",
            severity=WARNING)]
    return []


def _batched_tokens(ctx: DoctorContext) -> list[Finding]:
    cmd, view = ctx.command, ctx.view
    out: list[Finding] = []
    batched = cmd.get_int("max-num-batched-tokens")
    budget = batched if batched is not None else VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
    seqs = cmd.get_int("max-num-seqs") or VLLM_DEFAULT_MAX_NUM_SEQS
    context = ctx.context_length
    if cmd.switch("enable-chunked-prefill") is False:
        if context is not None and budget < context:
            out.append(CHUNKED.fire(
                f"vLLM refuses to start: max_num_batched_tokens {budget} < max_model_len {context:,} with chunked "
                "prefill off", "drop --no-enable-chunked-prefill (or raise --max-num-batched-tokens to the model "
                "length)", f"--max-num-batched-tokens {budget}, context {context:,}"))
        elif budget < seqs:
            out.append(CHUNKED.fire(f"vLLM refuses to start: max_num_batched_tokens {budget} < max_num_seqs {seqs}",
                                    "raise --max-num-batched-tokens", f"{budget} < {seqs}"))
    k = view.spec_config.get("num_speculative_tokens") if view.spec_config else None
    if isinstance(k, int) and k > 0 and batched is not None:
        width = k + 1
        if batched < width:
            out.append(VERIFY_BUDGET.fire(
                f"a step of {batched} tokens cannot hold one verify of {width} tokens",
                "raise --max-num-batched-tokens to at least 8192", f"{batched} < {width}", severity=ERROR))
        elif batched < seqs * width:
            out.append(VERIFY_BUDGET.fire(
                f"with {seqs} running requests a decode step needs {seqs * width} tokens but the budget is {batched}: "
                "part of the batch waits every step",
                f"raise --max-num-batched-tokens to {seqs * width} or lower --max-num-seqs",
                f"--max-num-batched-tokens {batched}, {seqs} x {width}"))
    return out


def _eager(ctx: DoctorContext) -> list[Finding]:
    cmd, spec = ctx.command, ctx.view.spec_config
    reason = None
    if cmd.switch("enforce-eager"):
        reason = "--enforce-eager"
    elif spec.get("enforce_eager") is True:
        reason = "speculative_config.enforce_eager"
    else:
        raw = cmd.get("compilation-config")
        try:
            mode = json.loads(raw).get("cudagraph_mode") if raw and raw.strip().startswith("{") else None
        except (ValueError, AttributeError):
            mode = None
        if isinstance(mode, str) and mode.upper() == "NONE":
            reason = "compilation_config cudagraph_mode NONE"
    if reason is None:
        return []
    adaptive = spec.get("enable_adaptive_verification") is True
    return [EAGER.fire(
        "vLLM refuses adaptive verification without full cudagraphs" if adaptive
        else "every decode and verify step runs eagerly: launch overhead dominates small batches",
        "remove it; keep CUDA graphs on", reason, severity=ERROR if adaptive else WARNING)]


def check(ctx: DoctorContext) -> list[Finding]:
    """All vLLM launch rules."""
    if ctx.engine != "vllm":
        return []
    found: list[Finding] = []
    for part in (_spec_config, _num_tokens, _batched_tokens, _eager):
        found.extend(part(ctx))
    return found
