"""Mix prompt sets into one training set, so many prompts of each kind from each pool (run 19: part of the prompts
runs 11-18 trained on, and prompts no draft had seen yet). Writes an xz-compressed JSONL that rides in a lease call.

Kinds: chat, stub, codeio, gsm (reasoning-gym's gsm_symbolic), func (a "write this function" request), code (a code
chunk to complete), math (the other reasoning-gym tasks). It reads and writes prompts only; it does not regenerate.

    python benchmarks/smollm2/mix_prompts.py --pool old stage_q/prompts.jsonl.xz \\
        --pool new /tmp/p19/fresh.jsonl /tmp/p19/fresh_math.jsonl \\
        --take old-chat=10000 old-stub=all old-codeio=all old-gsm=8000 old-func=3000 old-code=2000 \\
               new-func=all new-code=13000 new-gsm=all new-math=all --seed 19 --out stage_r19/prompts.jsonl.xz
"""
from __future__ import annotations

import argparse
import json
import lzma
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

from contamination import read_jsonl


def kind(record: dict) -> str:
    key = record["id"]
    if key.startswith("math-gsm_symbolic"):
        return "gsm"
    if key.startswith("code-"):
        return "func" if record["messages"][0]["content"].startswith("Write a Python function") else "code"
    return key.split("-")[0]


def mix(pools: dict[str, list[dict]], take: dict[str, int | None], seed: int) -> list[dict]:
    """take: "<pool>-<kind>" → how many (None: all), drawn at random in the order given; the result shuffled."""
    groups = defaultdict(list)
    for name, records in pools.items():
        for record in records:
            groups[f"{name}-{kind(record)}"].append(record)
    unknown = sorted(set(take) - set(groups))
    if unknown:
        sys.exit(f"mix_prompts: no prompts for {', '.join(unknown)}; groups here: {', '.join(sorted(groups))}")
    rng, out = random.Random(seed), []
    for group, n in take.items():
        records = groups[group][:]
        rng.shuffle(records)
        out += records if n is None else records[:n]
    rng.shuffle(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", nargs="+", action="append", required=True, metavar=("NAME", "FILE"),
                        help="a named pool of prompt files (.jsonl, .gz, .xz); repeat for more pools")
    parser.add_argument("--take", nargs="+", required=True, help="<pool>-<kind>=N or =all, in drawing order")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--out", type=Path, required=True, help="an .xz file")
    args = parser.parse_args()
    pools = {name: [r for f in files for r in read_jsonl(Path(f))] for name, *files in args.pool}
    take = {}
    for item in args.take:
        group, _, n = item.partition("=")
        take[group] = None if n == "all" else int(n)
    records = mix(pools, take, args.seed)
    data = lzma.compress("".join(json.dumps(r) + "\n" for r in records).encode(), preset=9)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(args.out)  # atomic: a lease never carries half a file
    print(json.dumps({"prompts": len(records), **Counter(kind(r) for r in records), "bytes": len(data)}))


if __name__ == "__main__":
    main()
