"""Which target hidden states training reads, and the byte layout of a compact store of just those: pure arithmetic
and the standard library (no torch), so `dspark train capture --estimate` runs without loading a model.

Rows training reads. The trainer draws anchors afresh at every step (the generator is seeded per global sequence
counter, so each epoch draws anew) from a sequence's valid anchors p (loss_mask[p] = loss_mask[p+1] = 1, see
`dspark.model.blocks`), so any valid anchor may be drawn some time. Then:
  * the draft reads the chosen layers' features of the context strictly before its anchor: positions 0 … P−1, where
    P is the sequence's last valid anchor. Later positions are masked out of every block;
  * the teacher reads the final hidden at rows p … p+k of each block's supervised prefix (slot k, label p+k+1), and
    the cumulative eval mask keeps slot k only while the loss mask holds from p to p+k+1, so the rows read with a
    non-zero loss weight are exactly the valid anchors themselves (every other row is read with weight 0).
A compact store keeps those rows (`rows_read`); the reader fills the rest with zeros, which reach no loss term. A
shorter `max_length` at training time only drops anchors, so one store serves every max_length up to the captured one.

Byte layout (shared by the writer `dspark.train.compact_hidden` and `estimate_capture`): shards of whole sequences,
closed before they pass `shard_bytes`; each shard is a safetensors file with input_ids (int32) and loss_mask (uint8)
for every token, features [R, m, d] and last_hidden [Q, d] in the storage dtype, and for fp8 one float32 scale per row
of each layer (features_scale [R, m], last_hidden_scale [Q]). Not here: running the target, quantising, reading.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from dspark.train.data import iter_examples

FORMAT = "dspark-compact-hidden-states"
INDEX_NAME = "index.json"
STORAGE_BYTES = {"bfloat16": 2, "float8_e4m3fn": 1, "float32": 4}  # bytes per stored element
STORAGE_NAMES = {"bf16": "bfloat16", "fp8": "float8_e4m3fn", "fp32": "float32", **{n: n for n in STORAGE_BYTES}}
SCALED = frozenset({"float8_e4m3fn"})  # dtypes with one float32 scale per row (bf16 has fp32's exponent range)
DEFAULT_SHARD_BYTES = 2 * 2**30
_ST_DTYPE = {"bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float32": "F32", "int32": "I32", "uint8": "U8"}
_ITEM = {**STORAGE_BYTES, "int32": 4, "uint8": 1}


def storage_dtype(name: str) -> str:
    """The storage dtype's full name for `name` (bf16 / fp8 / fp32 or the torch names)."""
    if name not in STORAGE_NAMES:
        raise ValueError(f"storage dtype {name!r} is not one of {', '.join(sorted(STORAGE_NAMES))}; use bf16 (half "
                         f"the bytes of fp32, tight) or fp8 (float8_e4m3fn with a float32 scale per row, a quarter)")
    return STORAGE_NAMES[name]


def valid_anchors(loss_mask: Sequence[int]) -> list[int]:
    """Positions p with loss_mask[p] and loss_mask[p+1] set: the anchors training can draw, and the final-hidden rows
    its teacher reads."""
    return [p for p in range(len(loss_mask) - 1) if loss_mask[p] and loss_mask[p + 1]]


@dataclass(frozen=True)
class SequenceRows:
    id: str
    length: int  # tokens (ids and loss mask are kept for all of them)
    context: int  # feature rows kept: positions 0 … context−1 (the last valid anchor; 0 without one)
    teacher: int  # final-hidden rows kept: one per valid anchor


def rows_read(id: str, loss_mask: Sequence[int]) -> SequenceRows:
    anchors = valid_anchors(loss_mask)
    return SequenceRows(id, len(loss_mask), anchors[-1] if anchors else 0, len(anchors))


@dataclass(frozen=True)
class Geometry:
    num_layers: int  # m chosen target layers
    hidden_size: int  # d
    dtype: str  # a STORAGE_BYTES name

    @property
    def scaled(self) -> bool:
        return self.dtype in SCALED

    def tensors(self, tokens: int, context: int, teacher: int) -> dict[str, tuple[str, tuple[int, ...]]]:
        """name -> (dtype, shape) of one shard holding these totals."""
        m, d = self.num_layers, self.hidden_size
        out = {"input_ids": ("int32", (tokens,)), "loss_mask": ("uint8", (tokens,)),
               "features": (self.dtype, (context, m, d)), "last_hidden": (self.dtype, (teacher, d))}
        if self.scaled:
            out.update(features_scale=("float32", (context, m)), last_hidden_scale=("float32", (teacher,)))
        return out

    def data_bytes(self, tokens: int, context: int, teacher: int) -> int:
        return sum(_ITEM[dt] * _prod(shape) for dt, shape in self.tensors(tokens, context, teacher).values())

    def file_bytes(self, tokens: int, context: int, teacher: int) -> int:
        """The safetensors file's size: 8-byte length, the JSON header (padded to 8), the data."""
        return 8 + _header_bytes(self.tensors(tokens, context, teacher)) + self.data_bytes(tokens, context, teacher)


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for n in shape:
        out *= n
    return out


def _header_bytes(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    """safetensors' header as its writer lays it out: tensors by element size (largest first) then name, compact
    JSON, padded with spaces to a multiple of 8."""
    header, at = {}, 0
    for name, (dt, shape) in sorted(tensors.items(), key=lambda kv: (-_ITEM[kv[1][0]], kv[0])):
        size = _ITEM[dt] * _prod(shape)
        header[name] = {"dtype": _ST_DTYPE[dt], "shape": list(shape), "data_offsets": [at, at + size]}
        at += size
    n = len(json.dumps(header, separators=(",", ":")))
    return n + (-n % 8)


def shard_name(i: int) -> str:
    return f"compact_{i:05d}.safetensors"


def plan_shards(rows: Sequence[SequenceRows], geometry: Geometry, shard_bytes: int) -> list[list[int]]:
    """Sequence indices per shard, in order: a shard closes before its data would pass `shard_bytes` (a sequence
    larger than that gets a shard of its own)."""
    shards: list[list[int]] = []
    size = 0
    for i, r in enumerate(rows):
        seq = geometry.data_bytes(r.length, r.context, r.teacher)
        if not shards or (shards[-1] and size + seq > shard_bytes):
            shards.append([])
            size = 0
        shards[-1].append(i)
        size += seq
    return shards


def build_index(rows: Sequence[SequenceRows], shards: Sequence[Sequence[int]], geometry: Geometry,
                layer_ids: Sequence[int], shard_file_bytes: Sequence[int]) -> dict:
    """The index.json of a store: per sequence its shard and offsets (tokens, feature rows, final-hidden rows) and
    lengths; per shard its file size and totals; the dtype, layer ids and total bytes of the shards."""
    sequences, shard_entries = [], []
    for s, members in enumerate(shards):
        tokens = context = teacher = 0
        for i in members:
            r = rows[i]
            sequences.append({"id": r.id, "shard": s, "offset": tokens, "length": r.length,
                              "context_offset": context, "context_rows": r.context,
                              "teacher_offset": teacher, "teacher_rows": r.teacher})
            tokens, context, teacher = tokens + r.length, context + r.context, teacher + r.teacher
        shard_entries.append({"name": shard_name(s), "bytes": int(shard_file_bytes[s]), "tokens": tokens,
                              "context_rows": context, "teacher_rows": teacher})
    return {"format": FORMAT, "version": 1, "layer_ids": [int(i) for i in layer_ids],
            "hidden_size": geometry.hidden_size, "dtype": geometry.dtype, "scaled": geometry.scaled,
            "total_bytes": sum(int(b) for b in shard_file_bytes), "shards": shard_entries, "sequences": sequences}


def index_text(index: dict) -> str:
    return json.dumps(index, separators=(",", ":")) + "\n"


def shard_totals(rows: Sequence[SequenceRows], members: Sequence[int]) -> tuple[int, int, int]:
    return (sum(rows[i].length for i in members), sum(rows[i].context for i in members),
            sum(rows[i].teacher for i in members))


def iter_data_rows(path: str | Path, max_length: int | None = None) -> Iterator[SequenceRows]:
    """The rows each example of a data JSONL (`dspark train regenerate`'s, .gz too) keeps, one line at a time (ids
    as `read_examples` names them; cut to `max_length` as it does)."""
    for example in iter_examples(path, max_length):
        yield rows_read(example.id, example.loss_mask)


@dataclass(frozen=True)
class CaptureEstimate:
    sequences: int
    tokens: int
    context_rows: int  # feature rows stored (each m layers)
    teacher_rows: int  # final-hidden rows stored
    num_layers: int
    hidden_size: int
    dtype: str
    shards: int
    shard_file_bytes: int  # all shard files
    index_bytes: int
    total_bytes: int  # shards + index: the disk the capture needs
    full_float32_bytes: int  # every position, every chosen layer + final hidden in float32 (the full store)

    def line(self) -> str:
        return (f"capture needs {human_bytes(self.total_bytes)} ({self.dtype}, {self.shards} shard(s)): "
                f"{self.sequences:,} sequences, {self.tokens:,} tokens -> {self.context_rows:,} context rows x "
                f"{self.num_layers} layers + {self.teacher_rows:,} final-hidden rows of {self.hidden_size}; every "
                f"position in float32: {human_bytes(self.full_float32_bytes)}")

    def to_json(self) -> dict:
        return {"estimate": asdict(self)}


def estimate_rows(rows: Iterable[SequenceRows], num_layers: int, hidden_size: int, dtype: str,
                  layer_ids: Sequence[int] | None = None,
                  shard_bytes: int = DEFAULT_SHARD_BYTES) -> CaptureEstimate:
    """What a compact capture of these sequences writes, byte for byte as far as the layout goes."""
    rows = list(rows)
    geometry = Geometry(num_layers, hidden_size, storage_dtype(dtype))
    shards = plan_shards(rows, geometry, shard_bytes)
    files = [geometry.file_bytes(*shard_totals(rows, members)) for members in shards]
    ids = list(layer_ids) if layer_ids is not None else list(range(num_layers))
    index = len(index_text(build_index(rows, shards, geometry, ids, files)).encode())
    tokens = sum(r.length for r in rows)
    full = tokens * ((num_layers + 1) * hidden_size * 4 + 16)  # float32 features + final hidden, int64 ids + mask
    return CaptureEstimate(len(rows), tokens, sum(r.context for r in rows), sum(r.teacher for r in rows), num_layers,
                           hidden_size, geometry.dtype, len(shards), sum(files), index, sum(files) + index, full)


def target_hidden_size(target: str | Path) -> int:
    """hidden_size from a local HF model folder's config.json (a multimodal wrapper's text_config too)."""
    path = Path(target) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{target}: no config.json; give the local HF target folder")
    config = json.loads(path.read_text())
    size = config.get("hidden_size") or (config.get("text_config") or {}).get("hidden_size")
    if not size:
        raise ValueError(f"{path} has no hidden_size (nor text_config.hidden_size); is it a causal LM's config?")
    return int(size)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
