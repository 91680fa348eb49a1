"""benchmarks/smollm2/codeio_doctests.py and build_prompts' doctest stubs: a CodeI/O task's own code gives worked
examples with rounded floats, a task that fails or hangs gives none, and the stub reads like a HumanEval prompt
(typing import, signature, wrapped task, `>>>` examples); long `>>>` docstrings count only when asked for."""
import ast
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "smollm2"))
from build_prompts import _documented  # noqa: E402
from codeio_doctests import _examples, doctest_stub, main_signature  # noqa: E402

CODE = '''
from typing import List

def main_solution(values: List[float], scale: float) -> float:
    return sum(values) * scale / 3
'''
GENERATOR = '''
def generate_input(rng: Random) -> dict:
    return {"values": [rng.uniform(0, 10) for _ in range(2)], "scale": rng.uniform(1, 2)}
'''


def test_worked_examples_come_from_the_tasks_own_code_with_rounded_inputs():
    examples = _examples((CODE, GENERATOR, 7, 2))
    assert len(examples) == 2 and examples[0] != examples[1]
    for call, shown in examples:
        namespace = {}
        exec(CODE, namespace)
        inputs = eval(call.replace("main_solution(", "dict("))
        assert all(round(v, 2) == v for v in inputs["values"] + [inputs["scale"]])  # two decimals at most
        assert float(shown) == round(namespace["main_solution"](**inputs), 4)


@pytest.mark.slow
def test_a_task_that_raises_or_hangs_gives_no_examples():
    assert _examples(("def main_solution(x):\n    return 1 / 0\n", "def generate_inputs(rng):\n    return {'x': 1}\n",
                      1, 2)) == []
    assert _examples(("def main_solution(x):\n    while True:\n        pass\n",
                      "def generate_inputs(rng):\n    return {'x': 1}\n", 1, 1)) == []


def test_the_stub_has_humaneval_layout():
    signature = main_signature(CODE)
    assert signature == "main_solution(values: List[float], scale: float) -> float"
    text = doctest_stub(signature, "Scale the mean. " * 12, [("main_solution(values=[1.0], scale=3.0)", "1.0")])
    lines = text.splitlines()
    assert lines[:3] == ["from typing import List", "", ""] and lines[3] == f"def {signature}:"
    assert lines[4].startswith('    """Scale the mean.') and all(len(line) <= 96 for line in lines[4:6])
    assert "    >>> main_solution(values=[1.0], scale=3.0)\n    1.0\n    \"\"\"\n" in text
    assert doctest_stub("main_solution(x)", "Task.", [])[:4] == "def "  # no typing import when none is used


def test_long_doctest_docstrings_count_only_under_the_larger_limit():
    doc = "Add one.\n\n" + ">>> add_one(1)\n2\n" * 40  # ~690 characters, over the earlier stub sets' 600
    tree = ast.parse(f'def add_one(x):\n    """{doc}"""\n')
    assert _documented(tree) == [] and [name for name, _, _ in _documented(tree, max_chars=2000)] == ["add_one"]
