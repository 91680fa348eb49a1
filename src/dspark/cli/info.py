"""`dspark info PRESET|DRAFT_DIR`: a draft's architecture, parameter count (meta device) and weight bytes."""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    from dspark.config import PRESETS

    parser.add_argument("draft", help=f"a preset ({', '.join(PRESETS)}) or a draft folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from dspark.config import ConfigError, preset
    from dspark.formats.native import CheckpointError, config_to_dict, read_config
    from dspark.model.summary import summarize

    try:
        config = read_config(args.draft) if Path(args.draft).is_dir() else preset(args.draft)
    except (ConfigError, CheckpointError) as err:
        print(f"error: {err}")
        return 2
    summary = summarize(config)
    if args.json:
        print(json.dumps({"config": config_to_dict(config), **asdict(summary)}))
        return 0
    table = Table(title=f"DSpark draft: {args.draft}", show_header=False)
    rows = [
        ("layers", f"{config.num_hidden_layers} × Qwen3 KV-injection ({config.num_attention_heads} Q / "
                   f"{config.num_key_value_heads} KV heads, head_dim {config.head_dim})"),
        ("hidden / FFN", f"{config.hidden_size} / {config.intermediate_size} (SwiGLU)"),
        ("mode", f"{config.mode}: block {config.block_size}, proposes {config.num_draft_tokens} tokens, "
                 f"verifies {config.num_draft_tokens + 1}"),
        ("target layers", f"{list(config.target_layer_ids)} of {config.num_target_layers} (HF ids)"),
        ("vocab / mask token", f"{config.vocab_size} / {config.mask_token_id}"),
        ("Markov head", f"{config.markov_head_type}, rank {config.markov_rank}" if config.markov_rank else "none"),
        ("confidence head", ("with Markov feature" if config.confidence_head_with_markov else "on")
         if config.enable_confidence_head else "none"),
        ("RoPE", f"{config.rope.rope_type}, θ {config.rope.rope_theta:g}"
                 + (f", ×{config.rope.factor:g} over {config.rope.original_max_position_embeddings:,}"
                    if config.rope.rope_type == "yarn" else "")
                 + f" → {config.max_position_embeddings:,} positions"),
        ("parameters", f"{summary.parameters:,} (embedding / LM head shared with the target, not counted)"),
        ("bf16 weights", f"{summary.bf16_weight_bytes:,} bytes ({summary.bf16_weight_bytes / 1e9:.3f} GB)"),
        ("draft KV per token", f"{summary.kv_bytes_per_token_bf16:,} bytes in bf16"),
    ]
    rows += [(f"  {part}", f"{n:,}") for part, n in summary.parameters_by_part.items()]
    for key, value in rows:
        table.add_row(key, value)
    Console().print(table)
    return 0
