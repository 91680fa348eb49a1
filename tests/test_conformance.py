"""Our model, blocks, loss and greedy engine reproduce the official DeepSpec / SpecForge reference vectors."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from fixture_paths import CONFORMANCE, VARIANTS
from dspark import GenerationConfig, Target, generate, load_draft
from dspark.model.block_forward import draft_forward, teacher_logits
from dspark.model.blocks import build_blocks
from dspark.train.loss import dspark_loss

DEEPSPEC = CONFORMANCE / "deepspec"


def _case(variant):
    folder = DEEPSPEC / variant
    inputs = load_file(folder / "inputs.safetensors")
    expected = load_file(folder / "expected.safetensors")
    meta = json.loads((folder / "inputs.json").read_text())
    return folder, inputs, expected, meta


def _run_training_forward(variant, conformance_target, draft_dir=None):
    folder, inputs, expected, meta = _case(variant)
    draft = load_draft(draft_dir or folder / "draft")
    target = Target(conformance_target, meta["target_layer_ids"])
    out = target.forward(inputs["input_ids"])
    blocks = build_blocks(inputs["input_ids"], inputs["loss_mask"], inputs["anchor_positions"],
                          inputs["block_keep_mask"].bool(), meta["block_size"], meta["mask_token_id"])
    if draft.embed_tokens is None:
        draft.tie_embeddings(target.embed_tokens, target.lm_head)
    with torch.no_grad():
        outputs = draft_forward(draft, out.features, blocks)
    teacher = teacher_logits(target.lm_head, out.last_hidden, blocks)
    return draft, out, blocks, outputs, teacher, expected


def _kept(t, blocks):
    keep = blocks.keep.float()
    return t * keep.view(*keep.shape, *([1] * (t.dim() - 2)))


@pytest.mark.parametrize("variant", VARIANTS)
def test_target_features_and_fused_context_match_reference(variant, conformance_target):
    draft, out, _, _, _, expected = _run_training_forward(variant, conformance_target)
    torch.testing.assert_close(out.features, expected["target_hidden_states"], atol=2e-5, rtol=0)
    torch.testing.assert_close(out.last_hidden, expected["target_last_hidden_states"], atol=2e-5, rtol=0)
    with torch.no_grad():
        fused = draft.fuse(out.features)
    torch.testing.assert_close(fused, expected["context_fused"], atol=2e-5, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_block_layout_integers_and_masks_match_reference_exactly(variant, conformance_target):
    _, _, blocks, _, _, expected = _run_training_forward(variant, conformance_target)
    assert torch.equal(blocks.block_ids, expected["block_input_ids"])
    assert torch.equal(blocks.positions, expected["position_ids"])
    assert torch.equal(blocks.label_indices, expected["label_indices"])
    assert torch.equal(blocks.target_ids, expected["target_ids"])
    assert torch.equal(blocks.prev_ids, expected["prev_token_ids"])
    assert torch.equal(blocks.eval_mask, expected["eval_mask"].bool())
    assert torch.equal(blocks.attention_mask, expected["attention_mask"].bool())
    torch.testing.assert_close(blocks.loss_weights, expected["loss_weights"], atol=1e-7, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_block_hidden_markov_and_confidence_logits_match_reference(variant, conformance_target):
    _, _, blocks, outputs, teacher, expected = _run_training_forward(variant, conformance_target)
    torch.testing.assert_close(_kept(outputs.hidden, blocks), _kept(expected["block_hidden"], blocks), atol=2e-5, rtol=0)
    torch.testing.assert_close(_kept(outputs.markov_bias, blocks), _kept(expected["markov_bias"], blocks),
                               atol=5e-5, rtol=0)
    torch.testing.assert_close(_kept(outputs.logits, blocks), _kept(expected["draft_logits"], blocks), atol=5e-5, rtol=0)
    torch.testing.assert_close(_kept(teacher, blocks), _kept(expected["aligned_target_logits"], blocks),
                               atol=5e-5, rtol=0)
    torch.testing.assert_close(_kept(outputs.confidence_logits, blocks), _kept(expected["confidence_logits"], blocks),
                               atol=1e-5, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_loss_terms_and_analytic_tau_match_reference(variant, conformance_target):
    _, _, blocks, outputs, teacher, expected = _run_training_forward(variant, conformance_target)
    terms = dspark_loss(outputs.logits, teacher, blocks.target_ids, outputs.confidence_logits,
                        blocks.loss_weights, blocks.eval_mask)
    for ours, ref in [(terms.total, "total_loss"), (terms.ce, "ce_loss"), (terms.l1, "l1_loss"),
                      (terms.confidence, "confidence_loss"), (terms.tau, "tau_probabilistic")]:
        assert abs(float(ours) - float(expected[ref])) < 1e-5, (ref, float(ours), float(expected[ref]))
    # numerators are sums over ~100 slots: compare them relative to their size
    for name in ("ce", "l1", "confidence"):
        ref = float(expected[f"{name}_loss_num"])
        assert abs(float(terms.numerators[name]) - ref) <= 1e-6 * abs(ref) + 1e-6, name
    assert abs(float(terms.denominator) - float(expected["ce_loss_den"])) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("tag", ["thr0", "thr04"])
def test_greedy_generation_reproduces_reference_tokens_and_acceptance(variant, tag, conformance_target):
    folder, _, _, meta = _case(variant)
    record = json.loads((folder / "inference.json").read_text())[tag]
    draft = load_draft(folder / "draft")
    target = Target(conformance_target, meta["target_layer_ids"])
    prompt = record["output_ids"][: record["prompt_len"]]
    config = GenerationConfig(max_new_tokens=record["max_new_tokens"], confidence_threshold=record["confidence_threshold"])
    result = generate(target, draft, prompt, config)
    assert result.tokens == record["output_ids"][record["prompt_len"]:]
    ours = list(result.stats.acceptance_lengths)
    reference = record["acceptance_lengths"]
    # Every round matches. The reference over-generates past max_new_tokens and truncates afterwards; we cap the
    # last round's verify at the tokens still allowed, so our last τ is the reference's τ clipped to that budget.
    budget_left = record["max_new_tokens"] - 1 - sum(ours[:-1])
    assert ours[:-1] == reference[: len(ours) - 1]
    assert ours[-1] == min(reference[len(ours) - 1], budget_left)
    assert 1 + sum(ours) == record["max_new_tokens"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_specforge_layout_loads_and_matches_reference(variant, conformance_target, tmp_path):
    specforge = CONFORMANCE / "specforge" / variant
    folder = tmp_path / "draft"
    folder.mkdir()
    shutil.copy(specforge / "draft" / "config.json", folder / "config.json")
    weights = load_file(DEEPSPEC / variant / "draft" / "model.safetensors")
    save_file({k: v for k, v in weights.items() if k not in ("embed_tokens.weight", "lm_head.weight")},
              folder / "model.safetensors")
    if variant == "vanilla":  # the one SpecForge weight file that is stored must equal the derived one
        stored = load_file(specforge / "draft" / "model.safetensors")
        assert stored.keys() == load_file(folder / "model.safetensors").keys()
    _, _, blocks, outputs, _, _ = _run_training_forward(variant, conformance_target, draft_dir=folder)
    expected = load_file(specforge / "expected.safetensors")
    torch.testing.assert_close(_kept(outputs.logits, blocks), _kept(expected["draft_logits"], blocks), atol=5e-5, rtol=0)
    torch.testing.assert_close(_kept(outputs.confidence_logits, blocks), _kept(expected["confidence_logits"], blocks),
                               atol=1e-5, rtol=0)
