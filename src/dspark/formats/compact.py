"""Compact 8-bit storage of a draft's weights, for shipping a draft where size is capped (a repository, a wheel).

Every floating-point matrix is stored as int8 with one float32 scale per row (symmetric: scale = the row's largest
magnitude / 127) under `<name>_scale`; vectors (norms) keep their dtype. The safetensors metadata records the
storage and the original dtype, and reading such a file gives back ordinary tensors in that dtype, so everything
downstream (loading, export to the engines' layouts) sees a normal checkpoint. A bf16 draft shrinks about 1.9×;
each weight moves by at most half a quantization step (its row's largest magnitude / 254), which changes what the
draft proposes, never what the target accepts (verification stays lossless).
It does not quantize compute: a loaded draft runs in the dtype asked for.
"""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from dspark.formats.layout import CheckpointError

STORAGE_KEY, DTYPE_KEY = "dspark_storage", "dspark_dtype"
INT8_ROWS = "int8-rows"
SCALE_SUFFIX = "_scale"


def compact_tensors(tensors: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The int8-rows form of a state dict and the safetensors metadata that marks it."""
    dtypes = {t.dtype for t in tensors.values() if t.is_floating_point()}
    if len(dtypes) != 1:
        raise ValueError(f"compact storage needs one floating-point dtype across the tensors "
                         f"(got {sorted(map(str, dtypes))})")
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if name.endswith(SCALE_SUFFIX):
            raise ValueError(f"tensor {name!r} ends in {SCALE_SUFFIX!r}, which compact storage reserves")
        if t.dim() == 2 and t.is_floating_point():
            w = t.detach().float()  # [rows, cols]
            scale = w.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / 127  # [rows]
            out[name] = (w / scale[:, None]).round().clamp(-127, 127).to(torch.int8)  # [rows, cols]
            out[name + SCALE_SUFFIX] = scale
        else:
            out[name] = t
    return out, {"format": "pt", STORAGE_KEY: INT8_ROWS, DTYPE_KEY: str(dtypes.pop()).removeprefix("torch.")}


def expand_tensors(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None,
                   where: str) -> dict[str, torch.Tensor]:
    """Ordinary tensors from a file's contents: unchanged unless its metadata marks int8-rows storage."""
    storage = (metadata or {}).get(STORAGE_KEY)
    if storage is None:
        return tensors
    if storage != INT8_ROWS:
        raise _error(f"{where}: unknown {STORAGE_KEY} {storage!r} (this dspark reads {INT8_ROWS!r}); "
                     f"upgrade dspark or re-save the draft")
    dtype = getattr(torch, (metadata or {}).get(DTYPE_KEY, "float32"), None)
    if not isinstance(dtype, torch.dtype):
        raise _error(f"{where}: {DTYPE_KEY} {metadata.get(DTYPE_KEY)!r} is not a torch dtype")
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if name.endswith(SCALE_SUFFIX):
            if name.removesuffix(SCALE_SUFFIX) not in tensors:
                raise _error(f"{where}: scale {name!r} has no int8 matrix beside it")
            continue
        if t.dtype == torch.int8:
            scale = tensors.get(name + SCALE_SUFFIX)
            if scale is None or t.dim() != 2 or tuple(scale.shape) != (t.shape[0],):
                raise _error(f"{where}: int8 matrix {name!r} needs a float scale of shape [{t.shape[0]}] "
                             f"named {name + SCALE_SUFFIX!r}")
            out[name] = (t.float() * scale.float()[:, None]).to(dtype)  # [rows, cols]
        else:
            out[name] = t
    return out


def read_weight_file(file: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of one safetensors file, expanded when it is stored compact."""
    with safe_open(str(file), framework="pt") as handle:
        metadata = handle.metadata()
    return expand_tensors(load_file(str(file)), metadata, str(file))


def _error(message: str) -> Exception:
    return CheckpointError(message)
