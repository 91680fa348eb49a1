"""Total memory of a target and/or draft: weights + KV cache + recurrent state + overheads, itemised.

Overheads are assumptions, stated on every estimate:
- CUDA context, NCCL and cuBLAS workspaces per GPU (calculators use 0.3 GB llmrun, 500 MiB gollama, 650 MB
  gpu_poor, 1.5 GB oniyoon / vrambudget; we take 0.5 GB),
- captured CUDA graphs per GPU (SGLang reserves ~2 MB per captured batch size; kvplan shows 0.25 GiB for an
  8B model; we take 0.5 GB),
- activations of the largest forward: max(prefill chunk, concurrency x verify width) tokens x (4 hidden-wide
  + 2 MLP-wide bf16 buffers) plus fp32 logits of the verified positions.
How the total splits over GPUs is `cluster`'s job; here `gpus` only multiplies the per-GPU overheads.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.plan.errors import PlanError
from dspark.plan.kv import kv_bytes
from dspark.plan.spec import FFN_GATE, ModelSpec
from dspark.plan.weights import QuantPlan, weight_bytes

GB = 1e9
GIB = 2**30


@dataclass(frozen=True)
class Overheads:
    """Memory that is neither weights nor cache (see the module docstring for where the defaults come from)."""

    cuda_context_gb: float = 0.5  # per GPU
    cuda_graphs_gb: float = 0.5  # per GPU
    prefill_chunk: int = 8192  # tokens in the largest prefill forward
    flat_bytes: float | None = None  # one flat figure instead (the seed's calculator used 2.0e9 B)

    def describe(self) -> str:
        if self.flat_bytes is not None:
            return f"flat overhead {self.flat_bytes / GB:g} GB"
        return (f"CUDA context {self.cuda_context_gb:g} GB/GPU, CUDA graphs {self.cuda_graphs_gb:g} GB/GPU, "
                f"activations for max(prefill chunk {self.prefill_chunk}, concurrency x verify width) tokens")


@dataclass(frozen=True)
class VramItem:
    label: str
    kind: str  # "weights", "kv", "state" or "overhead"
    bytes: float
    note: str = ""


@dataclass(frozen=True)
class VramEstimate:
    """An itemised memory total; `assumptions` lists everything the numbers rest on."""

    items: tuple[VramItem, ...]
    gpus: int
    context: int
    concurrency: int
    kv_dtype: str
    assumptions: tuple[str, ...] = ()

    @property
    def total(self) -> float:
        return sum(i.bytes for i in self.items)

    def by_kind(self, kind: str) -> float:
        return sum(i.bytes for i in self.items if i.kind == kind)

    @property
    def per_gpu(self) -> float:
        return self.total / self.gpus


def mlp_width(spec: ModelSpec) -> int:
    """Widest MLP intermediate one token produces (routed experts count top_k times)."""
    widths = [t.shape[0] * (spec.moe_top_k if t.routed else 1) for t in spec.tensors if t.category == FFN_GATE]
    return max(widths, default=4 * spec.hidden)


def activation_bytes(spec: ModelSpec, tokens: int, logit_tokens: int) -> float:
    """Live activations of one forward of `tokens` tokens, plus fp32 logits for `logit_tokens` positions."""
    return tokens * (4 * spec.hidden + 2 * mlp_width(spec)) * 2 + logit_tokens * spec.vocab * 4


def _model_items(spec: ModelSpec, plan: QuantPlan, context: int, concurrency: int, kv_dtype: str,
                 borrowed: bool) -> list[VramItem]:
    w = weight_bytes(spec, plan, include_shared=borrowed)
    items = [VramItem(f"{spec.name} {part}", "weights", size, "stored as " + "/".join(w.types_by_part[part]))
             for part, size in w.by_part.items() if size]
    kv = kv_bytes(spec.kv, kv_dtype, context, concurrency)
    if kv.attention:
        items.append(VramItem(f"{spec.name} KV cache", "kv", kv.attention,
                              f"{kv.per_token:,.0f} B/token x {context:,} tokens x {concurrency} seq, {kv_dtype}"))
    if kv.state:
        items.append(VramItem(f"{spec.name} recurrent state", "state", kv.state,
                              f"{spec.kv.linear_layers} linear-attention layers x {concurrency} seq, fp32"))
    return items


def estimate_vram(target: ModelSpec | None = None, draft: ModelSpec | None = None, *,
                  target_plan: QuantPlan | None = None, draft_plan: QuantPlan | None = None,
                  context: int = 131_072, concurrency: int = 1, kv_dtype: str = "bf16",
                  draft_kv_dtype: str | None = None, gpus: int = 1, overheads: Overheads = Overheads(),
                  borrow_embeddings: bool = True) -> VramEstimate:
    """Memory of `target` and/or `draft` serving `concurrency` sequences of `context` tokens on `gpus` GPUs.

    A draft without its target needs the target's embed_tokens and lm_head; `borrow_embeddings` adds them.
    """
    if target is None and draft is None:
        raise PlanError("nothing to size: give a target, a draft, or both")
    if gpus < 1:
        raise PlanError(f"gpus must be >= 1 (got {gpus})")
    items: list[VramItem] = []
    if target is not None:
        items += _model_items(target, target_plan or QuantPlan(target.default_quant), context, concurrency,
                              kv_dtype, borrowed=False)
    if draft is not None:
        items += _model_items(draft, draft_plan or QuantPlan(draft.default_quant), context, concurrency,
                              draft_kv_dtype or kv_dtype, borrowed=target is None and borrow_embeddings)
    verify_width = (draft.block_size + 1) if draft is not None else 1
    if overheads.flat_bytes is not None:
        items.append(VramItem("flat overhead", "overhead", overheads.flat_bytes, "one constant (the seed's choice)"))
    else:
        main = target or draft
        tokens = max(overheads.prefill_chunk, concurrency * verify_width)
        items += [
            VramItem("CUDA context + workspaces", "overhead", overheads.cuda_context_gb * GB * gpus, f"{gpus} GPU(s)"),
            VramItem("CUDA graphs", "overhead", overheads.cuda_graphs_gb * GB * gpus, f"{gpus} GPU(s)"),
            VramItem("activations", "overhead", activation_bytes(main, tokens, concurrency * verify_width),
                     f"{tokens:,} tokens in the largest forward; verify width {verify_width}"),
        ]
    assumptions = (f"context {context:,} tokens x concurrency {concurrency}, KV {kv_dtype}", overheads.describe())
    return VramEstimate(tuple(items), gpus, context, concurrency, kv_dtype, assumptions)
