"""Paired comparison of two acceptance results: each draft's τ, their ratio, and bootstrap intervals over prompts.

Two runs with the same suites, --seed and --max-new-tokens (any --limit: the selections are nested) measure two
drafts on the same prompts, and at T = 0 on the same target tokens (decoding is lossless). Resampling prompts with
replacement — a prompt's draft rounds and accepted drafts together, the same prompts for both drafts — gives a
percentile interval for each τ and for the ratio τ_A / τ_B; τ over a resample is pooled the way a row's is
(accepted + rounds over rounds). Only prompts present in both rows are paired; with several suites at a temperature
an 'all' row pools them (each prompt keeps its suite). It reads results; it runs and prints nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dspark.bench.acceptance import pooled
from dspark.bench.errors import BenchError
from dspark.bench.results import AcceptanceRow, BenchResult

SAME_SETTINGS = ("seed", "max_new_tokens", "chat_template")  # settings that change which tokens are decoded


@dataclass(frozen=True)
class Interval:
    value: float  # on every paired prompt
    low: float
    high: float


@dataclass(frozen=True)
class Comparison:
    """Draft A against draft B on one suite at one temperature."""

    suite: str
    temperature: float
    prompts: int  # paired prompts
    tau_a: Interval
    tau_b: Interval
    ratio: Interval  # τ_A / τ_B
    resamples: int
    level: float  # e.g. 0.95
    above: float | None = None  # share of resamples with ratio >= `threshold` (None: no threshold asked)
    threshold: float | None = None


def tau_interval(row: AcceptanceRow, resamples: int = 2_000, level: float = 0.95, seed: int = 0) -> Interval | None:
    """τ of one row with its `level` percentile bootstrap interval over prompts (None without per-prompt records or
    draft rounds)."""
    counts = np.array([(r, a) for _, r, a in row.per_prompt], dtype=np.float64).reshape(-1, 2)  # [P, 2]
    if not len(counts) or counts[:, 0].sum() == 0:
        return None
    return _interval(row.mean_tau, _draws(counts, resamples, seed)[:, 0], level)


def compare_rows(a: AcceptanceRow, b: AcceptanceRow, resamples: int = 10_000, level: float = 0.95, seed: int = 0,
                 threshold: float | None = None) -> Comparison:
    """τ of each row and their ratio on the prompts both measured, with `level` percentile bootstrap intervals."""
    if resamples < 100:
        raise BenchError(f"--resamples must be at least 100 for a percentile interval, got {resamples}")
    if not 0.5 <= level < 1:
        raise BenchError(f"--level must be in [0.5, 1), e.g. 0.95; got {level}")
    for name, row in (("A", a), ("B", b)):
        if not row.per_prompt:
            raise BenchError(f"{name}'s row {row.suite!r} (T={row.temperature:g}) has no per-prompt records (a file "
                             f"from an older dspark); measure it again with `dspark bench acceptance`")
    b_by_id = {i: (r, acc) for i, r, acc in b.per_prompt}
    paired = [(r, acc, *b_by_id[i]) for i, r, acc in a.per_prompt if i in b_by_id]
    if not paired:
        raise BenchError(f"suite {a.suite!r} (T={a.temperature:g}): the two runs share no prompt; run both with the "
                         f"same --suite and --seed")
    counts = np.array(paired, dtype=np.float64)  # [P, 4]: rounds A, accepted A, rounds B, accepted B
    total = counts.sum(axis=0)  # [4]
    if total[0] == 0 or total[2] == 0:
        raise BenchError(f"suite {a.suite!r} (T={a.temperature:g}): a draft made no draft round on the paired "
                         f"prompts; there is no τ to compare")
    value_a, value_b = (total[0] + total[1]) / total[0], (total[2] + total[3]) / total[2]
    taus = _draws(counts, resamples, seed)  # [R, 2]
    ratio = taus[:, 0] / taus[:, 1]  # [R]
    above = None if threshold is None else float(np.mean(ratio[np.isfinite(ratio)] >= threshold))
    return Comparison(a.suite, a.temperature, len(paired), _interval(value_a, taus[:, 0], level),
                      _interval(value_b, taus[:, 1], level), _interval(value_a / value_b, ratio, level), resamples,
                      level, above, threshold)


def _draws(counts: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """τ of each draft over `resamples` resamples of the prompts: counts [P, 2m] hold (rounds, accepted) per draft."""
    picks = np.random.default_rng(seed).integers(0, len(counts), size=(resamples, len(counts)))  # [R, P]
    sums = counts[picks].sum(axis=1)  # [R, 2m]
    with np.errstate(divide="ignore", invalid="ignore"):
        return (sums[:, 0::2] + sums[:, 1::2]) / sums[:, 0::2]  # [R, m]; inf / nan where a resample has no round


def _interval(value: float, draws: np.ndarray, level: float) -> Interval:
    tail = (1 - level) / 2 * 100
    low, high = np.nanpercentile(np.where(np.isfinite(draws), draws, np.nan), [tail, 100 - tail])
    return Interval(float(value), float(low), float(high))


def compare_results(a: BenchResult, b: BenchResult, resamples: int = 10_000, level: float = 0.95, seed: int = 0,
                    threshold: float | None = None, suites: Sequence[str] = ()) -> tuple[Comparison, ...]:
    """One comparison per (suite, temperature) row both results have, in A's order (only `suites` if given), then an
    'all' row per temperature that has several."""
    differ = [k for k in SAME_SETTINGS if a.settings.get(k) != b.settings.get(k)]
    if differ:
        raise BenchError("the two runs decoded different tokens: " + ", ".join(
            f"{k} {a.settings.get(k)!r} against {b.settings.get(k)!r}" for k in differ)
            + "; measure both with the same --seed, --max-new-tokens and chat template")
    b_rows = {(r.suite, r.temperature): r for r in b.acceptance}
    pairs = [(r, b_rows[(r.suite, r.temperature)]) for r in a.acceptance
             if (r.suite, r.temperature) in b_rows and (not suites or r.suite in suites)]
    if not pairs:
        raise BenchError(f"no suite and temperature in common (A: {_keys(a)}, B: {_keys(b)}"
                         + (f", asked for {list(suites)}" if suites else "") + ")")
    for temperature in dict.fromkeys(x.temperature for x, _ in pairs):
        both = [(x, y) for x, y in pairs if x.temperature == temperature]
        if len(both) > 1:
            pairs.append((pooled([x for x, _ in both])[0], pooled([y for _, y in both])[0]))
    return tuple(compare_rows(x, y, resamples, level, seed, threshold) for x, y in pairs)


def _keys(result: BenchResult) -> list[str]:
    return [f"{r.suite}@T={r.temperature:g}" for r in result.acceptance]
