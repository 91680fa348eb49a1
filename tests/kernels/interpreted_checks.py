"""Run under TRITON_INTERPRET=1 by the kernel tests' conftest, in two halves (`interpreted_checks.py a|b`): each
prints one JSON object of measured facts.

1. `greedy_decode` equals the eager Markov loop token for token (fp32 and bf16 weights, rank 8, 20 and 32, a row
   count and a vocabulary that are not multiples of the kernel's tiles, over more than one tile of each).
2. Engine runs that go through the kernel (batch-1 `generate` and the batched engine) stay identical to the target's
   own greedy decoding, and draft exactly the tokens the eager loop drafts.
3. The gated head through the kernel equals `GatedMarkovHead.step`'s greedy loop token for token (fp32 and bf16), and
   the engines with a gated draft stay lossless and accept what the eager loop accepts.
4. With a draft vocabulary (FR-Spec: the K ids the draft may propose) the kernel picks the eager loop's tokens, as
   full ids, and the engines with a restricted draft stay lossless and accept what the eager loop accepts.
5. A tree verify through the kernels: attention under the slot mask and RoPE by depth equal the torch ops, and a tree
   engine equals the target's greedy decoding and accepts what it accepts on the torch ops; the tree's beam through
   tree_kernel builds the torch ops' tree; its acceptance kernel returns the torch ops' accepted, bonus, path and
   committed tokens.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared static-target comparison
from static_agreement import static_target_differences  # noqa: E402

import dspark.engine.markov_kernel as markov_kernel  # noqa: E402
from dspark.engine import cache_attention, layer_kernels  # noqa: E402
from dspark.engine.static_target import (attention_bias, causal_bias, grouped_attention, read_rows,  # noqa: E402
                                         rope_tables, tree_visibility, write_rows)
from dspark.engine.batch import BatchEngine  # noqa: E402
from dspark.engine.tree import TreeDrafts, TreeShape, ancestor_slots  # noqa: E402
from dspark.model.rope import rotate, signed_sin  # noqa: E402
from dspark import GenerationConfig, Target, generate  # noqa: E402
from dspark.engine.batch import generate_batch  # noqa: E402
from dspark.engine.batch import prepare_pair  # noqa: E402
from dspark.model.draft import DSparkDraft  # noqa: E402
from dspark.model.draft_vocab import restrict_draft_vocab  # noqa: E402
from dspark.model.heads import GatedMarkovHead  # noqa: E402
from dspark.testbed.random_pair import tiny_target  # noqa: E402
from dspark.testbed.successor_pair import build_pair  # noqa: E402

# greedy_decode tiles the vocabulary by 512 entries at rank 8 and by 256 at ranks 20 and 32, the rows by 16 (19 rows)
# or one at a time (2 rows): each rank's vocabulary spans two tiles, the second one partial (the interpreter's cost is
# per program, so no more tiles than that)
VOCAB = {8: 600, 20: 300, 32: 300}


def eager(base: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    prev, tokens = anchors, []
    for k in range(base.shape[1]):
        prev = (base[:, k].float() + torch.nn.functional.linear(w1[prev], w2)).argmax(-1)  # [N]
        tokens.append(prev)
    return torch.stack(tokens, 1)  # [N, γ]


def decode_agreement() -> dict[str, int]:
    torch.manual_seed(0)
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        for rank in (8, 32, 20):
            rows, gamma, vocab = (19 if rank != 20 else 2), 7, VOCAB[rank]
            base = torch.randn(rows, gamma, vocab).to(dtype)  # [N, γ, V]
            w1, w2 = torch.randn(vocab, rank).to(dtype), (0.3 * torch.randn(vocab, rank)).to(dtype)
            anchors = torch.randint(0, vocab, (rows,))
            got, want = markov_kernel.greedy_decode(base, w1, w2, anchors), eager(base, w1, w2, anchors)
            out[f"{str(dtype).removeprefix('torch.')}/r{rank}/mismatches"] = int((got != want).sum())
    return out


def vocab_decode_agreement() -> dict[str, int]:
    """The kernel over a draft vocabulary of K ids (base [N, γ, K], W2 [K, r], W1 over the full V) against the eager
    loop that scores the K, maps the pick to its full id and reads W1 there; one full tile and a partial one."""
    torch.manual_seed(3)
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        rows, gamma, vocab, k, rank = 19, 7, 900, 600, 8
        ids = torch.randperm(vocab)[:k]  # [K] full ids, in no particular order
        base = torch.randn(rows, gamma, k).to(dtype)  # [N, γ, K]
        w1, w2 = torch.randn(vocab, rank).to(dtype), (0.3 * torch.randn(k, rank)).to(dtype)
        anchors = torch.randint(0, vocab, (rows,))
        prev, want = anchors, []
        for step in range(gamma):
            prev = ids[(base[:, step].float() + torch.nn.functional.linear(w1[prev], w2)).argmax(-1)]  # [N]
            want.append(prev)
        got = markov_kernel.greedy_decode(base, w1, w2, anchors, None, ids)
        out[f"vocab/{str(dtype).removeprefix('torch.')}/mismatches"] = int((got != torch.stack(want, 1)).sum())
    return out


def vocab_pair() -> tuple[torch.nn.Module, DSparkDraft]:
    """build_pair's target and draft, the draft restricted to every id but each fifth (tied to the target's head
    first): some target tokens can never be drafted, so rounds accept less and the target supplies them."""
    model, draft = build_pair()
    prepare_pair(Target(model, draft.config.target_layer_ids), draft)
    restrict_draft_vocab(draft, torch.tensor([i for i in range(draft.config.vocab_size) if i % 5 != 4]))
    return model, draft


def attention_agreement() -> dict[str, float]:
    """Largest |kernel − SDPA| over random caches, per case."""
    torch.manual_seed(1)
    out = {}
    b, heads, kv, d, length, window = 3, 6, 2, 16, 150, 144  # groups of 3 queries per KV head
    for t in (1, 5, 8, 20):  # 20: 60 grouped queries, over two programs
        for sliding in (None, 7):
            for rows in (None, torch.tensor([4, 0, 2])):
                cache = torch.randn(6, 2 * kv, length, d)  # [B_max, 2·H_kv, L, D]
                q = torch.randn(b, t, heads + 2 * kv, d)[:, :, :heads]  # [B, T, H, D] strided, as the engine's
                positions = torch.tensor([0, 37, 130])[:, None] + torch.arange(t)  # [B, T]
                got = cache_attention.attend(q, cache, kv, positions, rows, window, 0.25, sliding)
                keys = read_rows(cache[:, :kv], rows, b, window)
                values = read_rows(cache[:, kv:], rows, b, window)
                bias = causal_bias(positions, window, heads // kv, q.dtype, sliding)
                want = grouped_attention(q.transpose(1, 2), keys, values, bias, 0.25).transpose(1, 2)
                name = f"attention t{t} sliding{sliding} rows{rows is not None}"
                out[name] = float((got - want).abs().max())
    return out


def tree_kernel_agreement() -> dict[str, object]:
    """A tree verify through the kernels: attention under a tree's slot mask and RoPE by depth against the torch ops,
    and a tree engine (kernels on) against the target's greedy decoding and the same engine on the torch ops."""
    torch.manual_seed(4)
    out: dict[str, object] = {}
    b, heads, kv, d, t, window = 2, 6, 2, 16, 12, 64  # 36 grouped queries: two programs a head
    parent = torch.tensor([[0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 0, 1, 1, 3, 4, 5, 6, 7, 8, 9, 10]])  # [B, T]
    depth = torch.zeros(b, t, dtype=torch.long)
    for slot in range(1, t):
        depth[:, slot] = depth.gather(1, parent[:, slot : slot + 1])[:, 0] + 1
    visible = torch.eye(t, dtype=torch.bool).expand(b, t, t).clone()
    visible[:, :, 0] = True
    for _ in range(4):  # depths up to 10: pointer doubling four times
        visible |= visible.gather(1, parent[:, :, None].expand(b, t, t))
        parent = parent.gather(1, parent)
    start = torch.tensor([5, 40])
    cache = torch.randn(b, 2 * kv, 80, d)
    q = torch.randn(b, t, heads, d)
    positions = start[:, None] + torch.arange(t)
    tree = TreeDrafts(torch.zeros(b, t, dtype=torch.long), parent, depth, visible)
    ancestors = ancestor_slots(tree)  # [B, T, T]
    got = cache_attention.attend(q, cache, kv, start[:, None] + depth, None, window, 0.25, tree=(start, ancestors))
    bias = attention_bias(tree_visibility(start, visible, window)[:, None], heads // kv, q.dtype)
    want = grouped_attention(q.transpose(1, 2), cache[:, :kv, :window], cache[:, kv:, :window], bias,
                             0.25).transpose(1, 2)
    out["tree attention"] = float((got - want).abs().max())
    chain_equal = []  # each slot against a chain verify of its path: the same keys at the same positions
    for row in range(b):
        for slot in range(t):
            path = visible[row, slot].nonzero().flatten()  # its ancestors and itself, in depth order
            chain = cache.clone()
            chain[row, :, start[row] : start[row] + len(path)] = cache[row, :, start[row] + path]
            alone = cache_attention.attend(q[row : row + 1, slot : slot + 1], chain[row : row + 1], kv,
                                           (start[row] + depth[row, slot]).view(1, 1), None, window, 0.25)
            chain_equal.append(torch.equal(alone[0, 0], got[row, slot]))
    out["tree attention equals its path's chain bitwise"] = all(chain_equal)
    angle = torch.arange(80)[:, None] * torch.linspace(0.1, 1.0, d)
    cos_table, sin_table = angle.cos(), signed_sin(angle.sin())
    qkv = torch.randn(b, t, heads + 2 * kv, d)
    rotary = start[:, None] + depth
    cache, expected = torch.zeros(b, 2 * kv, 80, d), torch.zeros(b, 2 * kv, 80, d)
    q = layer_kernels.rope_write(qkv, heads, kv, cos_table, sin_table, cache, None, positions, rotary=rotary)
    rotated = rotate(qkv, *rope_tables(cos_table[rotary], sin_table[rotary], heads + kv, kv))
    write_rows(expected, None, positions, rotated[:, :, heads:].transpose(1, 2))
    out["tree rope_write"] = max(float((q - rotated[:, :, :heads]).abs().max()), float((cache - expected).abs().max()))
    model, draft = build_pair()
    target = Target(model, draft.config.target_layer_ids)
    prompts, config = [list(b"Hel"), list(b"jk"), list(b"A")], GenerationConfig(max_new_tokens=8)
    engine = BatchEngine(target, draft, max_batch=2, max_length=48, tree=TreeShape(6, 2))
    fused = engine.generate(prompts, config)
    os.environ["DSPARK_KERNELS"] = "0"
    try:
        eager = engine.generate(prompts, config)
    finally:
        del os.environ["DSPARK_KERNELS"]
    out["tree engine equals target"] = [r.tokens == hf_greedy(model, p, 8) for r, p in zip(fused, prompts)]
    out["tree engine acceptance as eager"] = [f.stats.accepted_counts == e.stats.accepted_counts
                                              for f, e in zip(fused, eager)]
    out["tree engine accepted"] = sum(sum(r.stats.accepted_counts) for r in fused)
    return out


def tree_build_agreement() -> dict[str, object]:
    """The tree's beam through tree_kernel against the torch ops (random vanilla draft, fp32, several vocabulary tiles,
    with and without a draft vocabulary, and once with a score temperature of 0.5)."""
    from dspark.engine.tree import build_tree
    from dspark.testbed.random_pair import draft_config_for, random_draft

    out: dict[str, object] = {}
    model = tiny_target("llama", vocab_size=600, num_layers=3, seed=5)  # 600 ids: three 256-entry tiles
    restricted = torch.randperm(600)[:300]
    for vocab_ids, temperature in ((None, 1.0), (restricted, 1.0), (None, 0.5)):
        cfg = draft_config_for(model, block_size=5, markov_rank=20)
        draft = random_draft(cfg, scale=3.0, seed=6)
        draft.tie_embeddings(model.model.embed_tokens, model.lm_head)
        restrict_draft_vocab(draft, vocab_ids)
        hidden = torch.randn(3, cfg.num_draft_tokens, cfg.hidden_size)
        anchors = torch.tensor([1, 250, 599])
        shape = TreeShape(12, 4, score_temperature=temperature)
        fused = build_tree(draft, hidden, anchors, shape)
        os.environ["DSPARK_KERNELS"] = "0"
        try:
            eager = build_tree(draft, hidden, anchors, shape)
            unscaled = build_tree(draft, hidden, anchors, TreeShape(12, 4))
        finally:
            del os.environ["DSPARK_KERNELS"]
        name = f"tree build vocab{vocab_ids is not None} temperature{temperature}"
        out[name] = all(torch.equal(a, b) for a, b in zip(fused.parts, eager.parts))
        if temperature != 1.0:  # the scale reached the kernel: another tree than at 1
            out["tree temperature changes the tree"] = not torch.equal(fused.tokens, unscaled.tokens)
    return out


def tree_accept_agreement() -> dict[str, object]:
    """tree_kernel.accept against the torch ops (tree.accept_tree, tree.accepted_path, the committed tokens) on trees
    the builder makes, with target choices that follow a random child most of the time (deep paths), budgets that
    stop some paths, and trees of more slots than γ + 1."""
    from dspark.engine import tree_kernel
    from dspark.engine.tree import accept_tree, accepted_path, build_tree
    from dspark.testbed.random_pair import draft_config_for, random_draft

    model = tiny_target("llama", vocab_size=97, num_layers=2, seed=7)
    draft = random_draft(draft_config_for(model, block_size=6), scale=3.0, seed=8)
    draft.tie_embeddings(model.model.embed_tokens, model.lm_head)
    gamma = draft.config.num_draft_tokens
    generator = torch.Generator().manual_seed(9)
    same, deepest = [], 0
    for nodes, beam in ((6, 1), (12, 3), (20, 4)):
        hidden = torch.randn(5, gamma, draft.config.hidden_size, generator=generator)
        os.environ["DSPARK_KERNELS"] = "0"  # the torch ops build the trees (their kernels are checked above)
        try:
            tree = build_tree(draft, hidden, torch.randint(97, (5,), generator=generator), TreeShape(nodes, beam))
        finally:
            del os.environ["DSPARK_KERNELS"]
        b, slots = tree.tokens.shape
        for trial in range(3):
            choice = torch.randint(97, (b, slots), generator=generator)  # [B, T]
            for row in range(b):  # mostly the token of one of the slot's children
                for slot in range(slots):
                    children = [c for c in range(1, slots) if int(tree.parent[row, c]) == slot]
                    if children and torch.rand(1, generator=generator) < 0.8:
                        pick = children[int(torch.randint(len(children), (1,), generator=generator))]
                        choice[row, slot] = tree.tokens[row, pick]
            lengths = torch.randint(0, gamma + 1, (b,), generator=generator) if trial % 2 else torch.full((b,), gamma)
            accepted, bonus, best = accept_tree(tree, lengths, choice)
            path = accepted_path(tree, best, gamma)
            committed = torch.cat([tree.tokens.gather(1, path), torch.zeros(b, 1, dtype=torch.long)], dim=1)
            committed.scatter_(1, accepted[:, None], bonus[:, None])
            fused = tree_kernel.accept(*tree.parts, choice, lengths, gamma)
            same.append(all(torch.equal(x, y) for x, y in zip(fused, (accepted, bonus, path, committed))))
            deepest = max(deepest, int(accepted.max()))
    return {"tree accept same": same, "tree accept deepest": deepest}


def layer_kernel_agreement() -> dict[str, float]:
    """Largest |kernel − torch ops| for add + RMSNorm, SiLU · up and RoPE + cache write (fp32)."""
    torch.manual_seed(2)
    x, delta, weight = torch.randn(3, 5, 40), torch.randn(3, 5, 40), torch.randn(40)
    total, normed = layer_kernels.add_rms_norm(x, delta, weight, 1e-6)
    want = torch.nn.functional.rms_norm(x + delta, (40,), weight, 1e-6)
    out = {"add_rms_norm": max(float((total - (x + delta)).abs().max()), float((normed - want).abs().max()))}
    gate_up = torch.randn(2, 3, 2 * 1500)
    gate, up = gate_up.chunk(2, dim=-1)
    out["silu_mul"] = float((layer_kernels.silu_mul(gate_up) - torch.nn.functional.silu(gate) * up).abs().max())
    b, t, heads, kv, d = 3, 4, 6, 2, 16
    q_weight, k_weight = torch.randn(d), torch.randn(d)
    angle = torch.arange(32)[:, None] * torch.linspace(0.1, 1.0, d)  # [P, D] a table row per position
    cos_table, sin_table = angle.cos(), signed_sin(angle.sin())
    for q_heads, normed in ((heads, False), (0, False), (heads, True), (0, True)):
        for rows in (None, torch.tensor([5, 1, 3])):
            # k/v-only cases read one layer's slice of a wider projection in place (the draft's context extension)
            wide = torch.randn(b, t, 3, q_heads + 2 * kv, d)
            qkv = wide[:, :, 1] if q_heads == 0 else wide[:, :, 0].contiguous()  # [B, T, H + 2·H_kv, D]
            positions = torch.tensor([[0], [9], [20]]) + torch.arange(t)  # [B, T]
            cos, sin_signed = cos_table[positions], sin_table[positions]  # [B, T, D] for the torch ops
            cache, expected = torch.zeros(6, 2 * kv, 32, d), torch.zeros(6, 2 * kv, 32, d)
            norms = (q_weight, k_weight, 1e-6) if normed else None
            q = layer_kernels.rope_write(qkv, q_heads, kv, cos_table, sin_table, cache, rows, positions, norms)
            if normed:  # the torch path's per-head norms of q and k (Qwen3), then the rotation
                rms = lambda y, w: torch.nn.functional.rms_norm(y, (d,), w, 1e-6)  # noqa: E731
                qkv = torch.cat([rms(qkv[:, :, :q_heads], q_weight), rms(qkv[:, :, q_heads : q_heads + kv], k_weight),
                                 qkv[:, :, q_heads + kv :]], dim=2)
            rotated = rotate(qkv, *rope_tables(cos, sin_signed, q_heads + kv, kv))
            write_rows(expected, rows, positions, rotated[:, :, q_heads:].transpose(1, 2))
            name = f"rope_write q{q_heads} rows{rows is not None} norms{normed}"
            out[name] = max(float((q - rotated[:, :, :q_heads]).abs().max()) if q_heads else 0.0,
                            float((cache - expected).abs().max()))
    return out


def static_target_agreement() -> dict[str, float]:
    """Largest |static target − HF target| logit over a prefill per row and two verify steps (the kernels)."""
    out = {}
    # the kernels' paths: q/k norms (qwen3) or none, full attention or a sliding window of 8 (mistral); llama and
    # qwen2 differ from these only outside the kernels (the CPU tests compare all four with HF)
    for arch in ("qwen3", "mistral"):
        model = tiny_target(arch, vocab_size=300, num_layers=3, seed=1)
        prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [1, 2, 3]]  # the first prefill also runs through the kernels
        out[f"static target {arch}"] = max(static_target_differences(model, (0, 1), prompts, rows=[3, 0], steps=2,
                                                                     width=5, max_length=48))
        # a prefill of G·T = 2 × 70 queries per row, past the attention kernel's tile: the layer kernels with SDPA
        long = [[(7 * i) % 300 for i in range(70)]]
        out[f"static target {arch} long prefill"] = max(static_target_differences(model, (0, 1), long, rows=[1],
                                                                                  steps=1, width=5, max_length=96))
    return out


def gated_agreement() -> dict[str, int]:
    """greedy_decode with a gated head's gate inputs against the head's own step, slot by slot (random weights, the
    same row and vocabulary sizes as decode_agreement)."""
    torch.manual_seed(3)
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        for rank in (8, 32, 20):
            rows, gamma, vocab, d = (19 if rank != 20 else 2), 7, VOCAB[rank], 48
            head = GatedMarkovHead(vocab, rank, d).to(dtype)
            with torch.no_grad():
                head.markov_w2.weight.mul_(3.0)  # a bias that often overrules the base logits
            hidden = torch.randn(rows, gamma, d).to(dtype)  # [N, γ, d]
            base = torch.randn(rows, gamma, vocab).to(dtype)  # [N, γ, V]
            anchors = torch.randint(0, vocab, (rows,))
            with torch.no_grad():
                got = markov_kernel.greedy_decode(base, head.markov_w1.weight, head.markov_w2.weight, anchors,
                                                  markov_kernel.gate_inputs(head, hidden))
                prev, want = anchors, []
                for k in range(gamma):
                    bias, _ = head.step(prev, hidden[:, k], None)  # [N, V]
                    prev = (base[:, k].float() + bias).argmax(-1)  # [N]
                    want.append(prev)
            key = f"gated/{str(dtype).removeprefix('torch.')}/r{rank}/mismatches"
            out[key] = int((got != torch.stack(want, 1)).sum())
    return out


def gated_pair() -> tuple[torch.nn.Module, DSparkDraft]:
    """build_pair's target and its draft with a gated head: the successor rule in W1 / W2, a random gate kept mostly
    open (bias 2), so acceptance is real and partial."""
    model, draft = build_pair()
    gated = DSparkDraft(draft.config.replace(markov_head_type="gated")).eval()
    missing = gated.load_state_dict(draft.state_dict(), strict=False).missing_keys
    assert all(k.startswith("markov_head.gate_proj") for k in missing), missing
    with torch.no_grad():
        gated.markov_head.gate_proj.bias.fill_(2.0)
    return model, gated


def hf_greedy(model, prompt: list[int], n: int) -> list[int]:
    ids = torch.tensor([prompt])
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                          eos_token_id=None, pad_token_id=0)[0, len(prompt):].tolist()


def engines(model: torch.nn.Module, draft: DSparkDraft, prefix: str = "") -> dict[str, object]:
    """Batch-1 and batched runs through the kernels against the target's greedy decoding and the eager drafts; the
    draft's Markov head knows the target's rule (build_pair), so acceptance is real and partial. Short prompts and
    few new tokens keep the rounds few (the interpreter runs every token of a round through every kernel): the
    prompts accept 2, 3 / 0, 0, 4 / 4, 1 drafts per round, the first two prefill together at different lengths (3
    and 2 tokens), and the third (1 token) joins when the first ends, so the batched engine also compacts its rows."""
    target = Target(model, draft.config.target_layer_ids)
    prompts = [list(b"Hel"), list(b"jk"), list(b"A")]
    config = GenerationConfig(max_new_tokens=8)
    calls = []
    real = markov_kernel.greedy_decode

    def counted(*args):
        calls.append(1)
        return real(*args)

    markov_kernel.greedy_decode = counted
    try:
        fused = [generate(target, draft, p, config) for p in prompts]
        batched = generate_batch(target, draft, prompts, config, max_batch=2)
        kernel_calls = len(calls)
        os.environ["DSPARK_KERNELS"] = "0"  # the torch ops throughout: the eager loop's drafts, quickly
        plain = [generate(target, draft, p, config) for p in prompts]
    finally:
        markov_kernel.greedy_decode = real
        os.environ.pop("DSPARK_KERNELS", None)
    reference = [hf_greedy(model, p, config.max_new_tokens) for p in prompts]
    facts = {
        "kernel_calls": kernel_calls,
        "batch1_equals_target": [r.tokens == want for r, want in zip(fused, reference)],
        "batched_equals_target": [r.tokens == want for r, want in zip(batched, reference)],
        "same_acceptance_as_eager": [f.stats.accepted_counts == e.stats.accepted_counts for f, e in zip(fused, plain)],
        "batched_acceptance_as_eager": [f.stats.accepted_counts == e.stats.accepted_counts
                                        for f, e in zip(batched, plain)],
        "accepted": sum(sum(r.stats.accepted_counts) for r in fused),
    }
    return {prefix + key: value for key, value in facts.items()}


# two halves of about equal interpreter time (~60 s each alone on one core), run side by side by the conftest
PARTS = {
    "a": lambda: {**static_target_agreement(), **tree_kernel_agreement(), **layer_kernel_agreement(),
                  **engines(*vocab_pair(), prefix="vocab_"), **vocab_decode_agreement()},
    "b": lambda: {**decode_agreement(), **attention_agreement(), **engines(*build_pair()), **gated_agreement(),
                  **engines(*gated_pair(), prefix="gated_"), **tree_build_agreement(), **tree_accept_agreement()},
}

if __name__ == "__main__":
    torch.set_num_threads(1)  # the other half runs beside this one
    print(json.dumps(PARTS[sys.argv[1]]()))
    sys.stdout.flush()
