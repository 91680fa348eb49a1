"""The doctor's vocabulary: rules, their findings, and a report with an exit status.

A `Rule` is the static part (id, default severity, title, and *why*: the engine behaviour it relies on,
with the source file or doc that shows it). A `Finding` is one firing of a rule on one input: *what*
will happen to this deployment, the evidence seen, and the fix. This module holds no checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)


@dataclass(frozen=True)
class Rule:
    """One doctor rule. `why` states the engine behaviour and cites where it is implemented or documented."""

    id: str
    severity: str
    title: str
    why: str

    def fire(self, what: str, fix: str, evidence: str = "", severity: str | None = None) -> Finding:
        """A finding of this rule; `severity` overrides the rule's default for this firing."""
        level = severity or self.severity
        if level not in SEVERITIES:
            raise ValueError(f"unknown severity {level!r}")
        return Finding(rule=self.id, severity=level, title=self.title, what=what, why=self.why,
                       fix=fix, evidence=evidence)


@dataclass(frozen=True)
class Finding:
    """One problem found: what will happen, why (engine behaviour + source), and the fix."""

    rule: str
    severity: str
    title: str
    what: str
    why: str
    fix: str
    evidence: str = ""

    def to_dict(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "title": self.title, "what": self.what,
                "why": self.why, "fix": self.fix, "evidence": self.evidence}


_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}


@dataclass(frozen=True)
class DoctorReport:
    """All findings of one doctor run, most severe first, plus what was examined."""

    findings: tuple[Finding, ...]
    checked: tuple[str, ...] = field(default_factory=tuple)  # e.g. ("command:sglang", "draft", "live")

    @staticmethod
    def of(findings: list[Finding], checked: list[str]) -> DoctorReport:
        unique: dict[tuple[str, str], Finding] = {}
        for finding in findings:
            unique.setdefault((finding.rule, finding.what), finding)
        ordered = sorted(unique.values(), key=lambda f: (_ORDER[f.severity], f.rule))
        return DoctorReport(findings=tuple(ordered), checked=tuple(checked))

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == ERROR)

    @property
    def exit_status(self) -> int:
        """1 when any finding is an error, else 0."""
        return 1 if self.errors else 0

    def rule_ids(self) -> set[str]:
        return {f.rule for f in self.findings}

    def to_dict(self) -> dict:
        return {
            "checked": list(self.checked),
            "errors": self.count(ERROR),
            "warnings": self.count(WARNING),
            "infos": self.count(INFO),
            "exit_status": self.exit_status,
            "findings": [f.to_dict() for f in self.findings],
        }
