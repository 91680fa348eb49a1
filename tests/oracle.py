"""Reference implementations the engine is checked against: the paper's Algorithm 1 in its per-request list form,
and a draft block through the network's own forward.

Short and written for reading, not speed; nothing in src/ imports this file.
"""
from __future__ import annotations

import torch

from dspark.config import GenerationConfig
from dspark.engine.draft_step import Proposal, decode_blocks
from dspark.engine.schedule import StepCostTable
from dspark.model.draft import DSparkDraft


def schedule_prefixes(survival: torch.Tensor, cost: StepCostTable) -> list[int]:
    """DSpark's hardware-aware prefix scheduler (paper Algorithm 1) for R requests verified in one pass.

    a[r, j] = Π_{i≤j} survival[r, i] is the chance slot j of request r is accepted. Every request verifies its anchor
    (B = R tokens, τ* = R). Candidates (r, j) are taken in decreasing a; each extends request r's prefix by one slot and
    is kept while Θ = τ*·SPS(B) improves; the first that does not stops the search. Returns drafts per request."""
    prefix = survival.float().clamp(0, 1).cumprod(-1)  # [R, γ]
    requests, slots = prefix.shape
    order = sorted(((float(prefix[r, j]), j, r) for r in range(requests) for j in range(slots)
                    if prefix[r, j] > 0), key=lambda item: (-item[0], item[1], item[2]))
    lengths = [0] * requests
    width, tau = requests, float(requests)
    best = tau * cost(width)
    for value, j, r in order:
        if j != lengths[r]:  # a prefix never grows in chance, so a request's earlier slots come first
            continue
        width, tau = width + 1, tau + value
        if tau * cost(width) <= best:
            break
        best = tau * cost(width)
        lengths[r] = j + 1
    return lengths


@torch.inference_mode()
def propose_alone(draft: DSparkDraft, features: torch.Tensor, anchor: int, config: GenerationConfig,
                  generator: torch.Generator | None) -> Proposal:
    """One block drafted after `anchor` through the network's own forward (`DSparkDraft.forward`, no static cache):
    target features [1, n, m·d] of positions 0 … n−1 are the context, the anchor sits at position n."""
    cfg = draft.config
    n = features.shape[1]
    context = draft.fuse(features.to(draft.fc.weight.dtype))  # [1, n, d]
    kv = draft.context_kv(context, torch.arange(n)[None])
    block = torch.full((1, cfg.block_size), cfg.mask_token_id, dtype=torch.long)  # [1, B]
    block[0, 0] = anchor
    hidden = draft(block, torch.arange(n, n + cfg.block_size)[None], kv)  # [1, B, d]
    if cfg.mode == "dflash":
        hidden = hidden[:, 1:]  # slot 0 predicts nothing
    out = decode_blocks(draft, hidden, block[:, 0], config, generator)
    return Proposal(out.tokens[0], None if out.probs is None else out.probs[0],
                    None if out.confidence_logits is None else out.confidence_logits[0])
