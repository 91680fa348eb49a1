"""How far the static target's forward is from the HF target's, over a prefill per row and ragged verify steps (shared by
tests/test_batch_engine.py and, under Triton's interpreter, tests/kernels/interpreted_checks.py)."""
from __future__ import annotations

import torch

from dspark.engine.static_target import StaticTarget
from dspark.model.target import Target


def static_target_differences(model: torch.nn.Module, layer_ids: tuple[int, ...], prompts: list[list[int]],
                              rows: list[int], steps: int, width: int, max_length: int) -> tuple[float, float]:
    """Each prompt prefilled into its cache row (rows not in order exercise row indexing), then `steps` verify steps
    of `width` random tokens per row, keeping a random 1 … width of them (the rest stays stale in the static cache,
    and is cropped from the HF reference) -> the largest |static − HF| over logits and over features."""
    static = StaticTarget(Target(model, layer_ids), max_batch=max(rows) + 1, max_length=max_length)
    references = [Target(model, layer_ids) for _ in prompts]
    logit_gap = feature_gap = 0.0

    def compare(got: tuple[torch.Tensor, torch.Tensor], expected) -> None:
        nonlocal logit_gap, feature_gap
        logit_gap = max(logit_gap, float((got[0] - expected.logits).abs().max()))
        feature_gap = max(feature_gap, float((got[1] - expected.features).abs().max()))

    for row, prompt, ref in zip(rows, prompts, references):
        compare(static.forward(torch.tensor([prompt]), torch.tensor([0]), torch.tensor([row])),
                ref.forward(torch.tensor([prompt])))
    start = [len(p) for p in prompts]
    vocab = int(model.config.vocab_size)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        block = torch.randint(0, vocab, (len(prompts), width), generator=gen)  # [B, T]
        logits, features = static.forward(block, torch.tensor(start), torch.tensor(rows))
        for b, ref in enumerate(references):
            compare((logits[b : b + 1], features[b : b + 1]), ref.forward(block[b : b + 1]))
            kept = int(torch.randint(1, width + 1, (1,), generator=gen))  # ragged acceptance
            ref.crop(ref.cache_length - (width - kept))
            start[b] += kept
    return logit_gap, feature_gap
