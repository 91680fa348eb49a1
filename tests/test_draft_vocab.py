"""A frequency-ranked draft vocabulary (FR-Spec): the draft proposes only its K ids, generation stays lossless
(token-identical at T=0, distribution-exact under sampling), and the token counts that rank the ids round-trip."""
from __future__ import annotations

import json
from collections import Counter

import pytest
import torch

from dspark import GenerationConfig, Target, generate
from dspark.cli import main
from dspark.engine.batch import generate_batch
from dspark.engine.draft_step import decode_blocks
from dspark.engine.batch import prepare_pair
from dspark.formats.native import save_draft
from dspark.formats.token_counts import TOKEN_COUNTS_NAME, coverage, load_token_counts, save_token_counts, top_tokens
from dspark.model.draft_vocab import restrict_draft_vocab
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
from dspark.train.data import Example, write_examples
from dspark.train.token_counts import count_tokens
from test_lossless_greedy import hf_greedy
from test_lossless_sampling import chi_square_excess, exact_continuations


def _pair(head: str = "vanilla", vocab: int = 97, block: int = 5, seed: int = 0):
    model = tiny_target("qwen3", vocab_size=vocab, seed=seed)
    cfg = draft_config_for(model, block_size=block, markov_head_type=head)
    draft = random_draft(cfg, seed=seed, scale=4.0)
    target = Target(model, cfg.target_layer_ids)
    prepare_pair(target, draft)
    return model, target, draft


@pytest.mark.parametrize("head", ["vanilla", "gated", "rnn"])
def test_restricted_drafts_stay_in_the_subset_and_match_the_full_draft_where_it_stayed_there(head):
    _, _, draft = _pair(head)
    gen = torch.Generator().manual_seed(1)
    hidden = torch.randn(6, 5, draft.config.hidden_size, generator=gen)  # [N, γ, d]
    anchors = torch.randint(0, 97, (6,), generator=gen)  # [N]
    full = decode_blocks(draft, hidden, anchors, GenerationConfig(), None).tokens  # [N, γ]
    keep = torch.randperm(97, generator=gen)[:40]
    restrict_draft_vocab(draft, keep)
    sub = decode_blocks(draft, hidden, anchors, GenerationConfig(), None).tokens  # [N, γ]
    assert set(sub.flatten().tolist()) <= set(keep.tolist())
    restrict_draft_vocab(draft, torch.cat([full.flatten().unique(), keep]).unique())  # every full draft allowed
    assert torch.equal(decode_blocks(draft, hidden, anchors, GenerationConfig(), None).tokens, full)
    restrict_draft_vocab(draft, None)
    assert torch.equal(decode_blocks(draft, hidden, anchors, GenerationConfig(), None).tokens, full)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 10, 60])
def test_greedy_with_a_draft_vocabulary_matches_target_greedy(k):
    model, target, draft = _pair("gated", seed=k)
    restrict_draft_vocab(draft, torch.arange(k) * 97 // k)
    prompt = [3, 14, 15, 92, 65, 35]
    result = generate(target, draft, prompt, GenerationConfig(max_new_tokens=24))
    assert result.tokens == hf_greedy(model, prompt, 24)
    prompts = [prompt, [7, 7, 1], list(range(20, 31))]  # the batch engine: ragged commits, its own draft path
    batched = generate_batch(target, draft, prompts, GenerationConfig(max_new_tokens=24), max_batch=2)
    assert [r.tokens for r in batched] == [hf_greedy(model, p, 24) for p in prompts]


@pytest.mark.slow
def test_sampling_with_a_draft_vocabulary_matches_the_target_distribution():
    vocab = 4
    model = tiny_target("qwen3", vocab_size=vocab, hidden_size=32, num_layers=2, seed=0)
    cfg = draft_config_for(model, layer_ids=(0,), block_size=3, num_layers=1)
    draft = random_draft(cfg, scale=3.0)
    target = Target(model, cfg.target_layer_ids)
    prepare_pair(target, draft)
    restrict_draft_vocab(draft, torch.tensor([2, 0]))  # tokens 1 and 3 can only come from the target
    prompt, n = [1, 2, 3], 600
    counts, accepted = Counter(), 0
    for seed in range(n):
        result = generate(target, draft, prompt, GenerationConfig(max_new_tokens=3, temperature=1.0, seed=seed))
        counts[tuple(result.tokens)] += 1
        accepted += sum(result.stats.accepted_counts)
    expected = exact_continuations(model, prompt, 3, GenerationConfig(temperature=1.0), vocab)
    assert chi_square_excess(counts, expected, n) < 0
    assert accepted > 50  # the restricted drafts were accepted, not just corrected


def test_restricting_refuses_bad_ids_and_an_untied_draft_and_a_restricted_draft_is_not_saved(tmp_path):
    _, _, draft = _pair()
    for ids in (torch.tensor([], dtype=torch.long), torch.tensor([5, 5]), torch.tensor([97])):
        with pytest.raises(ValueError, match="distinct ids"):
            restrict_draft_vocab(draft, ids)
    restrict_draft_vocab(draft, torch.arange(10))
    with pytest.raises(ValueError, match="save the full draft"):
        save_draft(draft, tmp_path / "restricted")
    assert not (tmp_path / "restricted").exists()  # nothing half-written
    model = tiny_target("qwen3")
    untied = random_draft(draft_config_for(model))
    with pytest.raises(RuntimeError, match="no LM head"):
        restrict_draft_vocab(untied, torch.arange(10))


def test_token_counts_count_response_tokens_only_and_rank_ties_by_id(tmp_path):
    examples = [Example("a", (1, 2, 3, 3, 4), (0, 0, 1, 1, 1)), Example("b", (3, 9, 4, 7), (0, 1, 1, 1))]
    counts = count_tokens(examples, 10)
    assert counts.tolist() == [0, 0, 0, 2, 2, 0, 0, 1, 0, 1]
    assert top_tokens(counts, 4).tolist() == [3, 4, 7, 9]
    assert coverage(counts, 2) == pytest.approx(4 / 6)
    save_token_counts(counts, tmp_path / TOKEN_COUNTS_NAME)
    assert torch.equal(load_token_counts(tmp_path, 10), counts)
    with pytest.raises(ValueError, match="vocabulary has 12"):
        load_token_counts(tmp_path, 12)
    with pytest.raises(ValueError, match="choose 1 … 10"):
        top_tokens(counts, 11)
    with pytest.raises(ValueError, match="outside a vocabulary"):
        count_tokens(examples, 8)


def test_cli_token_counts_writes_the_counts_beside_the_draft(tmp_path, capsys):
    model = tiny_target("qwen3")
    draft = random_draft(draft_config_for(model))
    save_draft(draft, tmp_path / "draft")
    write_examples([Example("a", (1, 5, 5, 6), (0, 1, 1, 1))], tmp_path / "regen.jsonl")
    assert main(["train", "token-counts", "--data", str(tmp_path / "regen.jsonl"), "--draft",
                 str(tmp_path / "draft")]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (line["tokens"], line["distinct"]) == (3, 2)
    counts = load_token_counts(tmp_path / "draft", 97)
    assert (int(counts[5]), int(counts[6]), int(counts.sum())) == (2, 1, 3)
