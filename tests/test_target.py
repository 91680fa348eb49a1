"""The target wrapper: feature capture by HF layer id, KV crop, and clear errors for mismatched pairs."""
from __future__ import annotations

import pytest
import torch

from dspark import Target, generate
from dspark.engine.hf_backend import HFBackend
from dspark.model.target import TargetMismatchError
from dspark.testbed.random_pair import ARCHITECTURES, draft_config_for, random_draft, tiny_target


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_features_are_the_hf_hidden_states_of_the_chosen_layers(arch):
    model = tiny_target(arch)
    target = Target(model, (-1, 1, 2))
    ids = torch.randint(0, 97, (1, 9))
    out = target.forward(ids)
    ref = model(ids, output_hidden_states=True).hidden_states
    torch.testing.assert_close(out.features, torch.cat([ref[0], ref[2], ref[3]], dim=-1))
    torch.testing.assert_close(out.last_hidden, ref[-1])
    torch.testing.assert_close(out.logits, model(ids).logits)


def test_features_come_from_hooks_that_are_gone_after_every_forward_even_a_failed_one(monkeypatch):
    model = tiny_target("qwen3", num_layers=4)
    target = Target(model, (-1, 1))
    seen = []
    forward = type(model).forward
    monkeypatch.setattr(type(model), "forward", lambda self, **kw: seen.append(kw) or forward(self, **kw))
    out = target.forward(torch.randint(0, 97, (2, 5)), logits_to_keep=1)
    assert out.features.shape == (2, 5, 2 * model.config.hidden_size) and out.logits.shape[1] == 1
    assert not seen[0].get("output_hidden_states")  # only the chosen layers are kept, not every layer's output
    modules = [target.norm, *target.layers]
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in modules)
    monkeypatch.setattr(type(model), "forward", lambda self, **kw: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        target.forward(torch.randint(0, 97, (1, 3)))
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in modules)


def test_a_model_without_decoder_layers_and_final_norm_is_refused_with_what_was_looked_for():
    model = tiny_target("llama")
    del model.model.norm
    with pytest.raises(TargetMismatchError, match="final norm of LlamaForCausalLM.*ln_f"):
        Target(model, (0,))


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_hf_backend_overwrites_rejected_positions_like_a_fresh_prefill(arch):
    model = tiny_target(arch, seed=3)
    backend = HFBackend(Target(model, (0,)), max_batch=2, max_length=32)
    ids = torch.randint(0, 97, (1, 14))
    backend.forward(ids[:, :8], torch.tensor([0]), torch.tensor([1]))
    backend.forward(torch.randint(0, 97, (1, 5)), torch.tensor([8]), torch.tensor([1]))  # drafts, all rejected
    logits, _ = backend.forward(ids[:, 8:], torch.tensor([8]), torch.tensor([1]))  # the same position again
    torch.testing.assert_close(logits, model(ids).logits[:, 8:], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="no cache to continue"):
        backend.forward(ids[:, :2], torch.tensor([3]), torch.tensor([0]))


def test_layer_id_errors_name_the_problem():
    model = tiny_target("qwen3", num_layers=4)
    with pytest.raises(TargetMismatchError, match="last layer"):
        Target(model, (0, 3))
    with pytest.raises(TargetMismatchError, match="out of range"):
        Target(model, (0, 7))
    with pytest.raises(TargetMismatchError, match="out of range"):
        Target(model, (-2, 0))
    with pytest.raises(TargetMismatchError, match="strictly increase"):
        Target(model, (2, 1))


def test_pair_errors_for_hidden_vocab_mask_and_layers():
    model = tiny_target("llama")
    target = Target(model, (0, 1))
    good = draft_config_for(model, layer_ids=(0, 1))
    cases = [
        (good.replace(hidden_size=32), "hidden size"),
        (good.replace(vocab_size=200), "vocab"),
        (good.replace(target_layer_ids=(0, 2)), "reads target layers"),
        (good.replace(num_target_layers=8, target_layer_ids=(0, 1)), "8-layer target"),
    ]
    for cfg, message in cases:
        with pytest.raises(TargetMismatchError, match=message):
            target.check_draft(cfg)
    with pytest.raises(ValueError, match="mask_token_id"):
        good.replace(mask_token_id=97)
    draft = random_draft(good)
    object.__setattr__(draft.config, "mask_token_id", 120)  # a config that dodged validation
    with pytest.raises(TargetMismatchError, match="mask_token_id"):
        generate(target, draft, [1, 2, 3])


def test_from_pretrained_loads_a_local_folder_and_refuses_a_non_model_folder(tmp_path):
    model = tiny_target("llama", seed=7)
    model.save_pretrained(tmp_path / "m")
    target = Target.from_pretrained(tmp_path / "m", (0, 1))
    ids = torch.randint(0, 97, (1, 6))
    torch.testing.assert_close(target.forward(ids).logits, model(ids).logits)
    with pytest.raises(FileNotFoundError, match="config.json"):
        Target.from_pretrained(tmp_path, (0,))
