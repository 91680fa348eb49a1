"""Predicted throughput of confidence scheduling from recorded blocks and a measured round-cost table.

Replays acceptance offline: each round draws R blocks at random from a record of verified blocks (the confidence
head's survival per slot and how many of the block's γ drafts the target accepted), a rule decides how many drafts
each row verifies, and a row that verifies k drafts commits min(accepted, k) + 1 tokens — acceptance is a prefix and
the rules are non-anticipating (they never read drafts past the slot they decide), so cutting a block never changes
what the kept drafts do. The round's time is the round-cost table's at the shared width (`BatchEngine.
measure_step_costs`: draft block + verify); plain decoding's is the same measurement without a draft.

`record_blocks` runs the real engine with every draft verified and collects the record. What this does not model:
prefill, admissions and rows finishing (every row is busy every round), and it draws blocks independently (a row's
consecutive blocks are not correlated as they are in a real text).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from dspark.config import GenerationConfig
from dspark.engine.batch import BatchEngine
from dspark.engine.schedule import Scheduling, StepCostTable, rectangle_drafts
from dspark.engine.stats import BlockRecord, GenerationResult

PREDICTED_RULES = ("none", "threshold", "algorithm1")


@dataclass(frozen=True)
class Prediction:
    """One rule at one batch size: per row and round, drafts verified and tokens committed (τ); throughput."""

    rows: int
    rule: str
    drafts_per_round: float  # mean drafts a row verifies
    tau: float  # mean tokens a row commits per round (accepted + 1)
    tokens_per_second: float
    speedup: float | None = None  # over plain decoding at the same rows (None without a plain step cost)


def record_blocks(engine: BatchEngine, prompts: Sequence[Sequence[int]],
                  config: GenerationConfig = GenerationConfig()) -> tuple[list[BlockRecord], list[GenerationResult]]:
    """Generate every prompt on `engine` verifying every draft (the threshold rule at 0: confidences computed, nothing
    cut) and return each row's verified blocks with the generations (token-identical to plain decoding)."""
    if engine.draft is None or engine.draft.confidence_head is None:
        raise ValueError("recording blocks needs a draft with a confidence head")
    if not prompts:
        raise ValueError("prompts is empty: pass at least one list of token ids")
    session = engine.open(replace(config, confidence_threshold=0.0), Scheduling("threshold"))
    session.blocks = []
    for i, prompt in enumerate(prompts):
        session.add(i, prompt, config.max_new_tokens)
    while not session.idle:
        session.step()
    return list(session.blocks), [session.release(i) for i in range(len(prompts))]


def full_blocks(blocks: Sequence[BlockRecord]) -> tuple[torch.Tensor, torch.Tensor]:
    """The blocks that verified all γ drafts (the others' acceptance is cut by the token budget) -> survival [N, γ],
    accepted [N]."""
    gamma = max((len(b.survival) for b in blocks), default=0)
    kept = [b for b in blocks if b.verified == gamma and gamma > 0]
    if not kept:
        raise ValueError("no block verified every draft: record with Scheduling('threshold') at threshold 0 "
                         "(record_blocks) and a token budget longer than one block")
    survival = torch.tensor([b.survival for b in kept], dtype=torch.float64)  # [N, γ]
    accepted = torch.tensor([b.accepted for b in kept], dtype=torch.long)  # [N]
    return survival, accepted


def predict(blocks: Sequence[BlockRecord], rows: int, cost: StepCostTable, rule: str = "none",
            threshold: float = 0.0, plain_steps_per_second: float | None = None, rounds: int = 4000,
            seed: int = 0) -> Prediction:
    """Expected behaviour of `rule` at `rows` busy rows over `rounds` simulated rounds (blocks drawn with `seed`);
    `cost`: the round-cost table for this many rows; `plain_steps_per_second`: plain decoding's steps per second at
    this many rows (for the speedup)."""
    if rule not in PREDICTED_RULES:
        raise ValueError(f"rule {rule!r} is unknown; use one of {PREDICTED_RULES}")
    if rows < 1 or rounds < 1:
        raise ValueError("rows and rounds must be at least 1")
    survival, accepted = full_blocks(blocks)
    gamma = survival.shape[1]
    generator = torch.Generator().manual_seed(seed)
    pick = torch.randint(survival.shape[0], (rounds, rows), generator=generator)  # [M, R]
    alive, kept = survival[pick], accepted[pick]  # [M, R, γ], [M, R]
    if rule == "none":
        drafts = torch.full((rounds, rows), gamma)  # [M, R]
    elif rule == "threshold":
        below = alive < threshold  # [M, R, γ]
        drafts = torch.where(below.any(-1), below.long().argmax(-1), gamma)  # [M, R] first slot below
    else:
        rates = Scheduling("algorithm1", cost).rates(rows, gamma)  # [γ+1]
        drafts = rectangle_drafts(alive, rates)[:, None].expand(rounds, rows)  # [M, R]
    commits = torch.minimum(kept, drafts) + 1  # [M, R]
    width = drafts.max(-1).values + 1  # [M] every row runs the widest row's width
    seconds = sum(1.0 / cost(int(t)) for t in width.tolist())
    tokens_per_second = float(commits.sum()) / seconds
    speedup = tokens_per_second / (rows * plain_steps_per_second) if plain_steps_per_second else None
    return Prediction(rows, rule, float(drafts.double().mean()), float(commits.double().mean()), tokens_per_second,
                      speedup)


def predict_table(blocks: Sequence[BlockRecord], costs: Mapping[int, StepCostTable],
                  plain_steps_per_second: Mapping[int, float] | None = None, rules: Sequence[str] = ("none",
                  "algorithm1"), threshold: float = 0.0, rounds: int = 4000, seed: int = 0) -> list[Prediction]:
    """`predict` for every rule at every batch size of `costs` ({rows: round-cost table})."""
    plain = plain_steps_per_second or {}
    return [predict(blocks, rows, costs[rows], rule, threshold, plain.get(rows), rounds, seed)
            for rows in sorted(costs) for rule in rules]
