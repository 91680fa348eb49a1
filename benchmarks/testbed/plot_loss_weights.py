"""Plot the testbed loss-weight sweep: held-out τ at T=0 and T=1 against the DSpark CE weight (L1 = 1 − CE), with
the DFlash-mode baseline as horizontal lines. Reads the `rows` of `--results` (default `benchmarks/results/testbed_loss_weights/result.json`, or a
`recipe_sweep.py` results.jsonl) and writes `--out`.

    python benchmarks/testbed/plot_loss_weights.py
"""
import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FOLDER = Path(__file__).resolve().parents[1] / "results" / "testbed_loss_weights"


def load_rows(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())["rows"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=FOLDER / "result.json")
    parser.add_argument("--out", type=Path, default=FOLDER / "tau_vs_ce_weight.png")
    args = parser.parse_args()
    rows = load_rows(args.results)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, steps in zip(axes, (240, 960)):
        for key, label, marker in (("tau", "T=0 (greedy)", "o"), ("tau_t1", "T=1 (sampled)", "s")):
            dspark = sorted((r["ce"], r[key]) for r in rows if r["mode"] == "dspark" and r["steps"] == steps
                            and r.get(key) is not None)
            if not dspark:
                continue
            line, = ax.plot(*zip(*dspark), marker=marker, linestyle="", label=f"DSpark {label}")
            base = [r[key] for r in rows if r["mode"] == "dflash" and r["steps"] == steps and r.get(key) is not None]
            if base:
                ax.axhline(sum(base) / len(base), color=line.get_color(), linestyle="--", linewidth=1,
                           label=f"DFlash mode {label}")
        ax.set_title(f"{steps} steps")
        ax.set_xlabel("DSpark CE weight (L1 weight = 1 − CE)")
        ax.set_ylabel("held-out τ (32 prompts)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Testbed draft: loss weights vs acceptance length (block 7)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
