"""Planning arithmetic: VRAM per quant type, cluster layouts, decode speed and cost versus an API.

Pure Python on purpose: nothing here imports torch, transformers or numpy, and matplotlib is imported only
inside `dspark.plan.plot` when a plot is asked for, so every `dspark plan` command answers in well under a
second. Facts (model shapes, bits per weight, GPU specs, prices) are copied into the modules that use them,
each with the public source it came from.
"""
from __future__ import annotations

from dspark.plan.errors import PlanError

__all__ = ["PlanError"]
