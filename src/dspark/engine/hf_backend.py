"""The generic target backend: any Hugging Face causal LM (DeepseekV3 / MLA / MoE included) through its own forward.

Each cache row holds one HF `DynamicCache` of full (never evicting) layers. A forward at a row's position first
crops its cache to that position, which drops the entries a rejected draft left, then runs the model over the new
tokens with forward hooks capturing the draft's features (`Target.forward`). Rows run one after another, eagerly:
this backend trades the static backend's speed (`static_target.py`) for running every architecture transformers
has. It does not verify trees (the static backend does), sample, accept or schedule.
"""
from __future__ import annotations

import torch

from dspark.engine.tree import TreeDrafts
from dspark.model.target import Target


class HFBackend:
    """Per-row HF caches of up to `max_length` positions for `max_batch` rows; see the module docstring."""

    supports_tree = False

    def __init__(self, target: Target, max_batch: int, max_length: int):
        self.target, self.max_batch, self.max_length = target, max_batch, max_length
        self.caches: list = [None] * max_batch  # DynamicCache or None (a row never prefilled)

    @property
    def device(self) -> torch.device:
        return self.target.device

    def _cache_at(self, row: int, start: int):
        """Row `row`'s cache holding exactly positions < start (a fresh one at 0)."""
        from transformers import DynamicCache

        cache = self.caches[row]
        if start == 0 or cache is None:
            if start:
                raise ValueError(f"row {row} has no cache to continue at position {start}; prefill it first")
            cache = self.caches[row] = DynamicCache()  # no config: full layers, so a crop can always roll back
        held = cache.get_seq_length()
        if held < start:
            raise ValueError(f"row {row} holds {held} positions, fewer than its position {start}")
        if held > start:
            cache.crop(start - held)  # a negative count removes that many positions
        return cache

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None = None,
                logits_at: torch.Tensor | None = None, window: int | None = None,
                tree: TreeDrafts | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, T] at positions start_b … of rows `rows` [B] (None: 0 … B−1) -> logits [B, T, V] fp32 ([B, 1, V]
        at column logits_at_b when given: a right-padded prefill, whose padding is never run) and features
        [B, T, m·d] (zero where not run). `window` is the static backend's hint and is not needed here."""
        if tree is not None:
            raise NotImplementedError("the Hugging Face backend does not verify trees; use a Llama / Qwen3 / Qwen2 / "
                                      "Mistral target (the static backend) or the chain")
        b, t = ids.shape
        starts, row_ids = start.tolist(), list(range(b)) if rows is None else rows.tolist()
        ends = [t] * b if logits_at is None else [at + 1 for at in logits_at.tolist()]
        logits, features = [], []
        for i in range(b):
            out = self.target.forward(ids[i : i + 1, : ends[i]], cache=self._cache_at(row_ids[i], starts[i]))
            row_logits, row_features = out.logits[0], out.features[0]  # [T_i, V], [T_i, m·d]
            if logits_at is not None:
                row_logits = row_logits[-1:]  # [1, V]
            features.append(torch.nn.functional.pad(row_features, (0, 0, 0, t - ends[i])))  # [T, m·d]
            logits.append(row_logits)
        return torch.stack(logits), torch.stack(features)  # [B, T, V] (or [B, 1, V]), [B, T, m·d]

    def copy_rows(self, sources: torch.Tensor, destinations: torch.Tensor) -> None:
        """Move sequences' caches to other rows (the source rows are retired after a move)."""
        for source, destination in zip(sources.tolist(), destinations.tolist()):
            self.caches[destination], self.caches[source] = self.caches[source], None

    def keep_path(self, start: torch.Tensor, path: torch.Tensor) -> None:
        raise NotImplementedError("the Hugging Face backend does not verify trees")
