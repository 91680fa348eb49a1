"""The target behind one small protocol: what the engine's round asks of a target, and which backend runs it.

A backend holds the KV cache of up to `max_batch` rows of `max_length` positions and runs the target over new tokens
at each row's own position (`forward`), reporting logits and the features a DSpark draft reads. Entries past a
row's position are stale and never read, so a rejected draft needs no cropping: the next forward at that position
overwrites them. Two backends implement it: `StaticTarget` (static_target.py: Llama / Qwen3 / Qwen2 / Mistral over a
preallocated cache, fused projections, Triton kernels and CUDA graphs on a GPU) and `HFBackend` (hf_backend.py: any
Hugging Face causal LM through its own forward and per-row caches, eager). `backend_for` picks the static one where
it runs the model. Nothing here samples, accepts or schedules.
"""
from __future__ import annotations

from typing import Protocol

import torch

from dspark.engine.tree import TreeDrafts
from dspark.model.target import Target


class TargetBackend(Protocol):
    """What `BatchRound` needs of the target."""

    target: Target
    max_batch: int
    max_length: int
    supports_tree: bool  # whether `forward(tree=…)` and `keep_path` run

    @property
    def device(self) -> torch.device: ...

    def forward(self, ids: torch.Tensor, start: torch.Tensor, rows: torch.Tensor | None = None,
                logits_at: torch.Tensor | None = None, window: int | None = None,
                tree: TreeDrafts | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, T] at positions start_b … start_b+T−1 of cache rows `rows` [B] (None: rows 0 … B−1) -> logits
        [B, T, V] (fp32 or the model's dtype: consumers take an argmax or make their own fp32 probabilities; only
        column logits_at_b, [B, 1, V], when given) and features [B, T, m·d]. `window`: positions
        every query attends within (a hint the static backend sizes its attention by). `tree`: ids are tree slots,
        slot t written at start_b + t, turned as position start_b + depth and attending to the context and its
        ancestors."""
        ...

    def copy_rows(self, sources: torch.Tensor, destinations: torch.Tensor) -> None:
        """Move sequences' caches to other rows (compacting the batch): rows sources [k] to destinations [k], the
        two sets disjoint, as device tensors."""
        ...

    def keep_path(self, start: torch.Tensor, path: torch.Tensor) -> None:
        """After a tree verify of rows 0 … B−1 at start [B]: move the accepted path's entries, tree slots path [B, γ]
        by depth 1 … γ, to positions start+1 … start+γ."""
        ...


def backend_for(target: Target, max_batch: int, max_length: int) -> TargetBackend:
    """The static backend when it runs this model, else the generic Hugging Face one."""
    from dspark.engine.static_target import StaticTarget, is_supported

    if is_supported(target.model):
        return StaticTarget(target, max_batch, max_length)
    from dspark.engine.hf_backend import HFBackend

    return HFBackend(target, max_batch, max_length)
