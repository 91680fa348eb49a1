"""A draft without the Markov bias at its first drafted slot (`DraftConfig.markov_first_slot` false): the backbone
alone picks slot 0, in decoding and in the training forward alike; generation stays lossless; the native folder keeps
the setting and the engines' layouts, which cannot say it, refuse it."""
from __future__ import annotations

import json

import pytest
import torch

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import generate_batch
from dspark.engine.draft_step import decode_blocks
from dspark.engine.sampling import processed_probs
from dspark.formats.checkpoint import ConvertOptions
from dspark.formats.convert import export_draft
from dspark.formats.native import CheckpointError, load_draft, save_draft
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
from dspark.train.blocks import build_blocks
from dspark.train.forward import draft_forward
from formats.formats_support import TARGET_DIR, make_native


def _pair(first_slot: bool, mode: str = "dspark"):
    model = tiny_target("qwen3", seed=0)
    config = draft_config_for(model, block_size=4).replace(mode=mode, markov_first_slot=first_slot)
    draft = random_draft(config, seed=1, scale=3.0)
    draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    return model, draft


def test_config_without_a_markov_head_normalises_the_flag_to_true():
    _, draft = _pair(False)
    assert draft.config.markov_first_slot is False
    assert draft.config.replace(markov_rank=0, enable_confidence_head=False).markov_first_slot is True


def test_greedy_decode_takes_slot0_from_the_backbone_alone_and_biases_the_later_slots():
    _, on = _pair(True)
    _, off = _pair(False)
    torch.manual_seed(0)
    hidden = torch.randn(6, on.config.num_draft_tokens, on.config.hidden_size)  # [N, γ, d]
    anchors = torch.randint(0, on.config.vocab_size, (6,))
    biased = decode_blocks(on, hidden, anchors, GenerationConfig(), None).tokens  # [N, γ]
    alone = decode_blocks(off, hidden, anchors, GenerationConfig(), None).tokens
    backbone = off.base_logits(hidden[:, 0]).argmax(-1)  # [N]
    assert torch.equal(alone[:, 0], backbone)
    assert not torch.equal(biased[:, 0], backbone)  # the bias matters in this draft, so the check above means something
    head = off.markov_head  # slot 1 of the unbiased-slot-0 draft: base + W2·W1[its own slot-0 draft]
    want = (off.base_logits(hidden[:, 1]) + head.markov_w2(head.markov_w1(alone[:, 0]))).argmax(-1)
    assert torch.equal(alone[:, 1], want)


def test_sampled_decode_keeps_the_backbone_distribution_at_slot0():
    _, off = _pair(False)
    torch.manual_seed(0)
    hidden = torch.randn(3, off.config.num_draft_tokens, off.config.hidden_size)  # [N, γ, d]
    config = GenerationConfig(temperature=0.8)
    out = decode_blocks(off, hidden, torch.tensor([3, 4, 5]), config, torch.Generator().manual_seed(0))
    torch.testing.assert_close(out.probs[:, 0], processed_probs(off.base_logits(hidden[:, 0]).float(), config))


@pytest.mark.parametrize("mode", ["dspark", "dflash"])
def test_training_forward_has_no_bias_at_the_first_drafted_slot_only(mode):
    _, draft = _pair(False, mode)
    cfg = draft.config
    ids = torch.randint(0, 96, (1, 40))
    anchors = torch.tensor([[5, 12, 20]])
    blocks = build_blocks(ids, torch.ones(1, 40, dtype=torch.long), anchors, torch.ones_like(anchors, dtype=torch.bool),
                          cfg.block_size, cfg.mask_token_id)
    with torch.no_grad():
        out = draft_forward(draft, torch.randn(1, 40, cfg.feature_size), blocks)
    base = draft.base_logits(out.hidden)  # [1, N, P, V]
    torch.testing.assert_close(out.logits[:, :, 0], base[:, :, 0], atol=0, rtol=0)
    assert float(out.markov_bias[:, :, 0].abs().max()) == 0.0
    assert float(out.markov_bias[:, :, 1:].abs().min(-1).values.max()) > 0  # every later slot is biased
    torch.testing.assert_close(out.logits[:, :, 1:], base[:, :, 1:] + out.markov_bias[:, :, 1:])


def _hf_greedy(model, prompt, n):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("mode", ["dspark", "dflash"])
def test_generation_without_the_first_slot_bias_equals_target_greedy(mode):
    model, draft = _pair(False, mode)
    target = Target(model, draft.config.target_layer_ids)
    prompts = [[1, 2, 3, 4, 5], [9, 8, 7], [40, 41, 42, 43, 44, 45, 46]]
    config = GenerationConfig(max_new_tokens=20)
    want = [_hf_greedy(model, p, 20) for p in prompts]
    assert [generate(target, draft, p, config).tokens for p in prompts] == want
    assert [r.tokens for r in generate_batch(target, draft, prompts, config, max_batch=2)] == want


def test_native_folder_keeps_the_flag_and_an_older_folder_reads_as_biased(tmp_path):
    _, draft = _pair(False)
    folder = save_draft(draft, tmp_path / "off")
    assert load_draft(folder).config.markov_first_slot is False
    raw = json.loads((folder / "config.json").read_text())
    del raw["markov_first_slot"]  # a folder written before the setting existed
    (folder / "config.json").write_text(json.dumps(raw))
    assert load_draft(folder).config.markov_first_slot is True


@pytest.mark.parametrize("layout", ["deepspec", "specforge", "speculators"])
def test_engine_layouts_refuse_a_draft_without_the_first_slot_bias(tmp_path, layout):
    folder = make_native(tmp_path)
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**raw, "markov_first_slot": False}))
    with pytest.raises(CheckpointError, match="markov_first_slot false.*--layout native"):
        export_draft(folder, tmp_path / layout, layout, ConvertOptions(target=TARGET_DIR))
