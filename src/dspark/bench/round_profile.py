"""Where the time of a decoding round goes: propose / verify / host per round, verify latency by width, and one draft
step; the profile that explains a missed speed goal, and the batch-1 round-cost table Algorithm 1 schedules with.

`profile_rounds` runs the batch-1 `dspark.engine.generate` unchanged and times its calls from outside: while it
runs, the engine's `propose` and `DraftContextCache` names are swapped for timing wrappers and the `Target`'s
`forward` for a timing wrapper (all restored afterwards). There "propose" = draft context extension + the draft block
+ Markov decode, "verify" = the target forward of [anchor, drafts], "host" = the rest of the round (acceptance,
cache crop, Python). `profile_engine_rounds` times the batched engine's propose and verify steps the same way (its
verify step includes acceptance and the draft's context extension). Every timed call is synchronised on CUDA, so
the split adds a little sync overhead of its own. Nothing here decides acceptance.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import torch

import dspark.engine.generate as engine
from dspark.config import GenerationConfig
from dspark.engine.draft_step import DraftContextCache
from dspark.engine.schedule import StepCostTable
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target


@dataclass(frozen=True)
class RoundProfile:
    rounds: int  # verify rounds (the prefill is not one)
    new_tokens: int
    seconds: float  # the whole generation, prefill included
    prefill_ms: float
    propose_ms: float  # per round
    verify_ms: float  # per round
    host_ms: float  # per round: the round's time not spent in propose or verify

    @property
    def round_ms(self) -> float:
        return self.propose_ms + self.verify_ms + self.host_ms

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "round_ms": self.round_ms, "tokens_per_second": self.tokens_per_second}


def cuda_sync(device: torch.device | str) -> Callable[[], None]:
    """torch.cuda.synchronize for a CUDA device, a no-op otherwise."""
    if torch.device(device).type == "cuda":
        return torch.cuda.synchronize
    return lambda: None


def _timed(fn: Callable, spent: list[float], sync: Callable[[], None]) -> Callable:
    def wrapper(*args, **kwargs):
        sync()
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        sync()
        spent.append(time.perf_counter() - start)
        return out
    return wrapper


def profile_rounds(target: Target, draft: DSparkDraft | None, prompt: Sequence[int], config: GenerationConfig,
                   sync: Callable[[], None] | None = None) -> RoundProfile:
    """Generate once with the batch-1 engine and split each round's time into propose / verify / host."""
    sync = sync or cuda_sync(target.device)
    forwards: list[float] = []
    proposes: list[float] = []

    class TimedContext(DraftContextCache):
        def extend(self, features: torch.Tensor) -> None:
            _timed(super().extend, proposes, sync)(features)

    saved = engine.propose, engine.DraftContextCache
    engine.propose, engine.DraftContextCache = _timed(engine.propose, proposes, sync), TimedContext
    target.forward = _timed(Target.forward.__get__(target), forwards, sync)
    try:
        sync()
        began = time.perf_counter()
        result = engine.generate(target, draft, list(prompt), config)
        sync()
        seconds = time.perf_counter() - began
    finally:
        engine.propose, engine.DraftContextCache = saved
        del target.forward  # back to the class's method
    rounds = max(1, len(forwards) - 1)
    prefill, verify = forwards[0], sum(forwards[1:])
    host = seconds - prefill - verify - sum(proposes)
    return RoundProfile(len(forwards) - 1, len(result.tokens), seconds, 1000 * prefill, 1000 * sum(proposes) / rounds,
                        1000 * verify / rounds, 1000 * max(0.0, host) / rounds)


def profile_engine_rounds(engine: Any, prompts: Sequence[Sequence[int]], config: GenerationConfig,
                          scheduling: Any = None, sync: Callable[[], None] | None = None) -> RoundProfile:
    """The same split for a `dspark.engine.batch.BatchEngine` (graphed or eager): its propose and verify steps and
    its prefills (`_admit`) are timed from outside for one `generate` call; rounds are batch rounds."""
    sync = sync or cuda_sync(engine.target.device)
    proposes: list[float] = []
    verifies: list[float] = []
    prefills: list[float] = []
    engine._propose = _timed(type(engine)._propose.__get__(engine), proposes, sync)
    engine._verify = _timed(type(engine)._verify.__get__(engine), verifies, sync)
    engine._admit = _timed(type(engine)._admit.__get__(engine), prefills, sync)
    try:
        sync()
        began = time.perf_counter()
        results = engine.generate([list(p) for p in prompts], config, scheduling)
        sync()
        seconds = time.perf_counter() - began
    finally:
        del engine._propose, engine._verify, engine._admit  # back to the class's methods
    rounds = max(1, len(verifies))
    host = seconds - sum(prefills) - sum(proposes) - sum(verifies)
    return RoundProfile(len(verifies), sum(len(r.tokens) for r in results), seconds, 1000 * sum(prefills),
                        1000 * sum(proposes) / rounds, 1000 * sum(verifies) / rounds, 1000 * max(0.0, host) / rounds)


def _median_ms(fn: Callable[[], object], repeat: int, sync: Callable[[], None]) -> float:
    times = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return 1000 * sorted(times)[len(times) // 2]


@torch.inference_mode()
def verify_latency_ms(target: Target, widths: Sequence[int], context_tokens: int = 512, repeat: int = 5,
                      sync: Callable[[], None] | None = None) -> dict[int, float]:
    """Median ms of one eager target forward of `width` tokens after a `context_tokens` prefix (batch 1)."""
    sync = sync or cuda_sync(target.device)
    vocab = target.vocab_size
    prefix = (torch.arange(context_tokens, device=target.device) * 7919 % vocab)[None]  # [1, P] any valid ids
    target.reset()
    target.forward(prefix)
    latency = {}
    for width in widths:
        block = (torch.arange(width, device=target.device) * 31 % vocab)[None]  # [1, W]

        def step() -> None:
            target.crop(context_tokens)
            target.forward(block)

        step()  # warm-up
        latency[int(width)] = _median_ms(step, repeat, sync)
    target.reset()
    return latency


@torch.inference_mode()
def draft_step_ms(target: Target, draft: DSparkDraft, context_tokens: int = 512, repeat: int = 5,
                  sync: Callable[[], None] | None = None) -> float:
    """Median ms of one draft block (propose: block forward + Markov decode) after a `context_tokens` context."""
    from dspark.engine.draft_step import propose
    from dspark.engine.generate import prepare_pair

    sync = sync or cuda_sync(target.device)
    prepare_pair(target, draft)
    prefix = (torch.arange(context_tokens, device=target.device) * 7919 % target.vocab_size)[None]  # [1, P]
    target.reset()
    cache = DraftContextCache(draft)
    cache.extend(target.forward(prefix).features)
    target.reset()
    config = GenerationConfig()
    propose(draft, cache, 5, config, None)  # warm-up
    return _median_ms(lambda: propose(draft, cache, 5, config, None), repeat, sync)


def round_cost_table(target: Target, draft: DSparkDraft, context_tokens: int = 512, repeat: int = 5) -> StepCostTable:
    """The batch-1 loop's Algorithm 1 table: one round's latency by verify width w = 1 … γ+1, i.e. one draft block
    (paid whatever is verified) + one target forward of w tokens, so τ·SPS(w) is tokens per second of whole rounds.
    Nearly flat on a GPU at batch 1; on a CPU a second verify token can double the target pass. Latency is made
    non-decreasing in width (the running maximum of the medians)."""
    drafting = draft_step_ms(target, draft, context_tokens, repeat)
    verify = verify_latency_ms(target, range(1, draft.config.num_draft_tokens + 2), context_tokens, repeat)
    latency, slowest = {}, 0.0
    for width in sorted(verify):  # a wider verify never costs less: timing noise must not make a bump Algorithm 1
        slowest = max(slowest, drafting + verify[width])  # would stop at, so the table keeps the running maximum
        latency[width] = slowest
    return StepCostTable.from_latency_ms(latency)
