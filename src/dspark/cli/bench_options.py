"""What `dspark bench acceptance` and `dspark bench throughput` share: their options as data, turned back into the
command line recorded in the result file."""
from __future__ import annotations

import argparse
import shlex
from typing import Any

OptionsTable = tuple[tuple[tuple[str, ...], dict[str, Any]], ...]  # (flags, argparse options) per option


def command_line(subcommand: str, options_table: OptionsTable, args: argparse.Namespace) -> str:
    """`dspark bench SUBCOMMAND` with every option of `options_table` spelled out (defaults included), so the
    recorded command reproduces the run even if defaults change later. Progress flags are left out."""
    words = ["dspark", "bench", subcommand]
    for flags, options in options_table:
        value = getattr(args, flags[0].lstrip("-").replace("-", "_"))
        if value is None or value is False or flags[0] == "--no-progress":
            continue
        if value is True:
            words.append(flags[0])
        else:
            for item in value if isinstance(value, list) else [value]:
                words += [flags[0], str(item)]
    return shlex.join(words)
