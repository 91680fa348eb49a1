"""How many drafts each row of a batch verifies this round, decided on device from the confidence head.

Rules: `none` (every draft the token budget allows), `threshold` (cut at the first slot whose calibrated confidence
σ(c_k / T_k) is below GenerationConfig.confidence_threshold, as the batch-1 engine does) and `algorithm1` (the
DSpark paper's hardware-aware prefix scheduler with a measured round-cost table, for this engine's verify pass).

The engine verifies in one of two shapes, and Algorithm 1 follows it:
- **rectangle** (CUDA graphs): every row of a round runs the target over the same width t (anchor + t−1 slots), so
  a round costs what its widest row costs, and a row that verifies fewer slots saves nothing. Algorithm 1's greedy
  search then runs over the shared width (`rectangle_drafts`): t grows one slot at a time, each step adding every
  row's chance of accepting that slot to the expected commits τ*, while τ*·rounds-per-second(t) improves.
- **ragged** (eager): the target computes only the slots each row verifies, so a round's cost follows the total
  token count, and Algorithm 1 is the paper's own: candidates (row, slot) in order of decreasing chance of
  acceptance, each adding one token, while τ*·rounds-per-second(tokens) improves (`ragged_drafts`; rows choose
  their lengths separately).
With one row both are exactly the paper's Algorithm 1 (`schedule.schedule_prefixes`). The decision to verify slot k
only uses confidences up to slot k, which depend on drafts before it (non-anticipating), so scheduling never changes
what is committed (lossless); it only changes the work.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from dspark.engine.schedule import StepCostTable, survival

RULES = ("none", "threshold", "algorithm1")


@dataclass(frozen=True)
class Scheduling:
    """A rule and, for algorithm1, the round cost by verify width t (tokens per row): one table for every batch
    size, or {rows: table} as `BatchEngine.round_cost_tables` measures (a batch uses the smallest measured size that
    holds it, else the largest)."""

    rule: str = "none"  # one of RULES
    cost: StepCostTable | Mapping[int, StepCostTable] | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"scheduling rule {self.rule!r} is unknown; use one of {RULES}")
        if self.rule == "algorithm1" and not self.cost:
            raise ValueError("algorithm1 scheduling needs a StepCostTable per batch size "
                             "(BatchEngine.round_cost_tables() measures them)")

    def table(self, rows: int) -> StepCostTable:
        if isinstance(self.cost, StepCostTable):
            return self.cost
        sizes = sorted(self.cost)
        return self.cost[next((s for s in sizes if s >= rows), sizes[-1])]

    def rates(self, rows: int, gamma: int, device: torch.device | None = None) -> torch.Tensor:
        """Rounds per second at verify widths 1 … γ+1 for a batch of `rows` [γ+1], float64."""
        table = self.table(rows)
        return torch.tensor([table(t) for t in range(1, gamma + 2)], dtype=torch.float64, device=device)

    def token_rates(self, rows: int, gamma: int, device: torch.device | None = None) -> torch.Tensor:
        """Rounds per second of a ragged round of `rows` rows by its total token count 0 … rows·(γ+1)
        [rows·(γ+1) + 1], float64: the table's rate at the mean width tokens / rows (the tables are measured with
        every row at one width)."""
        table = self.table(rows)
        return torch.tensor([table(max(1.0, tokens / rows)) for tokens in range(rows * (gamma + 1) + 1)],
                            dtype=torch.float64, device=device)


def rectangle_drafts(alive: torch.Tensor, rates: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
    """Algorithm 1 over a shared verify width: survival `alive` [R, γ] (zero past a row's budget) and rounds per
    second at widths 1 … γ+1 `rates` [γ+1] -> drafts every row verifies (0-d long tensor, stays on device).
    `anchors`: how many rows commit an anchor (0-d; default R; padding rows of a bucket commit nothing)."""
    prefix = alive.float().clamp(0, 1).cumprod(-1)  # [R, γ] chance that slot j is accepted
    gain = prefix.sum(0).to(torch.float64)  # [γ] expected extra commits from verifying slot j in every row
    if anchors is None:
        anchors = torch.tensor(float(prefix.shape[0]), device=alive.device)
    tau = torch.cat([anchors.to(torch.float64).reshape(1), gain]).cumsum(0)  # [γ+1] expected commits by width
    throughput = tau * rates  # [γ+1]
    improving = (throughput[1:] > throughput[:-1]) & (gain > 0)  # [γ]
    return improving.long().cumprod(0).sum()  # slots kept until the first step that does not improve


def ragged_drafts(alive: torch.Tensor, rates: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
    """The paper's Algorithm 1 over a ragged verify: survival `alive` [R, γ] (zero past a row's budget) and rounds
    per second by the round's total token count `rates` [R·(γ+1) + 1] (index = tokens) -> drafts per row [R].
    `anchors` (0-d): how many rows commit an anchor (default R; a bucket's padding rows compute one but commit none).

    Every row verifies its anchor (R tokens, τ* = anchors). Candidates (row r, slot j) with chance a[r, j] = Π_{i≤j}
    alive[r, i] are taken in order of decreasing a (slot-major among equals, so a row's earlier slot comes first);
    each adds one token and a[r, j] to τ*, and is kept while τ*·rates[tokens] improves; the first that does not
    stops the search. A row's chances never increase with the slot, so the kept candidates are a prefix of every
    row: its length is how many of them it has. Tensor ops only (no host value is read)."""
    prefix = alive.float().clamp(0, 1).cumprod(-1).to(torch.float64)  # [R, γ]
    rows, slots = prefix.shape
    committed = (anchors if anchors is not None else torch.tensor(rows, device=alive.device)).to(torch.float64)
    chance, order = prefix.t().reshape(-1).sort(descending=True, stable=True)  # [γ·R] slot-major, best first
    tokens = torch.arange(rows + 1, rows + rows * slots + 1, device=alive.device)  # [γ·R] after each candidate
    throughput = (committed + chance.cumsum(0)) * rates[tokens]  # [γ·R]
    before = torch.cat([(committed * rates[rows]).reshape(1), throughput[:-1]])  # [γ·R]
    kept = ((throughput > before) & (chance > 0)).long().cumprod(0)  # [γ·R] 1 until the first that does not improve
    return torch.zeros(rows, dtype=torch.long, device=alive.device).scatter_add_(0, order % rows, kept)  # [R]


def scheduled_lengths(confidence_logits: torch.Tensor | None, room: torch.Tensor, gamma: int, rule: str,
                      threshold: torch.Tensor, temperatures: torch.Tensor | None,
                      rates: torch.Tensor | None, ragged: bool = False) -> torch.Tensor:
    """Drafts to verify per row [B]: at most γ and at most `room` [B] (the token budget left after the bonus; −1 on
    a row without a request). `threshold` (0-d): the threshold rule's cut (0 cuts nothing); `rates`: algorithm1's
    rounds per second for this many rows, by verify width [γ+1] (a rectangle verify) or, `ragged`, by the round's
    total token count [B·(γ+1) + 1]. Tensor ops only (no host value is read), so a CUDA graph can capture it."""
    lengths = room.clamp(0, gamma)  # [B]
    if rule == "none" or confidence_logits is None or gamma == 0:
        return lengths
    alive = survival(confidence_logits[:, :gamma], temperatures)  # [B, γ]
    if rule == "threshold":
        below = alive < threshold  # [B, γ]
        cut = torch.where(below.any(-1), below.long().argmax(-1), gamma)  # [B] first slot below
        return torch.minimum(lengths, cut)
    slots = torch.arange(gamma, device=room.device)
    alive = alive.masked_fill(slots[None] >= lengths[:, None], 0.0)  # slots beyond the budget cannot be verified
    anchors = (room >= 0).sum()  # rows that hold a request
    if ragged:
        return ragged_drafts(alive, rates, anchors)
    return torch.minimum(lengths, rectangle_drafts(alive, rates, anchors))
