"""Doctor rules for SGLang's DSPARK and DFLASH algorithms: verify width, block size, SPS table,
ragged-verify mode, and DP attention.

All behaviour cited is in SGLang `python/sglang/srt/arg_groups/speculative_hook.py` (`_handle_dspark`,
`_handle_dflash`) and the `--speculative-dspark-*` help texts in `python/sglang/srt/server_args.py`.
"""
from __future__ import annotations

from dspark.deploy.doctor_context import DoctorContext
from dspark.deploy.engine_flags import SGLANG_RAGGED_VERIFY_ENV
from dspark.deploy.findings import ERROR, WARNING, Finding, Rule
from dspark.deploy.sglang_geometry import dspark_gamma

HOOK = "SGLang python/sglang/srt/arg_groups/speculative_hook.py"
ARGS = "SGLang python/sglang/srt/server_args.py"

NUM_DRAFT_TOKENS = Rule(
    "SG-DSPARK-NUM-DRAFT-TOKENS", ERROR, "--speculative-num-draft-tokens is not gamma + 1",
    f"{HOOK} `_handle_dspark`: 'DSpark speculative_num_draft_tokens must equal gamma + 1' (startup ValueError); "
    "gamma comes from --speculative-dspark-block-size, else the draft checkpoint, else DEFAULT_DSPARK_GAMMA = 7.")
BLOCK_SIZE = Rule(
    "SG-DSPARK-BLOCK-SIZE", ERROR, "block size differs from the draft's",
    f"{HOOK} `_handle_dspark` takes gamma from --speculative-dspark-block-size before the draft checkpoint, so a "
    "different value overrides what the draft was trained for: positions past its block are untrained "
    "(acceptance falls) and a smaller block wastes the draft.")
NO_SPS = Rule(
    "SG-DSPARK-NO-SPS-TABLE", WARNING, "no SPS cost table: DSPARK verifies every draft",
    f"{ARGS} --speculative-dspark-sps-table-path help: without it the scheduler has 'an uninitialized flat "
    "constant-SPS table: the budget degenerates to verify-all (zero throughput gain by itself)'.")
SPS_STATIC = Rule(
    "SG-DSPARK-SPS-TABLE-NOOP", WARNING, "SPS table ignored under static ragged verify",
    f"{HOOK} `_handle_dspark`: with {SGLANG_RAGGED_VERIFY_ENV}=static the ragged-verify budget scheduler is off "
    "and --speculative-dspark-sps-table-path 'will be a no-op' (warning only).")
GRAPH_TIER = Rule(
    "SG-DSPARK-GRAPH-TIER-NOOP", WARNING, "graph-tier alignment without compact ragged mode",
    f"{HOOK} `_handle_dspark`: --speculative-dspark-align-verify-tokens-to-graph-tier 'only takes effect with "
    f"{SGLANG_RAGGED_VERIFY_ENV}=compact'; otherwise it is a no-op with a warning.")
DSPARK_DP = Rule(
    "SG-DSPARK-DP-ATTENTION", ERROR, "DSPARK with DP attention is missing its requirements",
    f"{HOOK} `_handle_dspark`: with --enable-dp-attention and dp_size > 1, DSpark requires --enable-dp-lm-head, "
    "moe_a2a_backend 'none' (non-NPU) and attn_cp_size == 1 (startup ValueError otherwise).")
DFLASH_DP = Rule(
    "SG-DFLASH-DP-ATTENTION", ERROR, "DFLASH with DP attention",
    f"{HOOK} `_handle_dflash`: 'Currently DFLASH speculative decoding does not support dp attention' (startup error).")
DFLASH_BLOCK = Rule(
    "SG-DFLASH-BLOCK-SIZE", ERROR, "DFLASH block size inconsistent",
    f"{HOOK} `_handle_dflash`: --speculative-num-draft-tokens and --speculative-dflash-block-size must match "
    "(startup error); a block size other than the draft's overrides the draft config.")

RULES = (NUM_DRAFT_TOKENS, BLOCK_SIZE, NO_SPS, SPS_STATIC, GRAPH_TIER, DSPARK_DP, DFLASH_DP, DFLASH_BLOCK)


def _ragged_mode(ctx: DoctorContext) -> str | None:
    mode = ctx.command.env.get(SGLANG_RAGGED_VERIFY_ENV)
    return mode.lower() if mode else None


def _dspark(ctx: DoctorContext) -> list[Finding]:
    cmd, draft = ctx.command, ctx.draft
    out: list[Finding] = []
    gamma = dspark_gamma(cmd, draft)
    tokens = cmd.get_int("speculative-num-draft-tokens")
    if tokens is not None and tokens != gamma + 1:
        out.append(NUM_DRAFT_TOKENS.fire(
            f"the server refuses to start: gamma is {gamma}, so --speculative-num-draft-tokens must be {gamma + 1}",
            f"set --speculative-num-draft-tokens {gamma + 1} (or drop it; SGLang derives it from gamma)",
            f"--speculative-num-draft-tokens {tokens}, gamma {gamma}"))
    block = cmd.get_int("speculative-dspark-block-size")
    if block is not None and draft is not None and draft.block_size and block != draft.block_size:
        effect = ("positions beyond its trained block are guesses: acceptance drops" if block > draft.block_size
                  else "part of the draft's block is thrown away")
        out.append(BLOCK_SIZE.fire(
            f"the draft was trained with block {draft.block_size} but runs with {block}: {effect}",
            f"set --speculative-dspark-block-size {draft.block_size} and --speculative-num-draft-tokens "
            f"{draft.block_size + 1}",
            f"--speculative-dspark-block-size {block}, draft block_size {draft.block_size}"))
    mode = _ragged_mode(ctx)
    table = cmd.get("speculative-dspark-sps-table-path")
    if not table:
        out.append(NO_SPS.fire(
            "every round verifies the full block: no confidence scheduling, so no throughput gain from it under load",
            "profile a table with `python -m sglang.benchmark.dspark_sps_profiler`, pass "
            f"--speculative-dspark-sps-table-path FILE and set {SGLANG_RAGGED_VERIFY_ENV}=compact",
            "no --speculative-dspark-sps-table-path"))
    elif mode == "static":
        out.append(SPS_STATIC.fire(
            "the SPS table is loaded but never used: verification stays full-block",
            f"set {SGLANG_RAGGED_VERIFY_ENV}=compact (or cap-accept)",
            f"{SGLANG_RAGGED_VERIFY_ENV}=static with --speculative-dspark-sps-table-path {table}"))
    if cmd.switch("speculative-dspark-align-verify-tokens-to-graph-tier") and mode != "compact":
        out.append(GRAPH_TIER.fire(
            "verify lengths are not aligned to CUDA-graph tiers; the flag does nothing",
            f"set {SGLANG_RAGGED_VERIFY_ENV}=compact, or drop the flag",
            f"{SGLANG_RAGGED_VERIFY_ENV}={mode or '(unset)'}"))
    dp = cmd.get_int("dp-size") or 1
    if cmd.switch("enable-dp-attention") and dp > 1:
        missing = []
        if not cmd.switch("enable-dp-lm-head"):
            missing.append("--enable-dp-lm-head")
        if (cmd.get("moe-a2a-backend") or "none") != "none":
            missing.append(f"--moe-a2a-backend none (got {cmd.get('moe-a2a-backend')})")
        if (cmd.get_int("attn-cp-size") or 1) > 1:
            missing.append("--attn-cp-size 1")
        if missing:
            out.append(DSPARK_DP.fire(
                "the server refuses to start: DSPARK with DP attention needs " + ", ".join(missing),
                "add " + ", ".join(missing) + ", or drop --enable-dp-attention",
                f"--enable-dp-attention --dp-size {dp}"))
    return out


def _dflash(ctx: DoctorContext) -> list[Finding]:
    cmd, draft = ctx.command, ctx.draft
    out: list[Finding] = []
    if cmd.switch("enable-dp-attention"):
        out.append(DFLASH_DP.fire(
            "the server refuses to start", "drop --enable-dp-attention (use TP/DCP) for DFLASH",
            "--speculative-algorithm DFLASH --enable-dp-attention"))
    block = cmd.get_int("speculative-dflash-block-size")
    tokens = cmd.get_int("speculative-num-draft-tokens")
    if block is not None and tokens is not None and block != tokens:
        out.append(DFLASH_BLOCK.fire(
            f"the server refuses to start: block size {block} != num draft tokens {tokens}",
            "give only --speculative-dflash-block-size", f"{block} vs {tokens}"))
    running = block or tokens
    if running is not None and draft is not None and draft.block_size and running != draft.block_size:
        out.append(DFLASH_BLOCK.fire(
            f"the DFLASH draft was trained with block {draft.block_size} but runs with {running}",
            f"set --speculative-dflash-block-size {draft.block_size}",
            f"engine block {running}, draft block_size {draft.block_size}"))
    return out


def check(ctx: DoctorContext) -> list[Finding]:
    """DSPARK / DFLASH rules for SGLang launches."""
    if ctx.engine != "sglang":
        return []
    if ctx.method == "dspark":
        return _dspark(ctx)
    if ctx.method == "dflash":
        return _dflash(ctx)
    return []
