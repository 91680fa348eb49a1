"""Overlapped stepping (`BatchEngine(overlap=True)`, the default on CUDA): a round that drafts nothing is committed
only after the next round is launched, so a row that just ended runs one round for nothing and the host sees the rows
one round late; drafted rounds land in their own step. None of that may change what is committed: tokens and
acceptance statistics equal stepwise rounds (and decoding alone) for plain decoding and seeded sampling, with EOS,
refills, attention windows and cancels; with Algorithm 1 switching drafting off and on, the tokens do."""
from __future__ import annotations

from dataclasses import replace

import pytest

from dspark import GenerationConfig, Target, generate
from dspark.engine import batch_session
from dspark.engine.batch import BatchEngine
from dspark.engine.schedule import Scheduling, StepCostTable
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
from dspark.testbed.successor_pair import EOS_ID, build_pair

PROMPTS = [list(b"hello wor"), list(b"abc"), list(b"xyz 123 456 789"), list(b"The quick"), list(b"q"), list(b"mn"),
           list(b"a~")]  # "a~" ends at its first token (the EOS)


@pytest.fixture(scope="module")
def pair():
    model, draft = build_pair()
    return Target(model, draft.config.target_layer_ids), draft


def both(engine: BatchEngine, prompts, config: GenerationConfig, scheduling: Scheduling | None = None):
    """(overlapped, stepwise) results of the same generate call."""
    engine.overlap = True
    overlapped = engine.generate(prompts, config, scheduling)
    engine.overlap = False
    return overlapped, engine.generate(prompts, config, scheduling)


@pytest.mark.parametrize("mode", ["plain", "windows", "switching", "chain", "chain-in-flight"])
def test_overlapped_rounds_commit_the_same_tokens_and_stats_as_stepwise_rounds(pair, mode, monkeypatch):
    target, draft = pair
    if mode == "chain-in-flight":  # drafted rounds left in flight too (as over many rows on a GPU)
        monkeypatch.setattr(batch_session, "OVERLAP_DRAFTED_ROWS", 1)
    length = 600 if mode == "windows" else 96  # 600: rows cross the 256-position attention window
    engine = BatchEngine(target, draft, max_batch=3, max_length=length, pad_to_buckets=mode == "windows")
    budget = 300 if mode == "windows" else 30  # "windows": no EOS, rows run to their budget
    config = GenerationConfig(max_new_tokens=budget, eos_token_ids=() if mode == "windows" else (EOS_ID,),
                              max_drafts=0 if mode in ("plain", "windows") else None)
    # "switching": plain decoding is faster at every batch size, so most rounds draft nothing and every 16th drafts
    flat = StepCostTable([1, 8], [100.0, 100.0])
    scheduling = Scheduling("algorithm1", flat, plain={1: 1e6, 3: 1e6}) if mode == "switching" else None
    prompts = PROMPTS[:4] if mode == "windows" else PROMPTS
    overlapped, stepwise = both(engine, prompts, config, scheduling)
    for prompt, a, b in zip(prompts, overlapped, stepwise):
        assert a.tokens == b.tokens
        if mode != "switching":  # there a row freed a round later takes the next request a round later: other probes
            assert a.stats == b.stats  # the same rounds, proposed / accepted counts: a dropped round is not recorded
        assert a.tokens == generate(target, None, prompt, replace(config, max_drafts=0)).tokens
    if mode != "windows":
        assert any(r.tokens[-1] == EOS_ID and len(r.tokens) < budget for r in overlapped)  # rows ended early
    else:
        assert max(len(p) + len(r.tokens) for p, r in zip(prompts, overlapped)) > 256
    if mode == "switching":
        proposed = [p for r in overlapped for p in r.stats.proposed_counts]
        assert 0 < sum(p > 0 for p in proposed) < len(proposed) // 4  # drafted and undrafted rounds both ran


def test_overlapped_plain_sampling_draws_the_same_samples_as_stepwise_rows_of_mixed_settings():
    model = tiny_target("qwen3", vocab_size=32, hidden_size=32, num_layers=2, seed=1)
    cfg = draft_config_for(model, layer_ids=(0,), block_size=4, num_layers=1)
    engine = BatchEngine(Target(model, cfg.target_layer_ids), random_draft(cfg, scale=3.0), max_batch=3,
                         max_length=48)
    settings = [GenerationConfig(max_new_tokens=20, temperature=1.0, seed=11),
                GenerationConfig(max_new_tokens=9, temperature=0.5, seed=12),
                GenerationConfig(max_new_tokens=30, seed=13),  # greedy beside sampled rows
                GenerationConfig(max_new_tokens=14, temperature=1.3, top_k=5, seed=14),
                GenerationConfig(max_new_tokens=17, temperature=0.8, top_p=0.7, seed=15)]
    prompts = [[3, 1, 4], [9, 9], [5], [2, 7, 1, 8], [6, 6, 6]]
    runs = {}
    for overlap in (True, False):
        engine.overlap = overlap
        session = engine.open(GenerationConfig(eos_token_ids=(0,), max_drafts=0))
        for i, (prompt, sampling) in enumerate(zip(prompts, settings)):
            session.add(i, prompt, sampling.max_new_tokens, sampling=sampling)
        while not session.idle:
            session.step()
        runs[overlap] = [session.release(i) for i in range(len(prompts))]
    assert [r.tokens for r in runs[True]] == [r.tokens for r in runs[False]]
    assert [r.stats for r in runs[True]] == [r.stats for r in runs[False]]
    assert len({tuple(r.tokens) for r in runs[True]}) == len(prompts)


def test_an_overlapped_step_reports_the_previous_rounds_commits_and_a_mid_flight_cancel_drops_its_round(pair):
    target, _ = pair
    engine = BatchEngine(target, None, max_batch=2, max_length=96, overlap=True)
    config = GenerationConfig(max_new_tokens=24, eos_token_ids=())
    session = engine.open(config)
    session.add("a", PROMPTS[0], 24)
    session.add("b", PROMPTS[2], 24)
    first = {rid: tokens for rid, tokens, _ in session.step()}
    assert first == {"a": first["a"][:1], "b": first["b"][:1]}  # admission's tokens only: the round is in flight
    second = {rid: tokens for rid, tokens, _ in session.step()}
    assert len(second["a"]) == len(second["b"]) == 1  # the first round landed under the second one
    cancelled = session.cancel("b")  # its row's round in flight is dropped when it lands
    session.add("c", PROMPTS[3], 24)
    got = {"a": first["a"] + second["a"], "c": []}
    while not session.idle:
        for rid, tokens, _ in session.step():
            assert rid != "b"
            got[rid] += tokens
    for rid, prompt in (("a", PROMPTS[0]), ("c", PROMPTS[3])):
        expected = generate(target, None, prompt, config)
        result = session.release(rid)
        assert got[rid] == result.tokens == expected.tokens and result.stats == expected.stats
    expected_b = generate(target, None, PROMPTS[2], config).tokens
    assert cancelled.tokens == expected_b[:2] == first["b"] + second["b"]


def test_drafted_rounds_land_in_their_own_step_below_the_row_threshold_and_overlap_is_on_only_on_a_gpu(pair,
                                                                                                       monkeypatch):
    target, draft = pair
    assert BatchEngine(target, draft, max_batch=1, max_length=40).overlap is False  # the CPU: nothing to hide
    engine = BatchEngine(target, draft, max_batch=2, max_length=40, overlap=True)
    session = engine.open(GenerationConfig(eos_token_ids=()))
    session.add("a", PROMPTS[0], 20)
    [(_, tokens, _)] = session.step()
    assert len(tokens) > 2  # the first token and the first drafted round's commits (it accepts drafts)
    monkeypatch.setattr(batch_session, "OVERLAP_DRAFTED_ROWS", 2)
    session = engine.open(GenerationConfig(eos_token_ids=()))
    session.add("a", PROMPTS[0], 20)
    session.add("b", PROMPTS[1], 20)
    assert [len(tokens) for _, tokens, _ in session.step()] == [1, 1]  # two rows: the drafted round is in flight
    landed = [len(tokens) for _, tokens, _ in session.step()]  # it lands under the next one
    assert len(landed) == 2 and min(landed) >= 1 and sum(landed) > 2  # the drafted round's commits
