"""Public worked examples of self-hosting cost, recomputed with `cost` so users can check the arithmetic.

Each example keeps the published inputs, the published answer and where it was published; `reproduce()`
recomputes the answer. The Kimi-K3 rows use the seed's ~118 and ~370 tokens/s (vLLM's K3 blog, GB300 NVL72
TP16, batch 1) at SemiAnalysis' GB300 TCO of $2.65/GPU-h; they and the break-even rows are the research
brief's own worked anchors (hardware §4.4), built from the cited inputs.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.plan.cost import HOURS_PER_MONTH, api_per_output, cost_per_million
from dspark.plan.prices import ApiPrice


@dataclass(frozen=True)
class WorkedExample:
    name: str
    source: str
    inputs: str
    published: float
    unit: str
    computed: float

    @property
    def error_pct(self) -> float:
        return 100 * (self.computed - self.published) / self.published


K3_API = ApiPrice("kimi-k3", input=3.00, output=15.00, cached_input=0.30)


def reproduce() -> list[WorkedExample]:
    """All examples, recomputed."""
    b200_month = 16 * 4.00 * HOURS_PER_MONTH
    blend_3to1 = api_per_output(K3_API, 3.0) / 4  # per total token
    blend_cache = api_per_output(K3_API, 3.0, cache_hit=0.5) / 4
    return [
        WorkedExample("70B dense on 1x H100", "gmicloud.ai/en/blog/llm-inference-cost-per-million-tokens",
                      "$2.00/GPU-h, 85 tok/s", 6.54, "$/Mtok", cost_per_million(2.00, 85)),
        WorkedExample("Llama 3.1 405B FP8 on 8x H100", "gpuadvisor.com/cost-to-serve-1m-tokens",
                      "$19.92/h (Lambda), 1,000 tok/s", 5.53, "$/Mtok", cost_per_million(19.92, 1000)),
        WorkedExample("one GPU at full load", "dreaming.press/posts/self-hosting-llm-inference-vs-api-cost.html",
                      "$2.50/h, 700 tok/s", 0.99, "$/Mtok", cost_per_million(2.50, 700)),
        WorkedExample("same GPU at 10 % utilisation", "dreaming.press (same post)",
                      "$2.50/h, 700 tok/s, 10 %", 9.9, "$/Mtok", cost_per_million(2.50, 700, 0.10)),
        WorkedExample("Kimi K2 on 128x H200 (LMSYS)", "lm-sys blog 2025-07-17-k2-large-scale-ep",
                      "128 x $2.3/h, 384k output tok/s", 0.21, "$/Mtok output", cost_per_million(128 * 2.3, 384_000)),
        WorkedExample("Kimi K3, 16x GB300, batch 1, no draft", "vLLM K3 blog (118 tok/s); SemiAnalysis TCO $2.65",
                      "16 x $2.65/h, 118 tok/s", 99.8, "$/Mtok", cost_per_million(16 * 2.65, 118)),
        WorkedExample("Kimi K3, 16x GB300, batch 1, DSpark", "vLLM K3 blog (370 tok/s); SemiAnalysis TCO $2.65",
                      "16 x $2.65/h, 370 tok/s", 31.8, "$/Mtok", cost_per_million(16 * 2.65, 370)),
        WorkedExample("16x B200 rented 24/7", "research brief §4.4 (730 h/month, kickllm.com)",
                      "16 x $4.00/h x 730 h", 46_720, "$/month", b200_month),
        WorkedExample("break-even vs Kimi K3 API, 3:1 input:output", "research brief §4.4 (llmtco.com method)",
                      "$46,720/month / $6.00 per M total tokens", 7.8e9, "tokens/month",
                      b200_month / blend_3to1 * 1e6),
        WorkedExample("same with 50 % cache hits", "research brief §4.4",
                      "$46,720/month / $4.99 per M total tokens", 9.4e9, "tokens/month",
                      b200_month / blend_cache * 1e6),
    ]
