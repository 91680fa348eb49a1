"""The README's demo: lossless speculative generation on the embedded default, with τ and per-position acceptance.

Today the embedded default is a tiny random target + draft built on the CPU (untrained, so τ is near 1: it shows
the machinery, not a speedup). It checks that the output equals plain greedy decoding of the same target.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from dspark.config import GenerationConfig
from dspark.engine.generate import generate
from dspark.engine.stats import GenerationStats
from dspark.model.target import Target
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target


@dataclass(frozen=True)
class DemoResult:
    stats: GenerationStats
    speculative_tokens_per_s: float
    plain_tokens_per_s: float
    lossless: bool
    block_size: int


def run_demo(prompts: int = 4, max_new_tokens: int = 48, seed: int = 0) -> DemoResult:
    torch.manual_seed(seed)
    model = tiny_target("qwen3", vocab_size=256, hidden_size=64, num_layers=4, seed=seed)
    config = draft_config_for(model, block_size=7)
    draft = random_draft(config, seed=seed)
    target = Target(model, config.target_layer_ids)
    gen = GenerationConfig(max_new_tokens=max_new_tokens)
    stats, lossless, spec_s, plain_s, n = None, True, 0.0, 0.0, 0
    for i in range(prompts):
        prompt = torch.randint(0, 256, (12 + 4 * i,)).tolist()
        spec = generate(target, draft, prompt, gen)
        plain = generate(target, None, prompt, gen)
        lossless &= spec.tokens == plain.tokens
        stats = spec.stats if stats is None else stats.merge(spec.stats)
        spec_s, plain_s, n = spec_s + spec.seconds, plain_s + plain.seconds, n + len(spec.tokens)
    return DemoResult(stats, n / spec_s, n / plain_s, lossless, config.num_draft_tokens)
