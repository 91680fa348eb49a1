"""Column-major linear weights for inference on a CPU.

A verify multiplies a few rows (anchor + γ drafts) by every weight matrix. With the weight stored as nn.Linear keeps
it ([out, in], rows contiguous), MKL's small-M GEMM on a CPU runs 2–2.5× slower than with the same matrix stored
column-major ([in, out] contiguous, seen through `.t()`); for one row the two layouts cost about the same.
`column_major_weights` re-lays every nn.Linear weight of the given modules in place: shapes, values, module types
and tied parameters stay as they were, and `F.linear` reads the strides, so nothing downstream changes.
`fused_layers` keeps the layout when it stacks projections.

What it does not do: anything off the CPU (CUDA's GEMMs have no such gap, and the CUDA path runs graphs and Triton
kernels), or anything to a model that will be trained or saved (safetensors refuses non-contiguous tensors): call it
on models loaded for CPU inference only (demo, bench, serve).
"""
from __future__ import annotations

import torch
from torch import nn


def is_column_major(weight: torch.Tensor) -> bool:
    """True for a 2-D tensor stored [in, out]-contiguous and seen as [out, in]."""
    return weight.dim() == 2 and weight.shape[0] > 1 and weight.t().is_contiguous()


def column_major_weights(*modules: nn.Module | None) -> int:
    """Store each CPU nn.Linear weight of `modules` column-major (a tied weight once); returns how many changed."""
    changed = 0
    for module in modules:
        if module is None:
            continue
        for linear in module.modules():
            if not isinstance(linear, nn.Linear):
                continue
            weight = linear.weight
            if weight.device.type != "cpu" or is_column_major(weight):  # a tied weight's second visit lands here
                continue
            weight.data = weight.data.t().contiguous().t()  # same [out, in] shape and values, [in, out] in memory
            changed += 1
    return changed
