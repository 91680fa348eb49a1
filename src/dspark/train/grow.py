"""Deepen a trained draft without changing what it computes: the new layers are copies of trained ones whose
residual outputs (attention `o_proj`, MLP `down_proj`) start at zero, so the deeper draft's logits equal the
shallower draft's until training moves them (function-preserving growth, as in Net2Net / zero-init residual
branches). Only weight surgery; no training, no files."""
from __future__ import annotations

import dataclasses

import torch

from dspark.model.draft import DSparkDraft


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
    config = dataclasses.replace(draft.config, num_hidden_layers=num_layers)
    param = next(draft.parameters())
    grown = DSparkDraft(config).to(device=param.device, dtype=param.dtype)
    own = {k: v for k, v in draft.state_dict().items() if not k.startswith(("embed_tokens.", "lm_head."))}
    grown.load_state_dict(own, strict=False)
    with torch.no_grad():
        for i in range(old, num_layers):
            source = old - 1 - (i - old) % old
            grown.layers[i].load_state_dict(draft.layers[source].state_dict())
            grown.layers[i].self_attn.o_proj.weight.zero_()
            grown.layers[i].mlp.down_proj.weight.zero_()
    if draft.embed_tokens is not None:
        grown.tie_embeddings(draft.embed_tokens, draft.lm_head)
    return grown
