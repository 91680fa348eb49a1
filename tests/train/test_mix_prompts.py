"""benchmarks/smollm2/mix_prompts.py: so many prompts of each kind from each pool, the same set for the same seed."""
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "smollm2"))
from mix_prompts import kind, mix  # noqa: E402


def _record(key: str, text: str = "Explain this.") -> dict:
    return {"id": key, "messages": [{"role": "user", "content": text}]}


POOLS = {
    "old": [_record(f"chat-{i}") for i in range(10)] + [_record(f"math-gsm_symbolic-{i}") for i in range(6)]
    + [_record(f"code-{i}", "Write a Python function `f()` that does the following:\nx") for i in range(4)],
    "new": [_record(f"code-n{i}", "Complete the following Python code:\n```python\nx = 1\n```") for i in range(5)]
    + [_record(f"math-chain_sum-{i}") for i in range(3)],
}


def test_kinds_tell_function_requests_from_code_chunks_and_gsm_from_other_math():
    assert [kind(POOLS["old"][0]), kind(POOLS["old"][10]), kind(POOLS["old"][16])] == ["chat", "gsm", "func"]
    assert [kind(POOLS["new"][0]), kind(POOLS["new"][5])] == ["code", "math"]


def test_mix_takes_the_requested_count_of_each_group_and_all_when_asked():
    out = mix(POOLS, {"old-chat": 4, "old-gsm": None, "new-code": 2}, seed=1)
    counts = Counter((r["id"].startswith(("code-n",)), kind(r)) for r in out)
    assert counts == {(False, "chat"): 4, (False, "gsm"): 6, (True, "code"): 2}
    assert len({r["id"] for r in out}) == 12


def test_mix_is_the_same_set_in_the_same_order_for_the_same_seed_and_another_for_another():
    take = {"old-chat": 5, "new-code": 3, "new-math": None}
    assert mix(POOLS, take, seed=3) == mix(POOLS, take, seed=3)
    assert [r["id"] for r in mix(POOLS, take, seed=3)] != [r["id"] for r in mix(POOLS, take, seed=4)]


def test_a_group_with_no_prompts_stops_with_the_groups_that_exist():
    with pytest.raises(SystemExit, match="no prompts for new-chat; groups here: .*old-chat"):
        mix(POOLS, {"new-chat": 1}, seed=0)
