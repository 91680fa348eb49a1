"""A generation's result and acceptance statistics: per-round accepted counts, τ, per-position acceptance, histogram;
one verified block's record (confidence survival and acceptance) for scheduling studies.

τ (acceptance length) = accepted + 1 per verify round. Per-position conditional acceptance at slot k is
(rounds that accepted slot k) / (rounds that proposed slot k and accepted every earlier slot).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable


@dataclass
class StatsRecorder:
    """Mutable accumulator used while generating; `freeze()` gives the immutable result."""

    accepted: list[int] = field(default_factory=list)
    proposed: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    new_tokens: int = 0

    def record(self, proposed: int, accepted: int) -> None:
        self.proposed.append(proposed)
        self.accepted.append(accepted)

    def freeze(self) -> "GenerationStats":
        return GenerationStats(tuple(self.accepted), tuple(self.proposed), self.prompt_tokens, self.new_tokens)


@dataclass(frozen=True)
class GenerationStats:
    accepted_counts: tuple[int, ...]  # drafts accepted per verify round
    proposed_counts: tuple[int, ...]  # drafts verified per round
    prompt_tokens: int = 0
    new_tokens: int = 0

    @property
    def rounds(self) -> int:
        return len(self.accepted_counts)

    @property
    def acceptance_lengths(self) -> tuple[int, ...]:
        """τ per verify round (accepted + 1)."""
        return tuple(a + 1 for a in self.accepted_counts)

    @property
    def mean_acceptance_length(self) -> float:
        return sum(self.acceptance_lengths) / self.rounds if self.rounds else 0.0

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts / proposed drafts."""
        proposed = sum(self.proposed_counts)
        return sum(self.accepted_counts) / proposed if proposed else 0.0

    def per_position(self, positions: int | None = None) -> tuple[float, ...]:
        """Conditional acceptance by slot k: P(slot k accepted | slot k verified and slots < k accepted)."""
        positions = positions if positions is not None else max(self.proposed_counts, default=0)
        reached = [0] * positions
        kept = [0] * positions
        for proposed, accepted in zip(self.proposed_counts, self.accepted_counts):
            for k in range(min(proposed, positions)):
                if k > accepted:
                    break
                reached[k] += 1
                kept[k] += k < accepted
        return tuple(kept[k] / reached[k] if reached[k] else 0.0 for k in range(positions))

    def histogram(self, max_tau: int | None = None) -> tuple[int, ...]:
        """Counts of τ = 1 … max_tau (index 0 is τ = 1)."""
        top = max_tau if max_tau is not None else max(self.acceptance_lengths, default=1)
        counts = [0] * top
        for tau in self.acceptance_lengths:
            counts[min(tau, top) - 1] += 1
        return tuple(counts)

    def drafted(self) -> tuple[int, int]:
        """(rounds that proposed at least one draft, drafts accepted in them): one prompt's record in a bench row."""
        rounds = [a for p, a in zip(self.proposed_counts, self.accepted_counts) if p > 0]
        return len(rounds), sum(rounds)

    @classmethod
    def pooled(cls, each: "Iterable[GenerationStats]") -> "GenerationStats":
        """Every generation's rounds and token counts in one (`merge` over all of them, in one pass)."""
        each = list(each)
        return cls(tuple(a for s in each for a in s.accepted_counts),
                   tuple(p for s in each for p in s.proposed_counts),
                   sum(s.prompt_tokens for s in each), sum(s.new_tokens for s in each))

    def merge(self, other: "GenerationStats") -> "GenerationStats":
        return GenerationStats(self.accepted_counts + other.accepted_counts, self.proposed_counts + other.proposed_counts,
                               self.prompt_tokens + other.prompt_tokens, self.new_tokens + other.new_tokens)


@dataclass(frozen=True)
class BlockRecord:
    """One verified block of one row: the confidence head's calibrated survival σ(c_k / T_k) per slot [γ], how many
    drafts the row verified and how many of them it accepted (`BatchSession.blocks` collects them)."""

    survival: tuple[float, ...]
    verified: int
    accepted: int


@dataclass(frozen=True)
class GenerationResult:
    """One request's generation: its new tokens, acceptance stats and wall time."""

    tokens: list[int]  # new tokens only
    stats: GenerationStats
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds > 0 else 0.0
