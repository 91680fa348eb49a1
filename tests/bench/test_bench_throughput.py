"""`dspark bench throughput`: the matrix runner (rows, losslessness, n/a peers, budgets), speedup arithmetic and the
CLI, on tiny CPU models. Fake methods with a fake clock test the budgets, so nothing depends on real timing."""
from __future__ import annotations

import json

import pytest
import torch

from dspark.bench.errors import BenchError
from dspark.bench.our_engine import OurEngine, our_method
from dspark.bench.results import BenchResult, RunInfo, ThroughputRow, load_result, save_result
from dspark.bench.throughput import Method, Output, ThroughputSettings, run_matrix
from dspark.bench.throughput_job import ThroughputModels, build_methods
from dspark.cli import main
from dspark.config import GenerationConfig
from dspark.engine.tree import TreeShape
from dspark.model.target import Target

RUN = RunInfo("0.1.0", "abc", "cpu", "dspark bench throughput", "2026-12-01T00:00:00+00:00")
PROMPTS = [list(b"abcdefgh"), list(b"0123"), list(b"KLMNOPQRST")]


@pytest.fixture(scope="module")
def models():
    """The successor pair (a real DSpark draft: τ ≈ 2.5), a random DFlash-mode draft and a 2-layer assistant."""
    from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
    from dspark.testbed.successor_pair import EOS_ID, build_pair

    target, draft = build_pair()
    dflash = random_draft(draft_config_for(target, block_size=4, mode="dflash").replace(mask_token_id=259), seed=3)
    assistant = tiny_target("llama", vocab_size=260, hidden_size=32, num_layers=2, seed=4)
    return ThroughputModels(target, None, "cpu", torch.float32, (EOS_ID,), 256, 2048, draft, dflash, None, assistant)


@pytest.fixture(scope="module")
def matrix(models, tmp_path_factory):
    settings = ThroughputSettings(concurrency=(1, 2), max_new_tokens=10, num_prompts=2, warmup_tokens=2)
    methods, _ = build_methods(models, settings, None, None, tmp_path_factory.mktemp("work"), 10)
    return BenchResult(RUN, "t", "d", throughput=run_matrix(methods, PROMPTS, settings, "code"))


def by_key(rows):
    return {(r.method, r.scheduler, r.concurrency): r for r in rows}


@pytest.mark.slow
def test_the_matrix_has_one_row_per_method_scheduler_and_level(matrix):
    rows = by_key(matrix.throughput)
    methods = [("plain", "none"), ("dspark", "none"), ("dspark", "threshold"), ("dspark", "algorithm1"),
               ("dspark-tree", "none"), ("dflash", "none"), ("dflash-tree", "none"), ("hf-dynamic", "none"),
               ("hf-static", "none"), ("prompt-lookup", "none"), ("assisted", "none"), ("dflash-ref", "none")]
    assert list(rows) == [(m, s, c) for c in (1, 2) for m, s in methods]
    for method in ("plain", "dspark", "dflash", "hf-dynamic", "hf-static"):
        for c in (1, 2):
            row = rows[(method, "none", c)]
            assert row.status == "ok" and row.requests == 2 and row.new_tokens > 0 and row.seconds > 0
    assert matrix.speedup(rows[("plain", "none", 1)]) == pytest.approx(1.0)
    assert rows[("dspark", "none", 1)].mean_tau > 1.1  # the successor draft gets some drafts right
    assert rows[("plain", "none", 1)].mean_tau is None and rows[("hf-dynamic", "none", 1)].mean_tau is None
    for c in (1, 2):  # Algorithm 1 on the engine's measured round-cost tables
        assert rows[("dspark", "algorithm1", c)].status == "ok" and rows[("dspark", "algorithm1", c)].lossless is True
    assert rows[("dflash-ref", "none", 1)].status == "n/a" and "--dflash-draft" in rows[("dflash-ref", "none", 1)].note
    tree = rows[("dspark-tree", "none", 1)]  # the default 23-node tree cannot grow from this draft's 4 slots
    assert tree.status == "n/a" and "needs at least 23 candidates" in tree.note


def test_our_speculative_rows_are_lossless_and_peers_agree_at_t0_in_fp32(matrix):
    for row in matrix.throughput:
        if row.method in ("dspark", "dflash") and row.status == "ok":
            assert row.lossless is True and row.agreement == 1.0
        elif row.status == "ok" and row.method != "plain":
            assert row.lossless is None and row.agreement == 1.0  # peers are not judged, only compared


def test_batch1_only_peers_are_na_above_batch_1(matrix):
    rows = by_key(matrix.throughput)
    for method in ("prompt-lookup", "assisted"):
        assert rows[(method, "none", 1)].status == "ok"
        assert (rows[(method, "none", 2)].status, rows[(method, "none", 2)].note) == ("n/a", "batch 1 only")
        assert matrix.speedup(rows[(method, "none", 2)]) is None


def test_the_result_json_carries_every_row_with_speedups(matrix, tmp_path):
    raw = matrix.to_dict()
    row = next(r for r in raw["throughput"] if (r["method"], r["scheduler"], r["concurrency"]) == ("dspark", "none", 1))
    assert {"requests", "new_tokens", "seconds", "tokens_per_second", "speedup", "speedup_per_tau", "mean_tau",
            "lossless", "agreement", "status", "note"} <= set(row)
    assert row["speedup_per_tau"] == pytest.approx(row["speedup"] / row["mean_tau"])
    from dspark.bench.results import save_result

    assert load_result(save_result(matrix, tmp_path / "r.json")) == matrix


def test_a_wrong_engine_is_caught_as_not_lossless(models):
    engine = OurEngine(Target(models.model, models.draft.config.target_layer_ids), models.draft, 64)
    honest = our_method("dspark", engine, GenerationConfig(eos_token_ids=models.eos_token_ids))

    def wrong(prompts, concurrency, max_new_tokens, seconds_left):  # drops the last token of every request
        return [Output(o.tokens[:-1], o.taus) for o in honest.run(prompts, concurrency, max_new_tokens, seconds_left)]

    plain = OurEngine(Target(models.model, models.draft.config.target_layer_ids), None, 64)
    methods = [our_method("plain", plain, GenerationConfig(eos_token_ids=models.eos_token_ids)), honest,
               Method("dspark", wrong, "broken", speculative=True)]
    rows = by_key(run_matrix(methods, PROMPTS, ThroughputSettings((1,), 6, num_prompts=2, warmup_tokens=0), "code"))
    assert rows[("dspark", "none", 1)].lossless is True
    assert rows[("dspark", "broken", 1)].lossless is False and rows[("dspark", "broken", 1)].agreement == 0.0
    assert rows[("dspark", "broken", 1)].note == "2 of 2 requests differ from plain (earliest at new token 5)"


@pytest.mark.slow
def test_the_engine_runs_every_scheduler_losslessly_and_measures_step_costs(models, tmp_path):
    settings = ThroughputSettings(concurrency=(1, 2), max_new_tokens=10, num_prompts=2, warmup_tokens=2)
    methods, costs = build_methods(models, settings, ("plain", "dspark"), None, tmp_path, 10)
    rows = run_matrix(methods, PROMPTS, settings, "code")
    assert [(r.method, r.scheduler, r.status, r.requests) for r in rows] == [
        (m, s, "ok", 2) for _ in (1, 2) for m, s in (("plain", "none"), ("dspark", "none"), ("dspark", "threshold"),
                                                     ("dspark", "algorithm1"))]
    assert all(r.lossless for r in rows if r.method == "dspark")
    gamma = models.draft.config.num_draft_tokens
    assert sorted(costs.tables) == [1, 2]  # one table per batch size up to the top concurrency
    assert all(t.widths == list(range(1, gamma + 2)) and min(t.rates) > 0 for t in costs.tables.values())
    assert costs.as_dict()["2"].keys() == {str(w) for w in range(1, gamma + 2)}


def test_speedup_and_speedup_per_tau_arithmetic():
    plain = ThroughputRow("code", "plain", 1, 0.0, new_tokens=1000, seconds=10.0)  # 100 tok/s
    fast = ThroughputRow("code", "dspark", 1, 0.0, new_tokens=700, seconds=2.0, mean_tau=5.0)  # 350 tok/s
    cut = ThroughputRow("code", "dflash", 1, 0.0, new_tokens=500, seconds=1.0, mean_tau=4.0, status="timeout")
    peer = ThroughputRow("code", "hf-static", 1, 0.0, new_tokens=372, seconds=1.0)
    result = BenchResult(RUN, "t", "d", throughput=(plain, fast, cut, peer))
    assert result.speedup(fast) == pytest.approx(3.5) and result.speedup_per_tau(fast) == pytest.approx(0.7)
    assert result.speedup(peer) == pytest.approx(3.72) and result.speedup_per_tau(peer) is None  # no τ
    assert result.speedup(cut) is None and result.speedup_per_tau(cut) is None  # not a full measurement
    lost_base = BenchResult(RUN, "t", "d", throughput=(ThroughputRow("code", "plain", 1, 0.0, 10, 1.0,
                                                                     status="timeout"), fast))
    assert lost_base.speedup(fast) is None


def test_requests_per_level_fill_every_wave():
    settings = ThroughputSettings(concurrency=(1, 4, 16, 64), num_prompts=10, waves=2)
    assert [settings.requests(c) for c in settings.concurrency] == [10, 12, 32, 128]


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def slow_method(clock: FakeClock, name: str, seconds_per_call: float, **kwargs) -> Method:
    def run(prompts, concurrency, max_new_tokens, seconds_left):
        clock.now += seconds_per_call
        return [Output(tuple(range(max_new_tokens))) for _ in prompts]
    return Method(name, run, **kwargs)


def test_a_method_over_its_budget_is_cut_at_that_level_and_runs_afresh_at_the_next():
    clock = FakeClock()
    settings = ThroughputSettings(concurrency=(1, 2), max_new_tokens=4, num_prompts=4, warmup_tokens=1,
                                  method_budget_s=25.0)
    methods = [slow_method(clock, "plain", 1.0), slow_method(clock, "hf-dynamic", 10.0)]
    rows = by_key(run_matrix(methods, PROMPTS, settings, "code", clock=clock))
    assert (rows[("plain", "none", 1)].status, rows[("plain", "none", 1)].seconds) == ("ok", 4.0)
    slow = rows[("hf-dynamic", "none", 1)]  # warm-up 10 s (not billed), then two waves of 10 s; a third passes 25 s
    assert (slow.status, slow.requests, slow.new_tokens, slow.seconds) == ("timeout", 2, 8, 20.0)
    assert "after 2 of 4 requests" in slow.note
    batched = rows[("hf-dynamic", "none", 2)]  # its own 25 s: two waves of 2 requests at 10 s each
    assert (batched.status, batched.requests, batched.seconds) == ("ok", 4, 20.0)
    assert rows[("plain", "none", 2)].status == "ok"


def test_a_long_warm_up_is_not_billed_to_the_method_budget():
    clock = FakeClock()  # a 60 s warm-up (compilation, graph capture or a step-cost table), then 1 s waves
    calls = []

    def run(prompts, concurrency, max_new_tokens, seconds_left):
        calls.append(seconds_left)
        clock.now += 60.0 if len(calls) == 1 else 1.0
        return [Output(tuple(range(max_new_tokens))) for _ in prompts]

    rows = run_matrix([Method("hf-static", run)], PROMPTS, ThroughputSettings(
        (1,), 4, num_prompts=2, warmup_tokens=1, method_budget_s=10.0, deadline_s=100.0), "code", clock=clock)
    assert (rows[0].status, rows[0].requests, rows[0].seconds) == ("ok", 2, 2.0)
    assert calls[0] == 100.0  # the warm-up may take up to the run's deadline


def test_the_run_deadline_skips_what_is_left_and_errors_become_rows():
    clock = FakeClock()
    settings = ThroughputSettings(concurrency=(1, 2), max_new_tokens=4, num_prompts=1, warmup_tokens=0,
                                  deadline_s=5.0)
    methods = [slow_method(clock, "plain", 4.0), slow_method(clock, "hf-dynamic", 2.0)]
    rows = by_key(run_matrix(methods, PROMPTS, settings, "code", clock=clock))
    assert rows[("plain", "none", 1)].status == "ok"
    assert (rows[("hf-dynamic", "none", 1)].status, rows[("hf-dynamic", "none", 1)].requests) == ("timeout", 0)
    assert rows[("plain", "none", 2)].status == "skipped" and "deadline" in rows[("plain", "none", 2)].note

    clock = FakeClock()  # the deadline is a wall-clock time: 10 s warm-up + 10 s wave fit 25 s, a second wave not
    rows = run_matrix([slow_method(clock, "plain", 10.0)], PROMPTS,
                      ThroughputSettings((1,), 4, num_prompts=2, warmup_tokens=1, deadline_s=25.0), "code", clock=clock)
    assert (rows[0].status, rows[0].requests, rows[0].seconds) == ("timeout", 1, 10.0)

    def broken(*_):
        raise RuntimeError("CUDA graph capture failed")

    rows = by_key(run_matrix([Method("dspark", broken, speculative=True)], PROMPTS,
                             ThroughputSettings((1,), 4, num_prompts=1, warmup_tokens=0), "code", clock=FakeClock()))
    assert rows[("dspark", "none", 1)].status == "error"
    assert rows[("dspark", "none", 1)].note == "RuntimeError: CUDA graph capture failed"


def test_our_engine_runs_at_every_level_before_the_peers_and_rows_come_back_level_by_level():
    order = []

    def method(name: str, first: bool) -> Method:
        def run(prompts, concurrency, max_new_tokens, seconds_left):
            order.append((name, concurrency))
            return [Output((1, 2)) for _ in prompts]
        return Method(name, run, first=first)

    settings = ThroughputSettings((1, 2), 2, num_prompts=2, warmup_tokens=0)
    rows = run_matrix([method("hf-dynamic", False), method("plain", True)], PROMPTS, settings, "code")
    assert order == [("plain", 1), ("plain", 1), ("plain", 2), ("hf-dynamic", 1), ("hf-dynamic", 1),
                     ("hf-dynamic", 2)]  # waves of C requests
    assert [(r.method, r.concurrency, r.agreement) for r in rows] == [
        ("plain", 1, None), ("hf-dynamic", 1, 1.0), ("plain", 2, None), ("hf-dynamic", 2, 1.0)]


def test_cli_prints_a_table_ends_with_one_json_line_and_reports_plot_it(model_dirs, tmp_path, capsys):
    target, draft = model_dirs
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in ("Count: 1 2 3", "Say hi.")))
    out = tmp_path / "res" / "throughput.json"
    argv = ["bench", "throughput", "--target", str(target), "--draft", str(draft), "--prompts", str(prompts),
            "--num-prompts", "2", "--max-new-tokens", "4", "--concurrency", "1,2", "--methods",
            "plain,dspark,hf-dynamic,prompt-lookup", "--schedulers", "none,threshold",
            "--warmup-tokens", "1", "--repeats", "2", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "tok/s" in printed and "speedup/τ" in printed and "repeats: min – max tok/s" in printed
    last = json.loads(printed.strip().splitlines()[-1])
    assert last["results"] == str(out) and last["device"].startswith("cpu")
    assert [(r["method"], r["scheduler"], r["concurrency"], r["status"]) for r in last["rows"]] == [
        (m, s, c, "n/a" if (m, c) == ("prompt-lookup", 2) else "ok") for c in (1, 2)
        for m, s in (("plain", "none"), ("dspark", "none"), ("dspark", "threshold"), ("hf-dynamic", "none"),
                     ("prompt-lookup", "none"))]
    assert all(r["lossless"] for r in last["rows"] if r["method"] == "dspark")
    result = load_result(out)
    assert result.run.command.startswith("dspark bench throughput --target ")
    assert "--concurrency 1,2" in result.run.command
    assert result.suites[0].name == "p" and result.suites[0].prompts == 2
    assert all(len(r.repeats) == 2 and r.tokens_per_second in r.repeats for r in result.throughput if r.status == "ok")

    assert main(["bench", "report", str(out), "--out", str(tmp_path / "rep")]) == 0
    names = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert "throughput_vs_concurrency.png" in names and "report.md" in names
    assert "## Speedup by concurrency" in (tmp_path / "rep" / "report.md").read_text()


@pytest.mark.slow
def test_tree_rows_of_either_draft_are_lossless_and_commit_more_per_round_than_its_chain(models, tmp_path):
    settings = ThroughputSettings(concurrency=(1, 2), max_new_tokens=16, num_prompts=3, warmup_tokens=2)
    names = ("plain", "dspark", "dspark-tree", "dflash", "dflash-tree")
    # 9 nodes at beam 3: what the DFlash-mode draft's 3 predicting slots can fill
    methods, _ = build_methods(models, settings, names, ("none",), tmp_path, 10, tree=TreeShape(9, 3))
    rows = by_key(run_matrix(methods, PROMPTS, settings, "code"))
    for c in (1, 2):
        for draft in ("dspark", "dflash"):  # the same tree shape over either draft
            tree, chain = rows[(f"{draft}-tree", "none", c)], rows[(draft, "none", c)]
            assert tree.status == "ok" and tree.lossless is True and tree.new_tokens == chain.new_tokens
            assert tree.mean_tau >= chain.mean_tau
        assert rows[("dspark", "none", c)].mean_tau > 1.1


def test_cli_asks_for_the_models_a_named_method_needs(model_dirs, tmp_path, capsys):
    target, _ = model_dirs
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "hi"}) + "\n")
    assert main(["bench", "throughput", "--target", str(target), "--methods", "plain,assisted", "--prompts",
                 str(prompts), "--no-progress"]) == 2
    assert "method 'assisted' needs --assistant DIR" in capsys.readouterr().err
    assert main(["bench", "throughput", "--methods", "plain"]) == 2
    assert "--target PATH" in capsys.readouterr().err
    assert main(["bench", "throughput", "--smollm2", "--methods", "plain,fast"]) == 2
    assert "unknown method 'fast'" in capsys.readouterr().err
    assert main(["bench", "throughput", "--smollm2", "--methods", "dspark-tree", "--tree-score-temperature", "0"]) == 2
    assert "--tree-score-temperature must be > 0" in capsys.readouterr().err


def test_the_smollm2_flag_runs_the_converted_smollm2_folder_as_the_target(model_dirs, monkeypatch, tmp_path, capsys):
    import dspark.formats.smollm2 as smollm2

    target_dir, _ = model_dirs
    monkeypatch.setattr(smollm2, "smollm2_path", lambda: target_dir)  # the conversion's cache, without the wheel
    out = tmp_path / "t.json"
    assert main(["bench", "throughput", "--smollm2", "--methods", "plain", "--concurrency", "1", "--num-prompts", "1",
                 "--max-new-tokens", "4", "--warmup-tokens", "0", "--no-progress", "--out", str(out)]) == 0
    result = load_result(out)
    assert result.target == str(target_dir)
    assert [(r.method, r.status, r.requests) for r in result.throughput] == [("plain", "ok", 1)]


def test_repeats_interleave_the_methods_and_a_row_is_the_median_repeat_with_every_repeat_beside_it(tmp_path):
    clock, order = FakeClock(), []
    times = {"plain": iter([2.0, 4.0, 3.0]), "dspark": iter([1.0, 5.0, 2.0])}  # seconds per timed call

    def method(name: str) -> Method:
        def run(prompts, concurrency, max_new_tokens, seconds_left):
            order.append(name)
            clock.now += next(times[name])
            return [Output((1, 2, 3, 4), taus=(2, 2)) for _ in prompts]
        return Method(name, run, speculative=name == "dspark", whole=True)

    settings = ThroughputSettings((2,), 4, num_prompts=2, warmup_tokens=0, repeats=3)
    rows = by_key(run_matrix([method("dspark"), method("plain")], PROMPTS, settings, "code", clock=clock))
    assert order == ["plain", "dspark"] * 3
    plain, dspark = rows[("plain", "none", 2)], rows[("dspark", "none", 2)]
    assert (plain.seconds, plain.repeats) == (3.0, (4.0, 2.0, 8 / 3))  # 8 tokens a repeat
    assert (dspark.seconds, dspark.repeats) == (2.0, (8.0, 1.6, 4.0))
    assert dspark.lossless is True and dspark.note == "" and dspark.mean_tau == 2.0
    result = BenchResult(RUN, "t", "d", throughput=tuple(rows.values()))
    path = tmp_path / "r.json"
    save_result(result, path)
    assert load_result(path).throughput == result.throughput  # the repeats survive the JSON round trip


def test_a_repeat_cut_by_the_budget_is_left_out_of_the_median_and_named_in_the_note():
    clock = FakeClock()
    seconds = iter([1.0, 1.0, 30.0])  # the third repeat's wave runs past what the method's budget has left

    def run(prompts, concurrency, max_new_tokens, seconds_left):
        clock.now += next(seconds)
        return [Output((1, 2)) for _ in prompts]

    settings = ThroughputSettings((1,), 2, num_prompts=1, warmup_tokens=0, method_budget_s=10.0, repeats=3)
    row = run_matrix([Method("plain", run)], PROMPTS, settings, "code", clock=clock)[0]
    assert (row.status, row.seconds, row.repeats) == ("ok", 1.0, (2.0, 2.0))
    assert row.note == "1 more not counted (timeout)"
    with pytest.raises(BenchError, match="repeats must be at least 1"):
        ThroughputSettings(repeats=0)


def test_cli_with_a_draft_vocabulary_stays_lossless_and_records_k(model_dirs, counted_draft, tmp_path, capsys):
    target, draft = model_dirs
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "Count: 1 2 3"}) + "\n")
    argv = ["bench", "throughput", "--target", str(target), "--prompts", str(prompts), "--num-prompts", "1",
            "--max-new-tokens", "6", "--concurrency", "1", "--methods", "plain,dspark", "--schedulers", "none",
            "--warmup-tokens", "0", "--draft-vocab", "64", "--no-progress"]
    assert main([*argv, "--draft", str(draft)]) == 2  # no counts beside the draft
    assert "dspark train token-counts" in capsys.readouterr().err
    out = tmp_path / "t.json"
    assert main([*argv, "--draft", str(counted_draft), "--out", str(out)]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [r["lossless"] for r in last["rows"] if r["method"] == "dspark"] == [True]
    result = load_result(out)
    assert result.settings["draft_vocab"] == 64 and "--draft-vocab 64" in result.run.command
