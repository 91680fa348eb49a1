"""dflash (PyPI, z-lab's reference) loads our DFlash-layout export with its `DFlashDraftModel` and its
`dflash_generate` produces the same greedy tokens, round by round, as dspark's engine.

Run in the peers venv after tiny_pair.py: `$PEERS_VENV/bin/python benchmarks/integration/check_dflash.py
--work DIR`. The export is made with `dspark export --layout dflash`; the reference loads it with
`DFlashDraftModel.from_pretrained` and generates against the same target folder. A forward pre-hook on the target
(it observes, changes nothing) records each block dflash verifies, from which its per-round acceptance lengths
follow; they must equal dspark's (ours.json) for every round but the last, which dspark caps at max_new_tokens
while dflash verifies a full block. Prints a table, then one JSON line.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import dspark_cli, record  # noqa: E402


def _acceptance_from_blocks(blocks: list[list[int]], output: list[int], prompt_len: int) -> list[int]:
    """τ per verify round: 1 + the drafts that equal the committed tokens after the anchor."""
    taus, start = [], prompt_len
    for block in blocks:
        accepted = 0
        for k, token in enumerate(block[1:], start=1):
            if start + k < len(output) and output[start + k] == token:
                accepted += 1
            else:
                break
        taus.append(accepted + 1)
        start += accepted + 1
    return taus


def main(argv: list[str] | None = None) -> int:
    from importlib.metadata import version

    from dflash.model import DFlashDraftModel, dflash_generate
    from rich.console import Console
    from rich.table import Table
    from transformers import AutoModelForCausalLM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    began = time.time()
    work = args.work
    ours = json.loads((work / "ours.json").read_text())
    export = work / "draft-dflash-zlab"
    dspark_cli("export", str(work / "draft-dflash"), str(export), "--layout", "dflash", "--force")
    target = AutoModelForCausalLM.from_pretrained(work / "target", dtype=torch.float32).eval()
    draft = DFlashDraftModel.from_pretrained(export, dtype=torch.float32).eval()
    verified: list[list[int]] = []
    target.register_forward_pre_hook(lambda module, args, kwargs: verified.append(
        (kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0])[0].tolist()),
        with_kwargs=True)
    rows = []
    for run in ours["runs"]:
        prompt, new = run["prompt"], ours["max_new_tokens"]
        verified.clear()
        output = dflash_generate(draft, target, torch.tensor([prompt]), new, None, 0.0)[0].tolist()
        theirs_tokens = output[len(prompt):][:new]
        theirs_tau = _acceptance_from_blocks(verified[1:], output, len(prompt))  # [0] is the prefill
        mine_tau = run["acceptance_lengths"]
        rounds = len(mine_tau) - 1  # every round but dspark's capped last one
        rows.append({"prompt_len": len(prompt), "same_tokens": theirs_tokens == run["tokens"],
                     "rounds_dspark": len(mine_tau), "rounds_dflash": len(theirs_tau),
                     "same_acceptance_lengths": theirs_tau[:rounds] == mine_tau[:rounds],
                     "tau_dspark": mine_tau, "tau_dflash": theirs_tau})
    table = Table(title="z-lab dflash_generate vs dspark generate (greedy, same target, our DFlash export)")
    for column in ("prompt", "tokens", "rounds dspark / dflash", "τ per round (all but the last)", "mean τ dflash"):
        table.add_column(column)
    for i, row in enumerate(rows):
        table.add_row(str(i), "same" if row["same_tokens"] else "DIFFERENT",
                      f"{row['rounds_dspark']} / {row['rounds_dflash']}",
                      "same" if row["same_acceptance_lengths"] else "DIFFERENT",
                      f"{sum(row['tau_dflash']) / len(row['tau_dflash']):.3f}")
    Console().print(table)
    taus = [t for row in rows for t in row["tau_dflash"]]
    summary = {"check": "dflash", "dflash": version("dflash"), "torch": torch.__version__,
               "transformers": version("transformers"), "draft_class": type(draft).__name__,
               "draft_target_layer_ids": list(draft.target_layer_ids), "block_size": draft.block_size,
               "mean_acceptance_length_dflash": round(sum(taus) / len(taus), 3),
               "mean_acceptance_length_dspark": ours["mean_acceptance_length"], "prompts": rows,
               "passed": all(r["same_tokens"] and r["same_acceptance_lengths"] for r in rows),
               "seconds": round(time.time() - began, 1)}
    record("dflash", summary)
    print(json.dumps(summary))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
