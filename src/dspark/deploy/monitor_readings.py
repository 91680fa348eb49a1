"""Turn one parsed `/metrics` scrape into an engine-neutral `Reading`, and detect which server wrote it.

Knows the metric names of three servers and nothing about time windows, alerts or HTTP:

- vLLM (`vllm/v1/spec_decode/metrics.py`, `vllm/v1/metrics/loggers.py`): monotonic counters
  `vllm:spec_decode_num_drafts_total` (verify steps with at least one draft),
  `vllm:spec_decode_num_draft_tokens_total`, `vllm:spec_decode_num_accepted_tokens_total` (accepted drafts,
  bonus excluded) and `vllm:spec_decode_num_accepted_tokens_per_pos_total{position="k"}` (drafts whose
  position k was accepted), all labelled `model_name`, `engine`; plus `vllm:generation_tokens_total`,
  `vllm:prompt_tokens_total`, `vllm:request_success_total{finished_reason}`, the histograms
  `vllm:time_to_first_token_seconds` and `vllm:inter_token_latency_seconds` (older builds:
  `vllm:time_per_output_token_seconds`) and the gauges `vllm:num_requests_waiting` / `…_running`.
- dspark's own server: the same names with the `dspark:` prefix.
- SGLang (`python/sglang/srt/metrics/collector.py`, `--enable-metrics`): no spec-decode counters, only the
  gauges `sglang:spec_accept_length` (mean τ incl. bonus, recomputed every `--decode-log-interval` decode
  steps, default 40), `sglang:spec_accept_rate` (accepted / proposed drafts in newer builds; older builds
  counted the bonus) and `sglang:gen_throughput` (token/s), plus `sglang:num_queue_reqs`,
  `sglang:generation_tokens_total` and TTFT / inter-token latency histograms.

Input is `prom_scrape.parse_samples` output: sample name → [(labels, value)], with counters under their
`_total` sample names and histograms under `_sum` / `_count`.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.deploy.prom_scrape import Samples

SERVER_KINDS = ("dspark", "vllm", "sglang")


class MonitorError(ValueError):
    """A scrape that cannot be monitored: unreachable URL, not an inference server, no speculative metrics."""


@dataclass(frozen=True)
class Reading:
    """Totals and gauges of one scrape, summed over engines / ranks. None = the server has no such series."""

    kind: str
    time: float  # monotonic seconds at the scrape
    models: tuple[str, ...]
    drafts: float | None = None  # counters (dspark / vLLM)
    draft_tokens: float | None = None
    accepted: float | None = None
    accepted_per_pos: tuple[float, ...] = ()  # index k = drafts whose position k was accepted
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    requests: float | None = None  # finished requests
    ttft_sum: float | None = None  # histogram totals (seconds, observations)
    ttft_count: float | None = None
    itl_sum: float | None = None
    itl_count: float | None = None
    queue: float | None = None  # gauges
    running: float | None = None
    accept_length: float | None = None  # SGLang window gauges
    accept_rate: float | None = None
    gen_throughput: float | None = None


@dataclass(frozen=True)
class _Names:
    """Sample names of one server kind (None where that server has no such series)."""

    drafts: str | None
    draft_tokens: str | None
    accepted: str | None
    per_pos: str | None
    generation: str
    prompt: str
    requests: str
    ttft: str
    itl: tuple[str, ...]
    queue: str
    running: str
    accept_length: str | None = None
    accept_rate: str | None = None
    gen_throughput: str | None = None


def _counter_names(prefix: str) -> _Names:
    spec = f"{prefix}:spec_decode_num_"
    return _Names(
        drafts=f"{spec}drafts_total",
        draft_tokens=f"{spec}draft_tokens_total",
        accepted=f"{spec}accepted_tokens_total",
        per_pos=f"{spec}accepted_tokens_per_pos_total",
        generation=f"{prefix}:generation_tokens_total",
        prompt=f"{prefix}:prompt_tokens_total",
        requests=f"{prefix}:request_success_total",
        ttft=f"{prefix}:time_to_first_token_seconds",
        itl=(f"{prefix}:inter_token_latency_seconds", f"{prefix}:time_per_output_token_seconds"),
        queue=f"{prefix}:num_requests_waiting",
        running=f"{prefix}:num_requests_running",
    )


NAMES: dict[str, _Names] = {
    "dspark": _counter_names("dspark"),
    "vllm": _counter_names("vllm"),
    "sglang": _Names(
        drafts=None, draft_tokens=None, accepted=None, per_pos=None,
        generation="sglang:generation_tokens_total",
        prompt="sglang:prompt_tokens_total",
        requests="sglang:num_requests_total",
        ttft="sglang:time_to_first_token_seconds",
        itl=("sglang:inter_token_latency_seconds",),
        queue="sglang:num_queue_reqs",
        running="sglang:num_running_reqs",
        accept_length="sglang:spec_accept_length",
        accept_rate="sglang:spec_accept_rate",
        gen_throughput="sglang:gen_throughput",
    ),
}

_HINTS = {
    "dspark": "start `dspark serve` with a --draft",
    "vllm": "start vLLM with --speculative-config '{\"method\": ..., \"num_speculative_tokens\": ...}'",
    "sglang": "start SGLang with --speculative-algorithm",
}


def _series(samples: Samples, name: str | None, model: str | None) -> list[tuple[dict, float]]:
    if name is None:
        return []
    rows = samples.get(name, [])
    if model is not None:
        rows = [(labels, value) for labels, value in rows if labels.get("model_name") == model]
    return rows


def _total(samples: Samples, name: str | None, model: str | None) -> float | None:
    rows = _series(samples, name, model)
    return float(sum(value for _, value in rows)) if rows else None


def _window_gauges(samples: Samples, n: _Names, model: str | None) -> tuple[float | None, float | None]:
    """SGLang's (accept length, accept rate), averaged over the ranks that have measured a window (length > 0)."""
    lengths = {tuple(sorted(labels.items())): value
               for labels, value in _series(samples, n.accept_length, model) if value > 0}
    if not lengths:
        return None, None
    rates = [value for labels, value in _series(samples, n.accept_rate, model)
             if tuple(sorted(labels.items())) in lengths]
    return sum(lengths.values()) / len(lengths), (sum(rates) / len(rates) if rates else None)


def _per_position(samples: Samples, name: str | None, model: str | None) -> tuple[float, ...]:
    by_pos: dict[int, float] = {}
    for labels, value in _series(samples, name, model):
        try:
            pos = int(labels["position"])
        except (KeyError, ValueError):
            continue
        by_pos[pos] = by_pos.get(pos, 0.0) + value
    return tuple(by_pos.get(k, 0.0) for k in range(max(by_pos) + 1)) if by_pos else ()


def detect_server_kind(samples: Samples) -> str:
    """Return "dspark", "vllm" or "sglang" from the metric names, or raise MonitorError saying what is wrong."""
    names = set(samples)
    prefixes = {kind for kind in SERVER_KINDS if any(n.startswith(f"{kind}:") for n in names)}
    for kind in ("dspark", "vllm"):
        if f"{kind}:spec_decode_num_drafts_total" in names:
            return kind
    if "sglang:spec_accept_length" in names:
        return "sglang"
    for kind in SERVER_KINDS:
        if kind in prefixes:
            raise MonitorError(
                f"this {kind} server exposes no speculative-decoding metrics, so speculative decoding is off; "
                f"{_HINTS[kind]}"
            )
    raise MonitorError(
        "no dspark:, vllm: or sglang: metrics in this /metrics body; point the monitor at the /metrics of a "
        "dspark, vLLM or SGLang server (SGLang needs --enable-metrics)"
    )


def read_samples(samples: Samples, kind: str, time: float, model: str | None = None) -> Reading:
    """Collect one scrape's totals for `kind`, summed over engines / ranks (only `model` if given)."""
    if kind not in NAMES:
        raise MonitorError(f"unknown server kind {kind!r}; choose one of: {', '.join(SERVER_KINDS)}")
    n = NAMES[kind]
    models = sorted({labels["model_name"] for rows in samples.values() for labels, _ in rows
                     if "model_name" in labels})
    if model is not None and model not in models:
        raise MonitorError(f"model {model!r} is not served here; served models: {', '.join(models) or 'none'}")
    itl = next((name for name in n.itl if _series(samples, f"{name}_count", model)), n.itl[0])
    accept_length, accept_rate = _window_gauges(samples, n, model)
    return Reading(
        kind=kind,
        time=time,
        models=tuple(models),
        drafts=_total(samples, n.drafts, model),
        draft_tokens=_total(samples, n.draft_tokens, model),
        accepted=_total(samples, n.accepted, model),
        accepted_per_pos=_per_position(samples, n.per_pos, model),
        generation_tokens=_total(samples, n.generation, model),
        prompt_tokens=_total(samples, n.prompt, model),
        requests=_total(samples, n.requests, model),
        ttft_sum=_total(samples, f"{n.ttft}_sum", model),
        ttft_count=_total(samples, f"{n.ttft}_count", model),
        itl_sum=_total(samples, f"{itl}_sum", model),
        itl_count=_total(samples, f"{itl}_count", model),
        queue=_total(samples, n.queue, model),
        running=_total(samples, n.running, model),
        accept_length=accept_length,
        accept_rate=accept_rate,
        gen_throughput=_total(samples, n.gen_throughput, model),
    )
