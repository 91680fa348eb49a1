"""Speculative greedy output is token-identical to the target's own greedy decoding (transformers `generate`),
for Qwen3, Llama and DeepSeek-V3 targets, random and oracle drafts, block sizes 1…8 and varied prompts."""
from __future__ import annotations

import random

import pytest
import torch

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import generate_batch
from dspark.engine.draft_step import Proposal
from dspark.engine.static_draft import StaticDraft
from dspark.testbed.random_pair import ARCHITECTURES, draft_config_for, random_draft, tiny_target


def hf_greedy(model, prompt, n):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def oracle_proposer(reference, corrupt, rng, vocab):
    """A `StaticDraft.propose` that drafts the target's true greedy continuation of the sequence `reference` (prompt +
    output) after each row's anchor, each token corrupted with probability `corrupt`."""
    sequence = list(reference)

    def propose(self, anchor, start, rows, config, generator, window=None, confidence=True, row_sampling=None):
        gamma = self.draft.config.num_draft_tokens
        blocks = []
        for position in start.tolist():  # the anchor's position
            truth = sequence[position + 1 : position + 1 + gamma]
            truth += [0] * (gamma - len(truth))
            blocks.append([t if rng.random() >= corrupt else (t + 1 + rng.randrange(vocab - 1)) % vocab for t in truth])
        return Proposal(torch.tensor(blocks, device=anchor.device), None, None)  # [B, γ]

    return propose


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_random_drafts_match_target_greedy_for_every_block_size(arch):
    model = tiny_target(arch, seed=1)
    for block_size in range(1, 9):
        cfg = draft_config_for(model, block_size=block_size, markov_head_type=("vanilla", "gated", "rnn")[block_size % 3])
        draft = random_draft(cfg, seed=block_size, scale=5.0)
        target = Target(model, cfg.target_layer_ids)
        prompt = [random.Random(block_size).randrange(97) for _ in range(1 + 3 * block_size)]
        result = generate(target, draft, prompt, GenerationConfig(max_new_tokens=17))
        assert result.tokens == hf_greedy(model, prompt, 17), (arch, block_size)
        assert len(result.tokens) == 17


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_oracle_drafts_with_corruption_match_target_greedy_and_accept(arch, monkeypatch):
    model = tiny_target(arch, seed=2)
    accepted_total = 0
    for seed in range(12):
        rng = random.Random(seed)
        block_size = 1 + seed % 8
        cfg = draft_config_for(model, block_size=block_size)
        draft = random_draft(cfg, seed=seed)
        target = Target(model, cfg.target_layer_ids)
        prompt = [rng.randrange(97) for _ in range(rng.randrange(1, 40))]
        n = rng.randrange(1, 40)
        reference = hf_greedy(model, prompt, n + 10)
        corrupt = (0.0, 0.1, 0.3, 0.7)[seed % 4]
        monkeypatch.setattr(StaticDraft, "propose", oracle_proposer(prompt + reference, corrupt, rng, 97))
        result = generate(target, draft, prompt, GenerationConfig(max_new_tokens=n))
        assert result.tokens == reference[:n], (arch, seed)
        assert sum(result.stats.acceptance_lengths) + 1 == n if n > 1 else result.stats.rounds == 0
        if corrupt == 0.0 and n > 1:  # a perfect draft is always fully accepted (up to the token budget)
            assert all(a == min(p, a) for a, p in zip(result.stats.accepted_counts, result.stats.proposed_counts))
            assert result.stats.accepted_counts == result.stats.proposed_counts
        accepted_total += sum(result.stats.accepted_counts)
    assert accepted_total > 50  # the oracle really exercised multi-token commits


def test_dflash_mode_and_a_max_drafts_cut_stay_lossless(monkeypatch):
    model = tiny_target("qwen3", seed=3)
    prompt = list(range(5, 25))
    reference = hf_greedy(model, prompt, 40)
    cfg = draft_config_for(model, block_size=5, mode="dflash")
    draft = random_draft(cfg)
    target = Target(model, cfg.target_layer_ids)
    assert generate(target, draft, prompt, GenerationConfig(max_new_tokens=30)).tokens == reference[:30]
    monkeypatch.setattr(StaticDraft, "propose", oracle_proposer(prompt + reference, 0.0, random.Random(0), 97))
    result = generate(target, draft, prompt, GenerationConfig(max_new_tokens=30, max_drafts=2))
    assert result.tokens == reference[:30]
    assert max(result.stats.proposed_counts) == 2 and result.stats.acceptance_lengths[0] == 3


@pytest.mark.slow
def test_dspark_heads_on_the_dflash_layout_stay_lossless_alone_and_batched():
    model = tiny_target("qwen3", seed=5)
    cfg = draft_config_for(model, block_size=5, mode="dflash").replace(markov_rank=8, enable_confidence_head=True,
                                                                     confidence_head_with_markov=True)
    draft = random_draft(cfg, seed=5, scale=5.0)
    target = Target(model, cfg.target_layer_ids)
    prompts = [list(range(5, 25)), [7, 1, 7, 1, 9, 3]]
    references = [hf_greedy(model, p, 30) for p in prompts]
    single = [generate(target, draft, p, GenerationConfig(max_new_tokens=30)) for p in prompts]
    assert [r.tokens for r in single] == references
    assert max(max(r.stats.proposed_counts) for r in single) == 4  # γ − 1 drafts per block (the anchor slot is idle)
    batched = generate_batch(target, draft, prompts, GenerationConfig(max_new_tokens=30), max_batch=2)
    assert [r.tokens for r in batched] == references
    assert [r.stats.accepted_counts for r in batched] == [r.stats.accepted_counts for r in single]


def test_max_drafts_zero_is_plain_autoregressive_decoding_through_the_same_loop():
    model = tiny_target("llama", seed=4)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    cfg = draft_config_for(model)
    target = Target(model, cfg.target_layer_ids)
    for draft, config in [(random_draft(cfg), GenerationConfig(max_new_tokens=25, max_drafts=0)),
                          (None, GenerationConfig(max_new_tokens=25))]:
        result = generate(target, draft, prompt, config)
        assert result.tokens == hf_greedy(model, prompt, 25)
        assert set(result.stats.acceptance_lengths) == {1} and result.stats.rounds == 24


def test_eos_and_max_new_tokens_are_exact(monkeypatch):
    model = tiny_target("qwen3", seed=5)
    prompt = [7, 7, 8, 9]
    reference = hf_greedy(model, prompt, 30)
    eos = reference[9]
    first = reference.index(eos)
    cfg = draft_config_for(model, block_size=6)
    target = Target(model, cfg.target_layer_ids)
    monkeypatch.setattr(StaticDraft, "propose", oracle_proposer(prompt + reference, 0.0, random.Random(0), 97))
    result = generate(target, random_draft(cfg), prompt, GenerationConfig(max_new_tokens=30, eos_token_ids=(eos,)))
    assert result.tokens == reference[: first + 1]  # EOS included, nothing after it, even inside an accepted block
    assert sum(result.stats.acceptance_lengths) + 1 == len(result.tokens)
    for n in (0, 1, 2, 7):
        assert generate(target, random_draft(cfg), prompt, GenerationConfig(max_new_tokens=n)).tokens == reference[:n]


def test_generation_stops_at_the_targets_own_eos_by_default_and_an_empty_set_turns_that_off():
    model = tiny_target("qwen3", seed=5)
    prompt = [7, 7, 8, 9]
    reference = hf_greedy(model, prompt, 30)
    eos = reference[6]
    model.generation_config.eos_token_id = [eos, 96]  # what HF `generate` reads (an int or a list)
    cfg = draft_config_for(model, block_size=4)
    target, draft = Target(model, cfg.target_layer_ids), random_draft(cfg, scale=5.0)
    assert target.eos_token_ids == (eos, 96)
    stopped = generate(target, draft, prompt, GenerationConfig(max_new_tokens=30))
    assert stopped.tokens == reference[: reference.index(eos) + 1]
    assert generate_batch(target, draft, [prompt], GenerationConfig(max_new_tokens=30))[0].tokens == stopped.tokens
    assert generate(target, draft, prompt, GenerationConfig(max_new_tokens=30, eos_token_ids=())).tokens == reference
