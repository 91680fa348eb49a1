"""From a request (model folders, suite names, prompt files, settings) to a finished acceptance `BenchResult`.

Order: check that the suites' data packages are installed (before any slow model load), load target + draft +
tokenizer, build and encode the prompts, run, and record where and how. Progress goes to the caller's callbacks;
nothing is printed or written here (the CLI saves the result).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from dspark.bench.acceptance import AcceptanceSettings, count_work, run_acceptance
from dspark.bench.encode import EncodedPrompt, encode_prompt, has_chat_template, token_counter
from dspark.bench.errors import BenchError
from dspark.bench.loading import load_models
from dspark.bench.prompts import BenchPrompt, select
from dspark.bench.results import BenchResult, SuiteRecord
from dspark.bench.runinfo import collect_run_info
from dspark.bench.sources.jsonl import jsonl_prompts
from dspark.bench.suites import SUITES, SuiteOptions, check_installed, load_suites

LONG_CONTEXT_CAP = 32_768  # default long-context length when the model allows more (pass --context-tokens to go up)
TEMPLATE_MARGIN = 64  # tokens left for the chat template around the long-context text


class Progress(Protocol):
    def start(self, total: int) -> None: ...

    def advance(self, suite: str, temperature: float) -> None: ...


@dataclass(frozen=True)
class AcceptanceRequest:
    target: str
    draft: str
    tokenizer: str | None = None
    suites: tuple[str, ...] = ()  # built-in suite names (already validated by suites.suite_names)
    prompt_files: tuple[str, ...] = ()  # user JSONL files
    limit: int | None = None
    seed: int = 0
    context_tokens: int | None = None  # long suite; None: the model's positions minus the output, capped
    settings: AcceptanceSettings = AcceptanceSettings()
    device: str = "auto"
    dtype: str = "auto"
    use_chat_template: bool = True
    template_kwargs: tuple[tuple[str, Any], ...] = ()  # passed to the chat template, e.g. (("enable_thinking", False),)
    command: str = ""
    draft_vocab: int = 0  # K > 0: the draft scores only the K most frequent tokens (FR-Spec); 0: all

    def __post_init__(self) -> None:
        if not self.suites and not self.prompt_files:
            raise BenchError("nothing to measure: name suites with --suite or give prompts with --prompts FILE.jsonl")


def _user_suites(files: tuple[str, ...], limit: int | None, seed: int) -> dict[str, tuple[list[BenchPrompt], str]]:
    grouped: dict[str, tuple[list[BenchPrompt], str]] = {}
    for path in files:
        for prompt in jsonl_prompts(path):
            grouped.setdefault(prompt.suite, ([], path))[0].append(prompt)
    clash = sorted(set(grouped) & set(SUITES))
    if clash:
        raise BenchError(f"prompt file suite name(s) {clash} clash with built-in suites; set another 'suite' field")
    return {name: (select(prompts, limit, seed, name), path) for name, (prompts, path) in grouped.items()}


def run_acceptance_job(request: AcceptanceRequest, progress: Progress | None = None) -> BenchResult:
    check_installed(request.suites)
    user = _user_suites(request.prompt_files, request.limit, request.seed)  # bad files fail before the model loads
    models = load_models(request.target, request.draft, request.tokenizer, request.device, request.dtype,
                         request.draft_vocab)
    settings = request.settings
    context = request.context_tokens or max(1, min(
        LONG_CONTEXT_CAP, models.max_positions - settings.max_new_tokens - models.drafts_per_round - TEMPLATE_MARGIN))
    options = SuiteOptions(request.limit, request.seed, context, token_counter(models.tokenizer))
    prompts = {**load_suites(request.suites, options), **{name: p for name, (p, _) in user.items()}}
    kwargs = dict(request.template_kwargs)
    encoded: dict[str, list[EncodedPrompt]] = {
        name: [encode_prompt(models.tokenizer, p, request.use_chat_template, kwargs) for p in items]
        for name, items in prompts.items()}
    if progress is not None:
        progress.start(count_work(encoded, settings))
    rows = run_acceptance(models.target, models.draft, encoded, settings, models.eos_token_ids, models.max_positions,
                          progress.advance if progress is not None else None)
    records = tuple(SuiteRecord(name, len(items), SUITES[name].package.requirement, SUITES[name].mirrors)
                    if name in SUITES else SuiteRecord(name, len(items), user[name][1])
                    for name, items in prompts.items())
    return BenchResult(
        run=collect_run_info(request.command, models.device), target=str(request.target), draft=str(request.draft),
        settings={**settings.as_dict(), "limit": request.limit,
                  "context_tokens": context if "long" in prompts else None,
                  "drafts_per_round": settings.max_drafts or models.drafts_per_round,
                  "chat_template": request.use_chat_template and has_chat_template(models.tokenizer),
                  "chat_template_kwargs": kwargs,
                  "max_positions": models.max_positions, "eos_token_ids": list(models.eos_token_ids),
                  "dtype": request.dtype, "draft_vocab": request.draft_vocab},
        suites=records, acceptance=rows)
