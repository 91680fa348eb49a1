"""Paired draft comparison: exact τ and ratio on hand-made per-prompt records, bootstrap intervals, pairing, errors."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark.bench.compare import compare_results, compare_rows, tau_interval
from dspark.bench.errors import BenchError
from dspark.bench.results import AcceptanceRow, BenchResult, RunInfo, save_result
from dspark.cli import main

RUN = RunInfo("0.1.0", "abc123", "cpu", "dspark bench acceptance", "2026-12-02T00:00:00+00:00")
SETTINGS = {"seed": 0, "max_new_tokens": 16, "chat_template": True}


def row(per_prompt, suite="code", temperature=0.0, gamma=4) -> AcceptanceRow:
    """A row whose round table holds, per prompt, `rounds` rounds that proposed γ drafts, the accepted spread over
    them (the table only has to add up to the per-prompt records)."""
    table = []
    for _, rounds, accepted in per_prompt:
        full, rest = divmod(accepted, rounds)
        table += [(gamma, full + 1, rest), (gamma, full, rounds - rest)]
    return AcceptanceRow(suite, temperature, gamma, len(per_prompt), 0, tuple(t for t in table if t[2]), 50, 90, 1.0,
                         tuple(per_prompt))


def result(*rows, settings=SETTINGS, draft="d") -> BenchResult:
    return BenchResult(RUN, "t", draft, dict(settings), (), rows)


def test_tau_and_ratio_are_pooled_over_paired_prompts_and_two_prompts_bound_the_interval():
    a = row([("p1", 10, 20), ("p2", 10, 10)])  # τ_A = (30 + 20) / 20 = 2.5
    b = row([("p1", 10, 10), ("p2", 10, 10)])  # τ_B = 2.0
    c = compare_rows(a, b, resamples=4000, seed=1)
    assert (c.prompts, c.tau_a.value, c.tau_b.value, c.ratio.value) == (2, 2.5, 2.0, 1.25)
    # resamples are {p1, p1}: 3 / 2, {p2, p2}: 2 / 2 or a mix: 2.5 / 2 — each end has a quarter of the mass
    assert (c.ratio.low, c.ratio.high) == (1.0, 1.5)
    assert (c.tau_b.low, c.tau_b.high) == (2.0, 2.0)


def test_identical_drafts_give_a_ratio_of_exactly_one_and_the_threshold_share():
    a = row([(f"p{i}", 5 + i, i) for i in range(12)])
    c = compare_rows(a, a, resamples=500, threshold=1.0)
    assert (c.ratio.value, c.ratio.low, c.ratio.high, c.above) == (1.0, 1.0, 1.0, 1.0)
    assert c.tau_a.low < c.tau_a.value < c.tau_a.high  # twelve different prompts: a real interval
    assert compare_rows(a, a, resamples=500, threshold=1.01).above == 0.0


def test_one_rows_tau_interval_spans_its_prompts_and_needs_per_prompt_records():
    two = tau_interval(row([("p1", 10, 20), ("p2", 10, 0)]), resamples=4000, seed=2)  # τ 3 and 1 per prompt
    assert (two.value, two.low, two.high) == (2.0, 1.0, 3.0)
    assert tau_interval(AcceptanceRow("code", 0.0, 4, 1, 0, ((4, 1, 3),), 9, 9, 1.0)) is None


def test_only_prompts_both_runs_measured_are_paired():
    a = row([("p1", 4, 8), ("p2", 4, 0)])
    b = row([("p2", 4, 4), ("p3", 4, 4), ("p1", 4, 4)])  # a longer --limit: a superset, in another order
    c = compare_rows(a, b, resamples=200)
    assert c.prompts == 2 and c.tau_b.value == 2.0 and c.tau_a.value == 2.0


def test_every_shared_suite_and_temperature_is_compared_then_pooled_per_temperature():
    a = result(row([("p1", 4, 8)], "code"), row([("q1", 2, 2)], "math"), row([("p1", 4, 4)], "code", 1.0))
    b = result(row([("p1", 4, 4)], "code"), row([("q1", 2, 0)], "math"), row([("p1", 4, 4)], "code", 1.0))
    rows = compare_results(a, b, resamples=200)
    assert [(r.suite, r.temperature, r.prompts) for r in rows] == \
        [("code", 0.0, 1), ("math", 0.0, 1), ("code", 1.0, 1), ("all", 0.0, 2)]
    assert rows[-1].tau_a.value == pytest.approx((6 + 10) / 6) and rows[-1].tau_b.value == pytest.approx(1 + 4 / 6)
    assert [r.suite for r in compare_results(a, b, resamples=200, suites=["math"])] == ["math"]


def test_what_cannot_be_compared_says_what_to_do():
    old = AcceptanceRow("code", 0.0, 4, 1, 0, ((4, 1, 3),), 9, 9, 1.0)  # a file from before per-prompt records
    with pytest.raises(BenchError, match="no per-prompt records.*measure it again"):
        compare_rows(old, row([("p1", 3, 3)]))
    with pytest.raises(BenchError, match="share no prompt.*same --suite and --seed"):
        compare_rows(row([("p1", 3, 3)]), row([("p9", 3, 3)]))
    with pytest.raises(BenchError, match="max_new_tokens 16 against 32"):
        compare_results(result(row([("p1", 3, 3)])), result(row([("p1", 3, 3)]),
                                                            settings={**SETTINGS, "max_new_tokens": 32}))
    with pytest.raises(BenchError, match="no suite and temperature in common"):
        compare_results(result(row([("p1", 3, 3)])), result(row([("p1", 3, 3)], "math")))
    with pytest.raises(BenchError, match="--resamples must be at least 100"):
        compare_rows(row([("p1", 3, 3)]), row([("p1", 3, 3)]), resamples=10)


def test_per_prompt_records_must_add_up_to_the_round_table():
    with pytest.raises(BenchError, match="do not add up"):
        AcceptanceRow("code", 0.0, 4, 1, 0, ((4, 1, 3),), 9, 9, 1.0, (("p1", 3, 4),))
    with pytest.raises(BenchError, match="repeat a prompt id"):
        AcceptanceRow("code", 0.0, 4, 2, 0, ((4, 1, 4),), 9, 9, 1.0, (("p1", 2, 2), ("p1", 2, 2)))


def test_pooling_suites_keeps_each_prompt_apart_by_its_suite():
    pooled = row([("1", 2, 2)], "code").merge(row([("1", 3, 0)], "math"))
    assert pooled.per_prompt == (("code/1", 2, 2), ("math/1", 3, 0))
    assert pooled.merge(row([("1", 1, 1)], "chat")).per_prompt[-1] == ("chat/1", 1, 1)


def test_cli_compare_prints_intervals_and_ends_with_json(tmp_path, capsys):
    a = save_result(result(row([("p1", 10, 20), ("p2", 10, 10)]), draft="new"), tmp_path / "a.json")
    b = save_result(result(row([("p1", 10, 10), ("p2", 10, 10)]), draft="old"), tmp_path / "b.json")
    assert main(["bench", "compare", str(a), str(b), "--resamples", "400", "--threshold", "1.15"]) == 0
    printed = capsys.readouterr().out
    assert "A / B" in printed and "P(≥ 1.15)" in printed and "1.000–1.500" in printed
    (only,) = json.loads(printed.strip().splitlines()[-1])["rows"]
    assert only["ratio"]["value"] == 1.25 and only["prompts"] == 2 and 0.5 < only["above"] < 1
    assert main(["bench", "compare", str(a), str(tmp_path / "missing.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 30), st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=12))
def test_swapping_the_drafts_swaps_their_intervals_and_inverts_the_ratio(prompts):
    # per prompt: rounds, and accepted drafts per round of draft A and of draft B (at most γ = 6 each)
    a = row([(f"p{i}", r, r * x) for i, (r, x, _) in enumerate(prompts)], gamma=6)
    b = row([(f"p{i}", r, r * y) for i, (r, _, y) in enumerate(prompts)], gamma=6)
    ab, ba = compare_rows(a, b, resamples=200, seed=3), compare_rows(b, a, resamples=200, seed=3)
    assert (ab.tau_a, ab.tau_b) == (ba.tau_b, ba.tau_a)  # the same resamples of the same prompts
    assert ab.ratio.value * ba.ratio.value == pytest.approx(1.0)
    assert 1.0 <= ab.tau_a.low <= ab.tau_a.high <= 7.0 and 1.0 <= ab.tau_a.value <= 7.0  # τ = accepted + 1 ≤ γ + 1
