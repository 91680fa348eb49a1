"""Printing a checkpoint conversion report for `dspark export` / `dspark import`: a table, or one JSON object."""
from __future__ import annotations

import json


def print_report(report, title: str, as_json: bool) -> None:
    """`report` is a `dspark.formats.convert.ConversionReport`."""
    if as_json:
        print(json.dumps(report.to_dict()))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_header=False)
    rows = [
        ("layout", f"{report.source_layout} → {report.layout}"),
        ("mode", f"{report.mode}: block {report.block_size}, proposes {report.num_draft_tokens} tokens per round"),
        ("target layers", f"{list(report.target_layer_ids)} (HF ids; vLLM aux ids "
                          f"{[i + 1 for i in report.target_layer_ids]})"),
        ("mask token", str(report.mask_token_id)),
        ("tensors", f"{report.tensors} ({report.parameters:,} draft parameters, {report.dtype}, "
                    f"{'with' if report.embeddings else 'without'} the target's embedding / LM head)"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    Console().print(table)
