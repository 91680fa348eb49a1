"""Turn one `/metrics` scrape or an SGLang log into a `LiveObservation` for the doctor.

Metrics are read with the monitor's `monitor_readings` (server detection and metric names): counter
servers (vLLM, dspark) give a lifetime τ = 1 + accepted / drafts; SGLang gives its windowed
`sglang:spec_accept_length` gauge. Logs are read with `sglang_log`: τ is the mean `accept len` of
steady-state lines, and eager lines (`cuda graph: False`) are counted. No judgement here.
"""
from __future__ import annotations

from dspark.deploy.doctor_context import LiveObservation
from dspark.deploy.monitor_readings import SERVER_KINDS, MonitorError, detect_server_kind, read_samples
from dspark.deploy.prom_scrape import Samples, ScrapeError, fetch_metrics_text, parse_samples
from dspark.deploy.sglang_log import parse_decode_lines

WARMUP_LINES = 2  # the first decode log lines cover warm-up and CUDA-graph replay start


def observe_samples(samples: Samples) -> LiveObservation:
    """LiveObservation of parsed `/metrics` samples."""
    try:
        kind = detect_server_kind(samples)
    except MonitorError as exc:
        known = any(name.startswith(f"{k}:") for name in samples for k in SERVER_KINDS)
        if known:
            return LiveObservation(source=f"metrics ({exc})", speculative=False)
        return LiveObservation(source="metrics", error=str(exc))
    reading = read_samples(samples, kind, time=0.0)
    source = f"{kind} metrics"
    if reading.drafts is not None:
        drafts, accepted = reading.drafts, reading.accepted or 0.0
        tau = 1.0 + accepted / drafts if drafts > 0 else None
        rate = accepted / reading.draft_tokens if reading.draft_tokens else None
        return LiveObservation(source=source, tau=tau, accept_rate=rate, drafts=drafts)
    return LiveObservation(source=source, tau=reading.accept_length, accept_rate=reading.accept_rate)


def observe_url(url: str, timeout: float = 5.0) -> LiveObservation:
    """Scrape `url`'s `/metrics` once; an unreachable server becomes an observation with `error` set."""
    try:
        return observe_samples(parse_samples(fetch_metrics_text(url, timeout)))
    except ScrapeError as exc:
        return LiveObservation(source=f"metrics at {url}", error=str(exc))


def observe_log(text: str, source: str = "sglang log") -> LiveObservation:
    """LiveObservation of an SGLang server log's `Decode batch` lines."""
    lines = parse_decode_lines(text)
    steady = [line for line in lines[WARMUP_LINES:] if (line.running or 0) > 0]
    measured = [line.accept_len for line in (steady or lines) if line.accept_len is not None]
    rates = [line.accept_rate for line in (steady or lines) if line.accept_rate is not None]
    return LiveObservation(
        source=source,
        tau=sum(measured) / len(measured) if measured else None,
        accept_rate=sum(rates) / len(rates) if rates else None,
        decode_lines=len(lines),
        steady_lines=len(steady),
        eager_steady_lines=sum(1 for line in steady if line.graph is False),
        speculative=bool(measured) or not lines,
    )
