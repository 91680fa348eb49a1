"""The draft training loop: AdamW, cosine schedule with warmup, clipping, accumulation, bf16 autocast on CUDA,
a progress bar, JSONL metrics, checkpoints and exact resume; data parallel under torchrun (DDP) with the loss
normalised by the global count of supervised slots (numerators local, denominator all-reduced).

Data order and anchor draws are functions of (seed, position), so a resumed run sees exactly what the
uninterrupted run saw. SIGTERM (a scheduler's preemption, `timeout`, torchrun's shutdown) ends the run after the
current step with a checkpoint, on every rank at the same step, and raises `TrainingStopped`, so no caller mistakes
the run for a finished one. Hidden states come from any `HiddenStateSource` (online target or offline store).
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from dspark.config import ConfigError, TrainConfig
from dspark.model.block_forward import draft_forward, teacher_logits
from dspark.model.blocks import build_blocks, sample_anchors
from dspark.model.draft import DSparkDraft
from dspark.train.hidden_batch import HiddenStateSource, get_batch
from dspark.train.loss import LossWeights, dspark_loss, slot_terms_fn
from dspark.train.order import DataOrder
from dspark.train.state import Position, latest_checkpoint, load_checkpoint, save_checkpoint

METRICS = "metrics.jsonl"


@dataclass(frozen=True)
class StepMetrics:
    step: int
    loss: float
    ce: float
    l1: float
    confidence: float
    tau: float  # analytic τ of this step's blocks
    lr: float  # the learning rate this step used
    grad_norm: float  # before clipping
    tokens_per_s: float  # real (unpadded) sequence tokens per second, all ranks (padded when the source has no lengths)
    step_s: float  # wall time of this optimiser step


@dataclass(frozen=True)
class TrainResult:
    history: tuple[StepMetrics, ...]
    checkpoint: Path | None
    seconds: float


class TrainingStopped(Exception):
    """SIGTERM or the deadline (`cause`) ended training after `step` of `steps`; `checkpoint` (rank 0 with an output
    folder) holds that step, and training again with resume continues from it. `history`: this call's metrics."""

    def __init__(self, step: int, steps: int, checkpoint: Path | None, history: tuple[StepMetrics, ...],
                 cause: str = "SIGTERM"):
        where = f"checkpoint {checkpoint}" if checkpoint is not None else "no checkpoint (no output folder)"
        super().__init__(f"stopped by {cause} after step {step} of {steps}; {where}")
        self.step, self.steps, self.checkpoint, self.history = step, steps, checkpoint, history


class _Forward(nn.Module):
    """What DDP wraps: the draft's training forward (DDP hooks only a module's forward)."""

    def __init__(self, draft: DSparkDraft, attention: str):
        super().__init__()
        self.draft, self.attention = draft, attention

    def forward(self, features, blocks):
        return draft_forward(self.draft, features, blocks, self.attention)


def resolve_attention(choice: str, device: torch.device) -> str:
    """"auto": FlexAttention on CUDA when a small compiled forward + backward runs there, else SDPA."""
    if choice == "flex" and device.type != "cuda":
        raise ConfigError("attention='flex' trains on CUDA only (FlexAttention has no backward on CPU); use 'sdpa' "
                          "or 'auto'")
    if choice != "auto":
        return choice
    return "flex" if device.type == "cuda" and _flex_runs(device) else "sdpa"


@functools.cache
def _flex_runs(device: torch.device) -> bool:
    from dspark.model.blocks import flex_block_mask
    from dspark.model.draft import flex_attention_fn

    try:
        q = torch.randn(1, 4, 256, 64, device=device, dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(1, 2, 384, 64, device=device, dtype=torch.bfloat16) for _ in range(2))
        anchors = torch.arange(0, 128, 4, device=device)[None]  # [1, 32] blocks of 8 over a 128-token context
        mask = flex_block_mask(anchors, torch.ones_like(anchors, dtype=torch.bool), 128, 8)
        flex_attention_fn(True)(q, k, v, block_mask=mask, enable_gqa=True).sum().backward()
        return True
    except Exception as error:  # noqa: BLE001 - any compiler or kernel failure: train with SDPA instead
        logging.getLogger(__name__).warning("FlexAttention does not run here (%s); training with SDPA", error)
        return False


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _schedule(config: TrainConfig):
    warmup = int(config.warmup_ratio * config.steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, config.steps - warmup)
        return config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return factor


@contextlib.contextmanager
def _sigterm_requests():
    """Yields a list that gets an entry when SIGTERM arrives (the loop then stops at the end of its step). Only the
    main thread can take signals; elsewhere SIGTERM keeps its usual effect."""
    requests: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield requests
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: requests.append(signum))
    try:
        yield requests
    finally:
        signal.signal(signal.SIGTERM, previous)


def train(draft: DSparkDraft, source: HiddenStateSource, config: TrainConfig, out_dir: str | Path | None = None,
          resume: bool = False, progress: bool = True, stop_after: int | None = None,
          deadline: float | None = None) -> TrainResult:
    """Train `draft` (its embed / lm_head must be the target's, tied) and return the per-step metrics.
    `stop_after` ends the run early after that many steps (as a kill would), keeping the schedule of `steps`.
    Raises `TrainingStopped` after checkpointing when SIGTERM arrives, or at the end of the first step that finishes
    after `deadline` (Unix time, `time.time()`): a time-limited job then needs no signal to keep its last steps."""
    with _sigterm_requests() as requests:
        return _train(draft, source, config, out_dir, resume, progress, stop_after, requests, deadline)


def _train(draft: DSparkDraft, source: HiddenStateSource, config: TrainConfig, out_dir: str | Path | None,
           resume: bool, progress: bool, stop_after: int | None, requests: list[int],
           deadline: float | None) -> TrainResult:
    from tqdm.auto import tqdm

    rank, world = _world()
    device = draft.fc.weight.device
    out = Path(out_dir) if out_dir is not None else None
    params = [p for p in draft.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay,
                                  fused=device.type == "cuda")  # one kernel instead of a few per parameter group
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(config))
    position = Position(0, 0)
    if resume and out is not None and (ckpt := latest_checkpoint(out)) is not None:
        position = load_checkpoint(ckpt, draft, optimizer, scheduler)
    if out is not None and rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        _truncate_metrics(out / METRICS, position.step)
    model = _Forward(draft, resolve_attention(config.attention, device))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    use_bf16 = config.bf16 if config.bf16 is not None else device.type == "cuda"
    weights = LossWeights(config.ce_weight, config.l1_weight, config.confidence_weight, config.decay)
    terms_fn = slot_terms_fn(config.loss_backend)
    cfg = draft.config
    history: list[StepMetrics] = []
    end = config.steps if stop_after is None else min(config.steps, position.step + stop_after)
    bar = tqdm(total=config.steps, initial=position.step, desc="training draft", disable=not progress or rank != 0)
    began = time.perf_counter()
    stop = 0.0  # > 0 once any rank got SIGTERM
    draft.train()
    lengths_of = getattr(source, "lengths", None)  # online and offline sources know them; others need no grouping
    lengths = lengths_of() if lengths_of else None
    order = DataOrder(len(source), config.seed, config.batch_size, config.group_by_length,
                      lengths if config.group_by_length else None)
    per_step = config.grad_accum * world * config.batch_size  # sequences per optimiser step, all ranks
    for step in range(position.step, end):
        tick = time.perf_counter()
        micro = []
        for a in range(config.grad_accum):
            first = position.consumed + (a * world + rank) * config.batch_size  # global sequence counter
            seqs = range(first, first + config.batch_size)
            hs = get_batch(source, [order[q] for q in seqs])
            s = min(hs.input_ids.shape[1], config.max_length)
            gen = torch.Generator().manual_seed(config.seed * 7_919 + first)
            anchors, keep = sample_anchors(hs.loss_mask[:, :s].cpu(), config.num_anchors, gen)  # CPU: no sync
            ids, mask = hs.input_ids[:, :s].to(device), hs.loss_mask[:, :s].to(device)
            blocks = build_blocks(ids, mask, anchors.to(device), keep.to(device), cfg.block_size, cfg.mask_token_id,
                                  config.decay, cfg.mode)
            micro.append((hs.features[:, :s].to(device), hs.last_hidden[:, :s].to(device), blocks))
        den = sum(b.loss_weights.sum() for _, _, b in micro).detach().clone()
        if world > 1:
            dist.all_reduce(den)
        sums = torch.zeros(6, device=device)  # loss, ce, l1, confidence, τ, stop; read once per step (one sync)
        for i, (features, last_hidden, blocks) in enumerate(micro):
            sync = world > 1 and i < len(micro) - 1
            with (model.no_sync() if sync else contextlib.nullcontext()), torch.autocast(device.type, torch.bfloat16, enabled=use_bf16):
                outputs = model(features, blocks)
            teacher = teacher_logits(draft.lm_head, last_hidden, blocks)
            terms = dspark_loss(outputs.logits, teacher, blocks.target_ids, outputs.confidence_logits,
                                blocks.loss_weights, blocks.eval_mask, weights, denominator=den, terms_fn=terms_fn)
            (terms.total * world).backward()  # DDP averages gradients; the global denominator already normalises
            terms_now = [terms.total, terms.ce, terms.l1, terms.confidence, terms.tau / len(micro)]
            sums[:5] += torch.stack(terms_now).detach()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, config.grad_clip)  # the norm before clipping
        lr = scheduler.get_last_lr()[0]  # this step's
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if lengths is not None:  # every rank's sequences of this step (the order is the same on all ranks)
            tokens = sum(min(lengths[order[q]], config.max_length) for q in range(position.consumed,
                                                                                   position.consumed + per_step))
        else:
            tokens = sum(int(b.keep.shape[0]) * int(f.shape[1]) for f, _, b in micro) * world
        position = Position(step + 1, position.consumed + per_step)
        late = deadline is not None and time.time() >= deadline
        if requests or late:
            sums[5] = 1.0  # this rank got SIGTERM or passed the deadline: every rank stops after this step (the sum)
        if world > 1:
            sums[4] /= world
            dist.all_reduce(sums)
        loss, ce, l1, confidence, tau, stop, grad_norm = torch.cat([sums, grad_norm.reshape(1).to(sums)]).tolist()
        step_s = max(time.perf_counter() - tick, 1e-9)
        metrics = StepMetrics(step + 1, loss, ce, l1, confidence, tau, lr, grad_norm,
                              tokens / step_s, step_s)
        history.append(metrics)
        bar.set_postfix(loss=f"{metrics.loss:.4f}", tau=f"{metrics.tau:.2f}", tok_s=f"{metrics.tokens_per_s:.0f}")
        bar.update(1)
        if out is not None and rank == 0:
            if (step + 1) % config.log_every == 0:
                with (out / METRICS).open("a") as f:
                    f.write(json.dumps(asdict(metrics)) + "\n")
            if config.save_every and (step + 1) % config.save_every == 0 and step + 1 < end and not stop:
                save_checkpoint(out, draft, optimizer, scheduler, position, asdict(config))
        if stop:
            break
    bar.close()
    draft.eval()
    ckpt = None
    if out is not None and rank == 0:
        ckpt = save_checkpoint(out, draft, optimizer, scheduler, position, asdict(config))
    if stop and position.step < end:
        raise TrainingStopped(position.step, config.steps, ckpt, tuple(history), "SIGTERM" if requests else "deadline")
    return TrainResult(tuple(history), ckpt, time.perf_counter() - began)


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop metric lines past `step` (written by a run that was killed before its next checkpoint)."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in keep))


def init_distributed() -> tuple[int, int, torch.device]:
    """Initialise torch.distributed from torchrun's environment (NCCL on CUDA, gloo on CPU)."""
    if "WORLD_SIZE" not in os.environ or int(os.environ["WORLD_SIZE"]) == 1:
        return 0, 1, torch.device("cuda" if torch.cuda.is_available() else "cpu")
    local = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        dist.init_process_group("nccl")
        device = torch.device("cuda", local)
    else:
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    return dist.get_rank(), dist.get_world_size(), device
