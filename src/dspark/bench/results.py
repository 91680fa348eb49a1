"""Frozen benchmark result records and their JSON files (written atomically, read back with validation).

One `BenchResult` per run: who/where/when (`RunInfo`), what was measured (target, draft, settings, suites) and rows:
`AcceptanceRow`s (τ per suite and temperature) and `ThroughputRow`s (tokens/s per method and concurrency; a
speedup is computed against the baseline method measured in the same run). An acceptance row stores the exact
(proposed, accepted) → rounds table, so every statistic is recomputed from it, never trusted from the file, and each
prompt's draft rounds and accepted drafts (for confidence intervals over prompts, `compare.py`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dspark.bench.errors import BenchError
from dspark.files import write_json
from dspark.engine.stats import GenerationStats

SCHEMA = "dspark.bench.results/1"


@dataclass(frozen=True)
class RunInfo:
    """Where and how a result was produced."""

    dspark_version: str
    commit: str  # git commit of the dspark checkout, or "unknown"
    device: str  # e.g. "NVIDIA H200" or "cpu (x86_64, 2 threads)"
    command: str  # the command line that reproduces the run
    created: str  # UTC, ISO 8601
    python: str = ""
    torch: str = ""
    transformers: str = ""
    dirty: bool | None = None  # uncommitted changes in the checkout (None: unknown)


@dataclass(frozen=True)
class SuiteRecord:
    name: str
    prompts: int  # prompts selected (before skipping those too long for the model)
    source: str  # the pip requirement the prompts came from, or the user's file
    mirrors: str = ""  # the published benchmark this suite stands in for


@dataclass(frozen=True)
class AcceptanceRow:
    """Acceptance of one suite at one temperature. `rounds_table` = sorted (proposed, accepted, rounds) triples;
    `per_prompt` = (prompt id, draft rounds, drafts accepted) per prompt, adding up to the table's draft rounds (empty
    in files written before it existed)."""

    suite: str
    temperature: float
    drafts_per_round: int  # γ: the most drafts verified in one round
    prompts: int  # prompts generated from
    skipped: int  # prompts left out because prompt + max_new_tokens did not fit the model's positions
    rounds_table: tuple[tuple[int, int, int], ...]
    new_tokens: int
    prompt_tokens: int
    seconds: float
    per_prompt: tuple[tuple[str, int, int], ...] = ()

    def __post_init__(self) -> None:
        table = tuple(sorted((int(p), int(a), int(n)) for p, a, n in self.rounds_table))
        for proposed, accepted, rounds in table:
            if not 0 <= accepted <= proposed <= self.drafts_per_round or rounds < 1:
                raise BenchError(f"acceptance row {self.suite!r}: bad round entry (proposed {proposed}, accepted "
                                 f"{accepted}, rounds {rounds}) for {self.drafts_per_round} drafts per round")
        object.__setattr__(self, "rounds_table", table)
        object.__setattr__(self, "temperature", float(self.temperature))
        per_prompt = tuple((str(i), int(r), int(a)) for i, r, a in self.per_prompt)
        object.__setattr__(self, "per_prompt", per_prompt)
        if per_prompt:
            drafted = [(a, n) for p, a, n in table if p > 0]
            totals = (sum(r for _, r, _ in per_prompt), sum(a for _, _, a in per_prompt))
            if totals != (sum(n for _, n in drafted), sum(a * n for a, n in drafted)) or \
                    len({i for i, _, _ in per_prompt}) != len(per_prompt):
                raise BenchError(f"acceptance row {self.suite!r}: the per-prompt records ({totals[0]} rounds, "
                                 f"{totals[1]} accepted) do not add up to the round table, or repeat a prompt id")

    @classmethod
    def from_stats(cls, suite: str, temperature: float, drafts_per_round: int, stats: GenerationStats,
                   prompts: int, skipped: int, seconds: float,
                   per_prompt: tuple[tuple[str, int, int], ...] = ()) -> "AcceptanceRow":
        counts: dict[tuple[int, int], int] = {}
        for proposed, accepted in zip(stats.proposed_counts, stats.accepted_counts):
            counts[(proposed, accepted)] = counts.get((proposed, accepted), 0) + 1
        return cls(suite, temperature, drafts_per_round, prompts, skipped,
                   tuple((p, a, n) for (p, a), n in counts.items()), stats.new_tokens, stats.prompt_tokens, seconds,
                   per_prompt)

    def stats(self) -> GenerationStats:
        """The draft rounds (those that proposed at least one token) as engine statistics.

        Rounds that proposed nothing (the engine's last round when max_new_tokens leaves no room for drafts) are left
        out: counting them as τ = 1 would measure the token budget, not the draft.
        """
        rounds = [(p, a) for p, a, n in self.rounds_table if p > 0 for _ in range(n)]
        return GenerationStats(tuple(a for _, a in rounds), tuple(p for p, _ in rounds), self.prompt_tokens,
                               self.new_tokens)

    @property
    def rounds(self) -> int:
        return sum(n for p, _, n in self.rounds_table if p > 0)

    @property
    def mean_tau(self) -> float:
        return self.stats().mean_acceptance_length

    @property
    def acceptance_rate(self) -> float:
        return self.stats().acceptance_rate

    @property
    def per_position(self) -> tuple[float, ...]:
        return self.stats().per_position(self.drafts_per_round)

    @property
    def position_reached(self) -> tuple[int, ...]:
        """Rounds that verified draft k with drafts 1 … k−1 accepted (the denominators of `per_position`)."""
        return tuple(sum(n for p, a, n in self.rounds_table if p > k and a >= k) for k in range(self.drafts_per_round))

    @property
    def reached_per_position(self) -> tuple[float | None, ...]:
        """`per_position` with None where no round reached the slot (so "never tried" is not shown as 0)."""
        return tuple(v if n else None for v, n in zip(self.per_position, self.position_reached))

    @property
    def histogram(self) -> tuple[int, ...]:
        """Rounds with τ = 1 … γ+1 (index 0 is τ = 1)."""
        return self.stats().histogram(self.drafts_per_round + 1)

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    def merge(self, other: "AcceptanceRow", suite: str = "all") -> "AcceptanceRow":
        """Pool two rows at the same temperature (e.g. every suite into 'all')."""
        if other.temperature != self.temperature:
            raise BenchError("only rows at the same temperature can be pooled")
        counts: dict[tuple[int, int], int] = {}
        for p, a, n in self.rounds_table + other.rounds_table:
            counts[(p, a)] = counts.get((p, a), 0) + n
        both = self._qualified(suite) + other._qualified(suite)  # kept only when both rows have records
        return AcceptanceRow(suite, self.temperature, max(self.drafts_per_round, other.drafts_per_round),
                             self.prompts + other.prompts, self.skipped + other.skipped,
                             tuple((p, a, n) for (p, a), n in counts.items()), self.new_tokens + other.new_tokens,
                             self.prompt_tokens + other.prompt_tokens, self.seconds + other.seconds,
                             both if self.per_prompt and other.per_prompt else ())

    def _qualified(self, pooled_suite: str) -> tuple[tuple[str, int, int], ...]:
        """The per-prompt records with ids as 'suite/id' (kept as they are in a row already pooled under that name)."""
        if self.suite == pooled_suite:
            return self.per_prompt
        return tuple((f"{self.suite}/{i}", r, a) for i, r, a in self.per_prompt)

    def summary(self) -> dict[str, Any]:
        """The derived numbers, for JSON readers (recomputed from `rounds_table` on load)."""
        return {"rounds": self.rounds, "mean_tau": self.mean_tau, "acceptance_rate": self.acceptance_rate,
                "per_position": list(self.per_position), "position_reached": list(self.position_reached),
                "histogram": list(self.histogram),
                "tokens_per_second": self.tokens_per_second}


ROW_STATUSES = ("ok", "timeout", "n/a", "skipped", "error")


@dataclass(frozen=True)
class ThroughputRow:
    """Decoding speed of one method on one suite at one concurrency (filled in by throughput runs).

    `status` says whether the numbers are a full measurement ("ok"); "timeout" rows hold what finished before the
    method's budget ran out (or nothing, for the levels skipped after it), "n/a" rows a method that cannot run at
    this concurrency, "skipped" rows the run's deadline, "error" rows the exception text in `note`."""

    suite: str
    method: str  # e.g. "plain", "dspark", "dflash", "hf-dynamic", "hf-static", "prompt-lookup", "assisted"
    concurrency: int
    temperature: float
    new_tokens: int
    seconds: float
    scheduler: str = "none"  # "none" or the block scheduler used ("threshold", "algorithm1")
    baseline: str | None = "plain"  # the method, measured in the same run, that speedups are relative to
    mean_tau: float | None = None  # tokens committed per verify round (accepted + 1), every round counted
    requests: int = 0  # requests whose tokens are counted
    lossless: bool | None = None  # T=0, our speculative rows: every request token-identical to plain's
    agreement: float | None = None  # share of requests token-identical to the baseline's output
    status: str = "ok"
    note: str = ""
    repeats: tuple[float, ...] = ()  # tokens/s of every interleaved repeat when there were several (this row: median)

    def __post_init__(self) -> None:
        object.__setattr__(self, "repeats", tuple(float(v) for v in self.repeats))  # (a list when read from JSON)
        if self.status not in ROW_STATUSES:
            raise BenchError(f"throughput row {self.method!r}: status {self.status!r} is not one of {ROW_STATUSES}")

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class BenchResult:
    run: RunInfo
    target: str
    draft: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    suites: tuple[SuiteRecord, ...] = ()
    acceptance: tuple[AcceptanceRow, ...] = ()
    throughput: tuple[ThroughputRow, ...] = ()

    @property
    def kind(self) -> str:
        kinds = [k for k, rows in (("acceptance", self.acceptance), ("throughput", self.throughput)) if rows]
        return "+".join(kinds) or "empty"

    def speedup(self, row: ThroughputRow) -> float | None:
        """row's tokens/s over its baseline's, matched on suite, concurrency and temperature, in this run; None
        unless both are full measurements (status "ok")."""
        if row.baseline is None or row.status != "ok":
            return None
        for base in self.throughput:
            if (base.method, base.suite, base.concurrency, base.temperature, base.scheduler) == \
                    (row.baseline, row.suite, row.concurrency, row.temperature, "none"):
                if base.status != "ok" or not base.tokens_per_second:
                    return None
                return row.tokens_per_second / base.tokens_per_second
        return None

    def speedup_per_tau(self, row: ThroughputRow) -> float | None:
        """Speedup / mean τ: the share of the ideal (free drafting and verification) speedup the engine keeps."""
        speedup = self.speedup(row)
        return speedup / row.mean_tau if speedup is not None and row.mean_tau else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "kind": self.kind, "run": asdict(self.run), "target": self.target, "draft": self.draft,
            "settings": dict(self.settings), "suites": [asdict(s) for s in self.suites],
            "acceptance": [{**asdict(r), "rounds_table": [list(t) for t in r.rounds_table],
                            "per_prompt": [list(t) for t in r.per_prompt], **r.summary()}
                           for r in self.acceptance],
            "throughput": [{**asdict(r), "tokens_per_second": r.tokens_per_second, "speedup": self.speedup(r),
                            "speedup_per_tau": self.speedup_per_tau(r)} for r in self.throughput],
        }


def _build(cls: type, raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise BenchError(f"{where}: expected an object, got {type(raw).__name__}")
    names = set(cls.__dataclass_fields__)
    data = {k: v for k, v in raw.items() if k in names}
    try:
        return cls(**data)
    except TypeError as err:
        raise BenchError(f"{where}: {err}") from None


def result_from_dict(raw: Any, where: str = "result") -> BenchResult:
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        found = raw.get("schema") if isinstance(raw, dict) else None
        raise BenchError(f"{where} is not a dspark bench result (schema {found!r}, expected {SCHEMA!r}); "
                         f"make one with `dspark bench acceptance --out FILE`")
    acceptance = tuple(_build(AcceptanceRow, {**r, "rounds_table": tuple(map(tuple, r.get("rounds_table", ()))),
                                              "per_prompt": tuple(map(tuple, r.get("per_prompt", ())))}
                              if isinstance(r, dict) else r, f"{where}: acceptance[{i}]")
                       for i, r in enumerate(raw.get("acceptance", [])))
    return BenchResult(
        run=_build(RunInfo, raw.get("run"), f"{where}: run"), target=str(raw.get("target", "")),
        draft=raw.get("draft"), settings=dict(raw.get("settings") or {}),
        suites=tuple(_build(SuiteRecord, s, f"{where}: suites[{i}]") for i, s in enumerate(raw.get("suites", []))),
        acceptance=acceptance,
        throughput=tuple(_build(ThroughputRow, r, f"{where}: throughput[{i}]")
                         for i, r in enumerate(raw.get("throughput", []))))


def save_result(result: BenchResult, path: str | Path) -> Path:
    """Write the result as JSON, atomically."""
    return write_json(path, result.to_dict())


def load_result(path: str | Path) -> BenchResult:
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"result file {path} does not exist")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BenchError(f"{path} is not JSON ({err}); pass a file written by `dspark bench ... --out`") from None
    return result_from_dict(raw, str(path))
