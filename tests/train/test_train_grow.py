"""Growing a trained draft deeper or wider: the same outputs at first, and training then reaches the new weights."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from dspark import Target
from dspark.config import TrainConfig
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
from dspark.train.data import Example
from dspark.train.grow import grow_draft, widen_draft
from dspark.train.hidden import OnlineHiddenStates
from dspark.train.trainer import train


def _pair():
    model = tiny_target("qwen3", seed=0, num_layers=3)
    draft = random_draft(draft_config_for(model, layer_ids=(0, 1), block_size=4), seed=2, scale=3.0)
    draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    return model, draft


def _examples() -> list[Example]:
    gen = torch.Generator().manual_seed(0)
    return [Example(str(i), tuple(torch.randint(0, 96, (40,), generator=gen).tolist()), (0,) * 6 + (1,) * 34)
            for i in range(4)]


def _fit_args(tmp_path) -> list[str]:
    """`dspark train fit` arguments on a saved tiny target and four examples in tmp_path (add --out, --init …)."""
    from dspark.train.data import write_examples

    tiny_target("qwen3", seed=0, num_layers=3).save_pretrained(tmp_path / "target")
    write_examples(_examples(), tmp_path / "data.jsonl")
    return ["train", "fit", "--target", str(tmp_path / "target"), "--data", str(tmp_path / "data.jsonl"),
            "--steps", "2", "--num-anchors", "8", "--block-size", "4", "--markov-rank", "8", "--layers", "0,1",
            "--mask-token-id", "96"]


def _outputs(draft, features, block_ids, prev_ids):
    positions = torch.arange(features.shape[1]).expand(features.shape[0], -1)  # [B, S]
    context = draft.context_kv(draft.fuse(features), positions)
    block_positions = torch.arange(features.shape[1], features.shape[1] + block_ids.shape[1]).expand_as(block_ids)
    hidden = draft(block_ids, block_positions, context)  # [B, T, d]
    return draft.base_logits(hidden), draft.confidence_logits(hidden, prev_ids), draft.markov_head.features(prev_ids)


def _assert_same_outputs(draft, other, atol: float) -> None:
    """Base logits, confidence logits and Markov features of the two drafts agree on one random batch."""
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(2, 9, draft.config.feature_size, generator=gen)  # [B, S, m·d]
    block_ids = torch.randint(0, 96, (2, 4), generator=gen)  # [B, T]
    prev_ids = torch.randint(0, 96, (2, 4), generator=gen)
    for a, b in zip(_outputs(draft, features, block_ids, prev_ids), _outputs(other, features, block_ids, prev_ids)):
        torch.testing.assert_close(a, b, atol=atol, rtol=0)


def test_a_grown_draft_gives_the_same_logits_and_confidence_as_the_shallow_one():
    _, draft = _pair()
    grown = grow_draft(draft, 5)
    assert grown.config.num_hidden_layers == 5 and len(grown.layers) == 5
    assert grown.embed_tokens is draft.embed_tokens and grown.lm_head is draft.lm_head
    _assert_same_outputs(draft, grown, atol=1e-6)
    # the new layers start from trained weights (the last layers first), not from zeros
    torch.testing.assert_close(grown.layers[2].self_attn.q_proj.weight, draft.layers[1].self_attn.q_proj.weight)
    torch.testing.assert_close(grown.layers[3].mlp.up_proj.weight, draft.layers[0].mlp.up_proj.weight)
    assert float(grown.layers[4].self_attn.o_proj.weight.detach().abs().sum()) == 0.0


def test_training_a_grown_draft_moves_its_new_layers_and_keeps_the_old_draft_intact(tmp_path):
    model, draft = _pair()
    before = {k: v.clone() for k, v in draft.state_dict().items()}
    grown = grow_draft(draft, 3)
    examples = _examples()
    source = OnlineHiddenStates(Target(model, draft.config.target_layer_ids), examples)
    train(grown, source, TrainConfig(steps=2, lr=3e-3, num_anchors=8, warmup_ratio=0.0), tmp_path, progress=False)
    assert float(grown.layers[2].self_attn.o_proj.weight.detach().abs().sum()) > 0
    assert float(grown.layers[2].mlp.down_proj.weight.detach().abs().sum()) > 0
    for k, v in draft.state_dict().items():
        torch.testing.assert_close(v, before[k], atol=0, rtol=0)


def test_growing_to_fewer_layers_is_refused_with_the_count_to_pick():
    _, draft = _pair()
    with pytest.raises(ValueError, match="pick num_layers >= 2"):
        grow_draft(draft, 1)
    assert replace(draft.config, num_hidden_layers=2) == grow_draft(draft, 2).config


def test_train_fit_grows_an_init_draft_to_draft_layers_and_refuses_to_shrink_it(tmp_path, capsys):
    from dspark.cli import main
    from dspark.formats.native import load_draft

    common = _fit_args(tmp_path)
    assert main([*common, "--out", str(tmp_path / "a")]) == 0
    assert load_draft(tmp_path / "a" / "final").config.num_hidden_layers == 2
    assert main([*common, "--init", str(tmp_path / "a" / "final"), "--draft-layers", "4",
                 "--out", str(tmp_path / "b")]) == 0
    grown = load_draft(tmp_path / "b" / "final")
    assert grown.config.num_hidden_layers == 4
    assert float(grown.layers[3].self_attn.o_proj.weight.detach().abs().sum()) > 0  # trained past its zero start
    capsys.readouterr()
    assert main([*common, "--init", str(tmp_path / "b" / "final"), "--draft-layers", "3",
                 "--out", str(tmp_path / "c")]) == 2
    assert "cannot grow a 4-layer draft to 3 layers" in capsys.readouterr().err


def test_a_widened_draft_gives_the_same_logits_and_confidence_and_keeps_its_trained_units():
    _, draft = _pair()
    old = draft.config.intermediate_size
    state = torch.random.get_rng_state()
    wide = widen_draft(draft, 3 * old)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's random stream is untouched
    assert wide.config == replace(draft.config, intermediate_size=3 * old)
    assert wide.embed_tokens is draft.embed_tokens and wide.lm_head is draft.lm_head
    _assert_same_outputs(draft, wide, atol=1e-5)
    mlp, trained = wide.layers[1].mlp, draft.layers[1].mlp
    assert mlp.gate_proj.weight.shape == (3 * old, draft.config.hidden_size)
    torch.testing.assert_close(mlp.up_proj.weight[:old], trained.up_proj.weight, atol=0, rtol=0)
    assert float(mlp.down_proj.weight[:, old:].detach().abs().sum()) == 0.0  # the new units start silent
    assert float(mlp.gate_proj.weight[old:].detach().abs().sum()) > 0  # ... but not dead: their inputs are random
    torch.testing.assert_close(wide.layers[0].self_attn.q_proj.weight, draft.layers[0].self_attn.q_proj.weight)


def test_a_widened_draft_drafts_the_same_blocks_in_the_engine(monkeypatch):
    from dspark.config import GenerationConfig
    from dspark.engine.generate import generate
    from dspark.engine.static_draft import StaticDraft

    model, draft = _pair()
    target = Target(model, draft.config.target_layer_ids)
    prompt = [5, 17, 33, 2, 80, 41, 9]
    real, drafted = StaticDraft.propose, []

    def recording(*args, **kwargs):
        proposal = real(*args, **kwargs)
        drafted[-1].append(proposal.tokens.tolist())
        return proposal

    monkeypatch.setattr(StaticDraft, "propose", recording)
    results = []
    for candidate in (draft, widen_draft(draft, 2 * draft.config.intermediate_size)):
        drafted.append([])
        results.append(generate(target, candidate, prompt, GenerationConfig(max_new_tokens=24)))
    assert len(drafted[0]) >= 10 and drafted[1] == drafted[0]
    assert results[1].tokens == results[0].tokens and len(results[0].tokens) == 24


def test_training_a_widened_draft_moves_its_new_units(tmp_path):
    model, draft = _pair()
    old = draft.config.intermediate_size
    wide = widen_draft(draft, 2 * old)
    examples = _examples()
    source = OnlineHiddenStates(Target(model, draft.config.target_layer_ids), examples)
    train(wide, source, TrainConfig(steps=2, lr=3e-3, num_anchors=8, warmup_ratio=0.0), tmp_path, progress=False)
    assert float(wide.layers[0].mlp.down_proj.weight[:, old:].detach().abs().sum()) > 0


def test_narrowing_is_refused_with_the_width_to_pick_and_the_same_width_returns_the_draft():
    _, draft = _pair()
    old = draft.config.intermediate_size
    with pytest.raises(ValueError, match=f"pick intermediate_size >= {old}"):
        widen_draft(draft, old - 1)
    assert widen_draft(draft, old) is draft


def test_train_fit_widens_an_init_draft_to_draft_intermediate(tmp_path):
    from dspark.cli import main
    from dspark.formats.native import load_draft

    common = _fit_args(tmp_path)
    assert main([*common, "--out", str(tmp_path / "a"), "--draft-intermediate", "48"]) == 0
    assert load_draft(tmp_path / "a" / "final").config.intermediate_size == 48
    assert main([*common, "--init", str(tmp_path / "a" / "final"), "--draft-intermediate", "96",
                 "--out", str(tmp_path / "b")]) == 0
    wide = load_draft(tmp_path / "b" / "final")
    assert wide.config.intermediate_size == 96 and wide.layers[0].mlp.up_proj.weight.shape[0] == 96
    assert float(wide.layers[0].mlp.down_proj.weight[:, 48:].detach().abs().sum()) > 0  # trained past its zero start
