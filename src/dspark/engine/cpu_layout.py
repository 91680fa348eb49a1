"""How each linear layer multiplies on this CPU: a layout and a GEMM call per row count, timed once at load.

A verify multiplies a few rows (anchor + γ drafts) by every weight matrix, a plain step one row. Which of
`F.linear` on nn.Linear's own row-major weight ("row"), `F.linear` on the same matrix stored column-major ("col",
[in, out] contiguous, seen through `.t()`), or `W @ xᵀ` on the row-major weight ("row-nt") is fastest depends on the
BLAS, the CPU and the row count, and differs by up to 4× for the LM head: on one 2-core machine "col" won at every
size, on another it halved the 1-row LM head and doubled the 8-row one. `plan_cpu_layout` times the three on each
weight shape at a few row counts (under the thread count already set), keeps one layout where one is within
`SLACK` of the best at every count, and otherwise keeps both layouts of that weight (the column-major copy a
non-persistent buffer) and picks per call by row count (`PlannedLinear`). The baseline reads the same modules, so plain
decoding gets its own best call too and the speedup is not flattered. Values, shapes, parameters, state dicts and
ties stay; the formulations round differently in the last bits, as any two GEMM kernels do.

`DSPARK_CPU_LAYOUT=row` or `=col` skips the timing and stores every weight that way (reproducible numerics across
machines; the tests pin `col`). What it does not do: anything off the CPU (the CUDA path runs graphs and Triton
kernels), or anything to a model that will be trained or saved (safetensors refuses non-contiguous tensors): call it
on models loaded for CPU inference only (demo, bench, serve).
"""
from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

FORMULATIONS = ("row", "col", "row-nt")
ROWS = (1, 2, 4, 8, 16, 32)  # a plain step, verify widths, draft blocks, small batches
SLACK = 1.15  # one layout for a weight when it is within this factor of the best call at every row count …
FLOOR = 5e-6  # … or within this many seconds of it (differences of a few µs are timer noise, not layout)
Timer = Callable[[str, torch.Tensor, int], float]  # (formulation, weight laid out for it, rows) -> seconds


def is_column_major(weight: torch.Tensor) -> bool:
    """True for a 2-D tensor stored [in, out]-contiguous and seen as [out, in]."""
    return weight.dim() == 2 and weight.shape[0] > 1 and weight.t().is_contiguous()


def _column_major(weight: torch.Tensor) -> torch.Tensor:
    return weight.t().contiguous().t()  # same [out, in] shape and values, [in, out] in memory


def linear_call(x: torch.Tensor, formulation: str, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [..., in] through weight [out, in] (stored as the formulation wants) -> [..., out]."""
    if formulation != "row-nt":
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])  # [N, in]
    out = torch.mm(weight, flat.t()) if bias is None else torch.addmm(bias.unsqueeze(1), weight, flat.t())  # [out, N]
    return out.t().contiguous().view(*x.shape[:-1], weight.shape[0])  # [..., out]


def time_call(formulation: str, stored: torch.Tensor, rows: int) -> float:
    """Median seconds of one call on `stored` (laid out as the formulation wants) at `rows` rows, after two warm-up
    calls; more repeats for cheap calls."""
    seeded = torch.Generator().manual_seed(rows)  # not the global RNG: loading a model must not move users' seeds
    x = torch.randn(rows, stored.shape[1], dtype=stored.dtype, generator=seeded)
    start = time.perf_counter()
    for _ in range(2):
        linear_call(x, formulation, stored, None)
    repeats = max(3, min(25, int(0.02 / max((time.perf_counter() - start) / 2, 1e-7))))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        linear_call(x, formulation, stored, None)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@dataclass(frozen=True)
class WeightPlan:
    """One weight shape's measured costs and the call chosen per measured row count."""
    shape: tuple[int, int]  # [out, in]
    rows: tuple[int, ...]
    seconds: dict[str, tuple[float, ...]]  # formulation -> seconds per row count
    calls: tuple[str, ...]  # the formulation used at each row count

    @property
    def layouts(self) -> frozenset[str]:
        return frozenset("col" if call == "col" else "row" for call in self.calls)

    def call_for(self, rows: int) -> str:
        """The chosen call at the measured row count nearest to `rows` (on a log scale)."""
        nearest = min(range(len(self.rows)), key=lambda i: abs(math.log(self.rows[i]) - math.log(max(rows, 1))))
        return self.calls[nearest]

    def describe(self) -> str:
        """e.g. "[49152×576] col at 1 row, row-nt at 2–16, row at 32" (row counts as measured)."""
        spans, start = [], 0
        for i in range(1, len(self.calls) + 1):
            if i == len(self.calls) or self.calls[i] != self.calls[start]:
                lo, hi = self.rows[start], self.rows[i - 1]
                spans.append(f"{self.calls[start]} at {lo}" + (f"–{hi}" if hi != lo else "") + (" row" if hi == 1 else
                                                                                                  " rows"))
                start = i
        return f"[{self.shape[0]}×{self.shape[1]}] " + ", ".join(spans)


def choose(shape: tuple[int, int], rows: tuple[int, ...], seconds: dict[str, tuple[float, ...]]) -> WeightPlan:
    """One layout when its best call is within SLACK (or FLOOR) of the overall best at every row count (row-major
    preferred, as nn.Linear stores it), otherwise the fastest call at each row count over both layouts."""
    best = [min(seconds[f][i] for f in FORMULATIONS) for i in range(len(rows))]
    for layout, members in (("row", ("row", "row-nt")), ("col", ("col",))):
        picks = [min(members, key=lambda f: seconds[f][i]) for i in range(len(rows))]
        if all(seconds[f][i] <= max(SLACK * best[i], best[i] + FLOOR) for i, f in enumerate(picks)):
            return WeightPlan(shape, rows, seconds, tuple(picks))
    picks = [min(FORMULATIONS, key=lambda f: seconds[f][i]) for i in range(len(rows))]
    return WeightPlan(shape, rows, seconds, tuple(picks))


class PlannedLinear(nn.Linear):
    """An nn.Linear that multiplies with the call its `WeightPlan` chose for the input's row count. `weight` stays
    row-major (nn.Linear's layout, and an embedding's when tied); `weight_col` holds the column-major copy when the
    plan uses it."""

    plan: WeightPlan

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        call = self.plan.call_for(x.numel() // max(self.in_features, 1))
        weight = self.weight_col if call == "col" else self.weight
        return linear_call(x, call, weight, self.bias)


def _cpu_linears(modules: tuple[nn.Module | None, ...]) -> list[nn.Linear]:
    """Each plain nn.Linear (subclasses such as quantized layers are left alone) with a 2-D CPU weight, once."""
    seen, out = set(), []
    for module in modules:
        for linear in module.modules() if module is not None else ():
            if type(linear) not in (nn.Linear, PlannedLinear) or id(linear) in seen:
                continue
            if linear.weight.device.type == "cpu" and linear.weight.dim() == 2:
                seen.add(id(linear))
                out.append(linear)
    return out


def _apply(linear: nn.Linear, plan: WeightPlan) -> None:
    if isinstance(linear, PlannedLinear):  # planned before: start again from a plain nn.Linear
        del linear.weight_col
        linear.__class__ = nn.Linear
    weight = linear.weight
    if plan.layouts == {"col"}:
        if not is_column_major(weight):
            weight.data = _column_major(weight.data)
        return
    if not weight.is_contiguous():
        weight.data = weight.data.contiguous()
    if plan.calls != ("row",) * len(plan.calls):
        linear.__class__ = PlannedLinear  # still an nn.Linear: the same parameters, state dict and repr
        linear.plan = plan
        linear.register_buffer("weight_col", _column_major(weight.data) if "col" in plan.layouts else None,
                               persistent=False)


def plan_cpu_layout(*modules: nn.Module | None, rows: tuple[int, ...] = ROWS, timer: Timer | None = None,
                    layout: str | None = None, plans: dict[tuple[int, int], WeightPlan] | None = None,
                    ) -> dict[tuple[int, int], WeightPlan]:
    """Time the three calls for every CPU nn.Linear weight shape of `modules` (once per shape and dtype) and lay each
    weight out as its shape's plan says; returns shape -> plan. `layout` ("auto", "row" or "col"; by default
    DSPARK_CPU_LAYOUT, else "auto") fixes one layout for every weight instead of timing; `plans` (an earlier
    result) lays the weights out again without timing, shapes it lacks timed as usual."""
    fixed = layout or os.environ.get("DSPARK_CPU_LAYOUT") or "auto"
    if fixed not in ("auto", "row", "col"):
        raise ValueError(f"CPU layout {fixed!r} (DSPARK_CPU_LAYOUT): use auto (time the calls at load), row or col")
    timer = timer or time_call
    given = dict(plans or {})
    chosen: dict[tuple, WeightPlan] = {}
    for linear in _cpu_linears(modules):
        shape, dtype = tuple(linear.weight.shape), linear.weight.dtype
        if (shape, dtype) not in chosen:
            if shape in given:
                chosen[shape, dtype] = given[shape]
            elif fixed != "auto":
                chosen[shape, dtype] = choose(shape, tuple(rows), {f: tuple(0.0 if f == fixed else 1.0 for _ in rows)
                                                                   for f in FORMULATIONS})
            else:
                with torch.no_grad():
                    row_major = linear.weight.detach().contiguous()
                    stored = {"row": row_major, "row-nt": row_major, "col": _column_major(row_major)}
                    seconds = {f: tuple(timer(f, stored[f], r) for r in rows) for f in FORMULATIONS}
                chosen[shape, dtype] = choose(shape, tuple(rows), seconds)
        _apply(linear, chosen[shape, dtype])
    return {shape: plan for (shape, _), plan in chosen.items()}
