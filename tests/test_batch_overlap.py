"""Overlapped stepping (`BatchEngine(overlap=True)`, the default on CUDA): each round is launched before the previous
one lands, so a row that just ended runs one round for nothing and the host sees the rows one round late. None of that
may change what is committed: tokens and acceptance statistics equal stepwise rounds (and batch-1 decoding) for
greedy chains, trees, plain decoding, the threshold rule and seeded sampling, with EOS, refills and cancels; under
Algorithm 1 (whose shared width may count a row that the round in flight ends) the tokens do."""
from __future__ import annotations

from dataclasses import astuple

import pytest

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import BatchEngine
from dspark.engine.schedule import Scheduling, StepCostTable
from dspark.engine.tree import TreeShape
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


@pytest.mark.parametrize("mode", ["chain", "plain", "threshold", "algorithm1", "tree", "windows"])
def test_overlapped_rounds_commit_the_same_tokens_and_stats_as_stepwise_rounds(pair, mode):
    target, draft = pair
    tree = TreeShape(12, 3, max_rows=None) if mode == "tree" else None
    length = 600 if mode == "windows" else 96  # 600: rows cross the 256-position attention window
    engine = BatchEngine(target, draft, max_batch=3, max_length=length, pad_to_buckets=mode == "windows", tree=tree)
    budget = 300 if mode == "windows" else 30  # "windows": no EOS, rows run to their budget
    config = GenerationConfig(max_new_tokens=budget, eos_token_ids=() if mode == "windows" else (EOS_ID,),
                              max_drafts=0 if mode == "plain" else None,
                              confidence_threshold=0.5 if mode == "threshold" else 0.0)
    scheduling = (Scheduling("algorithm1", StepCostTable([1, 3, 5], [100.0, 80.0, 40.0])) if mode == "algorithm1"
                  else None)
    prompts = PROMPTS[:4] if mode == "windows" else PROMPTS
    overlapped, stepwise = both(engine, prompts, config, scheduling)
    for prompt, a, b in zip(prompts, overlapped, stepwise):
        assert a.tokens == b.tokens
        if mode != "algorithm1":  # its shared width may count a row the round in flight ends: other cuts, same tokens
            assert a.stats == b.stats  # the same rounds, proposed / accepted counts: a dropped round is not recorded
    if mode == "chain":
        for prompt, result in zip(prompts, overlapped):
            assert result.stats == generate(target, draft, prompt, config).stats
        assert any(r.tokens[-1] == EOS_ID and len(r.tokens) < budget for r in overlapped)  # rows ended early
    if mode == "windows":
        assert max(len(p) + len(r.tokens) for p, r in zip(prompts, overlapped)) > 256


def test_overlapped_sampling_draws_the_same_samples_as_stepwise_rows_of_mixed_settings():
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
        session = engine.open(GenerationConfig(eos_token_ids=(0,)))
        for i, (prompt, sampling) in enumerate(zip(prompts, settings)):
            session.add(i, prompt, sampling.max_new_tokens, sampling=sampling)
        while not session.idle:
            session.step()
        runs[overlap] = [session.release(i) for i in range(len(prompts))]
    assert [r.tokens for r in runs[True]] == [r.tokens for r in runs[False]]
    assert [r.stats for r in runs[True]] == [r.stats for r in runs[False]]
    assert len({tuple(r.tokens) for r in runs[True]}) == len(prompts)


def test_an_overlapped_step_reports_the_previous_rounds_commits_and_a_mid_flight_cancel_drops_its_round(pair):
    target, draft = pair
    engine = BatchEngine(target, draft, max_batch=2, max_length=96, overlap=True)
    config = GenerationConfig(max_new_tokens=24, eos_token_ids=())
    session = engine.open(config)
    session.add("a", PROMPTS[0], 24)
    session.add("b", PROMPTS[2], 24)
    first = dict((rid, tokens) for rid, tokens, _ in session.step())
    assert {rid: len(tokens) for rid, tokens in first.items()} == {"a": 1, "b": 1}  # admission only: a round flies
    second = dict((rid, tokens) for rid, tokens, _ in session.step())
    assert second["a"] and second["b"]  # the first round landed under the second one
    cancelled = session.cancel("b")  # its row's round in flight is dropped when it lands
    session.add("c", PROMPTS[3], 24)
    got = {"a": first["a"] + second["a"], "c": []}
    while not session.idle:
        for rid, tokens, _ in session.step():
            assert rid != "b"
            got[rid] += tokens
    for rid, prompt in (("a", PROMPTS[0]), ("c", PROMPTS[3])):
        expected = generate(target, draft, prompt, config)
        result = session.release(rid)
        assert got[rid] == result.tokens == expected.tokens and result.stats == expected.stats
    expected_b = generate(target, draft, PROMPTS[2], config).tokens
    assert cancelled.tokens == expected_b[: len(cancelled.tokens)] and len(cancelled.tokens) < 24


def test_overlapped_sessions_record_the_same_verified_blocks(pair):
    target, draft = pair
    engine = BatchEngine(target, draft, max_batch=3, max_length=96)
    config = GenerationConfig(max_new_tokens=24, eos_token_ids=(EOS_ID,))
    blocks = {}
    for overlap in (True, False):
        engine.overlap = overlap
        session = engine.open(config, Scheduling("threshold"))
        session.blocks = []
        for i, prompt in enumerate(PROMPTS):
            session.add(i, prompt, 24)
        while not session.idle:
            session.step()
        blocks[overlap] = session.blocks
    assert blocks[True] and sorted(map(astuple, blocks[True])) == sorted(map(astuple, blocks[False]))


def test_the_engine_overlaps_by_default_only_on_a_gpu(pair):
    target, draft = pair
    assert BatchEngine(target, draft, max_batch=1, max_length=40).overlap is False  # the CPU: nothing to hide
    assert BatchEngine(target, draft, max_batch=1, max_length=40, overlap=True).overlap is True
