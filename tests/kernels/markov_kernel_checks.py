"""Run under TRITON_INTERPRET=1 by test_markov_kernel.py: prints one JSON object of measured facts.

1. `greedy_decode` equals the eager Markov loop token for token (fp32 and bf16 weights, rank 8, 20 and 32, a row
   count and a vocabulary that are not multiples of the kernel's tiles).
2. Engine runs that go through the kernel (batch-1 `generate` and the batched engine) stay identical to the target's
   own greedy decoding, and draft exactly the tokens the eager loop drafts.
"""
from __future__ import annotations

import json
import os
import sys

import torch

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import dspark.engine.markov_kernel as markov_kernel  # noqa: E402
from dspark import GenerationConfig, Target, generate  # noqa: E402
from dspark.engine.batch import generate_batch  # noqa: E402
from dspark.testbed.successor_pair import build_pair  # noqa: E402


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
            rows, gamma, vocab = (19 if rank != 20 else 3), 7, 1500
            base = torch.randn(rows, gamma, vocab).to(dtype)  # [N, γ, V]
            w1, w2 = torch.randn(vocab, rank).to(dtype), (0.3 * torch.randn(vocab, rank)).to(dtype)
            anchors = torch.randint(0, vocab, (rows,))
            got, want = markov_kernel.greedy_decode(base, w1, w2, anchors), eager(base, w1, w2, anchors)
            out[f"{str(dtype).removeprefix('torch.')}/r{rank}/mismatches"] = int((got != want).sum())
    return out


def hf_greedy(model, prompt: list[int], n: int) -> list[int]:
    ids = torch.tensor([prompt])
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                          eos_token_id=None, pad_token_id=0)[0, len(prompt):].tolist()


def engines() -> dict[str, object]:
    model, draft = build_pair()  # a draft whose Markov head knows the target's rule: real, partial acceptance
    target = Target(model, draft.config.target_layer_ids)
    prompts = [list(b"abcdef"), list(b"Hello, world"), list(b"0123456789:;")]
    config = GenerationConfig(max_new_tokens=12)
    calls = []
    real = markov_kernel.greedy_decode

    def counted(*args):
        calls.append(1)
        return real(*args)

    markov_kernel.greedy_decode = counted
    fused = [generate(target, draft, p, config) for p in prompts]
    batched = generate_batch(target, draft, prompts, config, max_batch=2)
    kernel_calls = len(calls)
    markov_kernel.usable = lambda *a: False  # the eager loop, for the drafts it would have proposed
    plain = [generate(target, draft, p, config) for p in prompts]
    return {
        "kernel_calls": kernel_calls,
        "batch1_equals_target": [r.tokens == hf_greedy(model, p, 12) for r, p in zip(fused, prompts)],
        "batched_equals_target": [r.tokens == hf_greedy(model, p, 12) for r, p in zip(batched, prompts)],
        "same_acceptance_as_eager": [f.stats.accepted_counts == e.stats.accepted_counts for f, e in zip(fused, plain)],
        "accepted": sum(sum(r.stats.accepted_counts) for r in fused),
    }


if __name__ == "__main__":
    print(json.dumps({**decode_agreement(), **engines()}))
    sys.stdout.flush()
