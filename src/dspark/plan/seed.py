"""Explain the seed's "minimum VRAM by quant" table for the Kimi-K3-DSpark draft, then give realistic numbers.

The seed quotes FP16 39.818, Q8_0 37.529, Q4_K_M 36.385, Q2_K 35.843 "GB". Those four figures follow from
(derivation: research brief on hardware, §2.5):
    total = 1,000,000 tokens x 35,840 B fp16 draft KV  +  2.0e9 B flat overhead  +  params x nominal bits / 8,
printed in GiB but labelled GB, for the draft alone (no target, no embeddings), with naive nominal bits
16 / 8 / 4 / 2 instead of the real GGUF sizes. With the true 2,249,290,081 parameters this lands within 1 %
of each figure; a best fit (2.457e9 "parameters", Q2_K at 2.1 bits) matches all four to 0.001. Either way the
1M-token KV cache is 85-93 % of every figure: the quant hardly matters. The realistic rows use real GGUF sizes,
the borrowed embeddings a standalone draft needs, fp8 KV and the draft colocated with its target.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.plan.kv import kv_bytes
from dspark.plan.spec import ModelSpec
from dspark.plan.vram import GB, GIB, Overheads, estimate_vram
from dspark.plan.weights import QuantPlan, weight_bytes

SEED_FIGURES = {"FP16": 39.818, "Q8_0": 37.529, "Q4_K_M": 36.385, "Q2_K": 35.843}  # the seed's "GB" (really GiB)
SEED_NOMINAL_BITS = {"FP16": 16.0, "Q8_0": 8.0, "Q4_K_M": 4.0, "Q2_K": 2.0}
SEED_CONTEXT = 1_000_000
SEED_OVERHEAD_BYTES = 2.0e9
# Best fit of all four figures (brief §2.5): an effective 2.457e9 parameters and Q2_K at 2.1 bits.
FIT_PARAMS = 2.457e9
FIT_BITS = {"FP16": 16.0, "Q8_0": 8.0, "Q4_K_M": 4.0, "Q2_K": 2.1}
SEED_TO_GGUF = {"FP16": "F16", "Q8_0": "Q8_0", "Q4_K_M": "Q4_K_M", "Q2_K": "Q2_K"}


@dataclass(frozen=True)
class SeedRow:
    """One seed figure rebuilt from its implied assumptions."""

    quant: str
    seed_figure: float
    weights: float
    kv: float
    overhead: float
    fit_gib: float  # the best-fit reconstruction

    @property
    def total_gib(self) -> float:
        return (self.weights + self.kv + self.overhead) / GIB

    @property
    def error_pct(self) -> float:
        return 100 * (self.total_gib - self.seed_figure) / self.seed_figure

    @property
    def kv_share(self) -> float:
        return self.kv / (self.weights + self.kv + self.overhead)


@dataclass(frozen=True)
class RealisticRow:
    """What the same quant really costs (decimal GB)."""

    quant: str
    gguf_weights: float  # real file size of the draft's own tensors
    standalone_1m_fp16: float  # alone on a GPU: + borrowed bf16 embed/lm_head, 1M fp16 KV, real overheads
    colocated_128k_fp8: float  # next to its target: weights + 128K fp8 KV, nothing else
    colocated_per_gpu_tp8: float


@dataclass(frozen=True)
class SeedExplanation:
    rows: tuple[SeedRow, ...]
    realistic: tuple[RealisticRow, ...]
    kv_per_token_fp16: float
    params: int
    findings: tuple[str, ...]


def explain_seed(draft: ModelSpec) -> SeedExplanation:
    """Rebuild the seed's four figures for `draft` (normally kimi-k3-dspark) and set realistic ones beside them."""
    kv = kv_bytes(draft.kv, "fp16", SEED_CONTEXT).total
    rows = tuple(
        SeedRow(q, fig, draft.params * SEED_NOMINAL_BITS[q] / 8, kv, SEED_OVERHEAD_BYTES,
                (kv + SEED_OVERHEAD_BYTES + FIT_PARAMS * FIT_BITS[q] / 8) / GIB)
        for q, fig in SEED_FIGURES.items()
    )
    realistic = []
    for q in SEED_FIGURES:
        plan = QuantPlan(SEED_TO_GGUF[q])
        alone = estimate_vram(draft=draft, draft_plan=plan, context=SEED_CONTEXT, kv_dtype="fp16")
        colocated = estimate_vram(draft=draft, draft_plan=plan, context=131_072, kv_dtype="fp8",
                                  overheads=Overheads(flat_bytes=0.0), borrow_embeddings=False)
        realistic.append(RealisticRow(q, weight_bytes(draft, plan).total / GB, alone.total / GB,
                                      colocated.total / GB, colocated.total / GB / 8))
    fp16, q2 = rows[0], rows[-1]
    findings = (
        f"every figure is {SEED_CONTEXT:,} tokens of fp16 draft KV ({kv / GB:.2f} GB = {kv / GIB:.2f} GiB), a flat "
        f"{SEED_OVERHEAD_BYTES / GB:g} GB overhead and the draft's weights at nominal bits, printed in GiB as 'GB'",
        f"the KV cache is {fp16.kv_share:.0%} of the FP16 figure and {q2.kv_share:.0%} of the Q2_K one; FP16 -> Q2_K "
        f"saves only {(fp16.weights - q2.weights) / GB:.1f} GB, fp8 KV alone saves {kv / 2 / GB:.1f} GB",
        "nominal bits understate real GGUF files (Q8_0 is 8.5 bpw, Q4_K_M and Q2_K are mixes with Q6_K/Q4_K/Q3_K "
        "tensors) and the draft alone omits the target's embed_tokens + lm_head it borrows (4.70 GB in bf16)",
        f"served next to Kimi K3 the draft adds its weights plus {kv / SEED_CONTEXT / 2:,.0f} B/token of fp8 KV: "
        f"{realistic[1].colocated_128k_fp8:.2f} GB at Q8_0 for a 128K context, about "
        f"{realistic[1].colocated_per_gpu_tp8:.2f} GB per GPU on a TP8 node",
    )
    return SeedExplanation(rows, tuple(realistic), kv / SEED_CONTEXT, draft.params, findings)
