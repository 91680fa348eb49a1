"""How far the static target's forward is from the HF target's, over a prefill per row and ragged verify steps (shared by
tests/test_batch_engine.py and, under Triton's interpreter, tests/kernels/interpreted_checks.py)."""
from __future__ import annotations

import torch

from dspark.engine.static_target import StaticTarget
from dspark.model.target import Target


def static_target_differences(model: torch.nn.Module, layer_ids: tuple[int, ...], prompts: list[list[int]],
                              rows: list[int], steps: int, width: int, max_length: int,
                              ragged: bool = False) -> tuple[float, float]:
    """Each prompt prefilled into its cache row (rows not in order exercise row indexing), then `steps` verify steps
    of `width` random tokens per row, keeping a random 1 … width of them (the rest stays stale in the static cache,
    and is cropped from the HF reference) -> the largest |static − HF| over logits and over features. `ragged`: the
    static forward computes only the kept slots of each row (the rest are zero-filled and must not matter)."""
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
        kept = torch.randint(1, width + 1, (len(prompts),), generator=gen)  # [B] ragged acceptance
        tokens = (torch.arange(width)[None] < kept[:, None]).flatten().nonzero()[:, 0] if ragged else None
        logits, features = static.forward(block, torch.tensor(start), torch.tensor(rows), tokens=tokens)
        for b, ref in enumerate(references):
            n = int(kept[b])
            if ragged:  # only the kept slots were computed
                compare((logits[b : b + 1, :n], features[b : b + 1, :n]), ref.forward(block[b : b + 1, :n]))
            else:
                compare((logits[b : b + 1], features[b : b + 1]), ref.forward(block[b : b + 1]))
                ref.crop(ref.cache_length - (width - n))
            start[b] += n
    return logit_gap, feature_gap
