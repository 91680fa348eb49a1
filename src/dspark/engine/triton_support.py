"""Whether the engine's Triton kernels (markov_kernel, cache_attention, layer_kernels) may run on a tensor's device.

They run on CUDA tensors when Triton imports, and on CPU tensors only under Triton's interpreter (TRITON_INTERPRET=1,
which the tests use). DSPARK_KERNELS=0 switches them all off (the torch ops serve instead), for a GPU whose Triton
cannot compile them or to compare the two paths. Nothing here launches a kernel.
"""
from __future__ import annotations

import importlib.util
import os

import torch

TRITON = importlib.util.find_spec("triton") is not None


def interpreting() -> bool:
    """Triton's CPU interpreter is on (it is chosen when a kernel is defined, i.e. at import)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def available(tensor: torch.Tensor) -> bool:
    """True when a kernel may run on `tensor`'s device: Triton present, not switched off by DSPARK_KERNELS=0, and a
    CUDA tensor (or the interpreter)."""
    if not TRITON or os.environ.get("DSPARK_KERNELS", "1") == "0":
        return False
    return tensor.is_cuda or interpreting()
