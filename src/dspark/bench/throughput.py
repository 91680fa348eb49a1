"""The throughput matrix: every method on the same requests at each concurrency, timed, checked, one row each.

A `Method` is a name, a scheduler and a function that decodes a list of requests; where it comes from (our engine,
transformers, the dflash package) is `our_engine.py` / `peers.py`. Per concurrency level the runner builds the
requests (the prompts in order, repeated when there are more requests than prompts), then per method: a warm-up on
the first wave (excluded), the timed waves (synchronised on CUDA by the caller's `sync`), and a row with tokens/s,
mean τ and, at T = 0, whether our speculative outputs equal our plain outputs token for token. Our engine's methods
run at every level before the peers. A method that runs past its time budget at a level is cut there and marked
"timeout" (each level has its own budget: a peer too slow at batch 1 is still measured batched; the warm-up, where
compilation, graph capture and Algorithm 1's round-cost tables land, is not billed to it); the run's deadline skips
whatever is left. With `repeats` > 1 each level measures its methods that many times, interleaved (plain, dspark, …,
plain, dspark, …), and a row is the repeat with the median tokens/s, every repeat's tokens/s beside it: a gain smaller
than the spread of repeats is noise (on a GPU one row can move 10 % between two runs). It does not load
models, pick prompts or print.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

from dspark.bench.errors import BenchError
from dspark.bench.results import ThroughputRow

PLAIN = "plain"
SCHEDULERS = ("none", "threshold", "algorithm1")


@dataclass(frozen=True)
class ThroughputSettings:
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    max_new_tokens: int = 256
    temperature: float = 0.0
    num_prompts: int = 16  # requests at batch 1 (and at least this many at every level)
    waves: int = 1  # at concurrency C > 1, at least C · waves requests
    warmup_tokens: int = 16
    threshold: float = 0.3  # the "threshold" scheduler's confidence cut
    method_budget_s: float = 600.0  # per method, scheduler and level: the timed waves (the warm-up is not billed)
    deadline_s: float | None = None  # the whole matrix
    seed: int = 0
    repeats: int = 1  # interleaved measurements per method and level; a row is their median (the budget covers all)

    def __post_init__(self) -> None:
        object.__setattr__(self, "concurrency", tuple(int(c) for c in self.concurrency))
        if not self.concurrency or min(self.concurrency) < 1:
            raise BenchError(f"concurrency levels must be positive integers, got {list(self.concurrency)}")
        for name in ("max_new_tokens", "num_prompts", "waves", "repeats"):
            if getattr(self, name) < 1:
                raise BenchError(f"{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.warmup_tokens < 0 or self.method_budget_s <= 0 or self.temperature < 0:
            raise BenchError("warm-up tokens and temperature must be >= 0 and the method budget positive")

    def requests(self, concurrency: int) -> int:
        """Requests at a level: `num_prompts` at batch 1; else at least num_prompts and C · waves, a multiple of C
        (so every wave of a static-batching peer is full)."""
        if concurrency == 1:
            return self.num_prompts
        wanted = max(self.num_prompts, concurrency * self.waves)
        return -(-wanted // concurrency) * concurrency

    def as_dict(self) -> dict:
        return {**asdict(self), "concurrency": list(self.concurrency),
                "requests": {str(c): self.requests(c) for c in self.concurrency}}


@dataclass(frozen=True)
class Output:
    """One request's result: its new tokens and τ (tokens committed) of each verify round; empty: not reported."""

    tokens: tuple[int, ...]
    taus: tuple[int, ...] = ()


# (requests, concurrency, max_new_tokens, seconds left or None) -> one Output per request, in order
RunFn = Callable[[list[list[int]], int, int, "float | None"], list[Output]]


def never_run(*_: object) -> list[Output]:
    """The `run` of a method marked unavailable (the runner never calls it)."""
    raise RuntimeError("this method is unavailable and is never run")


@dataclass(frozen=True)
class Method:
    name: str
    run: RunFn
    scheduler: str = "none"
    batch1_only: bool = False  # reported n/a above batch 1
    speculative: bool = False  # ours with a draft: its T=0 outputs must equal plain's
    whole: bool = False  # one call decodes every request of a level (continuous batching); else waves of C
    unavailable: str = ""  # non-empty: reported n/a with this reason, never run
    first: bool = False  # run in the first pass (our engine), before the peers

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.scheduler


@dataclass
class _Budget:
    method_s: float
    deadline: float | None
    clock: Callable[[], float]
    used: dict[tuple[str, str, int], float] = field(default_factory=dict)  # (method, scheduler, concurrency)

    def left(self, key: tuple[str, str, int], running: float = 0.0) -> float:
        """Seconds `key` may still run, `running` seconds into a measurement not yet added to `used`."""
        left = self.method_s - self.used.get(key, 0.0) - running
        return left if self.deadline is None else min(left, self.until_deadline())

    def until_deadline(self) -> float | None:
        return None if self.deadline is None else self.deadline - self.clock()


def _no_sync() -> None:
    return None


def _measure(method: Method, requests: list[list[int]], concurrency: int, settings: ThroughputSettings,
             budget: _Budget, sync: Callable[[], None], warm_up: bool = True) -> tuple[list[Output], float, bool]:
    """(outputs of the requests that finished, their timed seconds, whether the budget cut the run). The warm-up
    (where one-time costs land: compilation, graph capture, Algorithm 1's round-cost tables; the first repeat only)
    is bounded by the run's deadline only; the method's budget bills the timed waves."""
    clock, key = budget.clock, (*method.key, concurrency)
    if settings.warmup_tokens and warm_up:
        method.run(requests[:concurrency], concurrency, min(settings.warmup_tokens, settings.max_new_tokens),
                   budget.until_deadline())
    began = clock()
    try:
        size = len(requests) if method.whole else concurrency
        outputs: list[Output] = []
        seconds = 0.0
        for first in range(0, len(requests), size):
            left = budget.left(key, clock() - began)
            if left <= 0:
                return outputs, seconds, True
            sync()
            start = clock()
            wave = method.run(requests[first: first + size], concurrency, settings.max_new_tokens, left)
            sync()
            took = clock() - start
            if took >= left:  # the wave ran into the budget (a peer stops itself at max_time): not a full wave
                return outputs, seconds, True
            outputs += wave
            seconds += took
        return outputs, seconds, False
    finally:
        budget.used[key] = budget.used.get(key, 0.0) + clock() - began


def _agreement(outputs: list[Output], plain: list[Output] | None) -> float | None:
    pairs = list(zip(outputs, plain or ()))
    return sum(a.tokens == b.tokens for a, b in pairs) / len(pairs) if pairs else None


def _divergence(outputs: list[Output], plain: list[Output]) -> str:
    """How the outputs differ from plain's: requests that differ and the earliest new token where one does."""
    firsts = [next((i for i, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y), min(len(a.tokens),
                                                                                         len(b.tokens)))
              for a, b in zip(outputs, plain) if a.tokens != b.tokens]
    return f"{len(firsts)} of {min(len(outputs), len(plain))} requests differ from plain (earliest at new token " \
           f"{min(firsts)})"


def run_matrix(methods: Sequence[Method], prompts: Sequence[Sequence[int]], settings: ThroughputSettings,
               suite: str, sync: Callable[[], None] = _no_sync, clock: Callable[[], float] = time.perf_counter,
               progress: Callable[[ThroughputRow], None] | None = None) -> tuple[ThroughputRow, ...]:
    """One row per (level, method, scheduler), in level order then method order (plain first).

    Run order: first the `first` methods (our engine) at every level, then the others (the peers) at every level,
    each pass levels in order with plain first; so when the deadline comes, what is lost is peers at high
    concurrency, not our own rows. `settings.repeats` > 1: each level runs its group's methods that many times in
    turn, and a row is the median repeat (`_median_row`); `progress` sees every repeat."""
    if not prompts:
        raise BenchError("no prompts to run")
    methods = sorted(methods, key=lambda m: (m.key != (PLAIN, "none")))
    budget = _Budget(settings.method_budget_s, None if settings.deadline_s is None else clock() + settings.deadline_s,
                     clock)
    done: dict[tuple[int, int], ThroughputRow] = {}
    plain: dict[int, list[Output]] = {}
    for group in ([m for m in methods if m.first], [m for m in methods if not m.first]):
        for level, concurrency in enumerate(settings.concurrency):
            requests = [list(prompts[i % len(prompts)]) for i in range(settings.requests(concurrency))]
            measured: dict[int, list[ThroughputRow]] = {}
            for repeat in range(settings.repeats):
                for method in group:
                    row = _level_row(method, requests, concurrency, settings, suite, budget, sync, plain, repeat == 0)
                    measured.setdefault(methods.index(method), []).append(row)
                    if progress is not None:
                        progress(row)
            for index, rows in measured.items():
                done[(level, index)] = _median_row(rows)
    return tuple(done[key] for key in sorted(done))


def _median_row(rows: list[ThroughputRow]) -> ThroughputRow:
    """The repeats of one method at one level as one row: the "ok" repeat with the median tokens/s (the lower of the
    middle two), every "ok" repeat's tokens/s in `repeats`, losslessness and agreement over all repeats, and a note on
    repeats cut by the budget or the deadline. Without an "ok" repeat, the first repeat (its status says why)."""
    if len(rows) == 1:
        return rows[0]
    ok = [r for r in rows if r.status == "ok"]
    if not ok:
        return rows[0]
    middle = sorted(ok, key=lambda r: r.tokens_per_second)[(len(ok) - 1) // 2]
    verdicts = [r.lossless for r in rows if r.lossless is not None]
    agreements = [r.agreement for r in rows if r.agreement is not None]
    notes = [r.note for r in rows if r.lossless is False][:1]
    if len(ok) < len(rows):
        cut = ", ".join(r.status for r in rows if r.status != "ok")
        notes.append(f"{len(rows) - len(ok)} more not counted ({cut})")
    return replace(middle, repeats=tuple(r.tokens_per_second for r in ok),
                   lossless=all(verdicts) if verdicts else None, agreement=min(agreements) if agreements else None,
                   note="; ".join(notes))


def _level_row(method: Method, requests: list[list[int]], concurrency: int, settings: ThroughputSettings, suite: str,
               budget: _Budget, sync: Callable[[], None], plain: dict[int, list[Output]], warm_up: bool = True
               ) -> ThroughputRow:
    row = dict(suite=suite, method=method.name, concurrency=concurrency, temperature=settings.temperature,
               scheduler=method.scheduler, new_tokens=0, seconds=0.0)
    if method.unavailable:
        return ThroughputRow(**row, status="n/a", note=method.unavailable)
    if method.batch1_only and concurrency > 1:
        return ThroughputRow(**row, status="n/a", note="batch 1 only")
    if budget.deadline is not None and budget.clock() >= budget.deadline:
        return ThroughputRow(**row, status="skipped", note="the run's deadline was reached")
    done, outputs = _row(method, requests, concurrency, settings, budget, sync, row, plain.get(concurrency), warm_up)
    if method.key == (PLAIN, "none") and done.status in ("ok", "timeout") and concurrency not in plain:
        plain[concurrency] = outputs
    return done


def _row(method: Method, requests: list[list[int]], concurrency: int, settings: ThroughputSettings, budget: _Budget,
         sync: Callable[[], None], row: dict, plain: list[Output] | None, warm_up: bool = True
         ) -> tuple[ThroughputRow, list[Output]]:
    try:
        outputs, seconds, cut = _measure(method, requests, concurrency, settings, budget, sync, warm_up)
    except Exception as err:  # noqa: BLE001 — a failing method is a result, not the end of the run
        return ThroughputRow(**row, status="error", note=f"{type(err).__name__}: {err}"[:500]), []
    taus = [t for o in outputs for t in o.taus]
    agreement = None if method.key == (PLAIN, "none") else _agreement(outputs, plain)
    lossless = agreement == 1.0 if (method.speculative and settings.temperature == 0 and agreement is not None) \
        else None
    status = "timeout" if cut else "ok"
    notes = [f"cut by the time budget (or the run's deadline) after {len(outputs)} of {len(requests)} requests"
             if cut else "", _divergence(outputs, plain) if lossless is False else ""]
    note = "; ".join(n for n in notes if n)
    row.update(new_tokens=sum(len(o.tokens) for o in outputs), seconds=seconds)
    return ThroughputRow(**row, mean_tau=sum(taus) / len(taus) if taus else None, requests=len(outputs),
                         lossless=lossless, agreement=agreement, status=status, note=note), outputs
