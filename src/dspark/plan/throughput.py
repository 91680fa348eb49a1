"""Decode tokens/s per user and in total, with and without the draft, from bandwidth, compute and latency.

One forward costs max(memory time, compute time) + fixed latency:
- memory: bytes each GPU streams (its weight shard, the *distinct* routed experts the step's tokens hit, its
  KV and recurrent state) / (HBM bandwidth x efficiency);
- compute: (2 x active parameters + attention over the context) x tokens / (GPUs x dense peak x efficiency),
  each part at the tensor-core rate of its storage type (BF16 trunk at bf16, MXFP4 experts at fp4 ...);
- latency: per layer, kernel overhead plus collectives whose cost grows with log2(group) and triples when the
  group leaves the NVLink domain; per pipeline hop a fixed cost.
Plain decode runs one such forward per token. DSpark runs a draft forward (γ positions, the target's lm_head)
and a verify forward of γ+1 tokens per sequence, and commits τ tokens per round (τ = accepted + 1).
Routed experts hit by n tokens: E x (1 - (1 - k/E)^n), uniform routing (an upper bound).

The two latency constants are calibrated on one public measurement, vLLM's Kimi K3 blog: GB300, batch 1,
8K in / 1K out, 111 tok/s at TP8 and 118 tok/s at TP16 without speculation. With the default τ the same
model then predicts the blog's DSpark numbers (331 at TP8, 370 at TP16) to within about 15 %; the
bandwidth-only roofline (~900 tok/s) shows single-stream decode is latency-bound, not bandwidth-bound.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import log2

from dspark.plan.errors import PlanError
from dspark.plan.gpus import Gpu
from dspark.plan.kv import kv_bytes
from dspark.plan.layout import Layout, sequences_per_rank, split_weights
from dspark.plan.spec import EMBED, ModelSpec
from dspark.plan.weights import QuantPlan

# Mean acceptance length of vLLM's reference K3 DSpark draft (huggingface.co/Inferact/Kimi-K3-DSpark).
DEFAULT_TAU = 3.85
SEED_TOKS = (118.0, 370.0)  # the seed's ~118 -> ~370 tokens/s (vLLM K3 blog, GB300 TP16, batch 1)


@dataclass(frozen=True)
class DecodeAssumptions:
    """The constants the speed model rests on (printed nowhere else; change them here or per call)."""

    bandwidth_efficiency: float = 0.75  # share of HBM peak that weight streaming reaches
    compute_efficiency: float = 0.40  # share of dense peak that batched decode GEMMs reach
    layer_overhead_us: float = 37.1  # per layer per forward (calibrated, see module docstring)
    collective_us_per_doubling: float = 4.81  # per collective per log2(group) inside an NVLink domain (calibrated)
    collectives_per_layer: int = 2  # all-reduce after attention and after the MLP / dispatch + combine for EP
    internode_factor: float = 3.0  # a collective that leaves the NVLink domain costs this much more
    pp_hop_us: float = 30.0


@dataclass(frozen=True)
class Forward:
    """The three costs of one forward pass, in seconds."""

    memory_s: float
    compute_s: float
    latency_s: float

    @property
    def seconds(self) -> float:
        return max(self.memory_s, self.compute_s) + self.latency_s

    @property
    def bound(self) -> str:
        if self.latency_s >= max(self.memory_s, self.compute_s):
            return "latency"
        return "memory" if self.memory_s >= self.compute_s else "compute"


def distinct_experts(experts: int, top_k: int, tokens: int) -> float:
    """Expected routed experts one MoE layer loads for `tokens` tokens (uniform routing)."""
    if not experts:
        return 0.0
    return experts * (1 - (1 - top_k / experts) ** tokens)


def compute_dtype(type_name: str) -> str:
    """The tensor-core rate a weight type runs at: FP8/INT8 at fp8, MXFP4/NVFP4 at fp4, the rest at bf16."""
    if type_name in ("FP8", "INT8"):
        return "fp8"
    return "fp4" if type_name in ("MXFP4", "NVFP4") else "bf16"


def attention_flops_per_token(spec: ModelSpec, context: int) -> float:
    """Score and value FLOPs one new token spends on `context` cached tokens (MLA in its absorbed form)."""
    kv, heads = spec.kv, spec.attention_heads
    gqa = 4 * heads * kv.k_head_dim * (kv.full_layers * context + kv.window_layers * min(context, kv.window or context))
    return gqa + 4 * heads * kv.mla_latent * kv.mla_layers * context


def _compute_s(spec: ModelSpec, plan: QuantPlan, layout: Layout, tokens: int, context: int,
               a: DecodeAssumptions) -> float:
    gpu = layout.gpu
    embed = sum(t.params for t in spec.tensors if t.category == EMBED)
    routed_active = spec.active_params - (spec.params - spec.routed_params)
    dense_active = spec.active_params - routed_active - embed
    expert_type = plan.experts or plan.weights
    seconds = (2 * dense_active / gpu.peak_tflops(compute_dtype(plan.weights))
               + 2 * routed_active / gpu.peak_tflops(compute_dtype(expert_type))
               + attention_flops_per_token(spec, context) / gpu.peak_tflops("bf16")) * tokens / 1e12
    return seconds / (layout.gpus * a.compute_efficiency)


def _latency(layers: int, layout: Layout, a: DecodeAssumptions) -> float:
    group = layout.tp if layout.attn_dp == 1 else layout.ep
    per_coll = a.collective_us_per_doubling * log2(group) if group > 1 else 0.0
    if layout.tp_crosses_nodes:
        per_coll *= a.internode_factor
    per_layer = a.layer_overhead_us + a.collectives_per_layer * per_coll
    return (layers * per_layer + (layout.pp - 1) * a.pp_hop_us) * 1e-6


def forward(spec: ModelSpec, plan: QuantPlan, layout: Layout, *, concurrency: int, tokens_per_seq: int,
            context: int, kv_dtype: str, a: DecodeAssumptions, extra_read: float = 0.0,
            extra_layers: int = 0) -> Forward:
    """Time of one forward of `tokens_per_seq` new tokens for each of `concurrency` sequences."""
    split = split_weights(spec, plan)
    tokens = concurrency * tokens_per_seq
    hit = distinct_experts(spec.moe_experts, spec.moe_top_k, tokens) / spec.moe_experts if spec.moe_experts else 0.0
    seqs = sequences_per_rank(concurrency, layout)
    kv_split = min(layout.attn_tp, max(spec.kv.kv_heads, 1) * layout.dcp) if spec.kv.full_layers else layout.dcp
    kv_read = seqs * kv_bytes(spec.kv, kv_dtype, context).attention / kv_split
    state_rw = 2 * seqs * spec.kv.linear_layers * spec.kv.linear_state_bytes / layout.attn_tp
    weights = (split.attention - split.embed) / layout.attn_tp + (split.dense + split.routed * hit) / layout.tp
    per_gpu = weights + kv_read + state_rw + extra_read / layout.attn_tp
    memory_s = per_gpu / (layout.gpu.bandwidth_tbs * 1e12 * a.bandwidth_efficiency)
    compute_s = _compute_s(spec, plan, layout, tokens, context, a)
    return Forward(memory_s, compute_s, _latency(spec.layers + extra_layers, layout, a))


@dataclass(frozen=True)
class DecodeEstimate:
    """Per-user speed without the draft (one token per step) and with it (τ tokens per draft + verify round)."""

    layout: str
    concurrency: int
    context: int
    tau: float
    verify_width: int
    ar_step_s: float
    spec_round_s: float
    ar_bound: str
    roofline_tok_s: float  # bandwidth-only bound for one user without the draft

    @property
    def ar_tok_s(self) -> float:
        return 1 / self.ar_step_s

    @property
    def spec_tok_s(self) -> float:
        return self.tau / self.spec_round_s if self.spec_round_s else self.ar_tok_s

    @property
    def speedup(self) -> float:
        return self.spec_tok_s / self.ar_tok_s

    def tau_for(self, tok_s: float) -> float:
        """The acceptance length this round time needs to reach `tok_s` per user."""
        return tok_s * self.spec_round_s

    @property
    def ar_total_tok_s(self) -> float:
        return self.ar_tok_s * self.concurrency

    @property
    def spec_total_tok_s(self) -> float:
        return self.spec_tok_s * self.concurrency


def estimate_decode(target: ModelSpec, target_plan: QuantPlan, layout: Layout, *, draft: ModelSpec | None = None,
                    draft_plan: QuantPlan | None = None, tau: float = DEFAULT_TAU, concurrency: int = 1,
                    context: int = 8192, kv_dtype: str = "fp8",
                    assumptions: DecodeAssumptions = DecodeAssumptions()) -> DecodeEstimate:
    """Per-user decode speed of `target` on `layout`, without and (if `draft`) with speculative decoding."""
    a = assumptions
    ar = forward(target, target_plan, layout, concurrency=concurrency, tokens_per_seq=1, context=context,
                 kv_dtype=kv_dtype, a=a)
    ideal = Layout(layout.gpu, layout.tp, 1, layout.ep, layout.attn_dp, layout.dcp)
    roof = forward(target, target_plan, ideal, concurrency=1, tokens_per_seq=1, context=context, kv_dtype=kv_dtype,
                   a=DecodeAssumptions(bandwidth_efficiency=1.0, compute_efficiency=1.0, layer_overhead_us=0.0,
                                       collective_us_per_doubling=0.0))
    round_s, width = 0.0, 1
    if draft is not None:
        gamma = draft.block_size
        if not 1 <= tau <= gamma + 1:
            raise PlanError(f"tau {tau} must lie in [1, {gamma + 1}] for a draft of block size {gamma} "
                            "(tau = accepted + 1)")
        width = gamma + 1
        lm_head = split_weights(target, target_plan).lm_head
        draft_fwd = forward(draft, draft_plan or QuantPlan(draft.default_quant), layout, concurrency=concurrency,
                            tokens_per_seq=gamma, context=context, kv_dtype=kv_dtype, a=a, extra_read=lm_head,
                            extra_layers=2)
        verify = forward(target, target_plan, layout, concurrency=concurrency, tokens_per_seq=width,
                         context=context, kv_dtype=kv_dtype, a=a)
        round_s = draft_fwd.seconds + verify.seconds
    return DecodeEstimate(layout.name, concurrency, context, tau if draft is not None else 1.0, width, ar.seconds,
                          round_s, ar.bound, 1 / roof.memory_s)


@dataclass(frozen=True)
class SeedDecodeCheck:
    """The model against vLLM's K3 measurements (GB300, batch 1): 111 -> 331 at TP8, 118 -> 370 at TP16."""

    tp: int
    measured_ar: float
    measured_spec: float
    estimate: DecodeEstimate

    @property
    def implied_tau(self) -> float:
        return self.estimate.tau_for(self.measured_spec)


def seed_decode_check(target: ModelSpec, target_plan: QuantPlan, draft: ModelSpec | None,
                      draft_plan: QuantPlan | None, gpu: Gpu, tau: float = DEFAULT_TAU,
                      assumptions: DecodeAssumptions = DecodeAssumptions()) -> list[SeedDecodeCheck]:
    """Estimates for the two published points (8K in / 1K out, fp8 KV, batch 1) on `gpu` (normally GB300)."""
    out = []
    for tp, ar, spec in ((8, 111.0, 331.0), (16, SEED_TOKS[0], SEED_TOKS[1])):
        est = estimate_decode(target, target_plan, Layout(gpu, tp=tp), draft=draft, draft_plan=draft_plan, tau=tau,
                              concurrency=1, context=8192, kv_dtype="fp8", assumptions=assumptions)
        out.append(SeedDecodeCheck(tp, ar, spec, est))
    return out
