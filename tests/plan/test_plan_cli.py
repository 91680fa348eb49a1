"""`dspark plan vram|cluster|cost` through `dspark.cli.main`."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dspark.cli import main


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_vram_seed_prints_the_four_figures_with_kv_weights_overhead(capsys):
    assert main(["plan", "vram", "--seed"]) == 0
    out = capsys.readouterr().out
    for figure in ("39.818", "37.529", "36.385", "35.843"):
        assert figure in out
    assert "KV GB" in out and "weights GB" in out and "overhead GB" in out and "Realistic" in out
    obj = _json(capsys, ["plan", "vram", "--seed", "--json"])
    assert all(abs(r["error_pct"]) < 5 for r in obj["rows"])
    assert obj["kv_bytes_per_token_fp16"] == 35_840


def test_vram_kimi_k3_with_draft_is_above_1_5_tb(capsys):
    obj = _json(capsys, ["plan", "vram", "--model", "kimi-k3", "--draft", "kimi-k3-dspark", "--context", "1048576",
                         "--kv-dtype", "fp8", "--json"])
    assert obj["total_bytes"] > 1.5e12
    assert set(obj["by_kind"]) == {"weights", "kv", "state", "overhead"} and obj["by_kind"]["state"] > 0
    assert main(["plan", "vram", "--model", "kimi-k3", "--draft", "kimi-k3-dspark", "--quant", "FP8"]) == 0
    assert "TB" in capsys.readouterr().out


def test_vram_quant_table_lists_real_sizes(capsys):
    obj = _json(capsys, ["plan", "vram", "--model", "kimi-k3-dspark", "--quant-table", "--json"])
    sizes = {q["quant"]: q["bytes"] for q in obj["quants"]}
    assert sizes["BF16"] == 4_498_580_162 and abs(sizes["Q8_0"] - 2_390_153_920) < 10_000


def test_cluster_compare_shows_two_h200_nodes_one_b300_node_and_the_seed_check(capsys):
    assert main(["plan", "cluster"]) == 0
    out = capsys.readouterr().out
    assert "2 x 8 = 16" in out and "1 x 8 = 8" in out and "118 -> 370" in out
    obj = _json(capsys, ["plan", "cluster", "--json"])
    best = {c["gpu"]: c["best"] for c in obj["choices"]}
    assert best["h200"]["nodes"] == 2 and best["b300"]["nodes"] == 1
    assert [c["measured"] for c in obj["seed_check"]] == [[111.0, 331.0], [118.0, 370.0]]


def test_cluster_single_gpu_prints_memory_breakdown_and_flags(capsys):
    assert main(["plan", "cluster", "--gpu", "h200", "--engine", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "Per-GPU memory" in out and "vllm serve moonshotai/Kimi-K3" in out and "--speculative-config" in out
    obj = _json(capsys, ["plan", "cluster", "--gpu", "b300", "--json", "--top", "3"])
    assert len(obj["candidates"]) == 3 and "--tp-size 8" in obj["candidates"][0]["flags"]


def test_cost_reports_dspark_cheaper_per_token_and_break_even(capsys):
    obj = _json(capsys, ["plan", "cost", "--gpu", "h200", "--json"])
    assert obj["gpus"] == 16 and obj["usd_per_m_dspark"] < obj["usd_per_m_no_draft"]
    assert obj["monthly_usd"] == pytest.approx(16 * 3.50 * 730)
    assert obj["api_usd_per_m_output"] == 24.0
    assert obj["break_even_output_tokens_per_month"] == pytest.approx(obj["monthly_usd"] / 24.0 * 1e6, rel=1e-6)


def test_cost_with_measured_throughput_custom_api_and_prices_file(capsys, tmp_path):
    prices = tmp_path / "prices.json"
    assert main(["plan", "cost", "--write-prices", str(prices)]) == 0
    data = json.loads(prices.read_text())
    data["gpu_hour"]["mi355x"]["on_demand"] = 5.0
    prices.write_text(json.dumps(data))
    capsys.readouterr()
    obj = _json(capsys, ["plan", "cost", "--gpu", "mi355x", "--prices", str(prices), "--gpus", "8", "--tps", "1000",
                         "--tps-dspark", "2500", "--api-input", "1", "--api-output", "5", "--utilisation", "1",
                         "--json"])
    assert obj["usd_per_m_no_draft"] == pytest.approx(8 * 5.0 / 3600 / 1000 * 1e6, rel=1e-4)
    assert obj["api_usd_per_m_output"] == 3 * 1 + 5 and obj["layout"] == "measured"


def test_cost_plot_is_written_as_png(capsys, tmp_path):
    path = tmp_path / "cost.png"
    obj = _json(capsys, ["plan", "cost", "--gpu", "b300", "--plot", str(path), "--json"])
    assert obj["plot"] == str(path) and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["cost.png"]


def test_cost_examples_are_listed(capsys):
    assert main(["plan", "cost", "--examples"]) == 0
    out = capsys.readouterr().out
    assert "lm-sys" in out and "gmicloud" in out and "6.54" in out


@pytest.mark.parametrize("argv,message", [
    (["plan", "vram", "--model", "no-such-model"], "unknown model"),
    (["plan", "vram", "--quant", "Q9_X"], "unknown quantization"),
    (["plan", "cost", "--gpu", "mi355x"], "no on_demand price"),
    (["plan", "cost", "--tps", "100"], "--tps-dspark"),
    (["plan", "cluster", "--gpu", "tpu"], "unknown GPU"),
    (["plan", "cost", "--plot", "x.svg"], "PNG"),
])
def test_bad_input_prints_one_error_line_and_exits_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_plan_without_a_subcommand_prints_help_and_exits_2(capsys):
    assert main(["plan"]) == 2
    assert "vram" in capsys.readouterr().err


def test_planning_imports_no_torch_numpy_or_matplotlib():
    code = ("import sys; from dspark.cli import main; import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['plan', 'cluster']); main(['plan', 'vram', '--seed']); main(['plan', 'cost'])\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'transformers', 'matplotlib')]\n"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)
