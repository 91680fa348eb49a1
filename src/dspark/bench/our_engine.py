"""Our engine as the throughput runner sees it: build once, then decode a list of requests at a concurrency.

`OurEngine.generate` runs `dspark.engine.batch.BatchEngine` (several sequences per round, continuous batching; on a
GPU with the static backend its CUDA graphs are all captured outside the timed region), built once per concurrency
level, with the none / threshold / algorithm1 schedulers. `StepCosts` measures the round-cost tables Algorithm 1
needs, once. Nothing here times a run or compares outputs (that is `throughput.py`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import torch

from dspark.bench.errors import BenchError
from dspark.bench.throughput import Method, Output
from dspark.config import GenerationConfig
from dspark.engine.schedule import StepCostTable
from dspark.engine.stats import GenerationResult
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target

def outputs(results: Sequence[GenerationResult], drafting: bool) -> list[Output]:
    """Engine results as runner outputs: tokens, and (when drafting) τ = accepted + 1 of every verify round, rounds
    a scheduler cut to no draft included (τ = 1)."""
    return [Output(tuple(r.tokens), tuple(a + 1 for a in r.stats.accepted_counts) if drafting else ())
            for r in results]


class OurEngine:
    """One target + (optional) draft, decoding requests with the engine."""

    def __init__(self, target: Target, draft: DSparkDraft | None, max_length: int, cuda_graphs: bool | None = None,
                 tree: Any = None):
        """`tree` (a `dspark.engine.tree.TreeShape`): verify a tree of drafts per row instead of the chain."""
        self.target, self.draft, self.max_length = target, draft, max_length
        self.tree, self.cuda_graphs = tree, cuda_graphs
        self._engines: dict[int, Any] = {}

    def unsupported(self, scheduler: str) -> str:
        """Why this engine cannot run `scheduler` ("" when it can)."""
        if scheduler != "none" and (self.draft is None or not self.draft.config.enable_confidence_head):
            return f"the {scheduler} scheduler needs a draft with a confidence head"
        if self.tree is not None and scheduler != "none":
            return "tree verification runs without a scheduler"
        if self.tree is not None:
            try:
                self.tree.check(self.draft.config.num_draft_tokens)
            except ValueError as exc:
                return str(exc)
        return ""

    def engine(self, max_batch: int) -> Any:
        """The batched engine for `max_batch` rows, built (and its graphs captured) on first use and kept: the
        schedulers and the step-cost measurement at one level share it, and no level is captured twice."""
        if max_batch not in self._engines:
            from dspark.engine.batch import BatchEngine

            engine = BatchEngine(self.target, self.draft, max_batch=max_batch, max_length=self.max_length,
                                 cuda_graphs=self.cuda_graphs, tree=self.tree)
            if engine.graphs is not None:
                engine.warm_up()  # every graph captured now: a capture inside a timed run would be billed to it
            self._engines[max_batch] = engine
        return self._engines[max_batch]

    def release(self) -> None:
        self._engines.clear()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def generate(self, prompts: list[list[int]], concurrency: int, config: GenerationConfig, scheduler: str = "none",
                 cost_tables: dict[int, StepCostTable] | None = None) -> list[GenerationResult]:
        """Decode every request, at most `concurrency` in flight."""
        reason = self.unsupported(scheduler)
        if reason:
            raise BenchError(reason)
        from dspark.engine.schedule import Scheduling

        return self.engine(concurrency).generate(prompts, config, Scheduling(scheduler, cost_tables))

    def measure_step_costs(self, batches: Sequence[int]) -> dict[int, StepCostTable]:
        """{batch size: rounds per second by verify width}: the engine's own whole rounds (draft block + verify) at
        each batch size in `batches`."""
        return self.engine(max(batches)).round_cost_tables(batches)


class StepCosts:
    """Algorithm 1's round-cost tables, measured once on first use and kept (`tables` is None until then), at batch
    sizes 1, 2, 4, … up to the largest concurrency level."""

    def __init__(self, engine: OurEngine, max_concurrency: int):
        self.engine = engine
        self.batches = sorted({min(2 ** k, max_concurrency) for k in range(max_concurrency.bit_length() + 1)})
        self.tables: dict[int, StepCostTable] | None = None

    def __call__(self) -> dict[int, StepCostTable]:
        if self.tables is None:
            self.tables = self.engine.measure_step_costs(self.batches)
        return self.tables

    def as_dict(self) -> dict[str, dict[str, float]] | None:
        """{batch size: {verify width: rounds per second}}, once measured."""
        if self.tables is None:
            return None
        return {str(b): {str(w): r for w, r in zip(t.widths, t.rates)} for b, t in self.tables.items()}


def our_method(name: str, engine: OurEngine, config: GenerationConfig, scheduler: str = "none",
               threshold: float = 0.0, cost_tables: Callable[[], dict[int, StepCostTable]] | None = None) -> Method:
    """A runner `Method` for our engine with one scheduler."""
    config = replace(config, confidence_threshold=threshold if scheduler == "threshold" else 0.0)

    def run(prompts: list[list[int]], concurrency: int, max_new_tokens: int,
            seconds_left: float | None) -> list[Output]:
        tables = cost_tables() if scheduler == "algorithm1" and cost_tables is not None else None
        return outputs(engine.generate(prompts, concurrency, replace(config, max_new_tokens=max_new_tokens),
                                       scheduler, tables), engine.draft is not None)

    return Method(name, run, scheduler, speculative=engine.draft is not None, whole=True,
                  unavailable=engine.unsupported(scheduler), first=True)
