"""Target hidden states for training: captured online, or once to disk (offline) and read back.

Online: the frozen target runs inside the training job (`Target.forward`, no cache) and yields the chosen layers'
features and its final post-norm hidden. Offline: the same tensors are written once to sharded safetensors with an
`index.json`, so training never runs the target; this full store keeps every position, and `OfflineHiddenStates` also
opens the compact store (only the rows training reads, bf16 / fp8: `compact_hidden.py`). Also reads the
`hs_*.safetensors` files written by vLLM's hidden-state extraction (`token_ids`, `hidden_states` [seq, layers,
hidden] with vLLM "aux" ids = our ids + 1). `HiddenStates` and the source protocol live in `hidden_batch.py`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from dspark.formats.native import atomic_write, write_json
from dspark.model.target import Target
from dspark.train.compact_layout import FORMAT as COMPACT_FORMAT
from dspark.train.data import Example
from dspark.train.hidden_batch import HiddenStates

INDEX_NAME = "index.json"


class OnlineHiddenStates:
    """Runs the target on demand. `cache_bytes` > 0 memoises each example's features and final hidden on the
    target's device after its first pass (until that many bytes are held), so later epochs skip the target: on a GPU
    the target's many small kernels, not its FLOPs, are what a step of a small draft waits for."""

    def __init__(self, target: Target, examples: Sequence[Example], cache_bytes: int = 0):
        self.target, self.examples = target, examples
        self.cache_bytes, self.cached_bytes = int(cache_bytes), 0
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # index -> ([L, m·d], [L, d])

    def __len__(self) -> int:
        return len(self.examples)

    def lengths(self) -> list[int]:
        """Each example's sequence length (no target pass)."""
        return [len(ex.input_ids) for ex in self.examples]

    def get(self, index: int) -> HiddenStates:
        return self.get_padded([index])

    def get_padded(self, indices: Sequence[int]) -> HiddenStates:
        """Several examples, right-padded to the longest; ids and mask stay on the CPU, the hidden states are on
        the target's device (one target pass over the examples not cached)."""
        rows = [self.examples[i] for i in indices]
        width = max(len(ex.input_ids) for ex in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for r, ex in enumerate(rows):
            ids[r, : len(ex.input_ids)] = torch.tensor(ex.input_ids)
            mask[r, : len(ex.loss_mask)] = torch.tensor(ex.loss_mask)
        if not self.cache_bytes:
            features, last = self._run(ids)
            return HiddenStates(ids, mask, features, last)
        pieces: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        missing = [r for r, i in enumerate(indices) if i not in self._cache]
        if missing:
            features, last = self._run(ids[missing][:, : max(len(rows[r].input_ids) for r in missing)])
            for j, r in enumerate(missing):
                pieces[r] = (features[j, : len(rows[r].input_ids)], last[j, : len(rows[r].input_ids)])
                self._remember(indices[r], pieces[r])
        ordered = [pieces[r] if r in pieces else self._cache[i] for r, i in enumerate(indices)]
        features = torch.nn.utils.rnn.pad_sequence([f for f, _ in ordered], batch_first=True)  # [B, W, m·d]
        last = torch.nn.utils.rnn.pad_sequence([h for _, h in ordered], batch_first=True)  # [B, W, d]
        return HiddenStates(ids, mask, features, last)

    def _run(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.target.forward(ids.to(self.target.device), logits_to_keep=1)
        return out.features.clone(), out.last_hidden.clone()  # inference tensors: clone them for autograd

    def _remember(self, index: int, piece: tuple[torch.Tensor, torch.Tensor]) -> None:
        size = sum(t.numel() * t.element_size() for t in piece)
        if self.cached_bytes + size <= self.cache_bytes:
            self._cache[index] = (piece[0].clone(), piece[1].clone())  # not views: the batch tensors can go
            self.cached_bytes += size


def capture_offline(target: Target, examples: Sequence[Example], out_dir: str | Path, shard_size: int = 256,
                    dtype: torch.dtype = torch.float32, progress: bool = True) -> Path:
    """Run the target once over `examples` and write shards + index.json (atomic per file)."""
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    online = OnlineHiddenStates(target, examples)
    entries, shard, shard_id = [], {}, 0

    def flush() -> None:
        nonlocal shard, shard_id
        if shard:
            name = f"shard_{shard_id:05d}.safetensors"
            atomic_write(out_dir / name, lambda tmp, s=shard: save_file(s, tmp))
            shard, shard_id = {}, shard_id + 1

    for i in tqdm(range(len(online)), desc="capturing hidden states", disable=not progress):
        hs = online.get(i)
        key = str(len(shard))
        shard.update({f"{key}.input_ids": hs.input_ids[0].cpu(), f"{key}.loss_mask": hs.loss_mask[0].cpu(),
                      f"{key}.features": hs.features[0].to(dtype).cpu().contiguous(),
                      f"{key}.last_hidden": hs.last_hidden[0].to(dtype).cpu().contiguous()})
        entries.append({"id": examples[i].id, "shard": f"shard_{shard_id:05d}.safetensors", "key": key,
                        "length": int(hs.input_ids.shape[1])})
        if len(shard) // 4 >= shard_size:
            flush()
    flush()
    write_json(out_dir / INDEX_NAME, {"format": "dspark-hidden-states", "version": 1,
                                       "layer_ids": list(target.layer_ids), "hidden_size": target.hidden_size,
                                       "dtype": str(dtype).removeprefix("torch."), "examples": entries})
    return out_dir


class OfflineHiddenStates:
    """Reads what `capture_offline` wrote, or a compact store (`compact_hidden.capture_compact`, told apart by its
    index's format), so `dspark train fit --hidden` takes either."""

    def __init__(self, folder: str | Path, layer_ids: Sequence[int] | None = None,
                 device: str | torch.device = "cpu"):
        self.folder = Path(folder)
        index_file = self.folder / INDEX_NAME
        if not index_file.is_file():
            raise FileNotFoundError(f"{self.folder}: no {INDEX_NAME}; capture hidden states first (dspark train capture)")
        self.index = json.loads(index_file.read_text())
        self._compact = None
        if self.index.get("format") == COMPACT_FORMAT:
            from dspark.train.compact_hidden import CompactHiddenStates

            self._compact = CompactHiddenStates(folder, layer_ids, device)
        if layer_ids is not None and list(layer_ids) != self.index["layer_ids"]:
            raise ValueError(f"{self.folder} holds target layers {self.index['layer_ids']}, the draft reads "
                             f"{list(layer_ids)}: capture again with the draft's target_layer_ids")
        self.device = device

    def __len__(self) -> int:
        return len(self._compact) if self._compact is not None else len(self.index["examples"])

    def lengths(self) -> list[int]:
        """Each example's sequence length, from the index."""
        if self._compact is not None:
            return self._compact.lengths()
        return [int(entry["length"]) for entry in self.index["examples"]]

    def get(self, index: int) -> HiddenStates:
        if self._compact is not None:
            return self._compact.get(index)
        entry = self.index["examples"][index]
        with safe_open(self.folder / entry["shard"], framework="pt") as f:
            t = {name: f.get_tensor(f"{entry['key']}.{name}").to(self.device)
                 for name in ("input_ids", "loss_mask", "features", "last_hidden")}
        return HiddenStates(t["input_ids"][None], t["loss_mask"][None], t["features"][None], t["last_hidden"][None])


class VllmHiddenStates:
    """vLLM hidden-state extraction output: one `hs_<i>.safetensors` per sequence with `token_ids` [S] and
    `hidden_states` [S, L, d] for aux layer ids (aux id a = the input of layer a = our id a − 1). When the last aux id
    equals the target's layer count (vLLM's --include-last-layer), that slice is the final pre-norm state; the
    target's final norm turns it into the teacher hidden."""

    def __init__(self, folder: str | Path, aux_layer_ids: Sequence[int], layer_ids: Sequence[int],
                 final_norm: torch.nn.Module, num_target_layers: int, loss_masks: dict[str, Sequence[int]] | None = None):
        self.files = sorted(Path(folder).glob("hs_*.safetensors"), key=lambda p: int(p.stem.split("_")[1]))
        if not self.files:
            raise FileNotFoundError(f"{folder}: no hs_*.safetensors files")
        aux = list(aux_layer_ids)
        if not aux or aux[-1] != num_target_layers:
            raise ValueError("the vLLM capture must include the last layer (aux id = number of target layers) to "
                             "give the teacher distribution; rerun extraction with --include-last-layer")
        wanted = [i + 1 for i in layer_ids]
        missing = [i for i in wanted if i not in aux]
        if missing:
            raise ValueError(f"vLLM aux ids {aux} lack {missing} (our layer ids {list(layer_ids)} + 1)")
        self.slots = [aux.index(i) for i in wanted]
        self.final_norm, self.loss_masks = final_norm, loss_masks or {}

    def __len__(self) -> int:
        return len(self.files)

    @torch.no_grad()
    def get(self, index: int) -> HiddenStates:
        with safe_open(self.files[index], framework="pt") as f:
            ids, hidden = f.get_tensor("token_ids").long(), f.get_tensor("hidden_states")  # [S], [S, L, d]
        features = hidden[:, self.slots].reshape(hidden.shape[0], -1)  # [S, m·d]
        last = self.final_norm(hidden[:, -1].to(next(self.final_norm.parameters()).dtype))  # [S, d]
        mask = torch.tensor(self.loss_masks.get(self.files[index].stem, [1] * ids.shape[0]))
        return HiddenStates(ids[None], mask[None], features[None], last[None])
