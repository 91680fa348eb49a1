"""Where a batch-1 round's wall time goes on the GPU: device busy vs idle, and the host path that leaves it idle.

`throughput_h200.py`'s profile times each step with a sync around it, which serialises host and device. This script
leaves the batched engine as it runs in the benchmark (CUDA graphs, the next block drafted before the round's one
sync) and only records CUDA events around each step it launches (propose, verify, admit, and the eager row moves and
retirements of continuous batching: no sync) and host clock stamps around each launch and the round's read-back wait.
From those:
  gpu_ms      per round, the device time of each step (event to event)
  idle_ms     per round, how long the device sat idle before each step (its start event minus the previous step's end
              event): the host had not launched it yet; also the idle in total, its largest five gaps, and which
              consecutive steps the most idle lies between
  host_ms     per round, the launch calls (graph replays), the read-back wait, and the host path from the read-back to
              the next verify's launch (commit, EOS, window, Python) — the part that can leave the device idle
For each method (plain decoding, DSpark, and DSpark with a draft vocabulary of --draft-vocab K when its counts ship),
first a clean timed pass (tokens/s as in the benchmark's batch-1 row), then the instrumented pass. Prints a table and
ends with one JSON line.

    python3 benchmarks/speed/round_timeline.py --target MODEL_DIR --draft DIR --prompts eval_prompts.jsonl
    python benchmarks/speed/round_timeline.py --smoke    # CPU: tiny random models, host clocks only
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput_h200 import assembled, smoke_models  # noqa: E402

from dspark.bench import throughput_job as job  # noqa: E402
from dspark.config import GenerationConfig  # noqa: E402
from dspark.engine.batch import BatchEngine  # noqa: E402
from dspark.formats.token_counts import draft_vocab_ids  # noqa: E402
from dspark.model.draft_vocab import restrict_draft_vocab  # noqa: E402
from dspark.model.target import Target  # noqa: E402


class Stamps:
    """CUDA events (or, on a CPU, host clocks) around each launched step, and host clocks around each call."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.steps: list[tuple[str, float, float, Any, Any]] = []  # (step, host start, host end, start, end)
        self.reads: list[tuple[float, float]] = []  # host clocks around each read-back wait

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def wrap(self, name: str, fn: Any, skip: Any = lambda: False) -> Any:
        def timed(*args: Any) -> Any:
            if skip():  # nested in another stamped step
                return fn(*args)
            host = time.perf_counter()
            start = self.mark()
            out = fn(*args)
            end = self.mark()
            self.steps.append((name, host, time.perf_counter(), start, end))
            return out
        return timed

    def device_ms(self) -> list[tuple[str, float, float]]:
        """(step, start, end) in ms from the first step's start, on the device clock (host clock on a CPU)."""
        if self.cuda:
            torch.cuda.synchronize()
            first = self.steps[0][3]
            return [(name, first.elapsed_time(s), first.elapsed_time(e)) for name, _, _, s, e in self.steps]
        first = self.steps[0][3]
        return [(name, 1000 * (s - first), 1000 * (e - first)) for name, _, _, s, e in self.steps]


def instrumented(engine: BatchEngine, prompts: list[list[int]], config: GenerationConfig) -> dict[str, float]:
    stamps = Stamps(engine.backend.device.type == "cuda")
    engine.propose = stamps.wrap("propose", type(engine).propose.__get__(engine))
    engine.verify = stamps.wrap("verify", type(engine).verify.__get__(engine))
    engine.admit = stamps.wrap("admit", type(engine).admit.__get__(engine))
    moving = []  # a move retires its source row: that retire is part of the move

    def move(sources: list[int], destinations: list[int]) -> None:
        moving.append(1)
        try:
            type(engine.round).move_rows(engine.round, sources, destinations)
        finally:
            moving.pop()

    engine.round.move_rows = stamps.wrap("move", move)
    engine.round.retire = stamps.wrap("retire", type(engine.round).retire.__get__(engine.round), lambda: bool(moving))
    reader = type(engine.round).packed_reader.__get__(engine.round)

    def packed_reader(n: int, t: int) -> Any:
        wait = reader(n, t)

        def timed() -> Any:
            began = time.perf_counter()
            rows = wait()
            stamps.reads.append((began, time.perf_counter()))
            return rows
        return timed

    engine.round.packed_reader = packed_reader
    try:
        began = time.perf_counter()
        results = engine.generate(prompts, config)
        wall = time.perf_counter() - began
    finally:
        del engine.propose, engine.verify, engine.admit, engine.round.packed_reader, engine.round.move_rows
        del engine.round.retire
    device = stamps.device_ms()
    rounds = sum(1 for name, *_ in device if name == "verify")
    busy: dict[str, float] = {}
    idle: dict[str, float] = {}
    gaps: list[tuple[float, str, str]] = []  # (idle ms, the step before, the step after)
    for i, (name, start, end) in enumerate(device):
        busy[name] = busy.get(name, 0.0) + (end - start)
        if i:
            gap = max(0.0, start - device[i - 1][2])
            idle[name] = idle.get(name, 0.0) + gap
            gaps.append((gap, device[i - 1][0], name))
    launches: dict[str, list[float]] = {}
    for name, h0, h1, _, _ in stamps.steps:
        launches.setdefault(name, []).append(1000 * (h1 - h0))
    verify_calls = [h0 for name, h0, *_ in stamps.steps if name == "verify"]
    host_gaps = [1000 * (next_call - read_end) for (_, read_end), next_call in zip(stamps.reads, verify_calls[1:])
            if next_call > read_end]  # read-back → the next verify's launch (same request or the next one)
    tokens = sum(len(r.tokens) for r in results)
    per = max(1, rounds)
    out = {"wall_ms": 1000 * wall, "rounds": rounds, "tokens": tokens,
           "tau": (tokens - len(results)) / per,  # each request's first token comes from its prefill, not a round
           "wall_per_round_ms": 1000 * wall / per,
           "device_span_ms": device[-1][2] - device[0][1]}
    for name in ("verify", "propose", "admit", "move", "retire"):
        out[f"gpu_{name}_ms"] = busy.get(name, 0.0) / per
        out[f"idle_before_{name}_ms"] = idle.get(name, 0.0) / per
        out[f"launch_{name}_ms"] = statistics.median(launches[name]) if launches.get(name) else 0.0
        out[f"{name}_calls"] = len(launches.get(name, []))
    out["read_wait_ms"] = statistics.median([1000 * (b - a) for a, b in stamps.reads]) if stamps.reads else 0.0
    out["host_path_ms"] = statistics.median(host_gaps) if host_gaps else 0.0
    out["host_path_p90_ms"] = sorted(host_gaps)[int(0.9 * len(host_gaps))] if host_gaps else 0.0
    idle_ms = sorted(g for g, *_ in gaps)
    out["idle_total_ms"] = sum(idle_ms)
    out["idle_gap_median_ms"] = statistics.median(idle_ms) if idle_ms else 0.0
    out["idle_largest_5_ms"] = sum(idle_ms[-5:])
    by_pair: dict[str, float] = {}
    for gap, before, after in gaps:
        by_pair[f"{before}>{after}"] = by_pair.get(f"{before}>{after}", 0.0) + gap
    out["idle_by_pair_ms"] = {k: round(v, 3) for k, v in sorted(by_pair.items(), key=lambda kv: -kv[1])[:6]}
    return out


def clean_pass(engine: BatchEngine, prompts: list[list[int]], config: GenerationConfig, repeats: int) -> dict:
    sync = torch.cuda.synchronize if engine.backend.device.type == "cuda" else (lambda: None)
    best = None
    for _ in range(repeats):
        sync()
        began = time.perf_counter()
        results = engine.generate(prompts, config)
        sync()
        seconds = time.perf_counter() - began
        tokens = sum(len(r.tokens) for r in results)
        if best is None or seconds < best[0]:
            best = (seconds, tokens, results)
    seconds, tokens, results = best
    rounds = sum(len(r.stats.accepted_counts) for r in results)
    return {"tokens_per_s": tokens / seconds, "seconds": seconds, "tokens": tokens, "rounds": rounds,
            "tokens_out": [r.tokens for r in results]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", help="the converted SmolLM2 folder (Hugging Face layout)")
    parser.add_argument("--draft", help="the DSpark draft folder (model.safetensors or model.part*)")
    parser.add_argument("--prompts", help="JSONL prompts (their 'code' lines when there are any)")
    parser.add_argument("--num-prompts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--draft-vocab", type=int, default=16384, help="K for the third method (0: skip it)")
    parser.add_argument("--repeats", type=int, default=3, help="clean passes per method (the fastest counts)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dspark-bench")
    parser.add_argument("--smoke", action="store_true", help="tiny random models on the CPU")
    args = parser.parse_args()
    if args.smoke:
        target, draft = (str(p) for p in smoke_models(args.work))
    else:
        target, draft = args.target, assembled(args.draft, args.work, "dspark")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    models = job.load_throughput_models(target, draft, device=device)
    source = args.prompts or "code"
    has_code = source.endswith(".jsonl") and '"code"' in Path(source).read_text()
    texts, suite, _ = job.load_prompt_texts(source, args.num_prompts, 0, "code" if has_code else None)
    prompts, _ = job.encode_all(models, texts, args.max_new_tokens)
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, eos_token_ids=tuple(models.eos_token_ids))
    length = max(map(len, prompts)) + args.max_new_tokens + 16
    methods: list[tuple[str, Any]] = [("plain", None), ("dspark", models.draft)]
    ids = None
    if args.draft_vocab:
        try:
            ids = draft_vocab_ids(draft, args.draft_vocab, models.draft.config.vocab_size)
        except (FileNotFoundError, ValueError) as err:
            print(f"no draft-vocabulary method: {err}")
        if ids is not None:
            methods.append((f"dspark+vocab{args.draft_vocab}", models.draft))
    rows: dict[str, dict] = {}
    reference = None
    for name, draft_model in methods:
        t = Target(models.model, models.draft.config.target_layer_ids)
        if draft_model is not None:
            from dspark.engine.batch import prepare_pair

            prepare_pair(t, draft_model)
            restrict_draft_vocab(draft_model, ids if "vocab" in name else None)
        engine = BatchEngine(t, draft_model, max_batch=1, max_length=length)
        if engine.graphs is not None:
            engine.warm_up()
        engine.generate(prompts[:1], GenerationConfig(max_new_tokens=16, eos_token_ids=config.eos_token_ids))
        clean = clean_pass(engine, prompts, config, args.repeats)
        tokens_out = clean.pop("tokens_out")
        reference = reference or tokens_out
        rows[name] = {**clean, "lossless": tokens_out == reference, **instrumented(engine, prompts, config)}
        del engine
        if device == "cuda":
            torch.cuda.empty_cache()
    plain = rows["plain"]["tokens_per_s"]
    print(f"{'method':22} {'tok/s':>8} {'×':>6} {'τ':>5} {'wall/rd':>8} {'gpu ver':>8} {'gpu prop':>8} "
          f"{'idle ver':>8} {'idle prop':>9} {'host path':>9} {'launch v':>8} {'launch p':>8} {'read':>7}")
    for name, r in rows.items():
        print(f"{name:22} {r['tokens_per_s']:8.1f} {r['tokens_per_s'] / plain:6.3f} {r['tau']:5.2f} "
              f"{r['wall_per_round_ms']:8.3f} {r['gpu_verify_ms']:8.3f} {r['gpu_propose_ms']:8.3f} "
              f"{r['idle_before_verify_ms']:8.3f} {r['idle_before_propose_ms']:9.3f} {r['host_path_ms']:9.3f} "
              f"{r['launch_verify_ms']:8.3f} {r['launch_propose_ms']:8.3f} {r['read_wait_ms']:7.3f}")
    from dspark.bench.runinfo import collect_run_info

    run = collect_run_info(" ".join(["python3", *sys.argv]), device)
    print(json.dumps({"device": run.device, "commit": run.commit, "command": run.command, "suite": suite,
                      "prompts": len(prompts), "max_new_tokens": args.max_new_tokens,
                      "methods": {k: {m: (round(v, 4) if isinstance(v, float) else v) for m, v in r.items()}
                                  for k, r in rows.items()}}))


if __name__ == "__main__":
    main()
