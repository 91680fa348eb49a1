"""Plot the SmolLM2 draft's training runs: analytic τ on the training blocks against sequences seen (run 5 continues
run 4's B, so its curve starts where B's ends), and held-out τ per suite for runs 3, 4 (B) and 5. Reads and writes
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
}
HELD_OUT = {"run 3": ("summary.json", "dspark"), "run 4 B": ("run4/B/summary.json", "dspark"),
            "run 5": ("run5/summary.json", "dspark"), "run 3 DFlash-mode twin": ("summary.json", "dflash")}


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
    suites, width = None, 0.2
    for k, (label, (name, mode)) in enumerate(HELD_OUT.items()):
        rows = json.loads((FOLDER / name).read_text())["eval"]
        taus = {key.split("/")[0]: r["tau"] for key, r in rows.items() if key.endswith(f"/{mode}")}
        suites = suites or list(taus)
        bars.bar([i + (k - 1.5) * width for i in range(len(suites))], [taus[s] for s in suites], width, label=label)
    bars.set_xticks(range(len(suites)), suites)
    for ax, ylabel in ((curve, "analytic τ on the training blocks (smoothed)"),
                       (bars, "held-out τ (40 prompts, T=0, block 7)")):
        ax.set(ylabel=ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("SmolLM2-135M-Instruct DSpark draft: training runs on the H200")
    fig.savefig(FOLDER / "runs.png", dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    main()
