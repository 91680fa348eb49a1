"""Plot the SmolLM2 draft's training runs: analytic τ on the training blocks against sequences seen (run 5 continues
run 4's B, run 8 continues run 5, run 9 run 8, run 10 run 9 grown to 5 layers and run 11 run 10, so their curves start
where the earlier run ends; run 19 continues run 11, run 20 run 19, run 21 run 20), and held-out τ per suite for runs
3, 4 (B), 5, 8-11 and 19-21 (`runs.png`); and the same-budget DSpark / DFlash-mode comparisons: the τ ratio per suite
in runs 2, 3, 4, 6 and 12-17 (runs 12-17: the DSpark heads on the DFlash block layout, "unanchored"; run 15: 5 layers;
run 17: the gated head, and the anchored layout again, both set against run 16's twin), and the conditional acceptance
per drafted position of the drafts of runs 15-17 and the twins of runs 12 and 15 (`twins.png`). Reads and writes
`benchmarks/results/smollm2/`.

    python benchmarks/smollm2/plot_runs.py
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FOLDER = Path(__file__).resolve().parents[1] / "results" / "smollm2"
RUNS = {  # name: (metrics file, sequences per step, sequences seen before the run)
    "run 3 (0.1 CE / 0.9 L1, batch 8)": ("metrics-dspark.jsonl", 8, 0),
    "run 4 B (0.5 / 0.5, batch 8)": ("run4/B/dspark-metrics.jsonl", 8, 0),
    "run 5 (from run 4 B, batch 32, cached hidden states)": ("run5/dspark-metrics.jsonl", 32, 56_000),
    "run 8 (from run 5, 68k sequences)": ("run8/dspark-metrics.jsonl", 32, 56_000 + 2_800 * 32),
    "run 9 (from run 8, 98k sequences)": ("run9/dspark-metrics.jsonl", 32, 56_000 + 7_800 * 32),
    "run 10 (run 9 grown to 5 layers)": ("run10/dspark-metrics.jsonl", 32, 56_000 + 13_750 * 32),
    "run 11 (from run 10, 114k sequences with code stubs)": ("run11/dspark-metrics.jsonl", 32, 56_000 + 18_550 * 32),
    "run 19 (from run 11, 82k sequences, 58 % fresh prompts)": ("run19/dspark-metrics.jsonl", 32,
                                                               56_000 + 23_550 * 32),
    "run 20 (from run 19, 79k sequences, 16k new method stubs)": ("run20/dspark-metrics.jsonl", 32,
                                                                 56_000 + 27_015 * 32),
    "run 21 (from run 20, 81k sequences, 7.5k GSM8K train questions)": ("run21/dspark-metrics.jsonl", 32,
                                                                       56_000 + 30_615 * 32),
}
HELD_OUT = {"run 3": ("summary.json", "dspark"), "run 4 B": ("run4/B/summary.json", "dspark"),
            "run 5": ("run5/summary.json", "dspark"), "run 8": ("run8/summary.json", "dspark"),
            "run 9": ("run9/summary.json", "dspark"), "run 10 (5 layers)": ("run10/summary.json", "dspark"),
            "run 11 (5 layers)": ("run11/summary.json", "dspark"), "run 19 (5 layers)": ("run19/summary.json", "dspark"),
            "run 20 (5 layers)": ("run20/summary.json", "dspark"),
            "run 21 (5 layers)": ("run21/summary.json", "dspark"),
            "run 3 DFlash-mode twin": ("summary.json", "dflash")}


TWINS = {  # same-budget pairs: (DSpark summary, its mode, DFlash-mode summary), held-out τ under "eval"
    "run 2 (0.1 / 0.9, 8.5k seqs)": ("run2/summary.json", "dspark", "run2/summary.json"),
    "run 3 (0.1 / 0.9, 21k seqs)": ("summary.json", "dspark", "summary.json"),
    "run 4 B (0.5 / 0.5, 21k seqs)": ("run4/B/summary.json", "dspark", "summary.json"),
    "run 6 (0.5 / 0.5, 49k seqs, batch 32)": ("run6/eval-summary.json", "dspark", "run6/eval-summary.json"),
    "run 12 unanchored (0.5 / 0.5, 114k seqs, batch 32)": ("run12/eval-summary.json", "unanchored",
                                                           "run12/eval-summary.json"),
    "run 13 unanchored (CE only; run 12's twin)": ("run13/eval-summary.json", "unanchored", "run12/eval-summary.json"),
    "run 14 unanchored (Markov rank 256, 108k seqs)": ("run14/eval-summary.json", "unanchored",
                                                       "run14/eval-summary.json"),
    "run 15 unanchored (5 layers, 2,500 steps)": ("run15/cpu-eval-summary.json", "unanchored",
                                                  "run15/cpu-eval-summary.json"),
    "run 16 unanchored (no Markov bias at slot 1)": ("run16/eval-summary.json", "unanchored",
                                                     "run16/eval-summary.json"),
    "run 17 unanchored, gated head (no slot-1 bias; run 16's twin)": ("run17/eval-summary.json", "unanchored-gated",
                                                                      "run16/eval-summary.json"),
    "run 17 anchored (no slot-1 bias; run 16's twin)": ("run17/eval-summary.json", "dspark", "run16/eval-summary.json"),
    "run 18: run 17's gated draft and run 16's twin, 2,640 more steps each": ("run18/eval-summary.json",
                                                                             "unanchored-gated",
                                                                             "run18/eval-summary.json"),
}


def _taus(name: str, mode: str) -> dict[str, float]:
    rows = json.loads((FOLDER / name).read_text())["eval"]
    return {key.split("/")[0]: r["tau"] for key, r in rows.items() if key.endswith(f"/{mode}")}


def plot_twins() -> None:
    fig, (ratio, position) = plt.subplots(1, 2, figsize=(12, 4.2))
    suites, width = None, 0.8 / len(TWINS)
    for k, (label, (dspark, mode, dflash)) in enumerate(TWINS.items()):
        a, b = _taus(dspark, mode), _taus(dflash, "dflash")
        suites = suites or list(a)
        ratio.bar([i + (k - (len(TWINS) - 1) / 2) * width for i in range(len(suites))],
                  [a[s] / b[s] for s in suites], width, label=label, color=plt.cm.tab20(k))
    ratio.axhline(1.15, color="k", ls="--", lw=1, label="goal 1.15×")
    ratio.axhline(1.0, color="grey", lw=0.8)
    ratio.set_xticks(range(len(suites)), suites)
    ratio.set_ylim(0.8, 1.8)  # room for the legend above the bars
    drafts = (("run17/eval-summary.json", "unanchored-gated", "C3"), ("run17/eval-summary.json", "dspark", "C5"),
              ("run18/eval-summary.json", "unanchored-gated", "C2"), ("run16/eval-summary.json", "dflash", "C1"),
              ("run18/eval-summary.json", "dflash", "C0"))
    for summary, mode, color in drafts:
        rows = json.loads((FOLDER / summary).read_text())["eval"]
        run = summary.split("/")[0]
        for suite, style in (("code", "-"), ("math", "--")):
            acc = rows[f"{suite}/{mode}"]["per_position"][: 7 if mode == "dspark" else 6]  # the DFlash layout: γ − 1
            position.plot(range(1, len(acc) + 1), acc, style, color=color, marker="o",
                          label=f"{run} {mode}, {suite}")
    position.set_xlabel("drafted token")
    _finish(fig, {ratio: "DSpark τ / DFlash-mode τ, same budget",
                  position: "acceptance given the earlier ones"},
            "SmolLM2-135M-Instruct: DSpark against its DFlash-mode twin (held-out, T=0, block 7)", "twins.png")


def _finish(fig, ylabels: dict, title: str, name: str, legend: dict | None = None) -> None:
    """Label, grid and legend each axis (legend: extra legend options per axis); title the figure and write it into
    the results folder."""
    for ax, ylabel in ylabels.items():
        ax.set(ylabel=ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, **(legend or {}).get(ax, {}))
    fig.suptitle(title)
    fig.savefig(FOLDER / name, dpi=110, bbox_inches="tight")


def _smooth(values: list[float], window: int = 20) -> list[float]:
    return [sum(values[max(0, i - window + 1): i + 1]) / len(values[max(0, i - window + 1): i + 1])
            for i in range(len(values))]


def main() -> None:
    fig, (curve, bars) = plt.subplots(1, 2, figsize=(12, 4.2))
    for label, (name, per_step, start) in RUNS.items():
        rows = [json.loads(line) for line in (FOLDER / name).read_text().splitlines() if line.strip()]
        curve.plot([start + r["step"] * per_step for r in rows], _smooth([r["tau"] for r in rows]), label=label)
    curve.set_xlabel("training sequences seen")
    curve.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:.0f}k")
    suites, width = None, 0.8 / len(HELD_OUT)
    for k, (label, (name, mode)) in enumerate(HELD_OUT.items()):
        taus = _taus(name, mode)
        suites = suites or list(taus)
        offset = (k - (len(HELD_OUT) - 1) / 2) * width
        bars.bar([i + offset for i in range(len(suites))], [taus[s] for s in suites], width, label=label)
    bars.set_xticks(range(len(suites)), suites)
    bars.axhline(5.0, color="k", ls="--", lw=1, label="goal τ ≥ 5 (code, math)")
    bars.set_ylim(0, 7.6)  # room above the bars for the legend's two columns
    _finish(fig, {curve: "analytic τ on the training blocks (smoothed)",
                  bars: "held-out τ (40 prompts, T=0, block 7)"},
            "SmolLM2-135M-Instruct DSpark draft: training runs on the H200", "runs.png",
            legend={bars: {"ncols": 2, "loc": "upper left"}})
    plot_twins()


if __name__ == "__main__":
    main()
