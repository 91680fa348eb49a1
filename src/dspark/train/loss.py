"""The DSpark training loss (DeepSpec recipe) and the analytic acceptance length τ.

Per slot: CE against the dataset token, the full L1 distance between draft and target distributions (= 2·TV), and
BCE of the confidence logit against α = clamp(1 − ½·L1, 0, 1) (detached). Each term is a weighted mean with
w_k = eval_k · exp(−k / decay); total = 0.1·CE + 0.9·L1 + 1.0·BCE. Everything in fp32. No model code here.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class LossWeights:
    ce: float = 0.1
    l1: float = 0.9
    confidence: float = 1.0
    decay: float = 4.0


@dataclass(frozen=True)
class LossTerms:
    total: torch.Tensor  # scalar, differentiable
    ce: torch.Tensor
    l1: torch.Tensor
    confidence: torch.Tensor
    numerators: dict[str, torch.Tensor]  # Σ w·term per term (for global-token normalisation across ranks)
    denominator: torch.Tensor  # Σ w
    accept_rate: torch.Tensor  # [B, N, γ] α (detached)
    tau: torch.Tensor  # analytic τ over kept blocks with at least one supervised slot


def per_slot_terms(draft_logits: torch.Tensor, teacher_logits: torch.Tensor, target_ids: torch.Tensor,
                   confidence_logits: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """[..., V] logits, [...] labels / confidence logits -> per-slot ce, l1, accept_rate, bce (each [...])."""
    draft_logits, teacher_logits = draft_logits.float(), teacher_logits.float()
    ce = F.cross_entropy(draft_logits.flatten(0, -2), target_ids.flatten(), reduction="none").view(target_ids.shape)
    l1 = (draft_logits.softmax(-1) - teacher_logits.detach().softmax(-1)).abs().sum(-1)
    alpha = (1 - 0.5 * l1).clamp(0, 1).detach()
    terms = {"ce": ce, "l1": l1, "accept_rate": alpha}
    if confidence_logits is not None:
        terms["bce"] = F.binary_cross_entropy_with_logits(confidence_logits.float(), alpha, reduction="none")
    return terms


SlotTerms = Callable[..., dict[str, torch.Tensor]]


def slot_terms_fn(backend: str | Callable = "eager") -> SlotTerms:
    """`per_slot_terms`, compiled with a torch.compile backend unless "eager". The vocabulary-wide softmax / L1 / CE
    chain is memory-bound ([B, N, γ, V] fp32 several times over); inductor fuses it into a few passes. Shapes are
    static in training (N anchors padded, fixed batch), so it compiles once per mode. A backend that fails on the
    first call falls back to eager with a warning instead of ending the run."""
    if backend == "eager":
        return per_slot_terms
    compiled = torch.compile(per_slot_terms, backend=backend, dynamic=False)
    state = {"fn": compiled, "checked": False}

    def terms(*args: torch.Tensor | None) -> dict[str, torch.Tensor]:
        if state["checked"]:
            return state["fn"](*args)
        try:
            out = compiled(*args)
        except Exception as error:  # noqa: BLE001 - any compiler failure: train on, uncompiled
            logging.getLogger(__name__).warning("loss backend %r failed (%s); using eager", backend, error)
            state["fn"], out = per_slot_terms, per_slot_terms(*args)
        state["checked"] = True
        return out

    return terms


def analytic_tau(accept_rate: torch.Tensor, eval_mask: torch.Tensor) -> torch.Tensor:
    """Mean over blocks with a supervised slot of 1 + Σ_k Π_{i≤k} α_i·e_i (accept_rate, eval_mask [..., γ])."""
    e = eval_mask.float()
    per_block = 1 + (accept_rate * e).cumprod(-1).sum(-1)  # [...]
    counted = e[..., 0]  # 1 where the block has a supervised slot
    total = counted.sum()  # no host sync: a block-less batch gives τ = 1
    return torch.where(total > 0, (per_block * counted).sum() / total.clamp(min=1), per_block.new_tensor(1.0))


def dspark_loss(draft_logits: torch.Tensor, teacher_logits: torch.Tensor, target_ids: torch.Tensor,
                confidence_logits: torch.Tensor | None, loss_weights: torch.Tensor, eval_mask: torch.Tensor,
                weights: LossWeights = LossWeights(), denominator: torch.Tensor | None = None,
                terms_fn: SlotTerms = per_slot_terms) -> LossTerms:
    """The weighted loss over blocks. `denominator` overrides Σw (e.g. the global Σw all-reduced over ranks);
    `terms_fn` is `per_slot_terms` or its compiled form (`slot_terms_fn`)."""
    terms = terms_fn(draft_logits, teacher_logits, target_ids, confidence_logits)
    w = loss_weights.float()
    den = w.sum() if denominator is None else denominator
    nums = {name: (w * terms[key]).sum() for name, key in (("ce", "ce"), ("l1", "l1"), ("confidence", "bce"))
            if key in terms}
    means = {name: num / (den + 1e-6) for name, num in nums.items()}
    zero = w.new_zeros(())
    total = (weights.ce * means.get("ce", zero) + weights.l1 * means.get("l1", zero)
             + weights.confidence * means.get("confidence", zero))
    return LossTerms(total=total, ce=means["ce"], l1=means["l1"], confidence=means.get("confidence", zero),
                     numerators=nums, denominator=den, accept_rate=terms["accept_rate"],
                     tau=analytic_tau(terms["accept_rate"], eval_mask))
