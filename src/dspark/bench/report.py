"""`dspark bench report`: turn result files into report.md plus PNG plots in one folder.

Tables: the runs (device, commit, command), acceptance per suite and temperature (with a pooled 'all' row and a
bootstrap interval over prompts), each later run's τ against the first's on the prompts both measured (`compare.py`),
our τ beside the seed's and the paper's, and throughput with speedups (every row, then speedup by concurrency) when the
results hold any. Plots come from
`plots.py`; each is drawn only from data that exists. All numbers are recomputed from the stored round tables.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from dspark.bench.acceptance import pooled
from dspark.bench.compare import compare_results, tau_interval
from dspark.bench.errors import BenchError
from dspark.files import write_text
from dspark.bench.plots import (plot_per_position, plot_speedup_by_suite, plot_tau_histogram,
                                plot_throughput_vs_concurrency)
from dspark.bench.reference import (REFERENCES, SEED_BEST_SPEEDUP, SEED_DSPARK_TOKENS_PER_S, SEED_PLAIN_TOKENS_PER_S,
                                    SEED_SPEEDUP)
from dspark.bench.results import BenchResult, load_result

Run = tuple[str, BenchResult]  # (label, result)
PLOTS = (("tau_histogram.png", "τ histogram"), ("per_position.png", "per-position acceptance"),
         ("speedup_by_suite.png", "speedup by suite"), ("throughput_vs_concurrency.png", "throughput vs concurrency"))


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    plots: tuple[Path, ...]


def labelled_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Load each result file, labelled by its file name (made unique with a counter)."""
    runs, seen = [], {}
    for path in paths:
        stem = Path(path).stem
        seen[stem] = seen.get(stem, 0) + 1
        runs.append((stem if seen[stem] == 1 else f"{stem}-{seen[stem]}", load_result(path)))
    return runs


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)]


def _runs_section(runs: Sequence[Run]) -> list[str]:
    rows = [(label, r.kind, r.target, r.draft or "–", r.run.device,
             r.run.commit[:12] + (" (dirty)" if r.run.dirty else ""), r.run.dspark_version, r.run.created)
            for label, r in runs]
    lines = ["## Runs", "", *_table(("run", "kind", "target", "draft", "device", "commit", "dspark", "created"), rows),
             "", "Commands:", ""]
    return lines + [f"- `{label}`: `{r.run.command}`" for label, r in runs] + [""]


def _acceptance_section(runs: Sequence[Run]) -> list[str]:
    rows_in = [(label, row) for label, r in runs for row in (*r.acceptance, *(pooled(r.acceptance)
                                                                                if len(r.acceptance) > 1 else ()))]
    if not rows_in:
        return ["## Acceptance", "", "No acceptance rows in these results.", ""]
    gamma = max(row.drafts_per_round for _, row in rows_in)
    header = ("run", "suite", "T", "prompts", "skipped", "rounds", "mean τ", "τ 95 %", "acc. rate",
              *(f"p{k}" for k in range(1, gamma + 1)))
    rows = []
    for label, row in sorted(rows_in, key=lambda lr: (lr[0], lr[1].temperature, lr[1].suite == "all")):
        positions = [_fmt(v) for v in row.reached_per_position]
        positions += [""] * (gamma - row.drafts_per_round)
        ci = tau_interval(row)
        rows.append((label, row.suite, f"{row.temperature:g}", row.prompts, row.skipped, row.rounds,
                     _fmt(row.mean_tau), "–" if ci is None else f"{ci.low:.2f}–{ci.high:.2f}",
                     _fmt(row.acceptance_rate), *positions))
    return ["## Acceptance", "",
            "τ = accepted + 1 per verify round, pooled over every round of the suite (rounds that proposed no draft, "
            "such as the last one when max_new_tokens leaves no room, are left out). Acceptance rate = accepted / "
            "proposed. pk = P(draft k accepted | drafts 1 … k−1 accepted); – where no round got that far. τ 95 % = "
            "percentile bootstrap interval over the prompts (– for files without per-prompt records).", "",
            *_table(header, rows), ""]


def _paired_section(runs: Sequence[Run]) -> list[str]:
    """Each later run with acceptance rows against the first one, on the prompts both measured."""
    measured = [(label, r) for label, r in runs if r.acceptance]
    if len(measured) < 2:
        return []
    (base_label, base), rows, notes = measured[0], [], []
    for label, r in measured[1:]:
        try:
            for c in compare_results(r, base, resamples=2_000):
                rows.append((label, c.suite, f"{c.temperature:g}", c.prompts, _fmt(c.tau_a.value, 3),
                             _fmt(c.tau_b.value, 3), _fmt(c.ratio.value, 3), f"{c.ratio.low:.3f}–{c.ratio.high:.3f}"))
        except BenchError as err:
            notes.append(f"- `{label}` is not paired with `{base_label}`: {err}")
    return ["## Paired against the first run", "", f"τ of each run over τ of `{base_label}` on the prompts both "
            "measured (same suites, seed and output length; at T = 0 the same target tokens), with a 95 % "
            "percentile bootstrap interval over those prompts (2,000 resamples; `dspark bench compare` for more).", "",
            *(_table(("run", "suite", "T", "prompts", "τ run", f"τ {base_label}", "ratio", "95 %"), rows)
              if rows else []), "", *notes, *([""] if notes else [])]


def _reference_section(runs: Sequence[Run]) -> list[str]:
    columns = sorted({(label, row.temperature) for label, r in runs for row in r.acceptance})
    if not columns:
        return []
    suites = list(dict.fromkeys([*REFERENCES, *(row.suite for _, r in runs for row in r.acceptance)]))
    header = ("suite", "published benchmark", "seed τ (Kimi K3)", "paper τ (Qwen3-8B, T=1)",
              *(f"{label} T={t:g}" if len(runs) > 1 else f"ours T={t:g}" for label, t in columns))
    rows = []
    for suite in suites:
        ref = REFERENCES.get(suite)
        ours = {(label, row.temperature): row.mean_tau for label, r in runs for row in r.acceptance
                if row.suite == suite and row.rounds}
        rows.append((suite, ref.benchmark if ref else "(your prompts)", _fmt(ref.seed_tau if ref else None),
                     _fmt(ref.paper_tau if ref else None), *(_fmt(ours.get(c)) for c in columns)))
    return ["## Against the seed and the paper", "",
            "Seed: Kimi K3 with Kimi-K3-DSpark (block 7). Paper: DSpark (arXiv 2607.05147) Table 1, Qwen3-8B, T = 1, "
            "block 7. Our suites are stand-ins built from data shipped on PyPI (see `dspark bench suites`); they "
            "match the published sets for code, GSM8K and MT-Bench, not for AIME or 1M-token RULER.", "",
            *_table(header, rows), ""]


def _throughput_section(runs: Sequence[Run]) -> list[str]:
    rows = [(label, t.suite, t.method, t.scheduler, t.concurrency, t.requests, f"{t.temperature:g}", t.new_tokens,
             _fmt(t.seconds), _fmt(t.tokens_per_second, 1), _fmt(r.speedup(t)), _fmt(r.speedup_per_tau(t)),
             t.baseline or "–", _fmt(t.mean_tau), _yes_no(t.lossless), t.status + (f": {t.note}" if t.note else ""))
            for label, r in runs for t in r.throughput]
    if not rows:
        return ["## Throughput", "", "No throughput rows in these results.", ""]
    return ["## Throughput", "", "Speedup = tokens/s over the baseline method measured in the same run, same suite, "
            "concurrency and temperature (full measurements only). Mean τ = tokens committed per verify round "
            "(accepted + 1, every round counted); speedup/τ is the share of that ideal speedup (drafting and "
            "verifying for free) the engine keeps. Lossless: at T = 0, every request of the row is "
            "token-identical to our plain decoding at the same concurrency. The seed reports "
            f"{SEED_PLAIN_TOKENS_PER_S:g} tok/s without the draft and {SEED_DSPARK_TOKENS_PER_S:g} tok/s with it "
            f"({SEED_SPEEDUP:g}×; up to {SEED_BEST_SPEEDUP:g}× on easy text) for Kimi K3, batch 1.", "",
            *_table(("run", "suite", "method", "scheduler", "concurrency", "requests", "T", "new tokens", "seconds",
                     "tok/s", "speedup", "speedup/τ", "baseline", "mean τ", "lossless", "status"), rows), ""]


def _yes_no(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "NO")


def _speedup_section(runs: Sequence[Run]) -> list[str]:
    """Speedup by concurrency, one row per (run, suite, T, method, scheduler); a cell says why when there is none."""
    levels = sorted({t.concurrency for _, r in runs for t in r.throughput})
    if not levels:
        return []
    cells: dict[tuple, dict[int, str]] = {}
    for label, r in runs:
        for t in r.throughput:
            key = (label, t.suite, f"{t.temperature:g}", t.method, t.scheduler)
            speedup = r.speedup(t)
            cells.setdefault(key, {})[t.concurrency] = f"{speedup:.2f}×" if speedup is not None else (
                t.status if t.status != "ok" else "–")
    rows = [(*key, *(cells[key].get(c, "–") for c in levels)) for key in cells]
    return ["## Speedup by concurrency", "", "Each method's tokens/s over its baseline's (our plain decoding) at the "
            "same concurrency, in the same run; n/a = the method does not run there, timeout = cut by its time "
            "budget.", "", *_table(("run", "suite", "T", "method", "scheduler", *(f"C={c}" for c in levels)), rows),
            ""]


def render_markdown(runs: Sequence[Run], plots: Sequence[Path]) -> str:
    names = {p.name for p in plots}
    figures = [line for name, title in PLOTS if name in names for line in (f"![{title}]({name})", "")]
    lines = ["# dspark benchmark report", "", f"{len(runs)} result file(s).", "",
             *_runs_section(runs), *_acceptance_section(runs), *_paired_section(runs), *_reference_section(runs),
             *_throughput_section(runs),
             *_speedup_section(runs),
             "## Plots", "", *(figures or ["No data to plot.", ""])]
    return "\n".join(lines)


def write_report(runs: Sequence[Run], out_dir: str | Path) -> ReportFiles:
    """Write report.md and the plots that have data into `out_dir` (created if needed)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    many = len(runs) > 1
    acceptance = [(f"{label}/{row.suite}" if many else row.suite, row) for label, r in runs for row in r.acceptance]
    speeds = [(label if many else "", r.speedup(t), t) for label, r in runs for t in r.throughput
              if t.status == "ok" and t.seconds > 0]
    drawn = (plot_tau_histogram(acceptance, out / PLOTS[0][0]), plot_per_position(acceptance, out / PLOTS[1][0]),
             plot_speedup_by_suite(speeds, out / PLOTS[2][0]),
             plot_throughput_vs_concurrency(speeds, out / PLOTS[3][0]))
    plots = tuple(p for p in drawn if p is not None)
    markdown = write_text(out / "report.md", render_markdown(runs, plots))
    return ReportFiles(markdown, plots)
