"""`dspark import SRC OUT`: read a draft in any supported layout and write dspark's native folder.

The layout is detected from config.json (DeepSpec Qwen3DSparkModel, SpecForge DSparkDraftModel, z-lab
DFlashDraftModel, vLLM speculators); a checkpoint whose conventions are ambiguous (layer-id base, anchor layout,
mask token, block size) is refused with a message naming the field. Parsing and printing only; the conversion is
`dspark.formats.convert.import_draft`. Exit status 0 on success, 2 when the checkpoint cannot be imported.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", help="draft folder (or its config.json) in a supported layout")
    parser.add_argument("out", help="output folder for the native checkpoint")
    parser.add_argument("--target", type=Path, help="target model folder, for layouts that do not store "
                                                    "num_target_layers (speculators)")
    parser.add_argument("--drop-embeddings", action="store_true",
                        help="leave out stored copies of the target's embed_tokens / lm_head")
    parser.add_argument("--force", action="store_true", help="overwrite a checkpoint already in OUT")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from dspark.cli.convert_output import print_report
    from dspark.config import ConfigError
    from dspark.formats.checkpoint import ConvertOptions
    from dspark.formats.convert import import_draft
    from dspark.formats.native import CheckpointError

    options = ConvertOptions(target=args.target, drop_embeddings=args.drop_embeddings)
    try:
        report = import_draft(args.src, args.out, options, overwrite=args.force)
    except (CheckpointError, ConfigError) as err:
        print(f"dspark import: error: {err}", file=sys.stderr)
        return 2
    print_report(report, f"imported {args.src} ({report.source_layout}) → {args.out}", args.json)
    return 0
