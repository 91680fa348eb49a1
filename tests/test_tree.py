"""Tree verification: the tree builder's structure, the target's tree forward against plain forwards of each path,
acceptance of the deepest matching path, tree-engine decoding token-identical to plain greedy decoding, and sampled
tree decoding distributed as the target's own samples (the χ² rule of tests/test_lossless_sampling.py)."""
from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from dspark import GenerationConfig, Target, generate
from dspark.engine import batch_round
from dspark.engine.batch import BatchEngine
from dspark.engine.schedule import Scheduling
from dspark.engine.static_target import StaticTarget
from dspark.engine.tree import TreeDrafts, TreeShape, accept_tree, accepted_path, build_tree
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
from dspark.testbed.successor_pair import EOS_ID, build_pair
from eager_graphs import EagerReplay
from test_lossless_sampling import chi_square_excess, exact_continuations

PROMPTS = [list(b"hello wor"), list(b"abc"), list(b"xyz 123 456 789"), list(b"The quick"), list(b"q")]


def random_tree_inputs(head: str = "vanilla", seed: int = 0):
    model = tiny_target("llama", seed=seed)
    draft = random_draft(draft_config_for(model, block_size=5, markov_head_type=head), scale=3.0)
    target = Target(model, draft.config.target_layer_ids)
    draft.tie_embeddings(target.embed_tokens, target.lm_head)
    torch.manual_seed(seed)
    hidden = torch.randn(3, draft.config.num_draft_tokens, draft.config.hidden_size)  # [B, γ, d]
    return target, draft, hidden, torch.tensor([5, 17, 60])


@pytest.mark.parametrize("head", ["vanilla", "gated", "rnn"])
@pytest.mark.parametrize("nodes,beam", [(5, 1), (9, 3), (12, 4), (20, 4)])
def test_tree_slots_follow_their_parents_in_depth_order_and_see_exactly_their_ancestors(head, nodes, beam):
    _, draft, hidden, anchors = random_tree_inputs(head)
    tree = build_tree(draft, hidden, anchors, TreeShape(nodes, beam))
    b, slots = tree.tokens.shape
    assert slots == nodes + 1 and torch.equal(tree.tokens[:, 0], anchors)
    for row in range(b):
        depth, parent, visible = tree.depth[row].tolist(), tree.parent[row].tolist(), tree.visible[row]
        assert depth == sorted(depth) and depth[0] == 0 and max(depth) <= draft.config.num_draft_tokens
        for slot in range(1, slots):
            assert parent[slot] < slot and depth[parent[slot]] == depth[slot] - 1
            ancestors, walk = {slot, 0}, slot
            while walk:
                walk = parent[walk]
                ancestors.add(walk)
            assert set(visible[slot].nonzero().flatten().tolist()) == ancestors
        children = {}
        for slot in range(1, slots):  # siblings never repeat a token: each path is a distinct continuation
            children.setdefault(parent[slot], []).append(tree.tokens[row, slot].item())
        assert all(len(set(c)) == len(c) for c in children.values())


def test_a_beam_of_one_is_the_greedy_markov_chain():
    _, draft, hidden, anchors = random_tree_inputs()
    gamma = draft.config.num_draft_tokens
    tree = build_tree(draft, hidden, anchors, TreeShape(gamma, 1))
    from dspark.engine.draft_step import decode_blocks

    chain = decode_blocks(draft, hidden, anchors, GenerationConfig(), None, confidence=False).tokens
    assert torch.equal(tree.tokens[:, 1:], chain) and tree.depth[0].tolist() == list(range(gamma + 1))


def test_acceptance_takes_the_deepest_path_the_target_agrees_with_and_its_bonus():
    # slots: 0 anchor; 1 (a, depth 1), 2 (b, depth 1), 3 (c under 1), 4 (d under 2), 5 (e under 4)
    parent = torch.tensor([[0, 0, 0, 1, 2, 4]])
    depth = torch.tensor([[0, 1, 1, 2, 2, 3]])
    tokens = torch.tensor([[9, 1, 2, 3, 4, 5]])
    visible = torch.zeros(1, 6, 6, dtype=torch.bool)
    for slot in range(6):
        walk = slot
        visible[0, slot, 0] = True
        while True:
            visible[0, slot, walk] = True
            if walk == 0:
                break
            walk = parent[0, walk].item()
    tree = TreeDrafts(tokens, parent, depth, visible)

    def choosing(choices):  # the target's next token after each slot
        return torch.tensor([choices])

    accepted, bonus, best = accept_tree(tree, torch.tensor([7]), choosing([2, 0, 4, 0, 5, 8]))
    assert (accepted.item(), bonus.item(), best.item()) == (3, 8, 5)  # anchor → b → d → e, then 8
    assert accepted_path(tree, best, 4).tolist() == [[2, 4, 5, 4]]  # past the path: the slot at that depth
    accepted, bonus, best = accept_tree(tree, torch.tensor([1]), choosing([2, 0, 4, 0, 5, 8]))
    assert (accepted.item(), bonus.item(), best.item()) == (1, 4, 2)  # the budget stops the path at depth 1
    accepted, bonus, _ = accept_tree(tree, torch.tensor([7]), choosing([7, 0, 4, 0, 5, 8]))
    assert (accepted.item(), bonus.item()) == (0, 7)  # no child matches: the target's own token


def test_tree_forward_gives_each_slot_the_logits_of_a_plain_forward_of_its_path():
    target, draft, hidden, anchors = random_tree_inputs(seed=1)
    tree = build_tree(draft, hidden, anchors, TreeShape(12, 4))
    static = StaticTarget(target, max_batch=3, max_length=64)
    prompts = torch.randint(0, 97, (3, 6))
    start = torch.full((3,), 6)
    static.forward(prompts, torch.zeros(3, dtype=torch.long))
    logits, features = static.forward(tree.tokens, start, tree=tree)  # [3, T, V], [3, T, F]
    for row in range(3):
        for slot in range(tree.tokens.shape[1]):
            path = tree.visible[row, slot].nonzero().flatten()  # its ancestors and itself, in depth order
            out = target.forward(torch.cat([prompts[row], tree.tokens[row, path]])[None])
            assert torch.allclose(logits[row, slot], out.logits[0, -1], atol=1e-4)
            assert torch.allclose(features[row, slot], out.features[0, -1], atol=1e-4)


def test_keep_path_moves_the_accepted_slots_keys_and_values_behind_the_anchor():
    target, *_ = random_tree_inputs()
    static = StaticTarget(target, max_batch=2, max_length=32)
    static.cache.copy_(torch.randn_like(static.cache))
    before = static.cache.clone()
    start = torch.tensor([3, 10])
    path = torch.tensor([[4, 6, 3, 4], [1, 2, 3, 4]])  # row 1 accepted the chain: nothing moves
    static.keep_path(start, path)
    for d, slot in enumerate(path[0].tolist()):
        assert torch.equal(static.cache[:, 0, :, 3 + 1 + d], before[:, 0, :, 3 + slot])
    assert torch.equal(static.cache[:, 1], before[:, 1])
    assert torch.equal(static.cache[:, 0, :, :4], before[:, 0, :, :4])


@pytest.mark.slow
@pytest.mark.parametrize("nodes,beam,max_batch", [(12, 3, 1), (14, 4, 3), (4, 1, 2)])
def test_tree_engine_output_equals_plain_greedy_decoding_with_eos_budgets_and_refills(nodes, beam, max_batch):
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=max_batch, max_length=96, tree=TreeShape(nodes, beam, max_rows=None))
    for config in (GenerationConfig(max_new_tokens=30, eos_token_ids=(EOS_ID,)), GenerationConfig(max_new_tokens=9)):
        results = engine.generate(PROMPTS, config)
        plain = [generate(target, None, p, config).tokens for p in PROMPTS]
        assert [r.tokens for r in results] == plain
        if beam == 1:  # a one-node beam is the block's greedy chain: the chain engine's very rounds
            chain = BatchEngine(target, draft, max_batch=max_batch, max_length=96).generate(PROMPTS, config)
            assert [r.stats for r in results] == [r.stats for r in chain]
        else:
            assert sum(sum(r.stats.accepted_counts) for r in results) > 20


def random_engine_inputs(block_size: int, mode: str, prompt_seed: int):
    """A random qwen3 target, a random draft of `mode` at `block_size`, and 4 random prompts."""
    model = tiny_target("qwen3", seed=4)
    draft = random_draft(draft_config_for(model, block_size=block_size, mode=mode), scale=5.0)
    rng = random.Random(prompt_seed)
    prompts = [[rng.randrange(97) for _ in range(rng.randrange(1, 20))] for _ in range(4)]
    return Target(model, draft.config.target_layer_ids), draft, prompts


def test_tree_engine_on_random_targets_equals_hf_greedy_and_accepts_more_than_the_chain():
    target, draft, prompts = random_engine_inputs(5, "dspark", 1)
    config = GenerationConfig(max_new_tokens=24)
    tree = BatchEngine(target, draft, max_batch=2, max_length=64, tree=TreeShape(16, 4)).generate(prompts, config)
    chain = BatchEngine(target, draft, max_batch=2, max_length=64).generate(prompts, config)
    assert [r.tokens for r in tree] == [generate(target, None, p, config).tokens for p in prompts]
    assert sum(r.stats.rounds for r in tree) <= sum(r.stats.rounds for r in chain)


def test_a_tree_engine_refuses_scheduling_short_blocks_and_shapes_it_cannot_fill():
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=1, max_length=64, tree=TreeShape(8, 2))
    with pytest.raises(ValueError, match="scheduling rule"):
        engine.generate([PROMPTS[0]], GenerationConfig(max_new_tokens=4), Scheduling("threshold"))
    with pytest.raises(ValueError, match="block_size"):
        engine.generate([PROMPTS[0]], GenerationConfig(max_new_tokens=4, max_drafts=3))
    gamma = draft.config.num_draft_tokens
    with pytest.raises(ValueError, match="candidates"):
        BatchEngine(target, draft, max_batch=1, max_length=64, tree=TreeShape(gamma * 2 + 1, 2))
    other = tiny_target("deepseek_v3", num_layers=2)  # the Hugging Face backend verifies chains only
    cfg = draft_config_for(other, layer_ids=(0,))
    with pytest.raises(ValueError, match="tree verification needs the static backend"):
        BatchEngine(Target(other, (0,)), random_draft(cfg), max_batch=1, max_length=64, tree=TreeShape(8, 2))


def test_a_warmed_up_tree_engine_captures_every_shape_within_both_caches_and_stays_lossless():
    # the tree's extra slots lengthen the target's cache; the draft's must follow, or a graphed prefill as wide as
    # the target's cache writes past the draft's (the H200's illegal memory access of the first tree run)
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=2, max_length=40, pad_to_buckets=True, tree=TreeShape(14, 4))
    engine.graphs = EagerReplay(engine.round)
    assert engine.static_draft.max_length >= engine.backend.max_length
    engine.warm_up()
    assert {key[2] for key in engine.graphs.graphs if key[0] == "verify"} == {1, 15}
    config = GenerationConfig(max_new_tokens=20, eos_token_ids=(EOS_ID,))
    results = engine.generate(PROMPTS, config)
    assert [r.tokens for r in results] == [generate(target, None, p, config).tokens for p in PROMPTS]


def _tree_sampling_counts(samples: int, nodes: int, beam: int) -> tuple[Counter, dict, int]:
    # the set-up of tests/test_batch_sampling.py: a 4-token target, so every continuation's exact probability is known
    vocab, prompt, length = 4, [1, 2, 3], 3
    model = tiny_target("qwen3", vocab_size=vocab, hidden_size=32, num_layers=2, seed=0)
    draft = random_draft(draft_config_for(model, layer_ids=(0,), block_size=3, num_layers=1), scale=3.0)
    engine = BatchEngine(Target(model, draft.config.target_layer_ids), draft, max_batch=64, max_length=24,
                         tree=TreeShape(nodes, beam, max_rows=None))
    config = GenerationConfig(max_new_tokens=length, temperature=1.0, seed=0)  # full support: only χ² can tell
    results = engine.generate([prompt] * samples, config)
    accepted = sum(sum(r.stats.accepted_counts) for r in results)
    return (Counter(tuple(r.tokens) for r in results), exact_continuations(model, prompt, length, config, vocab),
            accepted)


@pytest.mark.slow
@pytest.mark.parametrize("nodes,beam", [(6, 2), (3, 1)])
def test_sampled_tree_verification_commits_the_target_distribution(nodes, beam):
    counts, expected, accepted = _tree_sampling_counts(1500, nodes, beam)
    assert chi_square_excess(counts, expected, 1500) < 0
    assert accepted > 300  # nodes were really accepted, at several depths, not only bonus tokens


def test_a_tree_sampler_that_favours_the_drafts_is_caught(monkeypatch):
    real = batch_round.accept_tree

    def first_child_always(tree, lengths, choice):  # the target "chooses" each slot's first child when it has one
        slots = tree.tokens.shape[1]
        child = torch.where(tree.parent[:, None, :] == torch.arange(slots)[None, :, None], tree.tokens[:, None, :],
                            -1)  # [B, T, T] slot s's children's tokens
        child[:, 0, 0] = -1  # the anchor is not its own child
        first = child.max(-1).values  # [B, T] one child's token (any child will do)
        return real(tree, lengths, torch.where(first >= 0, first, choice))

    monkeypatch.setattr(batch_round, "accept_tree", first_child_always)
    counts, expected, _ = _tree_sampling_counts(1000, 6, 2)
    assert chi_square_excess(counts, expected, 1000) > 0


def test_a_row_moved_into_a_finished_rows_place_takes_its_drafted_tree_along():
    # padded buckets keep the block drafted ahead when a row ends and a later row moves into its place; the moved
    # row must verify its own tree (whose slot 0 is its own anchor), not the finished row's
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=4, max_length=96, pad_to_buckets=True,
                         tree=TreeShape(12, 3, max_rows=None))
    prompts = PROMPTS[:4]
    config = GenerationConfig(max_new_tokens=40, eos_token_ids=(EOS_ID,))
    session = engine.open(config)
    for i, (prompt, budget) in enumerate(zip(prompts, (6, 40, 40, 40))):  # row 0 ends first, then others: rows move
        session.add(i, prompt, budget)                                       # down once 2 rows are left (bucket 2)
    moves = []
    move_rows = engine.round.move_rows
    engine.round.move_rows = lambda sources, destinations: (moves.append((sources, destinations)),
                                                            move_rows(sources, destinations))
    while not session.idle:
        session.step()
    results = [session.release(i) for i in range(4)]
    assert moves  # the case under test happened
    for prompt, budget, result in zip(prompts, (6, 40, 40, 40), results):
        plain = generate(target, None, prompt, GenerationConfig(max_new_tokens=budget, eos_token_ids=(EOS_ID,)))
        assert result.tokens == plain.tokens


def test_a_tree_shape_with_max_rows_verifies_chains_above_it_and_stays_lossless():
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    engine = BatchEngine(target, draft, max_batch=3, max_length=96, tree=TreeShape(12, 3, max_rows=1))
    kinds = []
    tree_verify, uses_tree = engine.round._verify_tree, engine.round.uses_tree
    engine.round._verify_tree = lambda b, window: (kinds.append(("tree", b)), tree_verify(b, window))[1]
    config = GenerationConfig(max_new_tokens=30, eos_token_ids=(EOS_ID,))
    results = engine.generate(PROMPTS, config)  # 5 prompts on 3 rows: rounds of 3, 2 and finally 1 row
    assert [r.tokens for r in results] == [generate(target, None, p, config).tokens for p in PROMPTS]
    assert kinds and all(b == 1 for _, b in kinds)  # trees only at one row
    assert uses_tree(1) and not uses_tree(2)
    sampled = engine.generate(PROMPTS, GenerationConfig(max_new_tokens=12, temperature=1.0, seed=0))
    assert all(len(r.tokens) == 12 for r in sampled)  # sampled chain rounds (draft probabilities) and tree rounds
    with pytest.raises(ValueError, match="max_rows"):
        TreeShape(12, 3, max_rows=0)


def test_a_dflash_mode_draft_grows_trees_from_each_slots_own_distribution_and_stays_lossless():
    target, draft, prompts = random_engine_inputs(6, "dflash", 2)
    config = GenerationConfig(max_new_tokens=24)
    plain = [generate(target, None, p, config).tokens for p in prompts]
    chain = BatchEngine(target, draft, max_batch=2, max_length=64).generate(prompts, config)
    beam_one = BatchEngine(target, draft, max_batch=2, max_length=64, tree=TreeShape(5, 1)).generate(prompts, config)
    tree = BatchEngine(target, draft, max_batch=2, max_length=64, tree=TreeShape(15, 4)).generate(prompts, config)
    assert [r.tokens for r in tree] == plain and [r.tokens for r in beam_one] == plain
    assert [r.stats for r in beam_one] == [r.stats for r in chain]  # a beam of one is the DFlash chain itself
    assert sum(r.stats.rounds for r in tree) < sum(r.stats.rounds for r in chain)
    hidden = torch.randn(2, draft.config.num_draft_tokens, draft.config.hidden_size)  # [B, γ, d]
    draft.tie_embeddings(target.embed_tokens, target.lm_head)
    built = build_tree(draft, hidden, torch.tensor([3, 9]), TreeShape(15, 4))
    for row in range(2):  # without a Markov head a node's children do not depend on which node it is
        at_depth_one = {int(t) for t, d in zip(built.tokens[row], built.depth[row]) if d == 1}
        top = set(draft.base_logits(hidden)[row, 0].topk(len(at_depth_one)).indices.tolist())
        assert at_depth_one == top


@pytest.mark.parametrize("head", ["vanilla", "gated"])
def test_a_low_score_temperature_keeps_the_drafts_greedy_chain_in_the_tree_and_stays_lossless(head):
    from dspark.engine.draft_step import decode_blocks

    target, draft, hidden, anchors = random_tree_inputs(head)
    chain = decode_blocks(draft, hidden, anchors, GenerationConfig(), None).tokens  # [B, γ] the block's own drafts
    gamma = chain.shape[1]
    for temperature, keeps_chain in ((0.02, True), (1.0, False)):
        built = build_tree(draft, hidden, anchors, TreeShape(gamma + 2, 3, score_temperature=temperature))
        kept = []
        for row in range(hidden.shape[0]):
            slot, path = 0, []
            for depth in range(1, gamma + 1):  # follow the chain's token among each slot's children
                children = [s for s in range(1, gamma + 3) if int(built.parent[row, s]) == slot
                            and int(built.depth[row, s]) == depth
                            and int(built.tokens[row, s]) == int(chain[row, depth - 1])]
                if not children:
                    break
                slot = children[0]
                path.append(slot)
            kept.append(len(path) == gamma)
        assert all(kept) if keeps_chain else not all(kept)  # at 1 the wide shallow tree drops the chain's tail
    prompts = [[5, 17, 60, 2], [33], [8, 91, 40, 40, 12]]
    config = GenerationConfig(max_new_tokens=20)
    engine = BatchEngine(target, draft, max_batch=2, max_length=64, tree=TreeShape(9, 3, score_temperature=0.3))
    assert [r.tokens for r in engine.generate(prompts, config)] == [generate(target, None, p, config).tokens
                                                                   for p in prompts]
    with pytest.raises(ValueError, match="score_temperature must be > 0"):
        TreeShape(9, 3, score_temperature=0.0)
