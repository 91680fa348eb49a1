"""Acceptance statistics and the draft's context extension."""
from __future__ import annotations


from dspark import GenerationConfig, Target, generate
from dspark.engine.stats import GenerationStats
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target


def test_tau_per_position_and_histogram_from_known_rounds():
    stats = GenerationStats(accepted_counts=(3, 0, 1, 4, 2), proposed_counts=(4, 4, 4, 4, 2))
    assert stats.acceptance_lengths == (4, 1, 2, 5, 3)
    assert stats.mean_acceptance_length == 3.0
    assert stats.acceptance_rate == 10 / 18
    # slot 0 reached 5×, kept 4×; slot 1 reached 4×, kept 3×; slot 2 reached in rounds 1 and 4 only (round 5
    # proposed 2), kept in both; slot 3 reached in rounds 1 and 4, kept in round 4
    assert stats.per_position(4) == (4 / 5, 3 / 4, 1.0, 1 / 2)
    assert stats.histogram(5) == (1, 1, 1, 1, 1)


def test_the_drafts_context_takes_each_verified_slot_once_and_never_the_prefix_again():
    model = tiny_target("qwen3", seed=0)
    cfg = draft_config_for(model, block_size=4)
    draft = random_draft(cfg)
    rows = []
    draft.fc.register_forward_hook(lambda module, args, out: rows.append(args[0].shape[1]))
    prompt = list(range(10, 30))
    result = generate(Target(model, cfg.target_layer_ids), draft, prompt, GenerationConfig(max_new_tokens=15))
    # the prefill's rows, then each round's verified slots [anchor, drafts …] (the stale ones are overwritten by the
    # next round at the same positions); the last rounds verify fewer drafts when the token budget runs out
    stats = result.stats
    assert rows[0] == len(prompt)
    assert rows[1:] == [proposed + 1 for proposed in stats.proposed_counts]
    assert max(rows[1:]) <= cfg.block_size + 1


def test_pooling_many_generations_equals_merging_them_in_turn():
    each = [GenerationStats((1, 0), (4, 4), 10, 3), GenerationStats((), (), 5, 0), GenerationStats((4,), (4,), 7, 5)]
    merged = GenerationStats((), ())
    for one in each:
        merged = merged.merge(one)
    assert GenerationStats.pooled(each) == merged == GenerationStats((1, 0, 4), (4, 4, 4), 22, 8)
    assert GenerationStats.pooled([]) == GenerationStats((), ())
