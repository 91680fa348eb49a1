"""The acceptance run: speculative generation over encoded prompt suites, at each temperature, into result rows.

For every (temperature, suite) it generates each prompt with the lossless engine and pools the per-round acceptance
into one `AcceptanceRow` (mean τ, per-position conditional acceptance, τ histogram). Prompts whose length plus
max_new_tokens do not fit the model's positions are skipped and counted. It loads nothing and prints nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from dspark.bench.encode import EncodedPrompt
from dspark.bench.errors import BenchError
from dspark.bench.results import AcceptanceRow
from dspark.engine.stats import GenerationStats


@dataclass(frozen=True)
class AcceptanceSettings:
    temperatures: tuple[float, ...] = (0.0, 1.0)
    max_new_tokens: int = 256
    seed: int = 0  # prompt i of a suite samples with seed + i
    top_p: float = 1.0
    top_k: int = 0
    block_size: int | None = None  # drafts verified per round (None: the draft's own)
    confidence_threshold: float = 0.0  # 0: no confidence scheduling (the paper's Table 1 setting)

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperatures", tuple(float(t) for t in self.temperatures))
        if not self.temperatures:
            raise BenchError("give at least one temperature (e.g. --temperature 0,1)")
        if any(t < 0 for t in self.temperatures):
            raise BenchError("temperatures must be >= 0 (0 means greedy)")
        if self.max_new_tokens < 2:
            raise BenchError("--max-new-tokens must be at least 2 (one bonus token, then drafting)")
        if self.block_size is not None and self.block_size < 1:
            raise BenchError("--block-size must be at least 1: acceptance needs drafts (0 would be plain decoding)")

    def as_dict(self) -> dict[str, Any]:
        return {"temperatures": list(self.temperatures), "max_new_tokens": self.max_new_tokens, "seed": self.seed,
                "top_p": self.top_p, "top_k": self.top_k, "block_size": self.block_size,
                "confidence_threshold": self.confidence_threshold}


def count_work(prompts: Mapping[str, Sequence[EncodedPrompt]], settings: AcceptanceSettings) -> int:
    """How many generations a run does (for a progress bar)."""
    return len(settings.temperatures) * sum(len(p) for p in prompts.values())


def run_acceptance(target: Any, draft: Any, prompts: Mapping[str, Sequence[EncodedPrompt]],
                   settings: AcceptanceSettings = AcceptanceSettings(), eos_token_ids: Sequence[int] = (),
                   max_positions: int | None = None,
                   advance: Callable[[str, float], None] | None = None) -> tuple[AcceptanceRow, ...]:
    """One row per (temperature, suite), temperatures outermost. `advance(suite, T)` is called after each prompt."""
    from dspark.config import GenerationConfig
    from dspark.engine.generate import generate

    gamma = settings.block_size if settings.block_size is not None else int(draft.config.num_draft_tokens)
    rows = []
    for temperature in settings.temperatures:
        for suite, encoded in prompts.items():
            stats, seconds, done, skipped = GenerationStats((), ()), 0.0, 0, 0
            for index, prompt in enumerate(encoded):
                needed = len(prompt.token_ids) + settings.max_new_tokens + gamma
                if max_positions is not None and needed > max_positions:
                    skipped += 1
                else:
                    config = GenerationConfig(
                        max_new_tokens=settings.max_new_tokens, temperature=temperature, top_p=settings.top_p,
                        top_k=settings.top_k, seed=settings.seed + index, eos_token_ids=tuple(eos_token_ids),
                        block_size=settings.block_size, confidence_threshold=settings.confidence_threshold)
                    result = generate(target, draft, list(prompt.token_ids), config)
                    stats, seconds, done = stats.merge(result.stats), seconds + result.seconds, done + 1
                if advance is not None:
                    advance(suite, temperature)
            rows.append(AcceptanceRow.from_stats(suite, temperature, gamma, stats, done, skipped, seconds))
    return tuple(rows)


def pooled(rows: Sequence[AcceptanceRow]) -> tuple[AcceptanceRow, ...]:
    """One 'all' row per temperature, pooling every suite's rounds (exact: the round tables are added)."""
    out: dict[float, AcceptanceRow] = {}
    for row in rows:
        out[row.temperature] = row if row.temperature not in out else out[row.temperature].merge(row)
    return tuple(AcceptanceRow(**{**vars(r), "suite": "all"}) for r in out.values())
