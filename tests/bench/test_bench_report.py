"""`bench report` from hand-made result files: tables with exact numbers, reference columns, and which plots appear."""
from __future__ import annotations

import pytest

from dspark.bench.report import labelled_runs, render_markdown, write_report
from dspark.bench.results import AcceptanceRow, BenchResult, RunInfo, ThroughputRow, save_result

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(commit: str) -> RunInfo:
    return RunInfo("0.1.0", commit, "NVIDIA H200", f"dspark bench acceptance --suite code,chat # {commit}",
                   "2026-12-01T00:00:00+00:00")


def _acceptance(suite: str, temperature: float, table, per_prompt=()) -> AcceptanceRow:
    return AcceptanceRow(suite, temperature, 4, 2, 0, table, 40, 100, 1.0, per_prompt)


@pytest.fixture
def result_files(tmp_path):
    speed = BenchResult(_run("aaaa"), "smollm2", "draft", acceptance=(
        _acceptance("code", 0.0, ((4, 4, 3), (4, 0, 1)), (("p1", 3, 12), ("p2", 1, 0))),  # τ = (5·3 + 1) / 4 = 4.00
        _acceptance("chat", 0.0, ((4, 1, 2),)),  # τ = 2.00
        _acceptance("code", 1.0, ((4, 2, 4),)),  # τ = 3.00
    ), throughput=(
        ThroughputRow("code", "plain", 1, 0.0, 100, 1.0), ThroughputRow("code", "dspark", 1, 0.0, 350, 1.0),
        ThroughputRow("code", "plain", 4, 0.0, 360, 1.0), ThroughputRow("code", "dspark", 4, 0.0, 900, 1.0),
        ThroughputRow("code", "dspark", 4, 0.0, 990, 1.0, scheduler="confidence"),
    ))
    other = BenchResult(_run("bbbb"), "smollm2", "draft",
                        acceptance=(_acceptance("code", 0.0, ((4, 3, 2),), (("p1", 2, 6),)),))  # τ 4 on p1 alone
    return [save_result(speed, tmp_path / "gpu.json"), save_result(other, tmp_path / "sub" / "gpu.json")]


def test_report_writes_markdown_and_all_four_plots_when_speed_rows_exist(result_files, tmp_path):
    files = write_report(labelled_runs(result_files[:1]), tmp_path / "out")
    assert sorted(p.name for p in files.plots) == ["per_position.png", "speedup_by_suite.png", "tau_histogram.png",
                                                   "throughput_vs_concurrency.png"]
    for plot in files.plots:
        assert plot.read_bytes()[:8] == PNG_MAGIC
    text = files.markdown.read_text()
    for plot in files.plots:
        assert f"]({plot.name})" in text
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(["report.md", *(p.name for p in files.plots)])


def test_acceptance_table_has_exact_tau_and_a_pooled_row(result_files):
    text = render_markdown(labelled_runs(result_files[:1]), [])
    # the interval: resampling p1 (τ 5) and p2 (τ 1) twice each ends at 1 and 5
    assert "| gpu | code | 0 | 2 | 0 | 4 | 4.00 | 1.00–5.00 | 0.75 | 0.75 | 1.00 | 1.00 | 1.00 |" in text
    assert "| gpu | chat | 0 | 2 | 0 | 2 | 2.00 | – | 0.25 | 1.00 | 0.00 | – | – |" in text  # no round reached p3, p4
    assert "| gpu | all | 0 | 4 | 0 | 6 | 3.33 | – |" in text  # (16 + 4) / 6 rounds; chat has no per-prompt records


def test_reference_table_sets_ours_beside_the_seed_and_the_paper(result_files):
    text = render_markdown(labelled_runs(result_files[:1]), [])
    assert "| code | HumanEval | 5.51 | 5.52 | 4.00 | 3.00 |" in text
    assert "| chat | MT-Bench | – | 3.72 | 2.00 | – |" in text


def test_throughput_table_gives_speedups_against_the_same_runs_baseline(result_files):
    text = render_markdown(labelled_runs(result_files[:1]), [])
    assert "| gpu | code | dspark | none | 1 | 0 | 0 | 350 | 1.00 | 350.0 | 3.50 | – | plain | – | – | ok |" in text
    assert "| gpu | code | dspark | confidence | 4 | 0 | 0 | 990 | 1.00 | 990.0 | 2.75 | – | plain | – | – | ok |" in text
    assert "| gpu | code | 0 | dspark | none | 3.50× | 2.50× |" in text  # speedup by concurrency
    assert "| gpu | code | 0 | dspark | confidence | – | 2.75× |" in text


def test_two_files_with_the_same_name_get_distinct_labels_and_columns(result_files, tmp_path):
    runs = labelled_runs(result_files)
    assert [label for label, _ in runs] == ["gpu", "gpu-2"]
    text = render_markdown(runs, [])
    assert "| code | HumanEval | 5.51 | 5.52 | 4.00 | 3.00 | 4.00 |" in text  # gpu T=0, gpu T=1, gpu-2 T=0
    assert "`gpu-2`: `dspark bench acceptance --suite code,chat # bbbb`" in text


def test_a_later_run_is_paired_with_the_first_on_the_prompts_both_measured(result_files):
    text = render_markdown(labelled_runs(result_files), [])
    assert "## Paired against the first run" in text
    assert "| gpu-2 | code | 0 | 1 | 4.000 | 5.000 | 0.800 | 0.800–0.800 |" in text  # p1 alone: τ 4 against 5
    assert "## Paired" not in render_markdown(labelled_runs(result_files[:1]), [])  # one run: nothing to pair


def test_results_without_rows_still_give_a_report_without_plots(tmp_path):
    empty = save_result(BenchResult(_run("cccc"), "t", None), tmp_path / "empty.json")
    files = write_report(labelled_runs([empty]), tmp_path / "out")
    assert files.plots == ()
    text = files.markdown.read_text()
    assert "No acceptance rows" in text and "No throughput rows" in text and "No data to plot." in text
