"""The training block mask: no leakage from later blocks or from context at/after the anchor."""
from __future__ import annotations

import pytest
import torch

from dspark.model.block_forward import draft_forward
from dspark.model.blocks import block_attention_mask, build_blocks, sample_anchors, valid_anchor_mask
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target


def _setup(seq_len=40, anchors=((5, 12, 20, 31),)):
    model = tiny_target("qwen3", seed=0)
    cfg = draft_config_for(model, block_size=4)
    draft = random_draft(cfg, scale=3.0)
    draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    ids = torch.randint(0, 96, (1, seq_len))
    loss_mask = torch.ones(1, seq_len, dtype=torch.long)
    a = torch.tensor(anchors)
    keep = torch.ones_like(a, dtype=torch.bool)
    return draft, cfg, ids, loss_mask, a, keep


def test_mask_rows_see_only_context_before_the_anchor_and_their_own_block():
    mask = block_attention_mask(torch.tensor([[3, 7]]), torch.tensor([[True, True]]), seq_len=10, block_size=2)
    assert mask.shape == (1, 4, 14)
    assert mask[0, 0, :10].tolist() == [True] * 3 + [False] * 7
    assert mask[0, 2, :10].tolist() == [True] * 7 + [False] * 3
    assert mask[0, 0, 10:].tolist() == [True, True, False, False]
    assert mask[0, 3, 10:].tolist() == [False, False, True, True]


def test_blocks_are_unaffected_by_later_blocks_and_future_context():
    draft, cfg, ids, loss_mask, anchors, keep = _setup()
    features = torch.randn(1, ids.shape[1], cfg.feature_size)
    blocks = build_blocks(ids, loss_mask, anchors, keep, cfg.block_size, cfg.mask_token_id)
    with torch.no_grad():
        base = draft_forward(draft, features, blocks).hidden  # [1, N, γ, d]
        # change the context at and after anchor 12 and the tokens of the blocks after block 1
        features2 = features.clone()
        features2[:, 12:] = torch.randn_like(features2[:, 12:])
        ids2 = ids.clone()
        ids2[:, 20:] = (ids2[:, 20:] + 1) % 96
        blocks2 = build_blocks(ids2, loss_mask, anchors, keep, cfg.block_size, cfg.mask_token_id)
        changed = draft_forward(draft, features2, blocks2).hidden
    torch.testing.assert_close(changed[0, :2], base[0, :2], atol=1e-6, rtol=0)  # blocks anchored at 5 and 12
    assert not torch.allclose(changed[0, 2:], base[0, 2:])


def test_training_forward_of_a_block_equals_inference_on_the_same_context():
    draft, cfg, ids, loss_mask, anchors, keep = _setup()
    features = torch.randn(1, ids.shape[1], cfg.feature_size)
    blocks = build_blocks(ids, loss_mask, anchors, keep, cfg.block_size, cfg.mask_token_id)
    with torch.no_grad():
        trained = draft_forward(draft, features, blocks).hidden
        p = 20  # block 2: inference sees exactly the context rows < 20 and [x_20, MASK, MASK, MASK]
        ctx = draft.context_kv(draft.fuse(features[:, :p]), torch.arange(p)[None])
        block = torch.full((1, 4), cfg.mask_token_id)
        block[0, 0] = ids[0, p]
        inferred = draft(block, torch.arange(p, p + 4)[None], ctx)
    torch.testing.assert_close(inferred[0], trained[0, 2], atol=1e-5, rtol=0)


def test_anchor_sampling_keeps_only_valid_anchors_and_pads_with_dummies():
    loss_mask = torch.tensor([[0, 1, 1, 1, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0, 1, 1]])
    valid = valid_anchor_mask(loss_mask)
    assert valid[0].nonzero().flatten().tolist() == [1, 2, 5]
    anchors, keep = sample_anchors(loss_mask, num_anchors=4, generator=torch.Generator().manual_seed(0))
    assert anchors[0, :3].tolist() == [1, 2, 5] and keep[0].tolist() == [True, True, True, False]
    assert anchors[1].tolist() == [6, 0, 0, 0] and keep[1].tolist() == [True, False, False, False]
    many = torch.ones(1, 600, dtype=torch.long)
    anchors, keep = sample_anchors(many, 512, torch.Generator().manual_seed(0))
    assert keep.all() and anchors.unique().numel() == 512 and bool((anchors[0, 1:] > anchors[0, :-1]).all())


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")  # eager = the reference
def test_flex_block_mask_gives_the_same_attention_as_the_dense_sdpa_mask_dummy_blocks_included():
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import flex_attention

    from dspark.model.blocks import flex_block_mask, sdpa_mask

    seq_len, gamma = 40, 3
    anchors = torch.tensor([[3, 10, 20, 30, 0], [5, 6, 7, 0, 0]])
    keep = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]).bool()  # padding blocks (dummies) at the end
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5 * gamma, 16, generator=gen)
    k, v = (torch.randn(2, 2, seq_len + 5 * gamma, 16, generator=gen) for _ in range(2))
    dense = sdpa_mask(block_attention_mask(anchors, keep, seq_len, gamma), keep, seq_len, gamma)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=dense, enable_gqa=True)
    got = flex_attention(q, k, v, block_mask=flex_block_mask(anchors, keep, seq_len, gamma), enable_gqa=True)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
