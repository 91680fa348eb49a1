"""`dspark doctor`: gather the inputs (command, draft, target, context, live server, log) and run every rule.

`diagnose(DoctorRequest)` reads what the user pointed at, builds one `DoctorContext` per engine command
in the text (a multi-node script holds one per node), runs the rule modules over each, and returns one
`DoctorReport`. Rules live in the `rules_*` modules; this module decides nothing itself.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from dspark.deploy import (
    rules_checkpoint,
    rules_live,
    rules_parallel,
    rules_sglang,
    rules_sglang_spec,
    rules_trtllm,
    rules_vllm,
)
from dspark.deploy.checkpoint_facts import DraftFacts, TargetFacts
from dspark.deploy.cmdline import LaunchCommand, heredoc_files, parse_command
from dspark.deploy.doctor_context import DoctorContext, LiveObservation
from dspark.deploy.findings import DoctorReport, Finding, Rule
from dspark.deploy.live_observe import observe_log, observe_url
from dspark.deploy.monitor_expected import ExpectedTauError, expected_tau_from_draft
from dspark.deploy.resolve import preset_for_path, resolve_draft, resolve_target
from dspark.deploy.serving_view import view_of

MODULES = (rules_sglang, rules_sglang_spec, rules_vllm, rules_trtllm, rules_parallel, rules_checkpoint,
           rules_live)


class DoctorError(ValueError):
    """Inputs the doctor cannot work with."""


@dataclass(frozen=True)
class DoctorRequest:
    """What the user gave `dspark doctor`. Paths may be folders, config.json files, or preset names."""

    command_text: str | None = None
    draft: str | None = None
    target_config: str | None = None
    context: int | None = None
    url: str | None = None
    log_path: str | None = None
    llm_api_options: dict | None = None  # TensorRT-LLM options already loaded
    llm_api_options_path: str | None = None
    expected_tau: float | None = None
    timeout: float = 5.0
    draft_facts: DraftFacts | None = None  # already resolved (used by `dspark launch`); wins over `draft`
    target_facts: TargetFacts | None = None


def all_rules() -> tuple[Rule, ...]:
    """Every rule the doctor knows, in module order."""
    return tuple(rule for module in MODULES for rule in module.RULES)


def run_rules(ctx: DoctorContext) -> list[Finding]:
    """All findings of every rule module on one context."""
    found: list[Finding] = []
    for module in MODULES:
        found.extend(module.check(ctx))
    return found


def _local_config(path: str | None) -> bool:
    return bool(path) and os.path.isfile(os.path.join(path, "config.json"))


def _draft_for(request: DoctorRequest, draft_path: str | None) -> DraftFacts | None:
    if request.draft_facts is not None:
        return request.draft_facts
    if request.draft:
        return resolve_draft(request.draft).facts  # type: ignore[return-value]
    if _local_config(draft_path):
        return resolve_draft(draft_path).facts  # type: ignore[arg-type,return-value]
    known = preset_for_path(draft_path, "draft")
    return known.facts if known else None  # type: ignore[return-value]


def _target_for(request: DoctorRequest, target_path: str | None) -> TargetFacts | None:
    if request.target_facts is not None:
        return request.target_facts
    if request.target_config:
        return resolve_target(request.target_config).facts  # type: ignore[return-value]
    if _local_config(target_path):
        return resolve_target(target_path).facts  # type: ignore[arg-type,return-value]
    known = preset_for_path(target_path, "target")
    return known.facts if known else None  # type: ignore[return-value]


def _options_for(request: DoctorRequest, cmd: LaunchCommand) -> tuple[dict | None, str | None]:
    """TensorRT-LLM options: given, written by the script itself (here-document), or read from disk."""
    if cmd.engine != "trtllm":
        return None, None
    if request.llm_api_options is not None:
        return request.llm_api_options, None
    path = request.llm_api_options_path or cmd.get("extra-llm-api-options")
    if not path:
        return None, None
    written = heredoc_files(request.command_text or "")
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML comes with transformers
        return None, "reading TensorRT-LLM options needs PyYAML (pip install pyyaml)"
    try:
        if path in written and not request.llm_api_options_path:
            data = yaml.safe_load(written[path])
        elif os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        else:
            return None, f"LLM-API options file {path!r} not found (pass it with --llm-api-options)"
    except OSError as exc:
        return None, f"cannot read {path}: {exc}"
    except yaml.YAMLError as exc:
        return None, f"cannot parse {path} as YAML: {exc}"
    if not isinstance(data, dict):
        return None, f"{path} is not a YAML mapping"
    return data, None


def _expected_tau(request: DoctorRequest, draft_path: str | None) -> float | None:
    if request.expected_tau is not None:
        return request.expected_tau
    folder = request.draft if request.draft and os.path.isdir(request.draft) else draft_path
    if folder and os.path.isdir(folder):
        try:
            return expected_tau_from_draft(folder)[0]
        except ExpectedTauError:
            return None
    return None


def _context(request: DoctorRequest, view_context: int | None, target: TargetFacts | None) -> tuple[int | None, str]:
    if request.context is not None:
        return request.context, "--context"
    if view_context is not None:
        return view_context, "the command's context limit"
    if target is not None and target.max_position_embeddings:
        return target.max_position_embeddings, "the target's max_position_embeddings, the engines' default"
    return None, ""


def _live(request: DoctorRequest) -> tuple[LiveObservation, ...]:
    observations = []
    if request.url:
        observations.append(observe_url(request.url, request.timeout))
    if request.log_path:
        try:
            with open(request.log_path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError as exc:
            observations.append(LiveObservation(source=f"sglang log {request.log_path}", error=str(exc)))
        else:
            observations.append(observe_log(text, source=f"sglang log {request.log_path}"))
    return tuple(observations)


def diagnose(request: DoctorRequest) -> DoctorReport:
    """Run every rule on everything the request points at."""
    if not (request.command_text or request.url or request.log_path or request.draft or request.draft_facts):
        raise DoctorError("nothing to check: give a launch command (string or --file), --url, --log or --draft")
    live = _live(request)
    commands = parse_command(request.command_text) if request.command_text else []
    findings: list[Finding] = []
    checked: list[str] = []
    for cmd in commands or [None]:
        view = None
        options = options_error = None
        if cmd is not None:
            options, options_error = _options_for(request, cmd)
            view = view_of(cmd, options)
        draft = _draft_for(request, view.draft_path if view else None)
        target = _target_for(request, view.target if view else None)
        context, source = _context(request, view.context_length if view else None, target)
        ctx = DoctorContext(
            command=cmd, view=view, llm_api_options=options, llm_api_options_error=options_error,
            draft=draft, target=target, context_length=context, context_source=source, live=live,
            expected_tau=_expected_tau(request, view.draft_path if view else None),
        )
        findings.extend(run_rules(ctx))
        checked += [f"command:{cmd.engine}"] if cmd else []
        checked += [f"draft:{draft.source}"] if draft else []
        checked += [f"target:{target.source}"] if target else []
    checked += [f"live:{obs.source}" for obs in live]
    return DoctorReport.of(findings, list(dict.fromkeys(checked)))
