"""`dspark launch`: a correct SGLang / vLLM / TensorRT-LLM launch for a draft, a target, GPUs and nodes.

`plan_launch(LaunchRequest)` resolves the draft and target (preset names or checkpoint folders), lays
out parallelism (TP = GPUs per node x nodes; no pipeline parallelism, which no engine combines with
speculation; DCP inside a node for DSpark drafts, as in the seed's TP8 + DCP8), picks the context
(the smaller of the target's and the draft's RoPE range unless given), writes the commands with
`launch_commands`, and runs the doctor on the result: a plan with any error-severity finding is refused,
so every printed command passes `dspark doctor`.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.deploy.checkpoint_facts import DFLASH, DraftFacts, TargetFacts
from dspark.deploy.doctor import DoctorRequest, diagnose
from dspark.deploy.engine_flags import ENGINES
from dspark.deploy.findings import DoctorReport
from dspark.deploy.launch_commands import (
    DEFAULT_CHUNK,
    DEFAULT_PORTS,
    LaunchLayout,
    ray_lines,
    render,
    sglang_groups,
    trtllm_groups,
    trtllm_options,
    trtllm_yaml,
    vllm_groups,
)
from dspark.deploy.resolve import resolve_draft, resolve_target



class LaunchError(ValueError):
    """A launch request that cannot produce a correct command."""


@dataclass(frozen=True)
class LaunchRequest:
    """What the user asked `dspark launch` for. `draft` / `target`: preset name or checkpoint path."""

    engine: str
    draft: str
    target: str
    gpus_per_node: int = 8
    nodes: int = 1
    context: int | None = None
    max_running_requests: int = 64
    chunked_prefill_size: int | None = None
    dcp_size: int | None = None
    draft_path: str | None = None  # path/repo the command loads, if not the resolved one
    target_path: str | None = None
    sps_table: str | None = None
    host: str = "0.0.0.0"
    port: int | None = None
    head_addr: str = "$HEAD_IP"
    config_path: str = "dspark_trtllm.yaml"


@dataclass(frozen=True)
class LaunchPlan:
    """The script to run (TensorRT-LLM: it writes its options YAML with a here-document) and its doctor report."""

    engine: str
    script: str
    layout: LaunchLayout
    report: DoctorReport
    llm_api_options: dict | None = None
    yaml_text: str | None = None
    config_path: str | None = None


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise LaunchError(f"{name} must be at least 1, got {value}")


def _check_request(req: LaunchRequest) -> None:
    if req.engine not in ENGINES:
        raise LaunchError(f"unknown engine {req.engine!r}; choose one of: {', '.join(ENGINES)}")
    for name, value in (("--gpus-per-node", req.gpus_per_node), ("--nodes", req.nodes),
                        ("--max-running-requests", req.max_running_requests), ("--context", req.context),
                        ("--chunked-prefill-size", req.chunked_prefill_size), ("--dcp-size", req.dcp_size)):
        _positive(name, value)


def _context(req: LaunchRequest, draft: DraftFacts, target: TargetFacts) -> int:
    if req.context is not None:
        return req.context
    limits = [x for x in (target.max_position_embeddings, draft.position_range) if x]
    if not limits:
        raise LaunchError("neither the target nor the draft config states a context length; pass --context")
    return min(limits)


def _dcp(req: LaunchRequest, tp: int, dflash: bool) -> int:
    if req.dcp_size is not None:
        if tp % req.dcp_size:
            raise LaunchError(f"--dcp-size {req.dcp_size} must divide the TP size {tp} (= GPUs per node x nodes)")
        if req.engine == "trtllm" and req.dcp_size > 1:
            raise LaunchError("trtllm-serve has no decode-context-parallel flag; drop --dcp-size for TensorRT-LLM")
        return req.dcp_size
    if req.engine == "trtllm" or dflash or req.gpus_per_node < 2:
        return 1
    return req.gpus_per_node if tp % req.gpus_per_node == 0 else 1


def _layout(req: LaunchRequest) -> tuple[LaunchLayout, TargetFacts]:
    draft_r, target_r = resolve_draft(req.draft, req.draft_path), resolve_target(req.target, req.target_path)
    draft, target = draft_r.facts, target_r.facts
    assert isinstance(draft, DraftFacts) and isinstance(target, TargetFacts)
    for role, found, flag in (("draft", draft_r, "--draft-path"), ("target", target_r, "--target-path")):
        if not found.path:
            raise LaunchError(f"{role} preset {found.preset!r} has no published checkpoint to load; "
                              f"pass {flag} with its folder or repo id")
    if not draft.block_size:
        raise LaunchError(f"the draft config ({draft.source}) has no block_size; re-export it with `dspark export`")
    dflash = draft.anchor_layout == DFLASH
    if dflash and req.engine == "trtllm":
        raise LaunchError("this draft is DFlash-aligned (dspark_mode: dflash); dspark launch writes TensorRT-LLM "
                          "configs for DSpark drafts only: serve it with --engine sglang or --engine vllm")
    tp = req.gpus_per_node * req.nodes
    width = draft.block_size + (0 if dflash else 1)
    chunk = req.chunked_prefill_size or max(DEFAULT_CHUNK, -(-req.max_running_requests * width // 256) * 256)
    layout = LaunchLayout(
        target_path=target_r.path, draft_path=draft_r.path, draft=draft,
        trust_remote_code=target_r.trust_remote_code, gpus_per_node=req.gpus_per_node, nodes=req.nodes,
        tp=tp, dcp=_dcp(req, tp, dflash), context=_context(req, draft, target),
        max_running=req.max_running_requests, chunk=chunk, sps_table=req.sps_table, host=req.host,
        port=req.port or DEFAULT_PORTS[req.engine], head_addr=req.head_addr,
    )
    return layout, target


def _title(req: LaunchRequest, lay: LaunchLayout) -> str:
    engine = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}[req.engine]
    kind = "DFlash-aligned" if lay.dflash else "DSpark"
    parallel = f"TP {lay.tp}" + (f", DCP {lay.dcp}" if lay.dcp > 1 else "")
    return (f"# dspark launch: {engine}, {kind} draft {lay.draft_path} (block {lay.draft.block_size}) on "
            f"{lay.target_path}\n# {lay.nodes} node(s) x {lay.gpus_per_node} GPUs ({parallel}), context "
            f"{lay.context:,}, up to {lay.max_running} running requests")


def _script(req: LaunchRequest, lay: LaunchLayout) -> tuple[str, dict | None, str | None]:
    parts = [_title(req, lay)]
    if lay.nodes > 1 and req.engine != "trtllm":
        parts.append(f"# multi-node: run this same script on every node with NODE_RANK=0..{lay.nodes - 1} and "
                     "HEAD_IP=<node 0's address> exported")
    if req.engine == "sglang":
        groups, env = sglang_groups(lay)
        parts.append(render(groups, env))
        return "\n".join(parts) + "\n", None, None
    if req.engine == "vllm":
        parts += ray_lines(lay) if lay.nodes > 1 else []
        parts.append(render(vllm_groups(lay)))
        return "\n".join(parts) + "\n", None, None
    options = trtllm_options(lay)
    text = trtllm_yaml(options)
    parts.append(f"cat > {req.config_path} <<'EOF'\n{text}EOF")
    parts.append(render(trtllm_groups(lay, req.config_path)))
    return "\n".join(parts) + "\n", options, text


def plan_launch(req: LaunchRequest) -> LaunchPlan:
    """Build the launch and prove it with the doctor; raise LaunchError if it would not pass."""
    _check_request(req)
    layout, target = _layout(req)
    script, options, yaml_text = _script(req, layout)
    report = diagnose(DoctorRequest(command_text=script, draft_facts=layout.draft, target_facts=target,
                                    context=layout.context, llm_api_options=options))
    if report.errors:
        details = "; ".join(f"[{f.rule}] {f.what} (fix: {f.fix})" for f in report.errors)
        raise LaunchError(f"this launch would not pass `dspark doctor`: {details}")
    return LaunchPlan(engine=req.engine, script=script, layout=layout, report=report, llm_api_options=options,
                      yaml_text=yaml_text, config_path=req.config_path if options else None)
