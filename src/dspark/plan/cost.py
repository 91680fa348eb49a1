"""Self-hosting cost per million tokens, monthly cost, and break-even volume against an API price.

Formulas as the public self-host-vs-API calculators state them (deploycue.com, llmtco.com/methodology,
kickllm.com, dreaming.press; research brief on hardware §4.3):
- $ per M output tokens = cluster $/h / (output tok/s x 3600 x utilisation) x 1e6,
- monthly cost = cluster $/h x 730 h (x (1 + ops overhead)): a rented cluster costs the same idle or busy,
- API price of one output token *with its prompt* = r x input price + output price, r = input tokens per
  output token (default 3), input price blended over the cache-hit share; per total token it is that / (r + 1),
- break-even output tokens per month = monthly cost / that API price x 1e6; break-even utilisation = the
  sustained rate it implies / the cluster's capacity (above 1: the cluster cannot serve the volume).
Prefill is not costed separately; `prefill_share` of GPU time can be set aside for it.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.plan.errors import PlanError
from dspark.plan.prices import ApiPrice

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12


def cost_per_million(cluster_usd_per_hour: float, tokens_per_s: float, utilisation: float = 1.0) -> float:
    """USD per million tokens from an hourly cluster price and its token rate at full load."""
    if tokens_per_s <= 0 or not 0 < utilisation <= 1:
        raise PlanError(f"tokens/s must be > 0 and utilisation in (0, 1] (got {tokens_per_s}, {utilisation})")
    return cluster_usd_per_hour / (tokens_per_s * 3600 * utilisation) * 1e6


def api_per_output(api: ApiPrice, input_per_output: float = 3.0, cache_hit: float = 0.0) -> float:
    """USD the API charges per million output tokens including their `input_per_output` prompt tokens."""
    if input_per_output < 0 or not 0 <= cache_hit <= 1:
        raise PlanError("input_per_output must be >= 0 and cache_hit in [0, 1]")
    cached = api.input if api.cached_input is None else api.cached_input
    return input_per_output * (cache_hit * cached + (1 - cache_hit) * api.input) + api.output


@dataclass(frozen=True)
class CostInputs:
    gpu_hour: float  # USD per GPU-hour
    gpus: int
    tok_s_without: float  # aggregate output tokens/s at full load, plain decoding
    tok_s_with: float  # same with DSpark
    utilisation: float = 0.5
    hours_per_month: float = HOURS_PER_MONTH
    ops_overhead: float = 0.0  # fraction added for egress, storage, people (calculators add 0.3-0.5)
    prefill_share: float = 0.0  # GPU time spent on prefill instead of decode

    def __post_init__(self) -> None:
        if self.gpu_hour < 0 or self.gpus < 1:
            raise PlanError("gpu_hour must be >= 0 and gpus >= 1")
        if self.tok_s_without <= 0 or self.tok_s_with <= 0:
            raise PlanError("token rates must be > 0 (give --tps / --tps-dspark or a model that fits)")
        if not 0 < self.utilisation <= 1 or not 0 <= self.prefill_share < 1 or self.ops_overhead < 0:
            raise PlanError("utilisation must be in (0, 1], prefill_share in [0, 1), ops_overhead >= 0")

    @property
    def cluster_hour(self) -> float:
        return self.gpu_hour * self.gpus * (1 + self.ops_overhead)


@dataclass(frozen=True)
class CostResult:
    inputs: CostInputs
    api: ApiPrice
    input_per_output: float
    cache_hit: float
    monthly: float
    per_m_without: float
    per_m_with: float
    api_per_m_output: float
    break_even_output_tokens: float  # per month
    capacity_without: float  # output tokens per month at 100 % utilisation
    capacity_with: float

    @property
    def api_per_m_total(self) -> float:
        return self.api_per_m_output / (1 + self.input_per_output)

    @property
    def break_even_total_tokens(self) -> float:
        return self.break_even_output_tokens * (1 + self.input_per_output)

    @property
    def break_even_tok_s(self) -> float:
        return self.break_even_output_tokens / (self.inputs.hours_per_month * 3600)

    @property
    def break_even_util_without(self) -> float:
        return self.break_even_output_tokens / self.capacity_without

    @property
    def break_even_util_with(self) -> float:
        return self.break_even_output_tokens / self.capacity_with


def analyse(inputs: CostInputs, api: ApiPrice, input_per_output: float = 3.0, cache_hit: float = 0.0) -> CostResult:
    """Cost per Mtok with and without DSpark, monthly cost and break-even against `api`."""
    decode = 1 - inputs.prefill_share
    seconds = inputs.hours_per_month * 3600
    api_out = api_per_output(api, input_per_output, cache_hit)
    monthly = inputs.cluster_hour * inputs.hours_per_month
    return CostResult(
        inputs, api, input_per_output, cache_hit, monthly,
        cost_per_million(inputs.cluster_hour, inputs.tok_s_without * decode, inputs.utilisation),
        cost_per_million(inputs.cluster_hour, inputs.tok_s_with * decode, inputs.utilisation),
        api_out, monthly / api_out * 1e6,
        inputs.tok_s_without * decode * seconds, inputs.tok_s_with * decode * seconds,
    )


def cost_curve(inputs: CostInputs, points: int = 40) -> list[tuple[float, float, float]]:
    """(utilisation, $/M without, $/M with) from 5 % to 100 % utilisation, for the plot."""
    decode = 1 - inputs.prefill_share
    out = []
    for i in range(points):
        u = 0.05 + 0.95 * i / (points - 1)
        out.append((u, cost_per_million(inputs.cluster_hour, inputs.tok_s_without * decode, u),
                    cost_per_million(inputs.cluster_hour, inputs.tok_s_with * decode, u)))
    return out
