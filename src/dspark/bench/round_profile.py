"""Where the time of a decoding round goes: prefill, propose, verify and host time per round of the engine.

`profile_engine_rounds` times a `BatchEngine`'s steps from outside for one `generate` call: its propose step (the
draft block + Markov decode + scheduling), its verify step (the target pass, acceptance and the draft's context
extension) and its prefills; "host" is the rest of the round (the one sync, EOS and budget bookkeeping, Python).
Every timed call is synchronised on CUDA, so the split adds a little sync overhead of its own. Round costs by verify
width, which Algorithm 1 schedules with, are `BatchEngine.measure_step_costs`. Nothing here decides acceptance.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import torch

from dspark.config import GenerationConfig


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


def profile_engine_rounds(engine: Any, prompts: Sequence[Sequence[int]], config: GenerationConfig,
                          scheduling: Any = None, sync: Callable[[], None] | None = None) -> RoundProfile:
    """The same split for a `dspark.engine.batch.BatchEngine` (graphed or eager): its propose and verify steps and
    its prefills (`_admit`) are timed from outside for one `generate` call; rounds are batch rounds."""
    sync = sync or cuda_sync(engine.target.device)
    proposes: list[float] = []
    verifies: list[float] = []
    prefills: list[float] = []
    engine.propose = _timed(type(engine).propose.__get__(engine), proposes, sync)
    engine.verify = _timed(type(engine).verify.__get__(engine), verifies, sync)
    engine.admit = _timed(type(engine).admit.__get__(engine), prefills, sync)
    try:
        sync()
        began = time.perf_counter()
        results = engine.generate([list(p) for p in prompts], config, scheduling)
        sync()
        seconds = time.perf_counter() - began
    finally:
        del engine.propose, engine.verify, engine.admit  # back to the class's methods
    rounds = max(1, len(verifies))
    host = seconds - sum(prefills) - sum(proposes) - sum(verifies)
    return RoundProfile(len(verifies), sum(len(r.tokens) for r in results), seconds, 1000 * sum(prefills),
                        1000 * sum(proposes) / rounds, 1000 * sum(verifies) / rounds, 1000 * max(0.0, host) / rounds)
