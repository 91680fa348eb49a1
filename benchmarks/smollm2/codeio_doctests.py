"""reasoning-gym's CodeI/O tasks as HumanEval-shaped stubs whose docstrings hold worked `>>>` examples (run 23).

Each task ships a reference `main_solution` and a `generate_inputs(rng)`; this module runs both in worker processes
(two seconds per task at most, a task that fails or hangs is dropped; in a scratch folder, since some write files) to
get real input/output pairs, rounds the floats so an example reads like one a person would write, and formats the
stub: the signature, the task description and the examples. The prompts carry no solution; SmolLM2 writes its own when the set is regenerated. It reads the
package's data and runs its code; it does not regenerate or train.
"""
from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import random
import re
import signal
import tempfile
import textwrap
from pathlib import Path


def codeio_rows() -> list[dict]:
    """Every row of reasoning-gym's two CodeI/O files (task, spec, reference code, input generator)."""
    import reasoning_gym

    folder = Path(reasoning_gym.__file__).parent / "data"
    rows = []
    for name in ("codeio.jsonl.gz", "codeio-hq.jsonl.gz"):
        text = gzip.decompress((folder / name).read_bytes()).decode("utf-8")
        rows += json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x]
    return rows


def main_signature(code: str) -> str | None:
    """"main_solution(a, b)" from the reference code's `def main_solution(a, b):` line, None without one."""
    return next((line.strip().removeprefix("def ").rstrip(":") for line in code.splitlines()
                 if line.startswith("def main_solution")), None)


def _rounded(value, digits: int):
    """Floats rounded to `digits`, inside lists and dicts too."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, list):
        return [_rounded(v, digits) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    return value


def _timeout(signum, frame):
    raise TimeoutError


def _examples(job: tuple[str, str, int, int]) -> list[tuple[str, str]]:
    """(call, result) pairs of one task, or [] when its code fails, hangs or gives values too long to show."""
    code, generator, seed, count = job
    previous = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(2)
    out = []
    try:
        solution_ns, generator_ns = {"__name__": "codeio"}, {"__name__": "codeio", "Random": random.Random}
        exec(code, solution_ns)
        exec(generator, generator_ns)
        generate = generator_ns.get("generate_inputs") or generator_ns["generate_input"]  # both names occur
        rng = random.Random(seed)
        for _ in range(count * 3):
            inputs = json.loads(json.dumps(_rounded(generate(rng), 2)))
            result = json.loads(json.dumps(solution_ns["main_solution"](**inputs)))
            call = "main_solution(" + ", ".join(f"{k}={v!r}" for k, v in inputs.items()) + ")"
            shown = repr(_rounded(result, 4))
            if len(call) <= 200 and len(shown) <= 120 and (call, shown) not in out:
                out.append((call, shown))
            if len(out) == count:
                break
    except BaseException:  # anything the task's code raises, exits with or times out on: the task is dropped
        out = []
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return out if len(out) == count else []


TYPING = ("List", "Dict", "Tuple", "Optional", "Union", "Any", "Set")


def doctest_stub(signature: str, task: str, examples: list[tuple[str, str]]) -> str:
    """The stub's code in HumanEval's layout: the typing import its signature needs, the signature, then a docstring
    of the task (wrapped) and its examples."""
    used = [name for name in TYPING if re.search(rf"\b{name}\b", signature)]
    lines = [f"from typing import {', '.join(used)}", "", ""] if used else []
    lines += [f"def {signature}:", textwrap.fill(task.strip(), 96, initial_indent='    """', subsequent_indent="    "), ""]
    for call, result in examples:
        lines += [f"    >>> {call}", f"    {result}"]
    return "\n".join(lines + ['    """', ""])


def codeio_doctest_stubs(n: int, rng: random.Random, examples: int = 2, workers: int = 2) -> list[str]:
    """Up to n stubs (ASCII tasks whose code ran), in a random order fixed by rng."""
    rows = [r for r in codeio_rows() if main_signature(r.get("code_sample", "")) and r.get("input_generator")
            and r["task_description"].isascii()]
    rng.shuffle(rows)
    jobs = [(r["code_sample"], r["input_generator"], rng.randrange(2**31), examples) for r in rows]
    with tempfile.TemporaryDirectory() as scratch, \
            multiprocessing.get_context("fork").Pool(workers, os.chdir, (scratch,), maxtasksperchild=20) as pool:
        found = pool.map(_examples, jobs, chunksize=4)  # some tasks write files: into scratch, not the checkout
    stubs = [doctest_stub(main_signature(r["code_sample"]), r["task_description"], ex)
             for r, ex in zip(rows, found) if ex]
    return [s for s in dict.fromkeys(stubs) if s.isascii()][:n]
