"""The acceptance run: speculative generation over encoded prompt suites, at each temperature, into result rows.

For every (temperature, suite) it generates each prompt with the lossless engine and pools the per-round acceptance
into one `AcceptanceRow` (mean τ, per-position conditional acceptance, τ histogram, each prompt's draft rounds and
accepted drafts). Prompts whose length plus max_new_tokens do not fit the model's positions are skipped and counted.
`batch` 1 runs the prompts one at a time (`dspark.generate`; the suite's prompt i samples with seed + i);
`batch` N > 1 decodes up to N at a time through a `BatchEngine` built per suite (static caches for N rows × the suite's
longest prompt + output, fewer rows when that passes BATCH_POSITIONS; continuous batching; CUDA graphs for greedy
rounds on a GPU; one sampling stream per suite, seeded with `seed`): the same rounds at T = 0 up to numerics (identical
in fp32), the same distribution at T > 0. Its seconds are the session's wall time, graph captures included. It loads
nothing and prints nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
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
    max_drafts: int | None = None  # drafts verified per round at most (None: the draft's whole block)
    confidence_threshold: float = 0.0  # 0: no confidence scheduling (the paper's Table 1 setting)
    batch: int = 1  # sequences decoded at once (1: prompt by prompt, each with its own seed)
    tree_nodes: int = 0  # > 0: the batched engine verifies a tree of this many drafts per round
    tree_beam: int = 4  # the tree's nodes kept per depth
    tree_score_temperature: float = 1.0  # the tree's node scores: log-softmax(logits / this) (TreeShape)

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperatures", tuple(float(t) for t in self.temperatures))
        if not self.temperatures:
            raise BenchError("give at least one temperature (e.g. --temperature 0,1)")
        if any(t < 0 for t in self.temperatures):
            raise BenchError("temperatures must be >= 0 (0 means greedy)")
        if self.max_new_tokens < 2:
            raise BenchError("--max-new-tokens must be at least 2 (one bonus token, then drafting)")
        if self.max_drafts is not None and self.max_drafts < 1:
            raise BenchError("--max-drafts must be at least 1: acceptance needs drafts (0 would be plain decoding)")
        if self.batch < 1:
            raise BenchError("--batch must be at least 1 (1: one prompt at a time)")
        if self.tree_nodes < 0 or self.tree_beam < 1:
            raise BenchError("--tree-nodes must be >= 0 (0: the chain) and --tree-beam >= 1")
        if not self.tree_score_temperature > 0:
            raise BenchError("--tree-score-temperature must be > 0 (1: the draft's own log-probabilities)")
        if self.tree_nodes and (self.max_drafts is not None or self.confidence_threshold > 0):
            raise BenchError("a tree verifies the draft's whole block: drop --max-drafts and --confidence-threshold")

    def as_dict(self) -> dict[str, Any]:
        return {"temperatures": list(self.temperatures), "max_new_tokens": self.max_new_tokens, "seed": self.seed,
                "top_p": self.top_p, "top_k": self.top_k, "max_drafts": self.max_drafts,
                "confidence_threshold": self.confidence_threshold, "batch": self.batch,
                "tree_nodes": self.tree_nodes, "tree_beam": self.tree_beam,
                "tree_score_temperature": self.tree_score_temperature}


def count_work(prompts: Mapping[str, Sequence[EncodedPrompt]], settings: AcceptanceSettings) -> int:
    """How many generations a run does (for a progress bar)."""
    return len(settings.temperatures) * sum(len(p) for p in prompts.values())


def run_acceptance(target: Any, draft: Any, prompts: Mapping[str, Sequence[EncodedPrompt]],
                   settings: AcceptanceSettings = AcceptanceSettings(), eos_token_ids: Sequence[int] = (),
                   max_positions: int | None = None,
                   advance: Callable[[str, float], None] | None = None) -> tuple[AcceptanceRow, ...]:
    """One row per (temperature, suite), temperatures outermost. `advance(suite, T)` is called after each prompt."""
    gamma = settings.max_drafts if settings.max_drafts is not None else int(draft.config.num_draft_tokens)
    # the batch engine holds a whole block per row whatever --max-drafts verifies
    batched = settings.batch > 1 or settings.tree_nodes > 0  # a tree runs in the batched engine
    reserve = gamma if not batched else max(gamma, int(draft.config.num_draft_tokens))
    fits = {suite: [(i, list(p.token_ids)) for i, p in enumerate(encoded) if max_positions is None
                    or len(p.token_ids) + settings.max_new_tokens + reserve <= max_positions]
            for suite, encoded in prompts.items()}  # (index in the suite, token ids)
    run = _batched(target, draft, settings) if batched else _one_at_a_time(target, draft)
    rows = []
    for temperature in settings.temperatures:
        for suite, encoded in prompts.items():
            tick = partial(advance, suite, temperature) if advance is not None else (lambda: None)
            skipped = len(encoded) - len(fits[suite])
            for _ in range(skipped):
                tick()
            config = partial(_config, settings, temperature, tuple(eos_token_ids))
            each, seconds = run(fits[suite], config, tick)
            stats = GenerationStats.pooled(each)
            per_prompt = tuple((encoded[i].id, *one.drafted()) for (i, _), one in zip(fits[suite], each))
            rows.append(AcceptanceRow.from_stats(suite, temperature, gamma, stats, len(fits[suite]), skipped, seconds,
                                                 per_prompt))
    return tuple(rows)


def _config(settings: AcceptanceSettings, temperature: float, eos_token_ids: tuple[int, ...], seed_offset: int) -> Any:
    """The generation settings of one prompt (batch 1: seed + its index in the suite) or of one batched suite."""
    from dspark.config import GenerationConfig

    return GenerationConfig(max_new_tokens=settings.max_new_tokens, temperature=temperature, top_p=settings.top_p,
                            top_k=settings.top_k, seed=settings.seed + seed_offset, eos_token_ids=eos_token_ids,
                            max_drafts=settings.max_drafts, confidence_threshold=settings.confidence_threshold)


# ((index in the suite, token ids) pairs, config by seed offset, called after each prompt)
#   -> (each prompt's rounds in the order given, seconds)
Run = Callable[[list[tuple[int, list[int]]], Callable[[int], Any], Callable[[], None]],
               tuple[list[GenerationStats], float]]


def _one_at_a_time(target: Any, draft: Any) -> Run:
    """Each prompt alone (`dspark.generate`) with `config(its index)`; the seconds are the generations' own."""
    from dspark.engine.generate import generate

    def run(prompts, config, done):
        each, seconds = [], 0.0
        for index, prompt in prompts:
            result = generate(target, draft, prompt, config(index))
            each.append(result.stats)
            seconds += result.seconds
            done()
        return each, seconds

    return run


BATCH_POSITIONS = 1 << 18  # cache positions (rows × length) a batched suite may allocate: fewer rows for long prompts


def _batched(target: Any, draft: Any, settings: AcceptanceSettings) -> Run:
    """A suite's prompts through a `BatchEngine` sized for that suite (the previous suite's is freed first); the
    seconds are the session's wall time."""
    import time

    from dspark.engine.batch import engine_for
    from dspark.engine.tree import TreeShape

    tree = (TreeShape(settings.tree_nodes, settings.tree_beam, score_temperature=settings.tree_score_temperature)
            if settings.tree_nodes else None)

    def run(prompts, config, done):
        if not prompts:
            return [], 0.0
        ids = [p for _, p in prompts]
        _free_cuda_cache()  # the last suite's caches
        engine = engine_for(target, draft, ids, settings.max_new_tokens, settings.batch, max_positions=BATCH_POSITIONS,
                            tree=tree)
        began = time.perf_counter()
        results = engine.generate(ids, config(0), on_finish=lambda _: done())
        seconds = time.perf_counter() - began
        return [result.stats for result in results], seconds  # results come in prompt order

    return run


def _free_cuda_cache() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def pooled(rows: Sequence[AcceptanceRow]) -> tuple[AcceptanceRow, ...]:
    """One 'all' row per temperature, pooling every suite's rounds (exact: the round tables are added)."""
    out: dict[float, AcceptanceRow] = {}
    for row in rows:
        out[row.temperature] = row if row.temperature not in out else out[row.temperature].merge(row)
    return tuple(AcceptanceRow(**{**vars(r), "suite": "all"}) for r in out.values())
