"""How far the static target's forward is from the Hugging Face backend's, over a prefill per row and verify steps
(shared by tests/test_batch_engine.py and, under Triton's interpreter, tests/kernels/interpreted_checks.py)."""
from __future__ import annotations

import torch

from dspark.engine.hf_backend import HFBackend
from dspark.engine.static_target import StaticTarget
from dspark.model.target import Target


def static_target_differences(model: torch.nn.Module, layer_ids: tuple[int, ...], prompts: list[list[int]],
                              rows: list[int], steps: int, width: int, max_length: int) -> tuple[float, float]:
    """Each prompt prefilled into its cache row (rows not in order exercise row indexing), then `steps` verify steps
    of `width` random tokens per row, keeping a random 1 … width of them (the rest stays stale in the static cache,
    and is cropped by the HF backend) -> the largest |static − HF| over logits and over features."""
    static = StaticTarget(Target(model, layer_ids), max_batch=max(rows) + 1, max_length=max_length)
    reference = HFBackend(Target(model, layer_ids), max_batch=max(rows) + 1, max_length=max_length)
    logit_gap = feature_gap = 0.0

    def compare(*args: torch.Tensor) -> None:
        nonlocal logit_gap, feature_gap
        got, expected = static.forward(*args), reference.forward(*args)
        logit_gap = max(logit_gap, float((got[0] - expected[0]).abs().max()))
        feature_gap = max(feature_gap, float((got[1] - expected[1]).abs().max()))

    for row, prompt in zip(rows, prompts):
        compare(torch.tensor([prompt]), torch.tensor([0]), torch.tensor([row]))
    start = [len(p) for p in prompts]
    vocab = int(model.config.vocab_size)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        block = torch.randint(0, vocab, (len(prompts), width), generator=gen)  # [B, T]
        compare(block, torch.tensor(start), torch.tensor(rows))
        kept = torch.randint(1, width + 1, (len(prompts),), generator=gen)  # [B] each row's acceptance
        start = [s + int(k) for s, k in zip(start, kept)]
    return logit_gap, feature_gap
