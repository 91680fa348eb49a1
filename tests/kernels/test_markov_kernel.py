"""The fused greedy Markov decode (engine/markov_kernel.py, a Triton kernel for CUDA), run through Triton's
interpreter: it picks the eager loop's tokens and keeps the engines lossless, for the vanilla and the gated head."""
from __future__ import annotations

import pytest
import torch

import dspark.engine.markov_kernel as markov_kernel
from dspark.model.heads import GatedMarkovHead, MarkovHead, RNNMarkovHead

pytestmark = pytest.mark.slow  # in the full suite only (`pytest -m "not slow"` skips it)


def test_fused_greedy_decode_picks_the_eager_loops_tokens_for_fp32_and_bf16_weights(facts):
    for key in [f"{t}/r{r}" for t in ("float32", "bfloat16") for r in (8, 20, 32)]:
        assert facts[f"{key}/mismatches"] == 0, key


def test_engines_through_the_kernels_equal_target_greedy_and_the_eager_drafts(facts):
    assert facts["kernel_calls"] > 10  # the Markov kernel really served both engines' proposals
    assert facts["batch1_equals_target"] == [True, True, True]
    assert facts["batched_equals_target"] == [True, True, True]  # through the cache-attention kernel too
    assert facts["same_acceptance_as_eager"] == [True, True, True]
    assert facts["accepted"] > 0


def test_gated_head_through_the_kernel_picks_its_own_steps_tokens_for_fp32_and_bf16(facts):
    for key in [f"gated/{t}/r{r}" for t in ("float32", "bfloat16") for r in (8, 20, 32)]:
        assert facts[f"{key}/mismatches"] == 0, key


@pytest.mark.parametrize("draft", ["gated", "vocab"], ids=["gated head", "draft vocabulary"])
def test_engines_through_the_kernel_stay_lossless_and_accept_as_eager_with_a_gated_head_or_a_draft_vocabulary(
        facts, draft):
    assert facts[f"{draft}_kernel_calls"] > 10  # the draft went through the kernel, not the eager loop
    assert facts[f"{draft}_batch1_equals_target"] == [True, True, True]
    assert facts[f"{draft}_batched_equals_target"] == [True, True, True]
    assert facts[f"{draft}_same_acceptance_as_eager"] == [True, True, True]
    assert facts[f"{draft}_batched_acceptance_as_eager"] == [True, True, True]
    assert facts[f"{draft}_accepted"] > 0


def test_fused_decode_over_a_draft_vocabulary_picks_the_eager_loops_full_ids(facts):
    assert facts["vocab/float32/mismatches"] == 0
    assert facts["vocab/bfloat16/mismatches"] == 0


def test_fused_decode_rejects_a_vocabulary_that_does_not_fit_the_logits():
    base, anchors = torch.randn(2, 3, 40), torch.zeros(2, dtype=torch.long)  # [N, γ, K]
    w1, w2 = torch.randn(50, 8), torch.randn(40, 8)
    with pytest.raises(ValueError, match="DraftVocab"):
        markov_kernel.greedy_decode(base, w1, w2, anchors, None, torch.arange(30))


def test_gate_inputs_split_the_gate_into_the_slots_share_and_the_rank_square():
    torch.manual_seed(0)
    head = GatedMarkovHead(50, 8, 12)
    hidden, prev = torch.randn(3, 4, 12), torch.randint(0, 50, (3, 4))  # [N, γ, d], [N, γ]
    pre, w_e = markov_kernel.gate_inputs(head, hidden)
    assert pre.shape == (3, 4, 8) and pre.dtype == torch.float32 and w_e.shape == (8, 8)
    emb = head.features(prev)  # [N, γ, r]
    with torch.no_grad():
        split = torch.sigmoid(pre + emb @ w_e.T) * emb  # what the kernel computes, slot by slot
        torch.testing.assert_close(split, head._mix(emb, hidden), rtol=1e-5, atol=1e-6)
    assert markov_kernel.gate_inputs(MarkovHead(50, 8, 12), hidden) is None  # the vanilla head has no gate


def test_fused_decode_rejects_gate_inputs_built_for_other_slots():
    head = GatedMarkovHead(50, 8, 12)
    base, anchors = torch.randn(2, 3, 50), torch.zeros(2, dtype=torch.long)  # [N, γ, V], [N]
    gate = markov_kernel.gate_inputs(head, torch.randn(2, 2, 12))  # 2 slots, not 3
    with pytest.raises(ValueError, match="gate_inputs"):
        markov_kernel.greedy_decode(base, head.markov_w1.weight.detach(), head.markov_w2.weight.detach(), anchors, gate)


def test_the_rnn_head_stays_on_the_eager_loop():
    assert not markov_kernel.usable(RNNMarkovHead(50, 8, 12), torch.zeros(1), True)
