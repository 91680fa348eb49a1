"""The engine over its backends: the static target equals the Hugging Face backend, the static draft equals the
draft network's own forward, and batched decoding (per-row acceptance, EOS, budgets, continuous batching, padded
buckets) is token-identical to plain greedy decoding per prompt, with the τ statistics each row has alone."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from dspark import GenerationConfig, Target, generate
from dspark.engine.batch import BatchEngine, generate_batch
from dspark.engine.schedule import Scheduling
from dspark.engine.batch import prepare_pair
from dspark.engine.hf_backend import HFBackend
from dspark.engine.graphs import check_graphs
from dspark.engine.static_draft import StaticDraft
from dspark.engine.schedule import StepCostTable
from dspark.engine.static_target import StaticTarget
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
from dspark.testbed.successor_pair import EOS_ID, build_pair
from eager_graphs import EagerReplay
from oracle import propose_alone
from static_agreement import static_target_differences


def hf_greedy(model, prompt, n):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("arch", ["llama", "qwen3", "qwen2", "mistral"])  # qwen2 / mistral: sliding windows of 8
def test_static_target_equals_the_hf_backend_for_prefill_and_verify_steps(arch):
    model = tiny_target(arch, vocab_size=300, num_layers=3, seed=1)
    prompts = [[5, 6, 7, 8, 9], [1, 2, 3], [9, 8, 7, 6, 5, 4, 3]]
    logit_gap, feature_gap = static_target_differences(model, (-1, 0, 1), prompts, rows=[3, 0, 2], steps=4,
                                                       width=4, max_length=40)
    assert logit_gap < 1e-5 and feature_gap < 1e-5, (logit_gap, feature_gap)


def test_the_static_backend_refuses_other_architectures_by_name_and_the_engine_takes_the_hf_backend():
    model = tiny_target("deepseek_v3", num_layers=2)
    with pytest.raises(NotImplementedError, match="LlamaForCausalLM, Qwen3ForCausalLM, Qwen2ForCausalLM"):
        StaticTarget(Target(model, (0,)), 2, 32)
    assert isinstance(BatchEngine(Target(model, (0,)), None, 2, 32).backend, HFBackend)


@pytest.mark.parametrize("mode,head", [("dspark", "vanilla"), ("dspark", "rnn"), ("dflash", "vanilla")])
def test_static_draft_propose_equals_the_draft_networks_own_forward(mode, head):
    model = tiny_target("qwen3", vocab_size=300, num_layers=4)
    cfg = draft_config_for(model, block_size=4 if mode == "dspark" else 5, mode=mode, markov_head_type=head)
    draft = random_draft(cfg, scale=3.0)
    target = Target(model, cfg.target_layer_ids)
    prepare_pair(target, draft)
    static_target, static_draft = StaticTarget(target, 3, 48), StaticDraft(draft, 3, 48)
    prompts = [[5, 6, 7, 8, 9], [1, 2, 3], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11]]
    contexts = []
    for row, prompt in enumerate(prompts):
        zero, rows = torch.tensor([0]), torch.tensor([row])
        _, features = static_target.forward(torch.tensor([prompt]), zero, rows)
        static_draft.extend(features, zero, rows)
        contexts.append(features)
    anchors, start = torch.tensor([11, 12, 13]), torch.tensor([len(p) for p in prompts])
    greedy, sampling = GenerationConfig(), GenerationConfig(temperature=1.0)
    batched = static_draft.propose(anchors, start, None, greedy, None)
    for row in range(3):
        expected = propose_alone(draft, contexts[row], int(anchors[row]), greedy, None)
        assert batched.tokens[row].tolist() == expected.tokens.tolist()
        if expected.confidence_logits is not None:
            torch.testing.assert_close(batched.confidence_logits[row], expected.confidence_logits, atol=1e-5, rtol=0)
        # sampling: one row at a time draws the same random numbers as the network's own block
        one = static_draft.propose(anchors[row : row + 1], start[row : row + 1], torch.tensor([row]), sampling,
                                   torch.Generator().manual_seed(row))
        expected = propose_alone(draft, contexts[row], int(anchors[row]), sampling, torch.Generator().manual_seed(row))
        assert one.tokens[0].tolist() == expected.tokens.tolist()
        torch.testing.assert_close(one.probs[0], expected.probs, atol=1e-6, rtol=0)


PROMPTS = [list(b"hello wor"), list(b"abc"), list(b"xyz 123 456 789"), list(b"The quick"), list(b"q"), list(b"mn"),
           list(b"a~")]  # the target answers "a~" with the EOS: a request that ends at its first token


@pytest.mark.slow
@pytest.mark.parametrize("max_batch,pad,length", [(8, False, 96), (3, True, 600), (2, False, 96)])
def test_batched_greedy_equals_each_rows_decoding_alone_with_eos_and_refills(max_batch, pad, length):
    model, draft = build_pair()  # the successor pair: high but partial acceptance
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=max_batch, max_length=length, pad_to_buckets=pad)  # 600: windows
    for config in (GenerationConfig(max_new_tokens=30, eos_token_ids=(EOS_ID,)), GenerationConfig(max_new_tokens=9),
                   GenerationConfig(max_new_tokens=12, max_drafts=2)):
        results = engine.generate(PROMPTS, config)
        accepted = 0
        for prompt, result in zip(PROMPTS, results):
            expected = generate(target, draft, prompt, config)
            assert result.tokens == expected.tokens
            assert result.stats == expected.stats  # same rounds, proposed and accepted counts, token counts
            accepted += sum(result.stats.accepted_counts)
        assert accepted > 20  # multi-token commits really happened
    eos_run = engine.generate(PROMPTS, GenerationConfig(max_new_tokens=30, eos_token_ids=(EOS_ID,)))
    assert any(r.tokens[-1] == EOS_ID and len(r.tokens) < 30 for r in eos_run)  # EOS stopped some rows early


def counted_engine(max_batch: int, pad: bool = False) -> tuple[BatchEngine, list[int]]:
    """A BatchEngine on the successor pair whose propose steps are recorded (their row counts) in the list."""
    model, draft = build_pair()
    engine = BatchEngine(Target(model, draft.config.target_layer_ids), draft, max_batch=max_batch, max_length=96,
                         pad_to_buckets=pad)
    calls: list[int] = []
    propose = engine.propose
    engine.propose = lambda b, window: (calls.append(b), propose(b, window))
    return engine, calls


@pytest.mark.slow
def test_the_next_block_is_drafted_before_the_sync_once_per_round_and_redrafted_only_when_the_bucket_changes():
    engine, calls = counted_engine(max_batch=2)
    target, draft = engine.target, engine.draft
    config = GenerationConfig(max_new_tokens=30)
    [alone] = engine.generate([PROMPTS[0]], config)
    assert len(calls) == alone.stats.rounds + 1  # one per round, and the last round's look-ahead goes unused
    assert alone.tokens == generate(target, draft, PROMPTS[0], config).tokens
    calls.clear()
    pair = engine.generate([PROMPTS[0], PROMPTS[2][:4]], GenerationConfig(max_new_tokens=30))
    rounds = max(r.stats.rounds for r in pair)
    # the shorter request's end changes the rows once: that round's look-ahead is drafted again
    assert len(calls) == rounds + 2 and pair[0].tokens == alone.tokens
    padded, calls = counted_engine(max_batch=4, pad=True)
    four = padded.generate(PROMPTS[:4], config)
    # rows that end or move keep the bucket's blocks: only a smaller bucket (4 -> 2 -> 1) drafts again
    assert len(calls) <= max(r.stats.rounds for r in four) + 3
    assert [r.tokens for r in four] == [generate(target, draft, p, config).tokens for p in PROMPTS[:4]]


def test_no_block_is_drafted_ahead_while_waiting_requests_keep_taking_the_rows():
    engine, calls = counted_engine(max_batch=1)
    results = engine.generate([list(b"abc")] * 12, GenerationConfig(max_new_tokens=2))
    assert [r.stats.rounds for r in results] == [1] * 12  # every round ends its request and admits the next
    # each round drafts its own block; a look-ahead only while the share of ending rounds is below one half
    # (1 − 0.9^k < 0.5 for the first 7 rounds) and again in the last round (nothing waits)
    assert len(calls) == 12 + 7 + 1


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "qwen3", "qwen2", "mistral", "deepseek_v3"])  # deepseek_v3: the HF backend
def test_batched_random_draft_and_plain_loop_equal_hf_greedy(arch):
    model = tiny_target(arch, seed=3)
    cfg = draft_config_for(model, block_size=5, markov_head_type="gated")
    target = Target(model, cfg.target_layer_ids)
    rng = random.Random(0)
    prompts = [[rng.randrange(97) for _ in range(rng.randrange(1, 20))] for _ in range(4)]
    references = [hf_greedy(model, p, 14) for p in prompts]
    config = GenerationConfig(max_new_tokens=14)
    dflash = random_draft(draft_config_for(model, block_size=4, mode="dflash"))
    for draft, cfg_run in [(random_draft(cfg, scale=5.0), config), (dflash, config), (None, config),
                           (random_draft(cfg), GenerationConfig(max_new_tokens=14, max_drafts=0))]:
        results = generate_batch(target, draft, prompts, cfg_run, max_batch=3)
        assert [r.tokens for r in results] == references
        if cfg_run.max_drafts == 0 or draft is None:  # plain decoding: one token per round, through the same loop
            assert all(set(r.stats.acceptance_lengths) == {1} and r.stats.rounds == 13 for r in results)


def test_token_budgets_zero_and_one_and_bad_requests():
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=2, max_length=40)
    assert [r.tokens for r in engine.generate(PROMPTS[:3], GenerationConfig(max_new_tokens=0))] == [[], [], []]
    one = engine.generate(PROMPTS[:3], GenerationConfig(max_new_tokens=1))
    assert [r.tokens for r in one] == [generate(target, draft, p, GenerationConfig(max_new_tokens=1)).tokens
                                       for p in PROMPTS[:3]]
    with pytest.raises(ValueError, match="larger max_length"):
        engine.generate([list(range(30))], GenerationConfig(max_new_tokens=8))
    with pytest.raises(ValueError, match="empty"):
        engine.generate([[1], []], GenerationConfig(max_new_tokens=2))


@pytest.mark.slow
def test_measured_round_costs_cover_every_verify_width_per_batch_size_and_never_get_cheaper_with_width():
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=4, max_length=32)
    tables = engine.round_cost_tables()
    assert sorted(tables) == [1, 2, 4]
    for table in tables.values():
        assert table.widths == list(range(1, draft.config.num_draft_tokens + 2))
        assert all(rate > 0 for rate in table.rates)
        assert all(a >= b for a, b in zip(table.rates, table.rates[1:]))  # latency non-decreasing in width
    one = engine.generate(PROMPTS[:3], GenerationConfig(max_new_tokens=6))  # the measurement left no row behind
    assert [r.tokens for r in one] == [generate(target, draft, p, GenerationConfig(max_new_tokens=6)).tokens
                                       for p in PROMPTS[:3]]


def test_padded_batches_round_up_to_the_next_power_of_two_up_to_max_batch():
    # a level of 128 requests on a 256-row engine is timed (Algorithm 1's table) and run at 128 rows, not 256
    model, draft = build_pair()
    engine = BatchEngine(Target(model, draft.config.target_layer_ids), draft, max_batch=256, max_length=16,
                         pad_to_buckets=True)
    assert engine.buckets == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert [engine.width_rows(n) for n in (1, 3, 64, 65, 128, 129, 256)] == [1, 4, 64, 128, 128, 256, 256]
    odd = BatchEngine(Target(model, draft.config.target_layer_ids), draft, max_batch=100, max_length=16,
                      pad_to_buckets=True)
    assert odd.buckets == (1, 2, 4, 8, 16, 32, 64, 100)


@pytest.mark.slow
def test_graph_wrapper_warm_up_and_replay_leave_generation_unchanged():
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=3, max_length=64, pad_to_buckets=True)
    engine.graphs = EagerReplay(engine.round)
    config = GenerationConfig(max_new_tokens=20, eos_token_ids=(EOS_ID,))
    check_graphs(engine, PROMPTS, config)  # graphed (here: warmed-up, restored, replayed) == eager
    results = engine.generate(PROMPTS, config)
    assert [r.tokens for r in results] == [generate(target, draft, p, config).tokens for p in PROMPTS]
    assert {key[0] for key in engine.graphs.graphs} == {"prefill", "propose", "verify"}
    assert {key[2] for key in engine.graphs.graphs if key[0] == "prefill"} == {64}  # prompts padded to 64 tokens
    warm = BatchEngine(target, draft, max_batch=2, max_length=300, pad_to_buckets=True)
    warm.graphs = EagerReplay(warm.round)
    # buckets 1 2 × windows 256 304 × (propose under 3 rules + 5 verify widths), + prefills: buckets 1 2 × widths
    # 64 128 256 304
    assert warm.warm_up() == len(warm.graphs.graphs) == 2 * 2 * (3 + 5) + 2 * 4
    assert [r.tokens for r in warm.generate(PROMPTS, config)] == [r.tokens for r in results]
    steep = Scheduling("algorithm1", StepCostTable([1, 2, 5], [100.0, 60.0, 30.0]))
    for scheduling in (steep, Scheduling("threshold")):
        graphed = [r.tokens for r in warm.generate(PROMPTS, replace(config, confidence_threshold=0.5), scheduling)]
        assert graphed == [r.tokens for r in results]  # lossless under every captured rule
    assert len(warm.graphs.graphs) == 40  # everything the generations needed was already captured


def test_a_padded_prefill_repeats_its_first_entry_and_fills_the_rows_exactly_as_an_exact_one():
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    prompts, budgets = [list(b"hello wor"), list(b"abc"), list(b"xyz 123")], [5, 6, 7]
    runs = []
    for rows, width in ((3, 9), (4, 16)):  # exact shape; graph shape (a repeated entry, 7 padded tokens more)
        engine = BatchEngine(target, draft, max_batch=5, max_length=64)
        engine.round.begin(GenerationConfig(), 4)
        engine.round.stage([4, 1, 2], prompts, budgets, rows, width)
        engine.round.prefill(rows, width)
        r = engine.round
        caches = engine.backend.keys + engine.static_draft.keys + engine.backend.values
        runs.append((r.first[:3].tolist(), r.anchor.tolist(), r.start.tolist(), r.budget.tolist(), r.active.tolist(),
                     [c[row, :, : len(p)] for c in caches for row, p in zip([4, 1, 2], prompts)]))
    exact, padded = runs
    assert exact[:5] == padded[:5]
    assert exact[2] == [0, 3, 7, 0, 9] and exact[3] == [0, 5, 6, 0, 4] and exact[4] == [False, True, True, False, True]
    # every prompt position's cache entries (other shapes, other kernels: equal to rounding)
    assert all(torch.allclose(a, b, atol=1e-5, rtol=1e-5) for a, b in zip(exact[5], padded[5]))
    assert exact[0] == [generate(target, draft, p, GenerationConfig(max_new_tokens=1)).tokens[0] for p in prompts]


def test_graphed_prefill_caps_its_width_at_the_cache_and_runs_large_admissions_eagerly(monkeypatch):
    import dspark.engine.batch as batch_module

    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=4, max_length=300, pad_to_buckets=True)
    engine.graphs = EagerReplay(engine.round)
    long = [int(t) for t in torch.randint(0, 250, (280,), generator=torch.Generator().manual_seed(0))]
    assert engine._prefill_shape(1, 280) == (1, 304, True)  # 512 capped at the 304-position cache
    monkeypatch.setattr(batch_module, "PREFILL_GRAPH_TOKENS", 256)
    assert engine._prefill_shape(3, 100) == (3, 100, False)  # 4 × 128 padded tokens > 256: exact shape, eager
    config = GenerationConfig(max_new_tokens=6)
    prompts = [long[:280], long[:100], long[:90], long[:7]]
    results = engine.generate(prompts, config)
    assert [r.tokens for r in results] == [generate(target, draft, p, config).tokens for p in prompts]
    assert not [key for key in engine.graphs.graphs if key[0] == "prefill"]  # 4 × 304 padded tokens: eager
    one = engine.generate([long[:7]], config)  # 1 × 64 padded tokens: graphed
    assert one[0].tokens == results[3].tokens
    assert [key[1:3] for key in engine.graphs.graphs if key[0] == "prefill"] == [(1, 64)]


def test_bf16_logits_stay_bf16_and_commit_what_an_fp32_copy_of_them_commits(monkeypatch):
    model = tiny_target("qwen3", vocab_size=64, hidden_size=32, num_layers=2, seed=2).to(torch.bfloat16)
    cfg = draft_config_for(model, layer_ids=(0,), block_size=4, num_layers=1)
    draft = random_draft(cfg, scale=3.0).to(torch.bfloat16)
    target = Target(model, cfg.target_layer_ids)
    prompts = [[3, 1, 4, 1, 5], [9, 2], [6]]
    configs = [GenerationConfig(max_new_tokens=12), GenerationConfig(max_new_tokens=12, temperature=0.9, seed=5)]
    engine = BatchEngine(target, draft, max_batch=2, max_length=32)
    logits, _ = engine.backend.forward(torch.tensor([[3, 1]]), torch.tensor([0]))
    assert logits.dtype == torch.bfloat16  # no fp32 copy of [B, T, V]
    runs = [[r.tokens for r in engine.generate(prompts, config)] for config in configs]
    forward = StaticTarget.forward
    monkeypatch.setattr(StaticTarget, "forward", lambda self, *a, **k: (lambda out: (out[0].float(), out[1]))(
        forward(self, *a, **k)))  # the same logits, converted to fp32 first
    fp32 = [[r.tokens for r in BatchEngine(target, draft, max_batch=2, max_length=32).generate(prompts, config)]
            for config in configs]
    assert runs == fp32
