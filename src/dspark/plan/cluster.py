"""Search the parallel layouts that fit a target + draft on a GPU type, rank them, and say why.

For each node count up to `max_nodes`, it tries pure TP, TP + DCP (MLA models), TP + EP (TEP), TP x PP
(+ DCP) with TP inside the NVLink domain, and DP attention + EP (DEP). A layout fits when the fullest GPU's
target weights + draft weights + KV + state + overheads stay under `mem_fraction` of its memory. Fitting
layouts the engine refuses for speculative decoding are kept but ranked last; the rest rank by GPUs, nodes,
then estimated per-user decode speed. Memory sharing rules live in `layout`, timing in `throughput`; the
engine command of a layout is written by `dspark.deploy.launch_commands.plan_command`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil

from dspark.plan.errors import PlanError
from dspark.plan.gpus import CATALOGUE, Gpu
from dspark.plan.layout import Layout, kv_per_gpu, split_weights, weights_per_gpu
from dspark.plan.spec import ModelSpec
from dspark.plan.throughput import DEFAULT_TAU, DecodeAssumptions, DecodeEstimate, estimate_decode
from dspark.plan.vram import GB, Overheads, activation_bytes
from dspark.plan.weights import QuantPlan, weight_bytes

ENGINES = ("sglang", "vllm")  # the engines whose rules for speculative decoding the search knows


@dataclass(frozen=True)
class ClusterRequest:
    target: ModelSpec
    target_plan: QuantPlan
    draft: ModelSpec | None = None
    draft_plan: QuantPlan | None = None
    context: int = 131_072
    concurrency: int = 16
    kv_dtype: str = "fp8"
    mem_fraction: float = 0.90
    max_nodes: int = 8
    tau: float = DEFAULT_TAU
    engine: str = "sglang"
    overheads: Overheads = Overheads()
    assumptions: DecodeAssumptions = DecodeAssumptions()

    def __post_init__(self) -> None:
        if not 0 < self.mem_fraction <= 1:
            raise PlanError(f"mem_fraction must be in (0, 1] (got {self.mem_fraction})")
        if self.max_nodes < 1 or self.concurrency < 1 or self.context < 1:
            raise PlanError("max_nodes, concurrency and context must all be >= 1")
        if self.engine not in ENGINES:
            raise PlanError(f"unknown engine {self.engine!r}; choose one of: {', '.join(ENGINES)}")


@dataclass(frozen=True)
class GpuMemory:
    """Bytes on the fullest GPU of a layout."""

    target_weights: float
    draft_weights: float
    kv: float
    state: float
    draft_kv: float
    overhead: float
    usable: float

    @property
    def total(self) -> float:
        return self.target_weights + self.draft_weights + self.kv + self.state + self.draft_kv + self.overhead

    @property
    def fits(self) -> bool:
        return self.total <= self.usable


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    memory: GpuMemory
    decode: DecodeEstimate
    blocked: str = ""
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def usable(self) -> bool:
        return self.memory.fits and not self.blocked


def _memory(req: ClusterRequest, layout: Layout) -> GpuMemory:
    t_split = split_weights(req.target, req.target_plan)
    kv, state = kv_per_gpu(req.target, req.kv_dtype, req.context, req.concurrency, layout)
    d_w = d_kv = 0.0
    width = 1
    if req.draft is not None:
        one_stage = Layout(layout.gpu, layout.tp, 1, layout.ep, layout.attn_dp, layout.dcp)
        d_w = weights_per_gpu(split_weights(req.draft, req.draft_plan or QuantPlan(req.draft.default_quant)),
                              one_stage)
        d_kv = sum(kv_per_gpu(req.draft, req.kv_dtype, req.context, req.concurrency, one_stage))
        width = req.draft.block_size + 1
    o = req.overheads
    tokens = max(o.prefill_chunk, req.concurrency * width)
    overhead = (o.cuda_context_gb + o.cuda_graphs_gb) * GB \
        + activation_bytes(req.target, tokens, req.concurrency * width) / layout.gpus
    return GpuMemory(weights_per_gpu(t_split, layout), d_w, kv, state, d_kv, overhead,
                     layout.gpu.memory_bytes * req.mem_fraction)


def layouts_for(gpu: Gpu, gpus: int, mla: bool, moe: bool) -> list[Layout]:
    """The layouts tried on `gpus` GPUs of one type (EP and DP attention only for MoE, DCP only for MLA)."""
    out = [Layout(gpu, tp=gpus)]
    if moe and gpus > 1:
        out.append(Layout(gpu, tp=gpus, ep=gpus))
    if mla and gpus > 1:
        out.append(Layout(gpu, tp=gpus, dcp=min(gpus, gpu.nvlink_domain)))
    domain = gpu.nvlink_domain
    if gpus > domain and gpus % domain == 0:
        out.append(Layout(gpu, tp=domain, pp=gpus // domain))
        if mla:
            out.append(Layout(gpu, tp=domain, pp=gpus // domain, dcp=domain))
    if moe and gpus > 1:
        out.append(Layout(gpu, tp=gpus, ep=gpus, attn_dp=gpus))
    return out


def engine_caveats(layout: Layout, engine: str, with_draft: bool) -> tuple[str, tuple[str, ...]]:
    """(reason the engine refuses the layout or "", warnings) for speculative serving on `layout`."""
    warnings = []
    if layout.tp_crosses_nodes:
        warnings.append(f"TP{layout.tp} spans {layout.nodes} nodes: every layer's all-reduce crosses the network")
    if with_draft and layout.pp > 1:
        if engine == "sglang":
            return ("SGLang rejects pipeline parallelism with speculative decoding "
                    "(check_server_args); use TP across nodes or vLLM", tuple(warnings))
        warnings.append("vLLM documents PP as not composable with speculative decoding (vllm<=0.15); the public "
                        "16xH200 PP2xTP8 DSpark run used patches")
    if with_draft and layout.dcp > 1 and engine == "vllm":
        warnings.append("vLLM's DSpark path was first scoped to dcp=1; check your version supports DCP with DSpark")
    if with_draft and layout.attn_dp > 1 and engine == "sglang":
        warnings.append("SGLang DSpark with DP attention needs --enable-dp-lm-head and moe_a2a_backend none")
    return "", tuple(warnings)


def _candidate(req: ClusterRequest, layout: Layout) -> Candidate:
    blocked, warnings = engine_caveats(layout, req.engine, req.draft is not None)
    decode = estimate_decode(req.target, req.target_plan, layout, draft=req.draft, draft_plan=req.draft_plan,
                             tau=req.tau, concurrency=req.concurrency, context=req.context, kv_dtype=req.kv_dtype,
                             assumptions=req.assumptions)
    return Candidate(layout, _memory(req, layout), decode, blocked, warnings)


def _rank_key(c: Candidate) -> tuple:
    return (not c.memory.fits, bool(c.blocked), c.layout.gpus, c.layout.nodes, -c.decode.spec_tok_s)


def _valid(spec: ModelSpec, layout: Layout) -> bool:
    """Attention heads must split evenly over attention TP, routed experts over the TP/EP group."""
    heads_ok = not spec.attention_heads or spec.attention_heads % layout.attn_tp == 0
    experts_ok = not spec.moe_experts or spec.moe_experts % layout.tp == 0
    return heads_ok and experts_ok


def gpu_counts(gpu: Gpu, max_nodes: int) -> list[int]:
    """1, 2, 4 GPUs, then whole nodes (or NVL72 trays) up to `max_nodes`."""
    return sorted({1, 2, 4} | {n * gpu.gpus_per_node for n in range(1, max_nodes + 1)})


def search(req: ClusterRequest, gpu: Gpu) -> list[Candidate]:
    """Every valid layout tried on `gpu` up to `max_nodes` nodes, best first."""
    mla, moe = req.target.kv.mla_layers > 0, req.target.moe_experts > 0
    cands = []
    for count in gpu_counts(gpu, req.max_nodes):
        for layout in layouts_for(gpu, count, mla, moe):
            if _valid(req.target, layout):
                cands.append(_candidate(req, layout))
    return sorted(cands, key=_rank_key)


@dataclass(frozen=True)
class GpuChoice:
    """The best layout on one GPU type, and the arithmetic behind the node count."""

    gpu: Gpu
    best: Candidate | None
    weights_total: float  # target + draft weights, whole cluster
    min_gpus_for_weights: int  # before KV and overheads


def compare(req: ClusterRequest, gpus: list[Gpu] | None = None) -> list[GpuChoice]:
    """The best usable layout per GPU type (None when nothing fits within `max_nodes`)."""
    total = weight_bytes(req.target, req.target_plan).total
    if req.draft is not None:
        total += weight_bytes(req.draft, req.draft_plan or QuantPlan(req.draft.default_quant)).total
    out = []
    for gpu in gpus or list(CATALOGUE.values()):
        ranked = search(req, gpu)
        best = next((c for c in ranked if c.usable), None)
        out.append(GpuChoice(gpu, best, total, ceil(total / (gpu.memory_bytes * req.mem_fraction))))
    return out


def why(choice: GpuChoice, req: ClusterRequest) -> str:
    """One sentence: why this GPU type needs this many nodes."""
    g = choice.gpu
    node = g.gpus_per_node * g.memory_gb * req.mem_fraction
    if choice.best is None:
        return (f"{g.key}: no layout fits in {req.max_nodes} node(s) of {g.gpus_per_node}x{g.memory_gb:g} GB "
                f"({choice.weights_total / GB:,.0f} GB of weights alone)")
    c = choice.best
    return (f"{g.key}: weights {choice.weights_total / GB:,.0f} GB vs {node:,.0f} GB usable per "
            f"{g.gpus_per_node}-GPU {'tray' if g.nvlink_domain > g.gpus_per_node else 'node'} "
            f"(at {req.mem_fraction:.0%}) -> weights alone need {choice.min_gpus_for_weights} GPUs; with KV and "
            f"overheads: {c.layout.footprint} GPUs, {c.layout.name}, "
            f"{c.memory.total / GB:,.0f} of {c.memory.usable / GB:,.0f} GB per GPU")


def pick(req: ClusterRequest, gpu: Gpu, gpus: int | None = None) -> Candidate:
    """The best usable layout on `gpu` (with exactly `gpus` GPUs when given)."""
    for cand in search(req, gpu):
        if cand.usable and (gpus is None or cand.layout.gpus == gpus):
            return cand
    size = f"{gpus} x {gpu.key}" if gpus else f"up to {req.max_nodes} node(s) of {gpu.key}"
    raise PlanError(f"nothing fits on {size} for {req.target.name} at context {req.context:,} x concurrency "
                    f"{req.concurrency}; try more GPUs (--gpus / --max-nodes), a bigger GPU, fp8 KV, or a shorter "
                    "context / lower concurrency")
