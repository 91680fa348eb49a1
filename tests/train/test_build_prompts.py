"""benchmarks/smollm2/build_prompts.py: a documented method becomes a function stub without its self / cls; a private
one under its public name, dunders never; GSM8K's shipped train-split questions become prompts in the GSM8K suite's
own layout, none of them a suite problem."""
import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "smollm2"))
import random  # noqa: E402

from build_prompts import (STUB_REQUEST, _documented, _first_parameter, _stub, gsm8k_train_prompts,  # noqa: E402
                           method_as_function, public_signature)
from mix_prompts import kind  # noqa: E402

from dspark.bench.sources.gsm8k import gsm8k_prompts  # noqa: E402


def test_a_method_loses_only_its_first_parameter_whatever_follows():
    assert method_as_function("self, x, y=1") == "x, y=1"
    assert method_as_function("cls, items: list[int], *, key=None") == "items: list[int], *, key=None"
    assert method_as_function("self") == ""
    assert [_first_parameter(a) for a in ("self, x", "cls: type, y", "x=1", "")] == ["self", "cls", "x", ""]


def test_a_method_stub_has_the_stub_shape_and_a_content_id():
    record = _stub(f"index({method_as_function('self, state')})", "Returns the index of state in basis.")
    text = record["messages"][0]["content"]
    assert text.startswith(STUB_REQUEST) and 'def index(state):\n    """Returns the index of state in basis.' in text
    assert record["id"].startswith("stub-") and record == _stub("index(state)", "Returns the index of state in basis.")


SOURCE = '''
def visible(x):
    """A public function, documented well enough to be a stub."""
def _hidden(x, y=1):
    """A private function, documented well enough to be a stub."""
class Box:
    def __init__(self, size):
        """A dunder method, documented well enough to be a stub."""
    def _resize(self, size: int) -> None:
        """A private method, documented well enough to be a stub."""
def _short(x):
    """Too short."""
'''


def test_public_and_private_sets_split_the_documented_functions_and_leave_out_dunders():
    tree = ast.parse(SOURCE)
    assert [name for name, _, _ in _documented(tree)] == ["visible"]  # the sets of runs 11 and 20, unchanged
    private = _documented(tree, private=True)
    assert sorted(name for name, _, _ in private) == ["_hidden", "_resize"]
    assert sorted(public_signature(name, args) for name, args, _ in private) == ["hidden(x, y=1)", "resize(size: int)"]


def test_gsm8k_train_questions_become_suite_shaped_prompts_disjoint_from_the_suites_problems():
    records = gsm8k_train_prompts(10_000, random.Random(0))
    assert len(records) == len({r["id"] for r in records}) == 7473  # every shipped question, once
    suite = gsm8k_prompts("math")
    suffix = suite[0].messages[0][1].split("?")[-1]  # the suite's step-by-step / boxed instruction
    assert all(r["messages"][0]["content"].endswith(suffix) for r in records)
    assert {kind(r) for r in records} == {"gsm8k"}
    questions = {r["messages"][0]["content"] for r in records}
    assert not questions & {p.messages[0][1] for p in suite}  # no test problem among the train questions
    assert gsm8k_train_prompts(5, random.Random(1)) == gsm8k_train_prompts(5, random.Random(1))
