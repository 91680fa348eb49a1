"""Creative writing: WritingBench's English "Literature & Arts" queries, from `inspect-evals` (package MIT; the
upstream WritingBench licence is not stated in the wheel). File: `inspect_evals/writingbench/benchmark_all.jsonl`.

The file has 1,000 queries in six domains, English and Chinese mixed with no language field; a query counts as
English when it has no CJK ideographs. That keeps 93 of the 183 Literature & Arts queries (novels, poetry, scripts,
reviews ...). Queries are used as written, including any reference material they quote.
"""
from __future__ import annotations

import json
import re

from dspark.bench.prompts import BenchPrompt
from dspark.bench.sources.package_data import INSPECT_EVALS

DATA_FILE = "writingbench/benchmark_all.jsonl"
DOMAIN = "Literature & Arts"
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def writingbench_prompts(suite: str) -> list[BenchPrompt]:
    lines = INSPECT_EVALS.file(DATA_FILE).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [BenchPrompt.user(f"writingbench-{row['index']}", suite, row["query"]) for row in rows
            if row.get("domain1") == DOMAIN and not _CJK.search(row["query"])]
