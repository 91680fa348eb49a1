"""What-if τ from per-position acceptance: would a DSpark draft with its twin's first drafted token reach 1.15×?

Greedy τ is 1 + Σ_k Π_{j≤k} a_j over the conditional acceptance a_j of each drafted position (the eval summaries'
`per_position`). For each suite this prints the modelled τ of the DSpark draft and of its DFlash-mode twin next to the
measured ones, and a hybrid: the twin's first-position acceptance followed by the DSpark draft's later ones. Pure
arithmetic on a summary written by `train_draft.py --stage eval`; nothing is run or trained. Ends with one JSON line.

    python benchmarks/smollm2/acceptance_model.py benchmarks/results/smollm2/run6/eval-summary.json
    python benchmarks/smollm2/acceptance_model.py benchmarks/results/smollm2/run12/eval-summary.json --draft unanchored
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def modelled_tau(acceptance: list[float]) -> float:
    """1 + Σ_k Π_{j≤k} a_j: expected tokens per verify round when position j is accepted with probability a_j given
    that every earlier one was."""
    tau, reach = 1.0, 1.0
    for a in acceptance:
        reach *= a
        tau += reach
    return tau


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("summary", type=Path, help="eval summary with <suite>/dspark and <suite>/dflash rows")
    parser.add_argument("--dflash-drafts", type=int, default=6, help="positions the DFlash-mode draft drafts (γ − 1)")
    parser.add_argument("--draft", default="dspark", choices=("dspark", "unanchored"),
                        help="the summary's DSpark-headed mode to set against the twin (run 12: unanchored)")
    args = parser.parse_args()
    rows = json.loads(args.summary.read_text())["eval"]
    suites = [key.split("/")[0] for key in rows
              if key.endswith(f"/{args.draft}") and f"{key.split('/')[0]}/dflash" in rows]
    out = {}
    print(f"{'suite':10s} {'DSpark τ':>16s} {'twin τ':>16s} {'hybrid τ':>9s} {'hybrid / twin':>14s}")
    for suite in suites:
        dspark, twin = rows[f"{suite}/{args.draft}"], rows[f"{suite}/dflash"]
        a, b = dspark["per_position"], twin["per_position"][: args.dflash_drafts]
        hybrid = modelled_tau(b[:1] + a[1:])
        out[suite] = {"dspark_measured": dspark["tau"], "dspark_modelled": modelled_tau(a),
                      "twin_measured": twin["tau"], "twin_modelled": modelled_tau(b), "hybrid_modelled": hybrid,
                      "hybrid_over_twin": hybrid / twin["tau"]}
        r = out[suite]
        print(f"{suite:10s} {r['dspark_measured']:7.3f} ({r['dspark_modelled']:.3f}) {r['twin_measured']:7.3f} "
              f"({r['twin_modelled']:.3f}) {hybrid:9.3f} {r['hybrid_over_twin']:14.3f}")
    print("(measured (modelled))")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
