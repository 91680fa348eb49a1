"""Plot the testbed budget sweep: held-out greedy τ of the DSpark draft and its DFlash-mode twin against training
steps (mean of the seeds, each seed a dot), and the acceptance of the first drafted token, beside SmolLM2's
same-budget pairs. Reads the `rows` of `--results` (default `benchmarks/results/testbed_budget/result.json`, or a
`recipe_sweep.py` results.jsonl) and writes `--out`.

    python benchmarks/testbed/plot_budget.py
"""
import argparse
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FOLDER = Path(__file__).resolve().parents[1] / "results" / "testbed_budget"


def load_rows(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())["rows"]
SMOLLM2_RUN6_CODE = {"dspark": (2.060, 0.507), "dflash": (2.233, 0.612)}  # τ, first-token acceptance (HumanEval)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=FOLDER / "result.json")
    parser.add_argument("--out", type=Path, default=FOLDER / "budget.png")
    args = parser.parse_args()
    rows = load_rows(args.results)
    fig, (tau_ax, first_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for mode, color in (("dspark", "C0"), ("dflash", "C1")):
        mine = [r for r in rows if r["mode"] == mode]
        steps = sorted({r["steps"] for r in mine})
        for ax, value in ((tau_ax, lambda r: r["tau"]), (first_ax, lambda r: r["per_position"][0])):
            ax.scatter([r["steps"] for r in mine], [value(r) for r in mine], color=color, s=12, alpha=0.5)
            ax.plot(steps, [statistics.mean(value(r) for r in mine if r["steps"] == s) for s in steps], color=color,
                    marker="o", label=f"testbed, {mode}")
        tau, first = SMOLLM2_RUN6_CODE[mode]
        for ax, value in ((tau_ax, tau), (first_ax, first)):
            ax.axhline(value, color=color, linestyle=":", linewidth=1, label=f"SmolLM2 run 6 (code), {mode}")
    tau_ax.set_ylabel("held-out τ (T=0, block 7)")
    first_ax.set_ylabel("first drafted token accepted")
    for ax in (tau_ax, first_ax):
        ax.set(xscale="log", xlabel="training steps (testbed: batch 4 × 64 anchors)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("DSpark vs its DFlash-mode twin by training budget: the testbed leads at the first token, SmolLM2 not")
    fig.savefig(args.out, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    main()
