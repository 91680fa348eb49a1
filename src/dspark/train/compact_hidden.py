"""The compact hidden-state store: capture writes only the rows training reads (`compact_layout` says which and why),
in bf16 or fp8 (float8_e4m3fn, one float32 scale per row of each layer), and `CompactHiddenStates` reads them back
as float32 `HiddenStates`, the rows training never reads filled with zeros.

Files: `compact_NNNNN.safetensors` shards of whole sequences and `index.json` (per sequence its shard, token /
feature-row / final-hidden-row offsets and counts; dtype, layer ids, shard sizes, total bytes). Each shard is written
atomically and the index last, so a store is complete when its index exists; like the full store
(`hidden.capture_offline`), an interrupted capture starts again from the beginning. Not here: the byte arithmetic
(`compact_layout`), the full-precision every-position store (`hidden.py`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from dspark.files import atomic_write, write_text
from dspark.model.target import Target
from dspark.train.compact_layout import (
    DEFAULT_SHARD_BYTES,
    FORMAT,
    INDEX_NAME,
    Geometry,
    build_index,
    index_text,
    plan_shards,
    rows_read,
    storage_dtype,
    valid_anchors,
)
from dspark.train.data import Example
from dspark.train.hidden_batch import HiddenStates

FP8_MAX = 448.0  # the largest finite float8_e4m3fn


class CompactStoreError(ValueError):
    """A compact store whose index and shards disagree (or that is not a compact store)."""


def encode_rows(x: torch.Tensor, dtype: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """[..., d] float -> (stored [..., d], float32 scale [...] or None). fp8 scales each row by its absolute maximum
    onto ±448, so every row uses the format's whole range (relative error ≤ 2⁻⁴ per element, e4m3's own)."""
    if dtype == "float32" or dtype == "bfloat16":
        return x.to(getattr(torch, dtype)), None
    x = x.float()
    amax = x.abs().amax(-1)
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    q = (x / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def decode_rows(q: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    x = q.float()
    return x if scale is None else x * scale[..., None].float()


def capture_compact(target: Target, examples: Sequence[Example], out_dir: str | Path, dtype: str = "bfloat16",
                    shard_bytes: int = DEFAULT_SHARD_BYTES, progress: bool = True) -> Path:
    """Run the target once over `examples` and write the compact store (shards atomically, index.json last)."""
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    geometry = Geometry(len(target.layer_ids), target.hidden_size, storage_dtype(dtype))
    rows = [rows_read(ex.id, ex.loss_mask) for ex in examples]
    shards = plan_shards(rows, geometry, shard_bytes)
    sizes = []
    bar = tqdm(total=len(examples), desc=f"capturing hidden states ({geometry.dtype})", disable=not progress)
    for s, members in enumerate(shards):
        parts: dict[str, list[torch.Tensor]] = {}
        for i in members:
            for name, tensor in _sequence_tensors(target, examples[i], rows[i].context, geometry).items():
                parts.setdefault(name, []).append(tensor)
            bar.update(1)
        tensors = {name: torch.cat(pieces).contiguous() for name, pieces in parts.items()}
        path = out_dir / f"compact_{s:05d}.safetensors"
        atomic_write(path, lambda tmp, t=tensors: save_file(t, tmp))
        sizes.append(path.stat().st_size)
    bar.close()
    write_text(out_dir / INDEX_NAME, index_text(build_index(rows, shards, geometry, target.layer_ids, sizes)))
    return out_dir


def _sequence_tensors(target: Target, example: Example, context: int, geometry: Geometry) -> dict[str, torch.Tensor]:
    """One sequence's tensors for its shard: ids and mask of every token, the kept rows encoded."""
    ids = torch.tensor(example.input_ids, dtype=torch.long)
    out = target.forward(ids[None].to(target.device), logits_to_keep=1)
    anchors = torch.tensor(valid_anchors(example.loss_mask), dtype=torch.long, device=out.last_hidden.device)
    features = out.features[0, :context].reshape(context, geometry.num_layers, geometry.hidden_size)
    tensors = {"input_ids": ids.to(torch.int32), "loss_mask": torch.tensor(example.loss_mask, dtype=torch.uint8)}
    for name, x in (("features", features), ("last_hidden", out.last_hidden[0, anchors])):
        q, scale = encode_rows(x, geometry.dtype)
        tensors[name] = q.cpu()
        if scale is not None:
            tensors[f"{name}_scale"] = scale.cpu()
    return tensors


def is_compact_store(folder: str | Path) -> bool:
    index = Path(folder) / INDEX_NAME
    return index.is_file() and json.loads(index.read_text()).get("format") == FORMAT


class CompactHiddenStates:
    """Reads what `capture_compact` wrote, de-quantised to float32 on `device`; positions training never reads come
    back as zeros. Opening checks the index against every shard's size and tensor shapes, and each read checks the
    sequence's stored rows against its loss mask, so a store mixed from two captures is refused, not trained on."""

    def __init__(self, folder: str | Path, layer_ids: Sequence[int] | None = None,
                 device: str | torch.device = "cpu"):
        self.folder = Path(folder)
        index_file = self.folder / INDEX_NAME
        if not index_file.is_file():
            raise FileNotFoundError(f"{self.folder}: no {INDEX_NAME}; capture hidden states first (dspark train "
                                    f"capture), or finish an interrupted capture by running it again")
        self.index = json.loads(index_file.read_text())
        if self.index.get("format") != FORMAT:
            raise CompactStoreError(f"{index_file} is not a compact store index (format "
                                    f"{self.index.get('format')!r}); read it with OfflineHiddenStates")
        if layer_ids is not None and list(layer_ids) != self.index["layer_ids"]:
            raise ValueError(f"{self.folder} holds target layers {self.index['layer_ids']}, the draft reads "
                             f"{list(layer_ids)}: capture again with the draft's target_layer_ids")
        self.geometry = Geometry(len(self.index["layer_ids"]), int(self.index["hidden_size"]), self.index["dtype"])
        self.device = device
        for shard in self.index["shards"]:
            self._check_shard(shard)

    def _mismatch(self, what: str) -> CompactStoreError:
        return CompactStoreError(f"{self.folder}: {INDEX_NAME} does not match its shards ({what}); the store was "
                                 f"changed or mixed from two captures: capture again into an empty folder")

    def _check_shard(self, shard: dict) -> None:
        path = self.folder / shard["name"]
        if not path.is_file():
            raise self._mismatch(f"{shard['name']} is missing")
        if path.stat().st_size != shard["bytes"]:
            raise self._mismatch(f"{shard['name']} holds {path.stat().st_size} bytes, the index says {shard['bytes']}")
        expected = self.geometry.tensors(shard["tokens"], shard["context_rows"], shard["teacher_rows"])
        with safe_open(path, framework="pt") as f:
            found = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
        for name, (_, shape) in expected.items():
            if found.get(name) != shape:
                raise self._mismatch(f"{shard['name']}: {name} has shape {found.get(name)}, the index says {shape}")

    def __len__(self) -> int:
        return len(self.index["sequences"])

    def lengths(self) -> list[int]:
        """Each sequence's length, from the index."""
        return [int(entry["length"]) for entry in self.index["sequences"]]

    def get(self, index: int) -> HiddenStates:
        e = self.index["sequences"][index]
        shard = self.index["shards"][e["shard"]]
        m, d = self.geometry.num_layers, self.geometry.hidden_size
        with safe_open(self.folder / shard["name"], framework="pt") as f:
            def rows(name: str, offset: int, count: int) -> torch.Tensor:
                return f.get_slice(name)[offset: offset + count]

            ids = rows("input_ids", e["offset"], e["length"]).long()
            mask = rows("loss_mask", e["offset"], e["length"]).long()
            scaled = self.geometry.scaled
            ctx = (e["context_offset"], e["context_rows"])
            top = (e["teacher_offset"], e["teacher_rows"])
            features = decode_rows(rows("features", *ctx), rows("features_scale", *ctx) if scaled else None)
            last = decode_rows(rows("last_hidden", *top), rows("last_hidden_scale", *top) if scaled else None)
        anchors = valid_anchors(mask.tolist())
        if (anchors[-1] if anchors else 0) != e["context_rows"] or len(anchors) != e["teacher_rows"]:
            raise self._mismatch(f"sequence {e['id']!r}: its loss mask reads {anchors[-1] if anchors else 0} context "
                                 f"rows and {len(anchors)} final-hidden rows, the index says {e['context_rows']} and "
                                 f"{e['teacher_rows']}")
        length = e["length"]
        full_features = torch.zeros(length, m * d)
        full_features[: e["context_rows"]] = features.reshape(-1, m * d)
        full_last = torch.zeros(length, d)
        full_last[torch.tensor(anchors, dtype=torch.long)] = last
        return HiddenStates(ids[None].to(self.device), mask[None].to(self.device),
                            full_features[None].to(self.device), full_last[None].to(self.device))
