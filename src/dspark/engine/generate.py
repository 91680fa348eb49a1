"""The speculative generation loop: prefill → draft → verify → accept → commit, as a token stream.

One verify round: the draft proposes a block after the anchor (the last committed token), the scheduler may cut it
(the confidence threshold, or Algorithm 1 with a measured round-cost table, `bench.round_profile.round_cost_table`),
the target scores [anchor, d_0 … d_{L−1}] in one pass, the accepted drafts and the target's bonus token are
committed, the target KV cache is cropped to the kept rows and their features extend the draft's context cache.
With drafting off (block_size 0, or no draft) the same loop is plain autoregressive decoding: L = 0 every round.
Batch 1; lossless: greedy output equals the target's own greedy decoding, sampled output follows its distribution.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from dspark.config import GenerationConfig
from dspark.engine.draft_step import DraftContextCache, propose
from dspark.engine.sampling import processed_probs, sample
from dspark.engine.schedule import (
    StepCostTable,
    schedule_prefixes,
    survival,
    threshold_length,
)
from dspark.engine.stats import GenerationStats, StatsRecorder
from dspark.engine.verify import Verdict, verify_greedy, verify_sampling
from dspark.model.draft import DSparkDraft
from dspark.model.target import Target


@dataclass(frozen=True)
class GenerationResult:
    tokens: list[int]  # new tokens only
    stats: GenerationStats
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds > 0 else 0.0


def _prompt_ids(input_ids: Sequence[int] | torch.Tensor, device: torch.device) -> torch.Tensor:
    ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)
    if ids.dim() == 2:
        if ids.shape[0] != 1:
            raise ValueError(f"generate takes one sequence; got a batch of {ids.shape[0]}")
        ids = ids[0]
    if ids.dim() != 1 or ids.numel() == 0:
        raise ValueError("input_ids must be a non-empty sequence of token ids")
    return ids[None]  # [1, P]


def _drafts_per_round(draft: DSparkDraft | None, config: GenerationConfig) -> int:
    if draft is None or config.block_size == 0:
        return 0
    available = draft.config.num_draft_tokens
    if config.block_size is None:
        return available
    if config.block_size > available:
        raise ValueError(f"block_size {config.block_size} exceeds what the draft proposes per block ({available})")
    return config.block_size


def prepare_pair(target: Target, draft: DSparkDraft) -> None:
    """Check that the pair fits and give the draft the target's embedding / LM head if it has none of its own."""
    target.check_draft(draft.config)
    if draft.embed_tokens is None:
        draft.tie_embeddings(target.embed_tokens, target.lm_head)


def generate_stream(target: Target, draft: DSparkDraft | None, input_ids: Sequence[int] | torch.Tensor,
                    config: GenerationConfig = GenerationConfig(), recorder: StatsRecorder | None = None,
                    calibration: torch.Tensor | None = None, cost: StepCostTable | None = None) -> Iterator[int]:
    """Yield new tokens one by one as they are committed. `recorder` collects per-round acceptance. With `cost` (a
    round-cost table, `round_cost_table`) and a confidence head, Algorithm 1 picks how many drafts to verify."""
    recorder = recorder if recorder is not None else StatsRecorder()
    prompt = _prompt_ids(input_ids, target.device)  # [1, P]
    gamma = _drafts_per_round(draft, config)
    if calibration is None and draft is not None:
        calibration = getattr(draft, "sts_temperatures", None)
    if gamma:
        prepare_pair(target, draft)
        limit = draft.config.max_position_embeddings
        if prompt.shape[1] + config.max_new_tokens + gamma > limit:
            raise ValueError(
                f"prompt ({prompt.shape[1]}) + max_new_tokens ({config.max_new_tokens}) runs past the draft's "
                f"{limit} positions; shorten the request or use a draft with a longer (YaRN) range")
    recorder.prompt_tokens += prompt.shape[1]
    if config.max_new_tokens == 0:
        return
    generator = torch.Generator(device=target.device)
    generator.manual_seed(config.seed if config.seed is not None else int(torch.randint(2**62, (1,))))
    eos = set(config.eos_token_ids)

    def pick(logits: torch.Tensor) -> int:  # the target's own choice from one row of logits [V]
        return int(logits.argmax()) if config.greedy else int(sample(processed_probs(logits, config), generator))

    target.reset()
    out = target.forward(prompt)
    context = DraftContextCache(draft) if gamma else None
    pending = [out.features]  # verified target features [1, n, m·d] not yet in the draft's context cache
    anchor = pick(out.logits[0, -1])
    emitted = 1
    recorder.new_tokens += 1
    yield anchor
    while anchor not in eos and emitted < config.max_new_tokens:
        room = config.max_new_tokens - emitted - 1  # drafts we may still commit besides the bonus
        drafts = torch.empty(0, dtype=torch.long, device=target.device)
        proposal = None
        if gamma and room > 0:
            context.extend(torch.cat(pending, dim=1))
            pending.clear()
            proposal = propose(draft, context, anchor, config, generator)
            length = min(gamma, room)
            if cost is not None and proposal.confidence_logits is not None:
                alive = survival(proposal.confidence_logits[:length], calibration)[None]  # [1, L]
                length = schedule_prefixes(alive, cost)[0]
            elif config.confidence_threshold > 0 and proposal.confidence_logits is not None:
                length = min(length, threshold_length(proposal.confidence_logits, config.confidence_threshold,
                                                      calibration))
            drafts = proposal.tokens[:length].to(target.device)
        block = torch.cat([torch.tensor([anchor], device=target.device), drafts])[None]  # [1, L+1]
        verified = target.forward(block)
        logits = verified.logits[0]  # [L+1, V]
        if config.greedy:
            verdict = verify_greedy(drafts, logits)
        elif drafts.numel():
            verdict = verify_sampling(drafts, proposal.probs[: drafts.numel()].to(logits.device),
                                      processed_probs(logits, config), generator)
        else:
            verdict = Verdict(0, pick(logits[0]))
        committed = [*drafts[: verdict.accepted].tolist(), verdict.bonus]
        stop = next((i for i, token in enumerate(committed) if token in eos), None)
        if stop is not None:
            committed = committed[: stop + 1]  # an accepted EOS ends the sequence; nothing after it counts
        recorder.record(drafts.numel(), len(committed) - 1,
                        None if proposal is None else proposal.confidence_logits)
        kept = verdict.accepted + 1  # rows [anchor, d_0 … d_{a−1}] stay in the target cache
        target.crop(target.cache_length - (block.shape[1] - kept))
        if context is not None:
            pending.append(verified.features[:, :kept])
        for token in committed:
            emitted += 1
            recorder.new_tokens += 1
            yield token
        anchor = committed[-1]


def generate(target: Target, draft: DSparkDraft | None, input_ids: Sequence[int] | torch.Tensor,
             config: GenerationConfig = GenerationConfig(), calibration: torch.Tensor | None = None,
             cost: StepCostTable | None = None) -> GenerationResult:
    """Collect the whole generation: new tokens, acceptance stats and wall time."""
    recorder = StatsRecorder()
    began = time.perf_counter()
    tokens = list(generate_stream(target, draft, input_ids, config, recorder, calibration, cost))
    return GenerationResult(tokens, recorder.freeze(), time.perf_counter() - began)
