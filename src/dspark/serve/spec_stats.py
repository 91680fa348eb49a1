"""Per-request speculative-decoding stats, shaped like vLLM's `metrics.speculative_decoding`.

Field meanings follow vLLM's per-request acceptance metrics (docs/features/speculative_decoding/
acceptance_metrics.md): a *spec step* is a verify round that checked at least one draft (rounds with no drafts,
e.g. the last token before max_tokens, are left out, as vLLM leaves them out), `mean_acceptance_length`
= 1 + accepted / steps (bonus token included), `draft_acceptance_rate` = accepted / proposed,
`acceptance_histogram[j]` = steps that accepted exactly j drafts (length num_spec_tokens + 1). dspark adds
`num_accepted_tokens_per_pos[k]` = steps whose position-k draft was accepted, the per-request counterpart of the
Prometheus counter `dspark:spec_decode_num_accepted_tokens_per_pos`. Summed over requests the counts reconcile
with the Prometheus counters. No Prometheus or HTTP here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SpecTally:
    """Accumulates the verify rounds of one request."""

    num_spec_tokens: int  # drafts per round at most (the draft's γ, or the server's --max-drafts)
    accepted: list[int] = field(default_factory=list)
    proposed: list[int] = field(default_factory=list)

    def add_round(self, proposed: int, accepted: int) -> bool:
        """Record one verify round; returns False (and records nothing) for a round without drafts."""
        if proposed <= 0:
            return False
        if not 0 <= accepted <= proposed:
            raise ValueError(f"a round cannot accept {accepted} of {proposed} drafts")
        self.proposed.append(proposed)
        self.accepted.append(accepted)
        return True

    @property
    def steps(self) -> int:
        return len(self.proposed)

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + sum(self.accepted) / self.steps if self.steps else 1.0

    def to_dict(self, detailed: bool = False) -> dict[str, Any]:
        width = max([self.num_spec_tokens, *self.proposed])
        histogram = [0] * (width + 1)
        by_length: dict[str, list[int]] = {}
        per_pos = [0] * width
        for proposed, accepted in zip(self.proposed, self.accepted):
            histogram[accepted] += 1
            by_length.setdefault(str(proposed), [0] * (proposed + 1))[accepted] += 1
            for k in range(accepted):
                per_pos[k] += 1
        drafted = sum(self.proposed)
        out: dict[str, Any] = {
            "mean_acceptance_length": self.mean_acceptance_length,
            "draft_acceptance_rate": sum(self.accepted) / drafted if drafted else 0.0,
            "acceptance_histogram": histogram,
            "acceptance_histogram_by_draft_length": dict(sorted(by_length.items(), key=lambda kv: int(kv[0]))),
            "num_spec_steps": self.steps,
            "num_accepted_draft_tokens": sum(self.accepted),
            "num_draft_tokens": drafted,
            "num_spec_tokens": self.num_spec_tokens,
            "num_accepted_tokens_per_pos": per_pos,
        }
        if detailed:
            out["per_step_accepted"] = list(self.accepted)
            out["per_step_drafted"] = list(self.proposed)
        return out
