"""`dspark.generate` / `dspark.generate_stream`: one prompt through a one-row `BatchEngine`.

The engine's loop is the only one (batch.py): these functions size an engine for the request, open a session, and
yield the tokens each round commits. They stop at the target's EOS by default (GenerationConfig.eos_token_ids None),
as HF `generate` does. Keep a `BatchEngine` yourself to serve many requests without rebuilding its caches.
"""
from __future__ import annotations

import time
from typing import Iterator, Sequence

import torch

from dspark.config import GenerationConfig
from dspark.engine.batch import engine_for
from dspark.engine.schedule import Scheduling
from dspark.engine.stats import GenerationResult, StatsRecorder
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target


def _prompt_ids(input_ids: Sequence[int] | torch.Tensor) -> list[int]:
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    if ids.dim() == 2:
        if ids.shape[0] != 1:
            raise ValueError(f"generate takes one sequence; got a batch of {ids.shape[0]} (use BatchEngine.generate)")
        ids = ids[0]
    if ids.dim() != 1 or ids.numel() == 0:
        raise ValueError("input_ids must be a non-empty sequence of token ids")
    return ids.tolist()


def generate_stream(target: Target, draft: DSparkDraft | None, input_ids: Sequence[int] | torch.Tensor,
                    config: GenerationConfig = GenerationConfig(), recorder: StatsRecorder | None = None,
                    calibration: torch.Tensor | None = None, scheduling: Scheduling | None = None) -> Iterator[int]:
    """Yield new tokens as rounds commit them. `recorder` collects per-round acceptance. `scheduling`: how many drafts
    each round verifies, e.g. `Scheduling("algorithm1", table, plain={1: steps_per_s})` with a draft that has a
    confidence head (tables from `BatchEngine.measure_step_costs`; with plain decoding's step rate a round drafts
    nothing where plain decoding is expected to be faster); None: config.confidence_threshold may cut them."""
    prompt = _prompt_ids(input_ids)
    engine = engine_for(target, draft if config.max_drafts != 0 else None, [prompt], config.max_new_tokens,
                        max_batch=1, cuda_graphs=False)  # a capture per call would cost more than it saves
    session = engine.open(config, scheduling, calibration)
    session.add(0, prompt, config.max_new_tokens, recorder=recorder)
    while not session.idle:
        for update in session.step():
            yield from update.tokens
    session.release(0)


def generate(target: Target, draft: DSparkDraft | None, input_ids: Sequence[int] | torch.Tensor,
             config: GenerationConfig = GenerationConfig(), calibration: torch.Tensor | None = None,
             scheduling: Scheduling | None = None) -> GenerationResult:
    """The whole generation of one prompt: new tokens, acceptance stats and wall time (`generate_stream`)."""
    recorder = StatsRecorder()
    began = time.perf_counter()
    tokens = list(generate_stream(target, draft, input_ids, config, recorder, calibration, scheduling))
    return GenerationResult(tokens, recorder.freeze(), time.perf_counter() - began)
