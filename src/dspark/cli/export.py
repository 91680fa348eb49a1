"""`dspark export SRC OUT --layout L`: write a draft in the layout an engine or tool loads.

Layouts: deepspec (Qwen3DSparkModel: DeepSpec, SGLang DSPARK, vLLM dspark, TensorRT-LLM), specforge
(DSparkDraftModel), speculators (vLLM speculators), dflash (DFlashDraftModel: the dflash package, vLLM dflash; for
DFlash-mode drafts), native. Parsing and printing only; the conversion is `dspark.formats.convert.export_draft`.
Exit status 0 on success, 2 when the draft cannot be exported (the message says what to do).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
examples:
  dspark export ./my-draft ./my-draft-deepspec --layout deepspec --target ./Qwen3-8B
  dspark export ./my-draft ./my-draft-speculators --layout speculators --target ./Qwen3-8B
  dspark export ./my-dflash-draft ./out --layout dflash
  dspark export ./my-draft ./my-draft-int8 --layout native --int8     # smaller, to ship
"""


def register(parser: argparse.ArgumentParser) -> None:
    from dspark.formats.checkpoint import LAYOUTS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("src", help="draft folder in any supported layout (native, deepspec, specforge, "
                                    "speculators, dflash)")
    parser.add_argument("out", help="output folder (created; must not already hold a checkpoint unless --force)")
    parser.add_argument("--layout", required=True, choices=LAYOUTS, help="layout to write")
    parser.add_argument("--target", type=Path, help="target model folder: the embedding / LM head DeepSpec exports "
                                                    "carry, the verifier speculators records, num_target_layers")
    parser.add_argument("--verifier", help="verifier name_or_path to record in a speculators export")
    parser.add_argument("--num-anchors", type=int, help="DeepSpec num_anchors to write (default: kept, else 512)")
    parser.add_argument("--int8", action="store_true", help="native layout only: store matrices as int8 with "
                        "per-row scales (~1.9× smaller than bf16; read back in the original dtype)")
    parser.add_argument("--force", action="store_true", help="overwrite a checkpoint already in OUT")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from dspark.cli.convert_output import print_report
    from dspark.config import ConfigError
    from dspark.formats.checkpoint import ConvertOptions
    from dspark.formats.convert import export_draft
    from dspark.formats.native import CheckpointError

    options = ConvertOptions(target=args.target, verifier=args.verifier, num_anchors=args.num_anchors, int8=args.int8)
    try:
        report = export_draft(args.src, args.out, args.layout, options, overwrite=args.force)
    except (CheckpointError, ConfigError) as err:
        print(f"dspark export: error: {err}", file=sys.stderr)
        return 2
    print_report(report, f"exported {args.src} → {args.out} ({args.layout})", args.json)
    return 0
