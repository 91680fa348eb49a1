"""The acceptance runner on a tiny random target + draft: row structure, skipping, seeding, engine consistency."""
from __future__ import annotations

import pytest

from conftest import BLOCK, byte_tokenizer
from dspark.bench.acceptance import AcceptanceSettings, count_work, run_acceptance
from dspark.bench.encode import EncodedPrompt, encode_prompt, token_counter
from dspark.bench.errors import BenchError
from dspark.bench.prompts import BenchPrompt
from dspark.config import GenerationConfig
from dspark.engine.generate import generate

PROMPTS = {"alpha": [EncodedPrompt("a1", "alpha", tuple(range(40, 70))),
                     EncodedPrompt("a2", "alpha", tuple(range(9, 30)))],
           "beta": [EncodedPrompt("b1", "beta", tuple(range(100, 125)))]}


def test_chat_template_wraps_the_conversation_and_adds_the_assistant_turn(tokenizer):
    prompt = BenchPrompt("x", "s", (("system", "hi"), ("user", "2+2?")))
    ids = encode_prompt(tokenizer, prompt).token_ids
    assert tokenizer.decode(ids) == "<|im_start|>system\nhi<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n" \
                                    "<|im_start|>assistant\n"
    plain = encode_prompt(byte_tokenizer(chat_template=False), prompt).token_ids
    assert byte_tokenizer(chat_template=False).decode(plain) == "hi\n\n2+2?"
    assert token_counter(tokenizer)("héllo") == 6  # bytes
    assert encode_prompt(tokenizer, prompt, use_chat_template=False).token_ids == plain


def test_chat_template_options_reach_the_template():
    tokenizer = byte_tokenizer()
    tokenizer.chat_template = ("{% for m in messages %}{{ m['content'] }}{% endfor %}"
                               "{% if enable_thinking is defined and not enable_thinking %} /no_think{% endif %}")
    prompt = BenchPrompt.user("x", "s", "hi")
    assert tokenizer.decode(encode_prompt(tokenizer, prompt).token_ids) == "hi"
    assert tokenizer.decode(encode_prompt(tokenizer, prompt, template_kwargs={"enable_thinking": False}).token_ids) \
        == "hi /no_think"


def test_one_row_per_temperature_and_suite_with_consistent_shapes(tiny_pair):
    target, draft = tiny_pair
    calls = []
    settings = AcceptanceSettings(temperatures=(0.0, 1.0), max_new_tokens=9, seed=3)
    rows = run_acceptance(target, draft, PROMPTS, settings, advance=lambda s, t: calls.append((s, t)))
    assert [(r.temperature, r.suite) for r in rows] == [(0.0, "alpha"), (0.0, "beta"), (1.0, "alpha"), (1.0, "beta")]
    assert len(calls) == count_work(PROMPTS, settings) == 6
    for r in rows:
        assert r.drafts_per_round == BLOCK and r.skipped == 0
        assert r.prompts == len(PROMPTS[r.suite]) and r.new_tokens == 9 * r.prompts  # no EOS given
        assert len(r.per_position) == BLOCK and all(0.0 <= p <= 1.0 for p in r.per_position)
        assert len(r.histogram) == BLOCK + 1 and sum(r.histogram) == r.rounds > 0
        assert 1.0 <= r.mean_tau <= BLOCK + 1
        # τ − 1 summed over draft rounds equals the drafts accepted: the pooled numbers agree with each other
        assert sum((tau + 1) * n for tau, n in enumerate(r.histogram)) == pytest.approx(r.mean_tau * r.rounds)
        # one record per prompt, in suite order, adding up to the pooled rounds (checked again by the row itself)
        assert [i for i, _, _ in r.per_prompt] == [p.id for p in PROMPTS[r.suite]]
        assert sum(n for _, n, _ in r.per_prompt) == r.rounds


def test_greedy_row_matches_the_engines_own_statistics(tiny_pair):
    target, draft = tiny_pair
    (row,) = run_acceptance(target, draft, {"beta": PROMPTS["beta"]}, AcceptanceSettings((0.0,), max_new_tokens=9))
    engine = generate(target, draft, list(PROMPTS["beta"][0].token_ids), GenerationConfig(max_new_tokens=9)).stats
    drafted = [(p, a) for p, a in zip(engine.proposed_counts, engine.accepted_counts) if p > 0]
    assert sorted(zip(row.stats().proposed_counts, row.stats().accepted_counts)) == sorted(drafted)
    assert row.new_tokens == engine.new_tokens and row.prompt_tokens == engine.prompt_tokens


def test_sampled_rows_repeat_exactly_with_the_same_seed(tiny_pair):
    target, draft = tiny_pair
    settings = AcceptanceSettings((1.0,), max_new_tokens=9, seed=11)
    first = run_acceptance(target, draft, {"alpha": PROMPTS["alpha"]}, settings)
    again = run_acceptance(target, draft, {"alpha": PROMPTS["alpha"]}, settings)
    assert first[0].rounds_table == again[0].rounds_table


def test_prompts_too_long_for_the_model_are_skipped_and_counted(tiny_pair):
    target, draft = tiny_pair
    # alpha's prompts have 30 and 21 tokens: with 9 new tokens + 4 drafts only the second fits in 35 positions
    (row,) = run_acceptance(target, draft, {"alpha": PROMPTS["alpha"]}, AcceptanceSettings((0.0,), max_new_tokens=9),
                            max_positions=35)
    assert (row.prompts, row.skipped) == (1, 1)
    (none,) = run_acceptance(target, draft, {"alpha": PROMPTS["alpha"]}, AcceptanceSettings((0.0,), max_new_tokens=9),
                             max_positions=10)
    assert (none.prompts, none.skipped, none.rounds, none.mean_tau) == (0, 2, 0, 0.0)


def test_bad_settings_say_what_to_change():
    with pytest.raises(BenchError, match="at least one temperature"):
        AcceptanceSettings(temperatures=())
    with pytest.raises(BenchError, match=">= 0"):
        AcceptanceSettings(temperatures=(-1.0,))
    with pytest.raises(BenchError, match="--max-new-tokens must be at least 2"):
        AcceptanceSettings(max_new_tokens=1)
    with pytest.raises(BenchError, match="--max-drafts must be at least 1"):
        AcceptanceSettings(max_drafts=0)
    with pytest.raises(BenchError, match="--batch must be at least 1"):
        AcceptanceSettings(batch=0)
    with pytest.raises(BenchError, match="whole block"):
        AcceptanceSettings((0.0,), tree_nodes=8, max_drafts=2)
    with pytest.raises(BenchError, match="--tree-score-temperature must be > 0"):
        AcceptanceSettings((0.0,), tree_nodes=8, tree_score_temperature=0.0)


@pytest.mark.slow
def test_tree_rows_keep_every_prompt_token_and_accept_at_least_what_the_chain_accepts(tiny_pair):
    target, draft = tiny_pair
    chain = run_acceptance(target, draft, PROMPTS, AcceptanceSettings((0.0,), max_new_tokens=12, batch=2))
    tree = run_acceptance(target, draft, PROMPTS, AcceptanceSettings((0.0,), max_new_tokens=12, tree_nodes=8,
                                                                     tree_beam=3))
    for a, b in zip(chain, tree):
        assert (a.suite, a.prompts, a.new_tokens, a.prompt_tokens) == (b.suite, b.prompts, b.new_tokens,
                                                                       b.prompt_tokens)
        assert b.rounds <= a.rounds and b.mean_tau >= a.mean_tau
    sampled = run_acceptance(target, draft, PROMPTS, AcceptanceSettings((1.0,), max_new_tokens=12, tree_nodes=8,
                                                                        tree_beam=3))  # sampled trees run too
    assert [r.new_tokens for r in sampled] == [r.new_tokens for r in tree] and all(r.rounds > 0 for r in sampled)
    sharp = AcceptanceSettings((0.0,), max_new_tokens=12, tree_nodes=8, tree_beam=3, tree_score_temperature=0.5)
    assert sharp.as_dict()["tree_score_temperature"] == 0.5
    deeper = run_acceptance(target, draft, PROMPTS, sharp)  # the same greedy text, another tree per round
    assert [r.new_tokens for r in deeper] == [r.new_tokens for r in tree] and all(r.rounds > 0 for r in deeper)


def test_batched_greedy_rows_have_the_same_rounds_as_one_prompt_at_a_time(tiny_pair):
    target, draft = tiny_pair
    one = run_acceptance(target, draft, PROMPTS, AcceptanceSettings((0.0,), max_new_tokens=9))
    calls = []
    batched = run_acceptance(target, draft, PROMPTS, AcceptanceSettings((0.0,), max_new_tokens=9, batch=2),
                             advance=lambda s, t: calls.append(s))
    assert [r.suite for r in batched] == ["alpha", "beta"] and sorted(calls) == ["alpha", "alpha", "beta"]
    for a, b in zip(one, batched):
        assert sorted(a.rounds_table) == sorted(b.rounds_table) and a.rounds > 0
        assert a.per_prompt == b.per_prompt  # the batch engine's results come back in prompt order
        assert (a.prompts, a.new_tokens, a.prompt_tokens) == (b.prompts, b.new_tokens, b.prompt_tokens)
        assert b.mean_tau == pytest.approx(a.mean_tau)


@pytest.mark.slow
def test_batched_sampled_rows_repeat_with_the_same_seed_and_skip_what_does_not_fit(tiny_pair):
    target, draft = tiny_pair
    settings = AcceptanceSettings((1.0,), max_new_tokens=9, seed=5, batch=4)
    first = run_acceptance(target, draft, PROMPTS, settings, max_positions=38)  # a1: 30 + 9 + 4 > 38
    again = run_acceptance(target, draft, PROMPTS, settings, max_positions=38)
    assert [r.rounds_table for r in first] == [r.rounds_table for r in again]
    assert [(r.suite, r.prompts, r.skipped, r.new_tokens) for r in first] == [("alpha", 1, 1, 9), ("beta", 1, 0, 9)]
    assert all(r.rounds > 0 for r in first)


def test_a_skipped_prompt_keeps_the_seeds_of_the_prompts_after_it(tiny_pair):
    target, draft = tiny_pair
    # a1 (30 tokens) does not fit 35 positions; a2 is still the suite's prompt 1 and samples with seed + 1
    (row,) = run_acceptance(target, draft, {"alpha": PROMPTS["alpha"]},
                            AcceptanceSettings((1.0,), max_new_tokens=9, seed=3), max_positions=35)
    alone = generate(target, draft, list(PROMPTS["alpha"][1].token_ids),
                     GenerationConfig(max_new_tokens=9, temperature=1.0, seed=4)).stats
    drafted = [(p, a) for p, a in zip(alone.proposed_counts, alone.accepted_counts) if p > 0]
    assert (row.prompts, row.skipped) == (1, 1)
    assert sorted(zip(row.stats().proposed_counts, row.stats().accepted_counts)) == sorted(drafted)


def test_batched_suites_get_fewer_rows_when_rows_times_length_passes_the_position_budget(tiny_pair, monkeypatch):
    import dspark.bench.acceptance as acceptance
    import dspark.engine.batch as batch

    target, draft = tiny_pair
    built, real = [], batch.engine_for
    monkeypatch.setattr(batch, "engine_for", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    settings = AcceptanceSettings((0.0,), max_new_tokens=9, batch=4)
    wide = run_acceptance(target, draft, {"alpha": PROMPTS["alpha"]}, settings)
    monkeypatch.setattr(acceptance, "BATCH_POSITIONS", 60)  # alpha needs 30 + 9 + 4 + 1 = 44 positions a row
    narrow = run_acceptance(target, draft, {"alpha": PROMPTS["alpha"]}, settings)
    assert [engine.max_batch for engine in built] == [2, 1]  # alpha has 2 prompts
    assert sorted(wide[0].rounds_table) == sorted(narrow[0].rounds_table)
