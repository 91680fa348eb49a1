"""Everything one doctor run examines, gathered in frozen dataclasses the rule modules read.

`DoctorContext` bundles the parsed launch command (and its engine-neutral view), the draft and target
facts, the context length users will send, and live observations from `/metrics` or an SGLang log.
Building it (reading files, scraping) is `doctor.py`'s job; judging it is the `rules_*` modules'.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.deploy.checkpoint_facts import DraftFacts, TargetFacts
from dspark.deploy.cmdline import LaunchCommand
from dspark.deploy.serving_view import ServingView


@dataclass(frozen=True)
class LiveObservation:
    """What a running server showed: τ and acceptance from metrics or log lines, eager-decode counts."""

    source: str  # "vllm metrics", "sglang metrics", "dspark metrics", "sglang log"
    tau: float | None = None  # mean acceptance length, bonus included
    accept_rate: float | None = None
    drafts: float | None = None  # verify rounds with drafts (counter servers)
    decode_lines: int = 0  # SGLang log: all `Decode batch` lines
    steady_lines: int = 0  # ... after warm-up, with requests running
    eager_steady_lines: int = 0  # ... of which `cuda graph: False`
    speculative: bool = True  # False when the server shows no speculative decoding at all
    error: str | None = None  # the server or file could not be read


@dataclass(frozen=True)
class DoctorContext:
    """The inputs of one doctor run; every field may be None when the user did not provide it."""

    command: LaunchCommand | None = None
    view: ServingView | None = None
    llm_api_options: dict | None = None  # TensorRT-LLM YAML
    llm_api_options_error: str | None = None
    draft: DraftFacts | None = None
    target: TargetFacts | None = None
    context_length: int | None = None  # the longest prompt + output users will send
    context_source: str = ""  # where context_length came from, for messages
    live: tuple[LiveObservation, ...] = ()
    expected_tau: float | None = None

    @property
    def engine(self) -> str | None:
        return self.command.engine if self.command else None

    @property
    def method(self) -> str | None:
        return self.view.method if self.view else None

    @property
    def speculative(self) -> bool:
        return self.method is not None
