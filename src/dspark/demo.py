"""The README's demo: lossless speculative generation with a real trained pair, τ and per-position acceptance.

Until the shipped SmolLM2-135M-Instruct draft exists, the embedded default is the testbed: a small Qwen3 trained
here on the Python standard library and a DSpark draft trained against it with dspark's own pipeline (both cached;
a fresh machine trains them first, about 3 minutes on 2 cores). Prompts come from held-out stdlib files; the demo
checks that the speculative output equals plain greedy decoding of the same target, token for token.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dspark.config import GenerationConfig
from dspark.engine.generate import generate
from dspark.engine.stats import GenerationStats


@dataclass(frozen=True)
class DemoResult:
    stats: GenerationStats
    speculative_tokens_per_s: float
    plain_tokens_per_s: float
    lossless: bool
    block_size: int
    prompts: int


def run_demo(prompts: int = 8, max_new_tokens: int = 64,
             on_stage: Callable[[str], None] = lambda message: None) -> DemoResult:
    from dspark import Target, load_draft
    from dspark.testbed.draft_build import DraftRecipe, build_draft, heldout_or_train_examples
    from dspark.testbed.target_build import build_target, load_target

    on_stage("testbed target (trained on the Python standard library; cached after the first run)")
    target_dir = build_target()
    on_stage("DSpark draft for it (regenerated data + training; cached after the first run)")
    draft_dir = build_draft(target_dir, DraftRecipe(), progress=False)
    model, _ = load_target(target_dir)
    draft = load_draft(draft_dir)
    target = Target(model, draft.config.target_layer_ids)
    _, examples = heldout_or_train_examples(target_dir, "heldout", prompts, 48, 0)
    config = GenerationConfig(max_new_tokens=max_new_tokens)
    stats, lossless, spec_s, plain_s, n = None, True, 0.0, 0.0, 0
    on_stage(f"generating from {len(examples)} held-out prompts (speculative, then plain, same target)")
    for example in examples:
        spec = generate(target, draft, list(example.prompt_ids), config)
        plain = generate(target, None, list(example.prompt_ids), config)
        lossless &= spec.tokens == plain.tokens
        stats = spec.stats if stats is None else stats.merge(spec.stats)
        spec_s, plain_s, n = spec_s + spec.seconds, plain_s + plain.seconds, n + len(spec.tokens)
    return DemoResult(stats, n / spec_s, n / plain_s, lossless, draft.config.num_draft_tokens, len(examples))
