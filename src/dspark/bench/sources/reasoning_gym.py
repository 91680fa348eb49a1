"""Generated problems from `reasoning-gym` (Apache-2.0): GSM-style word problems and harder reasoning tasks.

`reasoning_gym.create_dataset(name, size, seed)` builds problems offline and deterministically from the seed. The GSM
suite uses its `gsm_symbolic` generator (100 templates derived from GSM8K); the hard suite takes problems round-robin
from the multi-step tasks in `HARD_TASKS` (a stand-in for AIME-style hard reasoning: no PyPI package ships AIME).
Questions are used as written; they carry their own answer-format instructions.
"""
from __future__ import annotations

import importlib
import math
from typing import Any

from dspark.bench.errors import MissingDataPackage
from dspark.bench.prompts import BenchPrompt
from dspark.bench.sources.package_data import REASONING_GYM

GSM_TASK = "gsm_symbolic"
HARD_TASKS = ("zebra_puzzles", "knights_knaves", "cryptarithm", "countdown", "self_reference", "futoshiki",
              "polynomial_equations", "advanced_geometry", "intermediate_integration")


def _module() -> Any:
    REASONING_GYM.root()  # raises MissingDataPackage with the pip command when it is absent
    try:
        return importlib.import_module("reasoning_gym")
    except ImportError as err:  # installed with --no-deps: its generators need their dependencies
        raise MissingDataPackage(f"reasoning-gym is installed but cannot import ({err}); install it with its "
                                 f"dependencies: {REASONING_GYM.install_command()}") from None


def generated_prompts(suite: str, tasks: tuple[str, ...], size: int, seed: int) -> list[BenchPrompt]:
    """`size` problems, round-robin over `tasks`; the first k of a bigger request equal a request for k."""
    gym = _module()
    per_task = math.ceil(size / len(tasks))
    columns = [list(gym.create_dataset(task, size=per_task, seed=seed)) for task in tasks]
    prompts = []
    for i in range(per_task):
        for task, items in zip(tasks, columns):
            prompts.append(BenchPrompt.user(f"{task}-{seed}-{i}", suite, str(items[i]["question"])))
    return prompts[:size]
