"""Confidence scheduling where verify costs grow: an 8B-class round-cost table and what Algorithm 1 would gain on it.

Three stages, each writing one JSON file into --out:
  record   the shipped SmolLM2 draft's blocks (bench/schedule_prediction.record_blocks): SmolLM2-135M-Instruct with
           the draft, every draft verified, held-out HumanEval + GSM8K prompts, T = 0 -> blocks.json (survival per
           slot, drafts verified, accepted). CPU or GPU.
  costs    on a GPU: a random bf16 target with Llama-3-8B's shapes and a random DSpark draft for it (5 layers, block
           7, Markov rank 256: the costs do not depend on the weights); the engine's round cost (draft block + verify,
           CUDA graphs) at verify widths 1 … 8 and rows 1 … 256, and plain decoding's step at the same rows ->
           costs.json
  predict  blocks.json + costs.json -> prediction.json: per concurrency, the chain verifying every block vs
           Algorithm 1 on the measured table (tokens/s, speedup over plain decoding, drafts verified), and a plot
Prints a table and ends with one JSON line.

    python benchmarks/speed/schedule_8b.py --stage record --out DIR          # here, or on the GPU
    python3 benchmarks/speed/schedule_8b.py --stage costs --out $OUT         # on the H200
    python benchmarks/speed/schedule_8b.py --stage predict --blocks DIR/blocks.json --costs DIR/costs.json --out DIR
    python benchmarks/speed/schedule_8b.py --stage costs --smoke --out /tmp/x  # CPU: a tiny target, same code path
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dspark.bench.schedule_prediction import predict_table  # noqa: E402
from dspark.config import DraftConfig, GenerationConfig  # noqa: E402
from dspark.engine.batch import BatchEngine  # noqa: E402
from dspark.engine.schedule import StepCostTable  # noqa: E402
from dspark.engine.stats import BlockRecord  # noqa: E402
from dspark.files import write_json  # noqa: E402
from dspark.model.target import Target  # noqa: E402

LLAMA3_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0, max_position_embeddings=8192)
SMOKE = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, rope_theta=10000.0, max_position_embeddings=2048)
# vLLM's adaptive verification (published): +41 % over no speculation at 256 concurrent requests on a large MoE,
# where a fixed k = 7 fell 53 % below no speculation
VLLM_ADAPTIVE = {"rows": 256, "adaptive_vs_no_spec": 1.41, "fixed_k7_vs_no_spec": 0.47}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def record(args: argparse.Namespace) -> dict:
    from dspark.assets import smollm2_draft
    from dspark.bench import throughput_job as job
    from dspark.bench.schedule_prediction import record_blocks
    from dspark.formats.smollm2 import smollm2_path

    device = "cuda" if torch.cuda.is_available() else "cpu"
    models = job.load_throughput_models(smollm2_path(), str(smollm2_draft()), device=device)
    texts = []
    for suite in ("code", "math"):
        texts += job.load_prompt_texts(suite, args.num_prompts // 2, args.seed)[0]
    prompts, _ = job.encode_all(models, texts, args.max_new_tokens)
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, eos_token_ids=models.eos_token_ids)
    engine = BatchEngine(Target(models.model, models.draft.config.target_layer_ids), models.draft, args.rows,
                         max(map(len, prompts)) + args.max_new_tokens + 16)
    began = time.perf_counter()
    blocks, results = record_blocks(engine, prompts, config)
    log(f"record: {len(blocks)} blocks from {len(prompts)} prompts in {time.perf_counter() - began:.0f} s")
    return {"draft": "shipped SmolLM2-135M-Instruct draft", "device": device, "prompts": len(prompts),
            "suites": "HumanEval + GSM8K", "max_new_tokens": args.max_new_tokens, "temperature": 0.0,
            "new_tokens": sum(len(r.tokens) for r in results),
            "blocks": [[list(b.survival), b.verified, b.accepted] for b in blocks]}


def random_pair(shapes: dict, device: str, dtype: torch.dtype) -> tuple[Target, torch.nn.Module]:
    """A random target with `shapes` (Llama) and a random 5-layer DSpark draft for it, on `device` in `dtype`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from dspark.model.draft import DSparkDraft

    config = LlamaConfig(**shapes, tie_word_embeddings=False)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
            n = shapes["num_hidden_layers"]
            heads, kv = shapes["num_attention_heads"], shapes["num_key_value_heads"]
            layer_ids = tuple(sorted({1, n // 4, n // 2, 3 * n // 4, n - 3} & set(range(n - 1))))
            draft_config = DraftConfig(hidden_size=shapes["hidden_size"], num_hidden_layers=5, num_attention_heads=heads,
                                       num_key_value_heads=kv, head_dim=shapes["hidden_size"] // heads,
                                       intermediate_size=shapes["intermediate_size"], vocab_size=shapes["vocab_size"],
                                       block_size=7, target_layer_ids=layer_ids, mask_token_id=shapes["vocab_size"] - 1,
                                       num_target_layers=n, markov_rank=256 if n > 4 else 8)
            draft = DSparkDraft(draft_config).eval()
    finally:
        torch.set_default_dtype(previous)
    return Target(model, layer_ids), draft


def costs(args: argparse.Namespace) -> dict:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shapes = SMOKE if args.smoke else LLAMA3_8B
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    rows = [int(r) for r in args.rows_list.split(",")]
    target, draft = random_pair(shapes, device, dtype)
    log(f"costs: target {sum(p.numel() for p in target.model.parameters()) / 1e9:.2f} B parameters, draft "
        f"{sum(p.numel() for p in draft.parameters()) / 1e9:.2f} B, {device}")
    out: dict = {"shapes": shapes, "draft_layers": 5, "block_size": 7, "context": args.context, "dtype": str(dtype),
                 "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "round_ms": {}, "plain_ms": {}}
    with torch.no_grad():
        for name, with_draft in (("round_ms", True), ("plain_ms", False)):
            engine = BatchEngine(target, draft if with_draft else None, max(rows), args.context + 16)
            for r in rows:
                began = time.perf_counter()
                table = engine.measure_step_costs(r, None if with_draft else [1], repeats=args.repeats,
                                                  context=args.context)
                out[name][str(r)] = {str(w): round(ms, 4) for w, ms in table.latency_ms().items()}
                log(f"{name} rows {r}: {out[name][str(r)]} ({time.perf_counter() - began:.1f} s)")
                write_json(args.out / "costs.json", out)  # what is measured so far survives a cut run
            del engine
            if device == "cuda":
                torch.cuda.empty_cache()
    return out


def predict(args: argparse.Namespace) -> dict:
    recorded, measured = json.loads(args.blocks.read_text()), json.loads(args.costs.read_text())
    recorded, measured = recorded.get("record", recorded), measured.get("costs", measured)  # or a merged result.json
    blocks = [BlockRecord(tuple(s), v, a) for s, v, a in recorded["blocks"]]
    tables = {int(r): StepCostTable.from_latency_ms({int(w): ms for w, ms in by.items()})
              for r, by in measured["round_ms"].items()}
    plain = {int(r): 1000.0 / by["1"] for r, by in measured["plain_ms"].items()}
    rows = []
    for p in predict_table(blocks, tables, plain, rules=("none", "algorithm1"), rounds=args.rounds, seed=args.seed):
        rows.append({"rows": p.rows, "rule": p.rule, "drafts_per_round": round(p.drafts_per_round, 3),
                     "tau": round(p.tau, 3), "tokens_per_second": round(p.tokens_per_second, 1),
                     "speedup_over_plain": round(p.speedup, 3)})
    by = {(r["rows"], r["rule"]): r for r in rows}
    print(f"{'rows':>5} {'plain tok/s':>12} {'verify-all ×':>13} {'Algorithm 1 ×':>14} {'A1 drafts':>10} "
          f"{'A1 vs all':>10} {'A1 or plain ×':>14}")
    for r in sorted({r["rows"] for r in rows}):
        none, a1 = by[r, "none"], by[r, "algorithm1"]
        a1["gain_over_verify_all"] = round(a1["tokens_per_second"] / none["tokens_per_second"] - 1, 4)
        a1["with_drafting_off_when_slower"] = round(max(1.0, a1["speedup_over_plain"]), 3)
        print(f"{r:5d} {r * plain[r]:12.0f} {none['speedup_over_plain']:13.3f} {a1['speedup_over_plain']:14.3f} "
              f"{a1['drafts_per_round']:10.2f} {a1['gain_over_verify_all']:+10.1%} "
              f"{a1['with_drafting_off_when_slower']:14.3f}")
    blocks_tau = sum(b.accepted + 1 for b in blocks if b.verified == len(b.survival)) / max(
        1, sum(b.verified == len(b.survival) for b in blocks))
    out = {"predictions": rows, "plain_tokens_per_second": {str(r): round(r * s, 1) for r, s in plain.items()},
           "blocks": len(blocks), "blocks_tau": round(blocks_tau, 3), "vllm_adaptive": VLLM_ADAPTIVE,
           "costs_device": measured["device"], "context": measured["context"]}
    if args.plot:
        plot(rows, args.out / "prediction.png", measured["device"])
    return out


def plot(rows: list[dict], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for rule, label in (("none", "verify every draft (γ = 7)"), ("algorithm1", "Algorithm 1")):
        points = sorted((r["rows"], r["speedup_over_plain"]) for r in rows if r["rule"] == rule)
        ax.plot(*zip(*points), marker="o", label=label)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.scatter([VLLM_ADAPTIVE["rows"]] * 2, [VLLM_ADAPTIVE["adaptive_vs_no_spec"],
                                             VLLM_ADAPTIVE["fixed_k7_vs_no_spec"]],
               marker="x", color="black", label="vLLM published (adaptive / fixed k = 7), large MoE")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent rows")
    ax.set_ylabel("predicted speedup over plain decoding")
    ax.set_title(f"8B-class target ({device.replace('NVIDIA ', '')} round costs), shipped draft's blocks")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=("record", "costs", "predict"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--num-prompts", type=int, default=40, help="record: half HumanEval, half GSM8K")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--rows", type=int, default=8, help="record: rows decoded together")
    parser.add_argument("--rows-list", default="1,2,4,8,16,32,64,128,256", help="costs: batch sizes")
    parser.add_argument("--context", type=int, default=1024, help="costs: positions each row attends to")
    parser.add_argument("--repeats", type=int, default=5, help="costs: interleaved samples per width (median)")
    parser.add_argument("--blocks", type=Path, help="predict: blocks.json")
    parser.add_argument("--costs", type=Path, help="predict: costs.json")
    parser.add_argument("--rounds", type=int, default=4000, help="predict: simulated rounds per batch size")
    parser.add_argument("--plot", action="store_true", help="predict: also prediction.png")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="costs: a tiny target on the CPU")
    args = parser.parse_args()
    if args.smoke:
        args.rows_list, args.context, args.repeats = "1,2,4", 64, 2
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"record": record, "costs": costs, "predict": predict}[args.stage](args)
    result["command"] = " ".join(["python3", *sys.argv])
    path = write_json(args.out / {"record": "blocks.json", "costs": "costs.json",
                                  "predict": "prediction.json"}[args.stage], result)
    summary = {k: v for k, v in result.items() if k != "blocks"}
    print(json.dumps({"file": str(path), **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
