"""Weight bytes of a model under a quantization plan, itemised by part and by storage type.

A `QuantPlan` names what the user asked for: a float type (BF16), a safetensors quantizer format (FP8, NVFP4,
INT4_W4A16 ...), a GGUF file type (Q4_K_M, a llama.cpp mix) or a single ggml type (Q4_K, pure), plus an
optional override for routed experts (Kimi K3 ships them in MXFP4, the rest in BF16). What stays in higher
precision follows the tools: llama.cpp never quantizes 1-D tensors, conv1d or the router (stored F32);
safetensors quantizers leave embeddings, lm_head, router and norms in BF16. KV cache is in `kv`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dspark.plan.errors import PlanError
from dspark.plan.gguf_mix import FTYPE_BASE, tensor_type
from dspark.plan.quant import QUANT_TYPES, canonical_name
from dspark.plan.spec import (
    EMBED,
    EMBED_LIKE,
    OUTPUT,
    ROUTER,
    SMALL,
    ModelSpec,
    TensorGroup,
)

_KEEP_HF = (EMBED, OUTPUT, ROUTER, EMBED_LIKE, SMALL)  # left in BF16 by safetensors quantizers


@dataclass(frozen=True)
class QuantPlan:
    """How the weights are stored: `weights` for everything quantizable, `experts` for routed experts."""

    weights: str
    experts: str | None = None
    pure: bool = False  # GGUF only: `llama-quantize --pure` (no mix; every matrix at the base type)

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", canonical_name(self.weights))
        if self.experts is not None:
            object.__setattr__(self, "experts", canonical_name(self.experts))
        for name in (self.weights, self.experts):
            if name is not None and name not in QUANT_TYPES and name not in FTYPE_BASE:
                known = sorted(set(QUANT_TYPES) | set(FTYPE_BASE))
                raise PlanError(f"unknown quantization {name!r}; choose one of: {', '.join(known)}")

    @property
    def family(self) -> str:
        if self.weights in ("F32", "F16", "BF16"):
            return "float"
        if self.weights in FTYPE_BASE or QUANT_TYPES[self.weights].family == "gguf":
            return "gguf"
        return "hf"

    @property
    def label(self) -> str:
        return self.weights + (f" + experts {self.experts}" if self.experts else "")


def plan_for(spec: ModelSpec, quant: str | None = None, experts: str | None = None) -> QuantPlan:
    """The plan a user means: `quant` (default: the model's native storage) and an optional expert override.

    Asking for a float or safetensors type on a model whose experts ship in another format keeps the native
    expert format unless `experts` says otherwise (asking Kimi K3 for FP8 gives FP8 trunk + MXFP4 experts).
    """
    weights = quant or spec.default_quant
    if experts is None and spec.default_expert_quant and QuantPlan(weights).family != "gguf":
        experts = spec.default_expert_quant
    return QuantPlan(weights, experts)


def _bits(type_name: str) -> float:
    return QUANT_TYPES[type_name].bits


def group_types(spec: ModelSpec, group: TensorGroup, plan: QuantPlan) -> dict[str, int]:
    """Parameters of `group` stored in each type (a GGUF mix can give different layers different types)."""
    family = plan.family
    if group.routed and plan.experts:
        return {plan.experts if plan.experts in QUANT_TYPES else FTYPE_BASE[plan.experts]: group.params}
    if family == "float":
        kept = "F32" if plan.weights == "F32" else plan.weights
        return {kept: group.params}
    if group.category in (SMALL, ROUTER) or len(group.shape) < 2:
        return {("F32" if family == "gguf" else "BF16"): group.params}
    if family == "hf":
        return {("BF16" if group.category in _KEEP_HF else plan.weights): group.params}
    out: dict[str, int] = {}
    for i in range(group.count):
        name = tensor_type(plan.weights, group.category, i, group.count, group.row_length, n_gqa=spec.n_gqa,
                           n_expert=spec.moe_experts, is_expert_stack=group.experts > 1,
                           tied=spec.tied_embeddings, pure=plan.pure)
        out[name] = out.get(name, 0) + group.params_per_copy
    return out


def group_bytes(spec: ModelSpec, group: TensorGroup, plan: QuantPlan) -> float:
    return sum(params * _bits(name) / 8 for name, params in group_types(spec, group, plan).items())


def part_of(group: TensorGroup) -> str:
    """The line a group is reported under."""
    if group.category in (EMBED, OUTPUT):
        return "embeddings + lm_head"
    if group.routed:
        return "routed experts"
    if group.category.startswith("attn"):
        return "attention"
    if group.category.startswith("ffn"):
        return "MLP / shared experts"
    if group.category == SMALL:
        return "norms and small tensors"
    return "other matrices"


@dataclass(frozen=True)
class WeightBytes:
    """Weight bytes of one model: total, per reported part, per storage type (in parameters)."""

    model: str
    plan: str
    total: float
    by_part: dict[str, float] = field(default_factory=dict)
    types_by_part: dict[str, tuple[str, ...]] = field(default_factory=dict)
    params_by_type: dict[str, int] = field(default_factory=dict)
    routed: float = 0.0
    lm_head: float = 0.0
    shared_included: bool = False

    @property
    def dense(self) -> float:
        return self.total - self.routed

    @property
    def bits_per_weight(self) -> float:
        params = sum(self.params_by_type.values())
        return self.total * 8 / params if params else 0.0


def weight_bytes(spec: ModelSpec, plan: QuantPlan, include_shared: bool = False) -> WeightBytes:
    """Bytes of `spec`'s weights under `plan`; `include_shared` adds a draft's borrowed embed/lm_head."""
    groups = spec.tensors + (spec.shared_tensors if include_shared else ())
    by_part: dict[str, float] = {}
    part_types: dict[str, set[str]] = {}
    by_type: dict[str, int] = {}
    routed = lm_head = 0.0
    for group in groups:
        types = group_types(spec, group, plan)
        size = sum(params * _bits(name) / 8 for name, params in types.items())
        part = "shared from target" if group in spec.shared_tensors else part_of(group)
        by_part[part] = by_part.get(part, 0.0) + size
        part_types.setdefault(part, set()).update(types)
        for name, params in types.items():
            by_type[name] = by_type.get(name, 0) + params
        routed += size if group.routed else 0.0
        lm_head += size if group.category == OUTPUT or (spec.tied_embeddings and group.category == EMBED) else 0.0
    types = {part: tuple(sorted(names)) for part, names in part_types.items()}
    return WeightBytes(spec.name, plan.label, sum(by_part.values()), by_part, types, by_type, routed, lm_head,
                       include_shared)
