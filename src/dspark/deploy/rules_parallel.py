"""Doctor rules about parallel layout that hold across engines: decode context parallelism (DCP),
its communication backend, and pipeline parallelism under speculation.

Cited: SGLang `python/sglang/srt/server_args.py` (DCP flags and side effects, `check_server_args`),
`python/sglang/srt/arg_groups/speculative_hook.py`; vLLM `vllm/config/parallel.py` and
`docs/features/speculative_decoding/README.md`.
"""
from __future__ import annotations

from dspark.deploy.doctor_context import DoctorContext
from dspark.deploy.engine_flags import SGLANG_DCP_A2A_BACKENDS, VLLM_DCP_A2A_BACKENDS
from dspark.deploy.findings import ERROR, INFO, Finding, Rule

DCP_DIVIDES = Rule(
    "PAR-DCP-DIVIDES-TP", ERROR, "--dcp-size does not divide the TP size",
    "DCP shards the decode KV cache over TP ranks and adds no processes: vLLM vllm/config/parallel.py requires "
    "tp % dcp == 0 (without PCP); SGLang's --dcp-size (server_args.py) likewise reuses the TP group.")
DCP_A2A = Rule(
    "PAR-DCP-A2A-WITHOUT-DCP", ERROR, "all-to-all DCP backend with DCP 1",
    "SGLang server_args.py: --dcp-comm-backend a2a / fi_a2a require dcp > 1; vLLM vllm/config/parallel.py: "
    "dcp_comm_backend a2a requires dcp > 1 (startup error).")
DCP_PREFILL = Rule(
    "PAR-DCP-PREFILL-GRAPHS", INFO, "DCP disables prefill CUDA graphs",
    "SGLang server_args.py: dcp > 1 disables prefill CUDA graphs (tc_piecewise and breakable) and post-capture "
    "KV sizing; decode graphs are unaffected.")
PP_SPEC = Rule(
    "PAR-PP-WITH-SPEC", ERROR, "pipeline parallelism with speculative decoding",
    "SGLang speculative_hook.py `_handle_dspark` / `_handle_dflash`: 'only supports pp_size == 1', and "
    "check_server_args asserts PP is 'not compatible with … speculative decoding'; vLLM "
    "docs/features/speculative_decoding/README.md: PP 'is not composible with speculative decoding'.")

RULES = (DCP_DIVIDES, DCP_A2A, DCP_PREFILL, PP_SPEC)


def check(ctx: DoctorContext) -> list[Finding]:
    """Parallel-layout rules for SGLang, vLLM and TensorRT-LLM launches."""
    view, cmd = ctx.view, ctx.command
    if view is None:
        return []
    out: list[Finding] = []
    if view.dcp > 1 and view.tp % view.dcp:
        good = [d for d in range(view.dcp, 0, -1) if view.tp % d == 0][0]
        out.append(DCP_DIVIDES.fire(
            f"the server refuses to start: TP {view.tp} is not a multiple of DCP {view.dcp}",
            f"use a DCP size that divides {view.tp}, e.g. {good}", f"tp {view.tp}, dcp {view.dcp}"))
    backend = cmd.get("dcp-comm-backend") if cmd else None
    a2a = SGLANG_DCP_A2A_BACKENDS if view.engine == "sglang" else VLLM_DCP_A2A_BACKENDS
    if backend in a2a and view.dcp <= 1:
        out.append(DCP_A2A.fire(
            f"the server refuses to start: --dcp-comm-backend {backend} needs DCP > 1",
            "drop --dcp-comm-backend (default ag_rs) or set a DCP size > 1",
            f"--dcp-comm-backend {backend}, dcp {view.dcp}"))
    if view.engine == "sglang" and view.dcp > 1:
        out.append(DCP_PREFILL.fire(
            "prefill runs without CUDA graphs (expected with DCP; decode graphs stay on)",
            "nothing to do unless prefill latency matters more than long-context decode memory",
            f"--dcp-size {view.dcp}"))
    if ctx.speculative and view.pp > 1:
        out.append(PP_SPEC.fire(
            f"the {view.engine} server refuses to start (or cannot speculate) with PP {view.pp}",
            "span nodes with tensor parallelism instead (TP = GPUs per node x nodes, DCP within a node)",
            f"pipeline parallel size {view.pp} with {view.method}"))
    return out
