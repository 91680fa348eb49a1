"""Published acceptance lengths and speedups to set our measurements beside (numbers only, with their sources).

SEED: the project's seed, the Kimi-K3-DSpark model card (Kimi K3 target, block 7; temperature not stated):
  τ 5.51 HumanEval, 5.41 GSM8K, 2.98 AIME26, 4.25 RULER at 1M tokens; decoding ~118 tok/s alone, ~370 tok/s with
  the draft (3.1×), up to 464 tok/s (3.9×) on easy text.
PAPER: DSpark (DeepSeek, arXiv 2607.05147) Table 1, Qwen3-8B target with its DSpark drafter, T = 1.0, block 7, chain
  drafting, no scheduler, one turn per prompt, up to 2048 new tokens; AIME is AIME25 there and Alpaca is its
  closest chat set to open-ended writing (no writing or long-context column in that table).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    benchmark: str  # the published benchmark's name
    seed_tau: float | None  # Kimi K3 + Kimi-K3-DSpark (the seed)
    paper_tau: float | None  # Qwen3-8B + DSpark, T = 1 (paper Table 1)


# keyed by our suite names (see suites.py)
REFERENCES: dict[str, Reference] = {
    "code": Reference("HumanEval", 5.51, 5.52),
    "math": Reference("GSM8K", 5.41, 6.17),
    "math-gen": Reference("GSM8K (generated variants)", 5.41, 6.17),
    "hard": Reference("AIME26 (seed) / AIME25 (paper)", 2.98, 5.01),
    "chat": Reference("MT-Bench", None, 3.72),
    "writing": Reference("easy text (seed: 3.9× speedup) / Alpaca (paper)", None, 3.58),
    "long": Reference("RULER, 1M tokens", 4.25, None),
}

SEED_PLAIN_TOKENS_PER_S = 118.0
SEED_DSPARK_TOKENS_PER_S = 370.0
SEED_SPEEDUP = 3.1
SEED_BEST_SPEEDUP = 3.9  # 464 tok/s on easy text
