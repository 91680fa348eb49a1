"""An engine-neutral view of one launch: speculation method, draft, parallelism and context.

Built from a parsed `LaunchCommand` (plus, for TensorRT-LLM, its LLM-API options YAML as a dict) so that
rules about the checkpoint and about parallelism can be written once for all engines. Engine-specific
rules read the `LaunchCommand` directly. Nothing here judges a setting.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from dspark.deploy.cmdline import CommandError, LaunchCommand, parse_int


@dataclass(frozen=True)
class ServingView:
    """What a launch will serve. `method` is lower-case ("dspark", "dflash", "eagle3", …) or None (no speculation)."""

    engine: str
    target: str | None
    method: str | None
    draft_path: str | None
    context_length: int | None
    tp: int = 1
    pp: int = 1
    dcp: int = 1
    spec_config: dict = field(default_factory=dict)  # vLLM --speculative-config / TRT-LLM speculative_config
    spec_config_error: str | None = None


def _context_flag(cmd: LaunchCommand, name: str) -> int | None:
    """A context-length flag; engine-chosen values (`auto`, -1) mean "the model's own", i.e. None here."""
    value = cmd.get(name)
    if value is None or value.strip().lower() in ("auto", "-1"):
        return None
    return parse_int(value, f"--{name}")


def _int_or(cmd: LaunchCommand, name: str, default: int) -> int:
    value = cmd.get_int(name)
    return default if value is None else value


def _vllm_infer_method(model: str | None) -> str | None:
    """vllm/config/speculative.py: with no `method`, the draft's name picks it."""
    name = (model or "").lower()
    for needle, method in (("dspark", "dspark"), ("dflash", "dflash"), ("eagle3", "eagle3"), ("eagle-", "eagle")):
        if needle in name:
            return method
    return "draft_model" if model else None


def _sglang(cmd: LaunchCommand) -> ServingView:
    algo = cmd.get("speculative-algorithm")
    method = algo.lower() if algo else None
    if method == "nextn":
        method = "eagle"
    return ServingView(
        engine="sglang", target=cmd.get("model-path"), method=method,
        draft_path=cmd.get("speculative-draft-model-path"),
        context_length=_context_flag(cmd, "context-length"),
        tp=_int_or(cmd, "tp-size", 1), pp=_int_or(cmd, "pp-size", 1), dcp=_int_or(cmd, "dcp-size", 1),
    )


def _vllm(cmd: LaunchCommand) -> ServingView:
    raw = cmd.get("speculative-config")
    spec: dict = {}
    error = None
    if raw is not None:
        try:
            spec = json.loads(raw)
            if not isinstance(spec, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            spec, error = {}, f"--speculative-config is not a JSON object: {exc}"
    method = spec.get("method")
    method = method.lower() if isinstance(method, str) else (_vllm_infer_method(spec.get("model")) if spec else None)
    target = cmd.positionals[0] if cmd.positionals else cmd.get("model")
    return ServingView(
        engine="vllm", target=target, method=method, draft_path=spec.get("model"),
        context_length=_context_flag(cmd, "max-model-len"),
        tp=_int_or(cmd, "tensor-parallel-size", 1), pp=_int_or(cmd, "pipeline-parallel-size", 1),
        dcp=_int_or(cmd, "decode-context-parallel-size", 1), spec_config=spec, spec_config_error=error,
    )


def _trtllm(cmd: LaunchCommand, options: dict | None) -> ServingView:
    options = options or {}
    spec = options.get("speculative_config") if isinstance(options.get("speculative_config"), dict) else {}
    kind = spec.get("decoding_type")
    method = kind.lower() if isinstance(kind, str) else None
    draft = spec.get("speculative_model") or spec.get("speculative_model_dir")
    target = cmd.positionals[0] if cmd.positionals else cmd.get("model-path")
    seq = _context_flag(cmd, "max-seq-len")
    if seq is None and options.get("max_seq_len") is not None:
        seq = parse_int(str(options["max_seq_len"]), "max_seq_len")
    tp = cmd.get_int("tp-size") or options.get("tensor_parallel_size") or 1
    pp = cmd.get_int("pp-size") or options.get("pipeline_parallel_size") or 1
    return ServingView(engine="trtllm", target=target, method=method, draft_path=draft, context_length=seq,
                       tp=int(tp), pp=int(pp), spec_config=spec)


def view_of(cmd: LaunchCommand, llm_api_options: dict | None = None) -> ServingView:
    """The engine-neutral view of `cmd` (TensorRT-LLM: with its LLM-API options)."""
    if cmd.engine == "sglang":
        return _sglang(cmd)
    if cmd.engine == "vllm":
        return _vllm(cmd)
    if cmd.engine == "trtllm":
        return _trtllm(cmd, llm_api_options)
    raise CommandError(f"unknown engine {cmd.engine!r}")
