"""Deepen or widen a trained draft without changing what it computes (function-preserving growth, as in Net2Net /
zero-init residual branches). Deeper: the new layers are copies of trained ones whose residual outputs (attention
`o_proj`, MLP `down_proj`) start at zero. Wider: each MLP gets new gate/up units (seeded random, like a fresh
layer's) whose `down_proj` columns start at zero. Either way the grown draft's logits equal the old draft's until
training moves them. Only weight surgery; no training, no files."""
from __future__ import annotations

import dataclasses

import torch

from dspark.config import DraftConfig
from dspark.model.draft import DSparkDraft


def _rebuilt(draft: DSparkDraft, config: DraftConfig, skip: str | None = None) -> DSparkDraft:
    """A fresh draft of `config` on `draft`'s device and dtype holding `draft`'s own weights wherever a name exists in
    both (all but the bound embeddings and, with `skip`, names containing it), bound to the same frozen embeddings."""
    param = next(draft.parameters())
    new = DSparkDraft(config).to(device=param.device, dtype=param.dtype)
    own = {k: v for k, v in draft.state_dict().items()
           if not k.startswith(("embed_tokens.", "lm_head.")) and not (skip and skip in k)}
    new.load_state_dict(own, strict=False)
    if draft.embed_tokens is not None:
        new.tie_embeddings(draft.embed_tokens, draft.lm_head)
    return new


def grow_draft(draft: DSparkDraft, num_layers: int) -> DSparkDraft:
    """A `num_layers`-layer copy of `draft` that gives the same outputs. Layer i < n keeps the trained weights; new
    layer i ≥ n copies layer n − 1 − (i − n) % n (the last layers first) with its `o_proj` and `down_proj` zeroed.
    The frozen embeddings bound with `tie_embeddings` are bound to the new draft too; at its own depth the draft
    itself comes back."""
    old = draft.config.num_hidden_layers
    if num_layers < old:
        raise ValueError(f"cannot grow a {old}-layer draft to {num_layers} layers; pick num_layers >= {old}")
    if num_layers == old:
        return draft
    grown = _rebuilt(draft, dataclasses.replace(draft.config, num_hidden_layers=num_layers))
    with torch.no_grad():
        for i in range(old, num_layers):
            source = old - 1 - (i - old) % old
            grown.layers[i].load_state_dict(draft.layers[source].state_dict())
            grown.layers[i].self_attn.o_proj.weight.zero_()
            grown.layers[i].mlp.down_proj.weight.zero_()
    return grown


def widen_draft(draft: DSparkDraft, intermediate_size: int, seed: int = 0) -> DSparkDraft:
    """A copy of `draft` whose MLPs have `intermediate_size` units and give the same outputs. The first units are the
    trained ones; the new units' gate and up rows are a fresh draft's (seed `seed`) and their `down_proj` columns are
    zero, so they add nothing until training moves them. A batch-1 round is launch-bound (a GEMM of this size costs
    about the same whatever its width), so width is the cheap place to add capacity; depth adds kernels to every
    round. At the draft's own width the draft itself comes back."""
    old = draft.config.intermediate_size
    if intermediate_size < old:
        raise ValueError(f"cannot widen a draft with {old} MLP units to {intermediate_size}; "
                         f"pick intermediate_size >= {old}")
    if intermediate_size == old:
        return draft
    with torch.random.fork_rng(devices=[]):  # the caller's random stream stays where it was
        torch.manual_seed(seed)
        wide = _rebuilt(draft, dataclasses.replace(draft.config, intermediate_size=intermediate_size), skip=".mlp.")
    with torch.no_grad():
        for layer, source in zip(wide.layers, draft.layers):
            layer.mlp.gate_proj.weight[:old].copy_(source.mlp.gate_proj.weight)  # [I', d]: the trained units first
            layer.mlp.up_proj.weight[:old].copy_(source.mlp.up_proj.weight)
            layer.mlp.down_proj.weight[:, :old].copy_(source.mlp.down_proj.weight)  # [d, I']
            layer.mlp.down_proj.weight[:, old:].zero_()  # the new units start silent
    return wide
