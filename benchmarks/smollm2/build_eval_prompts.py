"""Write the held-out evaluation prompts (the bench suites' own prompt texts) to one JSONL the GPU machine can read.

The GPU machine has no internet and none of the data packages, so the suites are materialised here:
    python benchmarks/smollm2/build_eval_prompts.py --out stage/eval_prompts.jsonl
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from dspark.bench.suites import SuiteOptions, load_suites


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--suites", default="code,math,chat,math-gen,hard,writing")
    parser.add_argument("--limit", type=int, default=80)
    args = parser.parse_args()
    suites = load_suites(args.suites.split(","), SuiteOptions(limit=args.limit))
    lines = []
    for name, prompts in suites.items():
        for p in prompts:
            lines.append(json.dumps({"suite": name, "id": p.id, "messages": [{"role": r, "content": c} for r, c in p.messages]}))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(json.dumps({name: len(p) for name, p in suites.items()}))


if __name__ == "__main__":
    main()
