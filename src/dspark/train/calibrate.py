"""Confidence calibration by Sequential Temperature Scaling (DSpark paper §3.2.1).

The head's σ(c_k) estimates P(slot k accepted | slots < k accepted); what a scheduler uses is the cumulative product
Π_{i≤k} σ(c_i / T_i) = P(slots 0 … k all accepted). For k = 0 … γ−1 in order, grid-search T_k minimising the ECE of
that product against the observed prefix acceptance, keeping T_{<k} fixed. Data: full-block verify rounds on
held-out prompts. Writes `calibration.json` beside the draft (`sts_temperatures`, ECE before/after).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import torch

from dspark.formats.native import write_json

CALIBRATION_NAME = "calibration.json"


@dataclass(frozen=True)
class Calibration:
    sts_temperatures: tuple[float, ...]
    ece_before: tuple[float, ...]  # per slot, of the cumulative product with T = 1
    ece_after: tuple[float, ...]
    rounds: int


def expected_calibration_error(pred: torch.Tensor, label: torch.Tensor, bins: int = 10) -> float:
    """ECE with equal-width bins: Σ_b |B_b|/N · |mean(label) − mean(pred)| over the bin."""
    idx = (pred * bins).long().clamp(max=bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += float(sel.float().mean() * (label[sel].float().mean() - pred[sel].mean()).abs())
    return total


def prefix_labels(accepted: torch.Tensor, slots: int) -> torch.Tensor:
    """accepted [R] -> [R, γ] with 1 while every slot up to k was accepted."""
    return (torch.arange(slots)[None, :] < accepted[:, None]).float()


def fit_sts(confidence_logits: torch.Tensor, accepted: torch.Tensor, grid: Sequence[float] | None = None) -> Calibration:
    """confidence_logits [R, γ] of full-block rounds, accepted [R] -> per-slot temperatures."""
    logits = confidence_logits.float()
    rounds, slots = logits.shape
    labels = prefix_labels(accepted, slots)
    grid = torch.tensor(grid) if grid is not None else torch.logspace(-1.3, 1.3, 121)
    temps = torch.ones(slots)
    before = torch.sigmoid(logits).cumprod(-1)  # [R, γ]
    carried = torch.ones(rounds)
    for k in range(slots):
        errors = [expected_calibration_error(carried * torch.sigmoid(logits[:, k] / t), labels[:, k]) for t in grid]
        temps[k] = grid[int(torch.tensor(errors).argmin())]
        carried = carried * torch.sigmoid(logits[:, k] / temps[k])
    after = torch.sigmoid(logits / temps).cumprod(-1)
    return Calibration(
        tuple(float(t) for t in temps),
        tuple(expected_calibration_error(before[:, k], labels[:, k]) for k in range(slots)),
        tuple(expected_calibration_error(after[:, k], labels[:, k]) for k in range(slots)),
        rounds,
    )


def full_block_rounds(records: Sequence[tuple[list[float], int, int]], slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    """From `replay_greedy`'s confidence records (logits, proposed, accepted) keep rounds that verified the whole block."""
    kept = [(c, a) for c, proposed, a in records if proposed == slots and len(c) == slots]
    if not kept:
        raise ValueError("no full-block rounds to calibrate on: generate with confidence_threshold 0 and longer outputs")
    return torch.tensor([c for c, _ in kept]), torch.tensor([a for _, a in kept])


def save_calibration(calibration: Calibration, draft_dir: str | Path) -> Path:
    path = Path(draft_dir) / CALIBRATION_NAME
    write_json(path, {**asdict(calibration), "temperatures": list(calibration.sts_temperatures)})
    return path


def load_temperatures(draft_dir: str | Path) -> torch.Tensor | None:
    path = Path(draft_dir) / CALIBRATION_NAME
    return torch.tensor(json.loads(path.read_text())["sts_temperatures"]) if path.is_file() else None
