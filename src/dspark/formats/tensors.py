"""Safetensors files of a checkpoint folder: read (single file or sharded), write atomically, check against a config.

Tensors travel as they are stored (dtype and bytes untouched), so conversions between layouts are bit-exact; a file in
compact int8 storage (`dspark.formats.compact`) is read back in its original dtype, and written so on request. The
shape check builds the draft on the meta device, so checking a 2-billion-parameter draft allocates nothing.
It knows nothing about layouts or renaming.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from dspark.config import DraftConfig
from dspark.formats.compact import compact_tensors, read_weight_file
from dspark.files import atomic_write
from dspark.formats.layout import EMBEDDING_TENSORS, WEIGHTS_NAME, CheckpointError

INDEX_NAME = "model.safetensors.index.json"


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files holding a folder's weights (one file, or the shards its index names)."""
    single, index = folder / WEIGHTS_NAME, folder / INDEX_NAME
    if single.is_file():
        return [single]
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise CheckpointError(f"{index}: not a safetensors index ({err})") from None
        shards = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [str(p) for p in shards if not p.is_file()]
        if missing:
            raise CheckpointError(f"{index} names shards that are missing: {missing}")
        return shards
    raise CheckpointError(f"{folder}: no {WEIGHTS_NAME} or {INDEX_NAME}; pass a checkpoint folder with its weights")


def read_tensors(folder: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint folder, exactly as stored."""
    tensors: dict[str, torch.Tensor] = {}
    for file in weight_files(Path(folder)):
        for name, tensor in read_weight_file(file).items():
            if name in tensors:
                raise CheckpointError(f"{file}: tensor {name!r} is stored in more than one shard")
            tensors[name] = tensor
    return tensors


def read_some(folder: str | Path, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Only the named tensors that exist in the folder (reads nothing else: for big target checkpoints)."""
    found: dict[str, torch.Tensor] = {}
    for file in weight_files(Path(folder)):
        with safe_open(str(file), framework="pt") as handle:
            for name in names:
                if name in handle.keys() and name not in found:
                    found[name] = handle.get_tensor(name)
    return found


def write_tensors(folder: Path, tensors: dict[str, torch.Tensor], int8: bool = False) -> Path:
    """Write `model.safetensors` atomically (contiguous CPU copies; dtypes kept, or int8 per-row storage)."""
    path = folder / WEIGHTS_NAME
    state = {name: t.detach().to("cpu").contiguous() for name, t in sorted(tensors.items())}
    state, metadata = compact_tensors(state) if int8 else (state, {"format": "pt"})
    atomic_write(path, lambda tmp: save_file(state, tmp, metadata=metadata))
    return path


def expected_shapes(config: DraftConfig, with_embeddings: bool) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape for a draft of this config (native / DeepSpec names)."""
    from dspark.model.draft import DSparkDraft

    with torch.device("meta"):
        draft = DSparkDraft(config, with_embeddings=with_embeddings)
    return {name: tuple(t.shape) for name, t in draft.state_dict().items()}


def has_embeddings(tensors: dict[str, torch.Tensor], where: str) -> bool:
    """True if both shared tensors are present, False if neither; refuse a half pair."""
    present = [name in tensors for name in EMBEDDING_TENSORS]
    if any(present) and not all(present):
        raise CheckpointError(f"{where}: holds only one of {EMBEDDING_TENSORS}; store both or neither")
    return all(present)


def check_tensors(config: DraftConfig, tensors: dict[str, torch.Tensor], where: str) -> None:
    """Refuse tensors that do not match the config: name the first missing / unexpected / mis-shaped one."""
    expected = expected_shapes(config, has_embeddings(tensors, where))
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{where}: tensors do not match the config; missing {missing[:5]}"
                              f"{'…' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
                              f"{'…' if len(unexpected) > 5 else ''}")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise CheckpointError(f"{where}: tensor {name!r} has shape {tuple(tensors[name].shape)}, the config "
                                  f"implies {shape}")


def dtype_name(tensors: dict[str, torch.Tensor]) -> str:
    """The dtype holding most floating-point weights ("float32", "bfloat16", …), as HF configs spell it."""
    counts: dict[str, int] = {}
    for t in tensors.values():
        if t.is_floating_point():
            kind = str(t.dtype).removeprefix("torch.")
            counts[kind] = counts.get(kind, 0) + t.numel()
    return max(counts, key=counts.__getitem__) if counts else "float32"
