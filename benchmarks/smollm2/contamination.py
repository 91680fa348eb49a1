"""How close the training prompts come to the held-out eval prompts: for each eval prompt, the largest word-set
Jaccard similarity to any training prompt (a re-instantiated template or a copied problem shares most of its words;
unrelated prompts of one task family share the template's wording, ~0.3-0.5). Prints a table per suite and one JSON
line; exits 1 when a pair reaches --limit (a near-copy that would make the held-out τ a training τ).

    python benchmarks/smollm2/contamination.py --train stage_q/prompts.jsonl.xz --eval stage_d/eval_prompts.jsonl

It reads prompts only (the user turns' text); it does not look at responses or tokenizer ids.
"""
from __future__ import annotations

import argparse
import gzip
import json
import lzma
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

WORD = re.compile(r"[a-z0-9]+")


def read_jsonl(path: Path) -> list[dict]:
    opener = lzma.open if path.suffix == ".xz" else gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def words(record: dict) -> frozenset[str]:
    text = " ".join(m["content"] for m in record.get("messages", []) if m.get("role") == "user")
    return frozenset(WORD.findall((text or record.get("prompt", "") or record.get("text", "")).lower()))


def nearest(train: list[frozenset[str]], queries: list[frozenset[str]]) -> list[tuple[float, int]]:
    """(largest Jaccard similarity, index of that training prompt) for each query, through an inverted index."""
    postings: dict[str, list[int]] = defaultdict(list)
    for i, ws in enumerate(train):
        for w in ws:
            postings[w].append(i)
    index = {w: np.asarray(ids, dtype=np.int64) for w, ids in postings.items()}
    sizes = np.asarray([len(ws) for ws in train], dtype=np.float64)  # [N]
    out = []
    for q in queries:
        hits = [index[w] for w in q if w in index]
        if not hits:
            out.append((0.0, -1))
            continue
        inter = np.bincount(np.concatenate(hits), minlength=len(train)).astype(np.float64)  # [N]
        jaccard = inter / np.maximum(len(q) + sizes - inter, 1.0)  # [N]
        best = int(jaccard.argmax())
        out.append((float(jaccard[best]), best))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, required=True, help="training prompts (.jsonl, .jsonl.gz or .jsonl.xz)")
    parser.add_argument("--eval", type=Path, required=True, help="eval prompts with a 'suite' field")
    parser.add_argument("--limit", type=float, default=0.8, help="similarity that counts as a near-copy")
    parser.add_argument("--per-suite", type=int, default=40,
                        help="the first N prompts of each suite (what train_draft.py --stage eval uses; 0: all)")
    args = parser.parse_args()
    train_records, counts, eval_records = read_jsonl(args.train), defaultdict(int), []
    for record in read_jsonl(args.eval):
        counts[record["suite"]] += 1
        if not args.per_suite or counts[record["suite"]] <= args.per_suite:
            eval_records.append(record)
    found = nearest([words(r) for r in train_records], [words(r) for r in eval_records])
    suites: dict[str, list[tuple[float, dict, dict]]] = defaultdict(list)
    for record, (sim, j) in zip(eval_records, found):
        suites[record["suite"]].append((sim, record, train_records[j] if j >= 0 else {}))
    print(f"{len(train_records):,} training prompts against {len(eval_records)} eval prompts (word-set Jaccard)")
    print(f"{'suite':<10} {'prompts':>7} {'min':>6} {'median':>6} {'max':>6}  closest pair")
    summary = {}
    for suite, rows in suites.items():
        sims = [s for s, _, _ in rows]
        top = max(rows, key=lambda r: r[0])
        summary[suite] = {"prompts": len(rows), "min": round(min(sims), 3), "median": round(statistics.median(sims), 3),
                          "max": round(max(sims), 3), "closest": [top[1].get("id"), top[2].get("id")],
                          "near_copies": sum(s >= args.limit for s in sims)}
        print(f"{suite:<10} {len(rows):>7} {min(sims):>6.3f} {statistics.median(sims):>6.3f} {max(sims):>6.3f}  "
              f"{top[1].get('id')} ~ {top[2].get('id')}")
    copies = sum(v["near_copies"] for v in summary.values())
    print(json.dumps({"train": str(args.train), "eval": str(args.eval), "per_suite": args.per_suite,
                      "limit": args.limit, "near_copies": copies, "suites": summary}))
    return 1 if copies else 0


if __name__ == "__main__":
    sys.exit(main())
