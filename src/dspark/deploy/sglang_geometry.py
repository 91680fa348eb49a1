"""How many tokens one SGLang verify pass processes, and how many requests run at once.

Resolves the verify width the way `python/sglang/srt/arg_groups/speculative_hook.py` does:
DSPARK: gamma from --speculative-dspark-block-size, else --speculative-num-draft-tokens - 1, else the
draft's block_size, else DEFAULT_DSPARK_GAMMA (7); width = gamma + 1. DFLASH: the block size
(--speculative-dflash-block-size, --speculative-num-draft-tokens, the draft's, else 16). EAGLE family:
--speculative-num-draft-tokens, else steps + 1, else the auto default 4. NGRAM: 12 by default.
Pure arithmetic over a parsed command; no judgement.
"""
from __future__ import annotations

from dspark.deploy.checkpoint_facts import DraftFacts
from dspark.deploy.cmdline import LaunchCommand
from dspark.deploy.engine_flags import (
    SGLANG_DEFAULT_DFLASH_BLOCK,
    SGLANG_DEFAULT_DSPARK_GAMMA,
    SGLANG_SPEC_DEFAULT_MAX_RUNNING,
)


def dspark_gamma(cmd: LaunchCommand, draft: DraftFacts | None) -> int:
    """The gamma (drafts per round) SGLang's DSPARK handler resolves for this command."""
    block = cmd.get_int("speculative-dspark-block-size")
    if block is not None:
        return block
    if draft is not None and draft.block_size:
        return draft.block_size
    tokens = cmd.get_int("speculative-num-draft-tokens")
    if tokens is not None:
        return tokens - 1
    return SGLANG_DEFAULT_DSPARK_GAMMA


def verify_width(cmd: LaunchCommand, draft: DraftFacts | None) -> int | None:
    """Tokens per request in one verify pass (anchor + drafts); None without speculation."""
    algo = (cmd.get("speculative-algorithm") or "").upper()
    tokens = cmd.get_int("speculative-num-draft-tokens")
    if algo == "DSPARK":
        return dspark_gamma(cmd, draft) + 1
    if algo == "DFLASH":
        block = cmd.get_int("speculative-dflash-block-size") or tokens
        return block or (draft.block_size if draft and draft.block_size else SGLANG_DEFAULT_DFLASH_BLOCK)
    if algo in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "FROZEN_KV_MTP"):
        steps = cmd.get_int("speculative-num-steps")
        return tokens or (steps + 1 if steps else 4)
    if algo == "NGRAM":
        return tokens or 12
    return tokens if algo else None


def max_running(cmd: LaunchCommand, speculative: bool) -> int | None:
    """--max-running-requests, or the 48 SGLang substitutes under speculation, or None (memory-derived)."""
    value = cmd.get_int("max-running-requests")
    if value is not None:
        return value
    return SGLANG_SPEC_DEFAULT_MAX_RUNNING if speculative else None
