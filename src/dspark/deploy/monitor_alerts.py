"""Acceptance alerts for the live monitor: pure decisions over windows, no I/O.

Four alerts, each a code and a sentence that says what it means and what to check:

- `tau-mismatch`: mean τ at or below `mismatch_tau` (≈ 1.0). Engines do not fail on a draft whose
  layout or conventions do not match: they serve it and accept almost nothing (sglang PR#21272 EAGLE vs
  EAGLE3 → accept_len 1.00; vllm#56792 / sglang#40144 DSpark vs DFlash anchor layout → 1.06 against a card
  value of 2.76), so τ ≈ 1.0 is the signature of a mismatch, not of a weak draft.
- `tau-below-min`: mean τ under the user's `--min-tau`.
- `tau-below-expected`: mean τ under `expected_margin` × the draft's expected τ (its card, or `--expected-tau`).
- `acceptance-collapse`: the accepted drafts per verify step (τ − 1) of the most recent `collapse_windows`
  busy windows fell by `collapse_drop` or more against the earlier ones (long prompts past the draft's
  trained context, a traffic shift, a restart with another configuration).

The τ alerts judge the whole monitored span (`overall`); the collapse alert compares windows.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.deploy.monitor_window import Window


class AlertConfigError(ValueError):
    """An alert threshold that makes no sense."""


@dataclass(frozen=True)
class AlertConfig:
    min_tau: float | None = None
    expected_tau: float | None = None
    expected_source: str = "--expected-tau"  # where expected_tau came from, for the message
    expected_margin: float = 0.8  # alert when τ < margin × expected τ
    mismatch_tau: float = 1.1  # τ at or below this looks like a layout / convention mismatch
    collapse_drop: float = 0.3  # alert when (τ − 1) of recent windows fell by this fraction
    collapse_windows: int = 3  # recent busy windows compared with (at least as many) earlier ones
    min_drafts: float = 16  # dspark / vLLM: fewer verified drafts than this is too little evidence

    def __post_init__(self) -> None:
        checks = [
            (self.min_tau is None or self.min_tau >= 1.0, "--min-tau must be ≥ 1.0 (τ counts the bonus token)"),
            (self.expected_tau is None or self.expected_tau >= 1.0, "the expected τ must be ≥ 1.0"),
            (0.0 < self.expected_margin <= 1.0, "--expected-margin must be in (0, 1]"),
            (self.mismatch_tau >= 1.0, "--mismatch-tau must be ≥ 1.0"),
            (0.0 < self.collapse_drop < 1.0, "--collapse-drop must be in (0, 1)"),
            (self.collapse_windows >= 1, "--collapse-windows must be ≥ 1"),
            (self.min_drafts >= 0, "--min-drafts must be ≥ 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise AlertConfigError(message)


@dataclass(frozen=True)
class Alert:
    code: str
    message: str


def _enough_evidence(window: Window, config: AlertConfig) -> bool:
    return window.drafts is None or window.drafts >= config.min_drafts


def _tau_alerts(overall: Window, config: AlertConfig) -> list[Alert]:
    tau = overall.tau
    if tau is None or not _enough_evidence(overall, config):
        return []
    evidence = f"{overall.drafts:.0f} verified drafts" if overall.drafts is not None else "the server's window gauge"
    alerts = []
    if tau <= config.mismatch_tau:
        alerts.append(Alert("tau-mismatch", (
            f"mean τ {tau:.2f} ≈ 1.0 ({evidence}): the target rejects almost every draft token. This is the "
            "signature of a layout/convention mismatch between the draft checkpoint and the engine (DSpark vs "
            "DFlash anchor layout, target layer ids off by one, wrong speculative algorithm, another mask "
            "token or tokenizer), not of a weak draft; run `dspark doctor` on the launch command and draft")))
    if config.min_tau is not None and tau < config.min_tau:
        alerts.append(Alert("tau-below-min", f"mean τ {tau:.2f} is below --min-tau {config.min_tau:.2f} ({evidence})"))
    if config.expected_tau is not None and tau < config.expected_margin * config.expected_tau:
        alerts.append(Alert("tau-below-expected", (
            f"mean τ {tau:.2f} is below {config.expected_margin:.0%} of the draft's expected τ "
            f"{config.expected_tau:.2f} ({config.expected_source}); check that the served target, chat "
            "template, sampling temperature and block size match what the draft was measured with")))
    return alerts


def _collapse_alert(windows: list[Window], config: AlertConfig) -> list[Alert]:
    taus = [w.tau for w in windows if w.tau is not None and _enough_evidence(w, config)]
    n = config.collapse_windows
    if len(taus) < 2 * n:
        return []
    earlier, recent = taus[:-n], taus[-n:]
    earlier_tau = sum(earlier) / len(earlier)
    recent_tau = sum(recent) / len(recent)
    earlier_gain, recent_gain = earlier_tau - 1.0, recent_tau - 1.0
    if earlier_gain <= 0.05 or recent_gain >= (1.0 - config.collapse_drop) * earlier_gain:
        return []
    drop = 1.0 - recent_gain / earlier_gain
    return [Alert("acceptance-collapse", (
        f"acceptance is collapsing: mean τ fell from {earlier_tau:.2f} (earlier {len(earlier)} windows) to "
        f"{recent_tau:.2f} (last {n}), {drop:.0%} fewer accepted drafts per verify step; look for prompts longer "
        "than the draft's trained context, a shift in traffic, or a restart with another configuration"))]


def evaluate_alerts(overall: Window | None, windows: list[Window], config: AlertConfig) -> tuple[Alert, ...]:
    """Alerts for the span `overall` and the sequence of `windows` it covers (oldest first)."""
    if overall is None:
        return ()
    return tuple(_tau_alerts(overall, config) + _collapse_alert(windows, config))
