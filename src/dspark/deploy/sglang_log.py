"""Parse SGLang's periodic decode log lines into numbers.

SGLang prints, every --decode-log-interval (40) decode steps on attention-TP rank 0
(`python/sglang/srt/observability/scheduler_metrics_mixin.py`):

    Decode batch, #running-req: 32, #token: 51234, token usage: 0.12, accept len: 3.41, accept rate: 0.34,
    cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0

Older builds write `Decode batch.` and omit `accept rate`; CPU / NPU builds say `cpu graph` / `npu graph`.
This module only extracts fields; it draws no conclusions.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_RUNNING = re.compile(r"#running-req:\s*(\d+)")
_ACCEPT_LEN = re.compile(r"accept len:\s*([0-9]+(?:\.[0-9]+)?)")
_ACCEPT_RATE = re.compile(r"accept rate:\s*([0-9]+(?:\.[0-9]+)?)")
_GRAPH = re.compile(r"(?:cuda|cpu|npu) graph:\s*(True|False)")
_THROUGHPUT = re.compile(r"gen throughput \(token/s\):\s*([0-9]+(?:\.[0-9]+)?)")


@dataclass(frozen=True)
class DecodeLine:
    """One `Decode batch` log line; None where the line lacks the field."""

    running: int | None
    accept_len: float | None
    accept_rate: float | None
    graph: bool | None
    gen_throughput: float | None


def _float(pattern: re.Pattern, line: str) -> float | None:
    match = pattern.search(line)
    return float(match.group(1)) if match else None


def parse_decode_lines(text: str) -> list[DecodeLine]:
    """Every `Decode batch` line of a log, in order."""
    lines: list[DecodeLine] = []
    for line in text.splitlines():
        if "Decode batch" not in line:
            continue
        running = _RUNNING.search(line)
        graph = _GRAPH.search(line)
        lines.append(DecodeLine(
            running=int(running.group(1)) if running else None,
            accept_len=_float(_ACCEPT_LEN, line),
            accept_rate=_float(_ACCEPT_RATE, line),
            graph=(graph.group(1) == "True") if graph else None,
            gen_throughput=_float(_THROUGHPUT, line),
        ))
    return lines
