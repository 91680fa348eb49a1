"""Doctor rules for a running server: τ near 1.0, τ far below the draft's recorded value, eager decode
in steady state, and a server or log that shows no speculative decoding.

Cited: SGLang `python/sglang/srt/observability/scheduler_metrics_mixin.py` (the `Decode batch … accept
len … cuda graph` log line and the `sglang:spec_accept_length` gauge), vLLM `vllm/v1/spec_decode/
metrics.py` (spec-decode counters; τ = 1 + accepted / drafts), and the issues where layout mismatches
served silently at τ ≈ 1 (sglang PR #21272, vllm#56792, sglang#40144). Thresholds match the monitor's.
"""
from __future__ import annotations

from dspark.deploy.doctor_context import DoctorContext, LiveObservation
from dspark.deploy.findings import ERROR, INFO, WARNING, Finding, Rule

MISMATCH_TAU = 1.1  # as monitor_alerts.AlertConfig.mismatch_tau
LOW_MARGIN, VERY_LOW_MARGIN = 0.8, 0.6

UNREACHABLE = Rule(
    "LV-UNREACHABLE", ERROR, "live server or log could not be read",
    "SGLang serves GET /metrics only with --enable-metrics (python/sglang/srt/server_args.py); vLLM serves it by "
    "default.")
SPEC_OFF = Rule(
    "LV-SPEC-OFF", ERROR, "the live server shows no speculative decoding",
    "vLLM registers vllm:spec_decode_* counters (vllm/v1/spec_decode/metrics.py) and SGLang reports "
    "sglang:spec_accept_length and `accept len` (scheduler_metrics_mixin.py) only when speculation is configured.")
NO_TRAFFIC = Rule(
    "LV-NO-TRAFFIC", INFO, "no speculative rounds measured yet",
    "vLLM's spec-decode counters (vllm/v1/spec_decode/metrics.py) stay at zero and SGLang's gauge is recomputed "
    "only every --decode-log-interval (40) decode steps (scheduler_metrics_mixin.py), so an idle server has no "
    "acceptance to judge.")
TAU_ONE = Rule(
    "LV-TAU-ONE", ERROR, "acceptance length ~1.0: the draft is accepted almost never",
    "τ (accept len) counts the bonus token, so τ = 1.0 means no draft token is accepted. Engines serve a draft "
    "with mismatched conventions without an error: sglang PR #21272 (EAGLE vs EAGLE3: accept_len 1.00), "
    "vllm#56792 / sglang#40144 (DSpark vs DFlash anchor layout: 1.06 against a card value of 2.76).")
TAU_LOW = Rule(
    "LV-TAU-LOW", WARNING, "acceptance length far below the draft's recorded value",
    "The draft's recorded τ (its card / config expected_tau, or --expected-tau) was measured on the same target; "
    "a much lower live τ means other conventions (context past the RoPE range, chat template, sampling, "
    "quantized target) or traffic unlike the evaluation (SpecForge #533: 98% training vs 10% served).")
EAGER = Rule(
    "LV-EAGER-STEADY", ERROR, "`cuda graph: False` in steady-state decode",
    "SGLang's decode log reports `cuda graph: False` for a batch that ran eagerly (scheduler_metrics_mixin.py): "
    "batches above --cuda-graph-max-bs, disabled graphs, or graph-less attention backends.")
LOG_EMPTY = Rule(
    "LV-LOG-EMPTY", WARNING, "no `Decode batch` lines in the log",
    "SGLang prints a `Decode batch` line every --decode-log-interval (40) decode steps on attention-TP rank 0 "
    "(scheduler_metrics_mixin.py); a log without them is another rank's, too early, or not SGLang's.")

RULES = (UNREACHABLE, SPEC_OFF, NO_TRAFFIC, TAU_ONE, TAU_LOW, EAGER, LOG_EMPTY)


def _tau(obs: LiveObservation, expected: float | None) -> list[Finding]:
    if obs.tau is None:
        return [NO_TRAFFIC.fire(f"{obs.source} holds no measured acceptance yet",
                                "send traffic (e.g. `dspark bench` or a few chat requests) and run the doctor again",
                                obs.source)]
    if obs.tau <= MISMATCH_TAU:
        return [TAU_ONE.fire(
            f"τ = {obs.tau:.2f} ({obs.source}): speculation costs a draft pass per token and gains nothing",
            "run `dspark doctor` on the launch command with --draft: check method vs anchor layout, layer-id base, "
            "block size and mask token", f"τ {obs.tau:.3f}")]
    if expected and obs.tau < LOW_MARGIN * expected:
        severe = obs.tau < VERY_LOW_MARGIN * expected
        return [TAU_LOW.fire(
            f"τ = {obs.tau:.2f} ({obs.source}) against a recorded {expected:.2f}: "
            f"{100 * (1 - obs.tau / expected):.0f}% of the expected speed-up is lost",
            "compare prompt lengths with the draft's RoPE range, the chat template and sampling with the "
            "evaluation's; re-run `dspark bench` against this server", f"τ {obs.tau:.3f} vs {expected:.3f}",
            severity=ERROR if severe else WARNING)]
    return []


def _one(obs: LiveObservation, expected: float | None) -> list[Finding]:
    if obs.error:
        return [UNREACHABLE.fire("the live checks could not run", "check the URL / file (SGLang needs "
                                 "--enable-metrics for /metrics)", obs.error)]
    if obs.source.startswith("sglang log") and obs.decode_lines == 0:
        return [LOG_EMPTY.fire("the log says nothing about acceptance or CUDA graphs",
                               "pass the log of attention-TP rank 0 after some decoding", obs.source)]
    if not obs.speculative:
        return [SPEC_OFF.fire(f"{obs.source}: the server decodes without the draft",
                              "relaunch with the command from `dspark launch` and check its startup log",
                              obs.source)]
    found = _tau(obs, expected)
    if obs.steady_lines and obs.eager_steady_lines:
        share = obs.eager_steady_lines / obs.steady_lines
        found.append(EAGER.fire(
            f"{obs.eager_steady_lines} of {obs.steady_lines} steady-state decode lines ran eagerly: decode is "
            "several times slower there",
            "raise --cuda-graph-max-bs to --max-running-requests, keep CUDA graphs enabled, avoid "
            "torch_native / flex_attention", f"{share:.0%} eager", severity=ERROR if share >= 0.5 else WARNING))
    return found


def check(ctx: DoctorContext) -> list[Finding]:
    """Live rules over every observation (metrics, log)."""
    expected = ctx.expected_tau
    found: list[Finding] = []
    for obs in ctx.live:
        found.extend(_one(obs, expected))
    return found
