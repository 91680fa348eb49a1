"""Pre-training the testbed target from scratch: sequence packing, the AdamW + cosine loop, held-out evaluation.

Deterministic on a given machine and thread count: the model is initialised after `torch.manual_seed(seed)`,
batches follow a permutation drawn from a `torch.Generator` seeded with `seed + epoch`, and there is no dropout.
fp32 on CPU. This module works on token tensors; it does not read files, tokenize or save anything.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from dspark.testbed.recipe import TargetRecipe


@dataclass(frozen=True)
class StepLog:
    """One optimiser step, as reported to a progress callback."""

    step: int  # 1-based
    steps: int
    loss: float
    lr: float
    tokens: int  # tokens trained on so far
    seconds: float  # wall time since training started


@dataclass(frozen=True)
class TrainResult:
    losses: tuple[float, ...]  # training loss of each step
    tokens: int
    seconds: float


@dataclass(frozen=True)
class EvalResult:
    loss: float  # mean next-token cross-entropy (nats) over all predicted positions
    top1: float  # fraction of positions where the argmax is the true next token
    tokens: int  # predicted positions

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)


def pack(token_docs: Sequence[Sequence[int]], seq_len: int, eos_token_id: int) -> torch.Tensor:
    """Concatenate documents, each followed by the EOS, and cut the stream into [N, seq_len] rows (the ragged
    tail is dropped)."""
    stream: list[int] = []
    for ids in token_docs:
        stream.extend(ids)
        stream.append(eos_token_id)
    n = len(stream) // seq_len
    if n == 0:
        raise ValueError(f"the corpus has {len(stream)} tokens, fewer than one sequence of {seq_len}; "
                         f"raise the corpus byte budget or lower seq_len")
    return torch.tensor(stream[: n * seq_len], dtype=torch.long).view(n, seq_len)


def spread_rows(rows: torch.Tensor, count: int) -> torch.Tensor:
    """`count` rows evenly spaced over `rows` (all of them if there are fewer), so evaluation covers every file."""
    if rows.shape[0] <= count:
        return rows
    index = torch.linspace(0, rows.shape[0] - 1, count).round().long()
    return rows[index]


def lr_factor(step: int, recipe: TargetRecipe) -> float:
    """Multiplier of the peak LR at 0-based `step`: linear warmup, then cosine down to `min_lr_ratio`."""
    if step < recipe.warmup_steps:
        return (step + 1) / recipe.warmup_steps
    span = max(1, recipe.steps - recipe.warmup_steps)
    progress = min(1.0, (step - recipe.warmup_steps) / span)
    return recipe.min_lr_ratio + (1 - recipe.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def _optimizer(model: nn.Module, recipe: TargetRecipe) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    other = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=recipe.lr, betas=(0.9, 0.95), eps=1e-8)


def batches(rows: torch.Tensor, recipe: TargetRecipe):
    """Yield `recipe.steps` batches of `batch_size` rows: epoch e visits the rows in the permutation seeded by
    `seed + e`. Step s keeps whole rows when (s + 1) % long_every == 0, else cuts them into short_seq_len pieces."""
    per_epoch = max(1, rows.shape[0] // recipe.batch_size)
    order = torch.empty(0, dtype=torch.long)
    for step in range(recipe.steps):
        epoch, slot = divmod(step, per_epoch)
        if slot == 0:
            order = torch.randperm(rows.shape[0], generator=torch.Generator().manual_seed(recipe.seed + epoch))
        batch = rows[order[slot * recipe.batch_size:(slot + 1) * recipe.batch_size]]
        yield batch if (step + 1) % recipe.long_every == 0 else batch.reshape(-1, recipe.short_seq_len)


def train(model: nn.Module, rows: torch.Tensor, recipe: TargetRecipe,
          on_step: Callable[[StepLog], None] | None = None) -> TrainResult:
    """Train `model` (an HF causal LM) in place on the packed `rows` for `recipe.steps` steps."""
    model.train()
    optimizer = _optimizer(model, recipe)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, recipe))
    losses: list[float] = []
    tokens = 0
    start = time.perf_counter()
    for step, batch in enumerate(batches(rows, recipe)):
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
        tokens += batch.numel()
        if on_step is not None:
            on_step(StepLog(step + 1, recipe.steps, losses[-1], lr, tokens, time.perf_counter() - start))
    model.eval()
    return TrainResult(tuple(losses), tokens, time.perf_counter() - start)


@torch.no_grad()
def evaluate(model: nn.Module, rows: torch.Tensor, batch_size: int = 8) -> EvalResult:
    """Held-out next-token loss and top-1 accuracy of `model` on `rows` ([N, T] token ids)."""
    model.eval()
    total, correct, count = 0.0, 0, 0
    for i in range(0, rows.shape[0], batch_size):
        batch = rows[i:i + batch_size]
        logits = model(input_ids=batch).logits[:, :-1].float()
        labels = batch[:, 1:]
        total += float(nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                   reduction="sum"))
        correct += int((logits.argmax(-1) == labels).sum())
        count += labels.numel()
    return EvalResult(total / count, correct / count, count)
