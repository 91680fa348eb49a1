"""benchmarks/smollm2/build_prompts.py: a documented method becomes a function stub without its self / cls."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "smollm2"))
from build_prompts import STUB_REQUEST, _first_parameter, _stub, method_as_function  # noqa: E402


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
