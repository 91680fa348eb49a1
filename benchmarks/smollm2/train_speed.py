"""Training throughput of the SmolLM2 DSpark draft on one GPU, without the model files: a randomly initialised
target of SmolLM2-135M's shape, synthetic sequences of the regenerated data's lengths, the real trainer.

For each setting BATCHxANCHORS (a trailing "c": the target's hidden states memoised on the GPU after their first
pass, `OnlineHiddenStates(cache_bytes=…)`; --examples is small enough that the second half of a run is later epochs)
it runs `train()` for --steps steps and reports the median step time of the last half, sequence tokens/s and block
tokens/s; then one profiled run (torch.profiler) gives the GPU-busy fraction of a
step and the kernels / host calls that take the time. Timing only: the weights are random, the losses mean nothing.
Prints a table and ends with one JSON line.

    python benchmarks/smollm2/train_speed.py --settings 8x256,8x256c,32x256,32x256c --steps 60
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dspark import Target  # noqa: E402
from dspark.config import TrainConfig  # noqa: E402
from dspark.model.draft import DSparkDraft  # noqa: E402
from dspark.train.data import Example  # noqa: E402
from dspark.train.hidden import OnlineHiddenStates  # noqa: E402
from dspark.train.recipe import draft_config_from_target  # noqa: E402
from dspark.train.trainer import train  # noqa: E402

SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
               rms_norm_eps=1e-5, tie_word_embeddings=True)
DRAFT_SHAPE = dict(num_layers=2, block_size=7, target_layers=5, markov_rank=32, mask_token_id=16)


def synthetic_examples(n: int, seed: int = 0) -> list[Example]:
    """Prompt 40–250 tokens (unsupervised) + response 60–256 tokens (supervised), like the regenerated data."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        p, r = rng.randint(40, 250), rng.randint(60, 256)
        ids = tuple(rng.randrange(100, 49000) for _ in range(p + r))
        out.append(Example(f"s{i}", ids, (0,) * p + (1,) * r))
    return out


def build(device: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMOLLM2)).to(device, torch.bfloat16).eval()
    config = draft_config_from_target(model.config, mode="dspark", heads=True, **DRAFT_SHAPE)
    draft = DSparkDraft(config).to(device)
    draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    return model, draft


def run(model, draft, examples, batch: int, anchors: int, steps: int, attention: str, backend: str,
        cached: bool = False) -> dict:
    source = OnlineHiddenStates(Target(model, draft.config.target_layer_ids), examples,
                                cache_bytes=40 * 2**30 if cached else 0)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    config = TrainConfig(steps=steps, lr=1e-4, batch_size=batch, num_anchors=anchors, max_length=1024,
                         loss_backend=backend, attention=attention, ce_weight=0.5, l1_weight=0.5)
    result = train(draft, source, config, None, progress=False)
    tail = [m.step_s for m in result.history[steps // 2:]]
    step_s = statistics.median(tail)
    seq_tokens = statistics.median(m.tokens_per_s * m.step_s for m in result.history[steps // 2:])
    return {"batch": batch, "anchors": anchors, "cached": cached, "attention": attention, "loss_backend": backend,
            "step_ms": 1e3 * step_s, "seq_tokens_per_s": seq_tokens / step_s,
            "block_tokens_per_s": batch * anchors * draft.config.block_size / step_s,
            "first_steps_s": sum(m.step_s for m in result.history[:10]),
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
            "cached_gib": source.cached_bytes / 2**30}


def profile(model, draft, examples, batch: int, anchors: int, attention: str, backend: str, cached: bool,
            steps: int = 6) -> dict:
    from torch.profiler import ProfilerActivity, profile as torch_profile

    run(model, draft, examples, batch, anchors, 4, attention, backend, cached)  # compiled already; settle caches
    began = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run(model, draft, examples, batch, anchors, steps, attention, backend, cached)
        torch.cuda.synchronize()
    wall = time.perf_counter() - began
    events = prof.key_averages()
    gpu_us = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA")
    table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=30, max_name_column_width=70)
    cpu_table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=25, max_name_column_width=70)
    return {"steps": steps, "wall_s": wall, "gpu_busy_s": gpu_us / 1e6, "busy_fraction": gpu_us / 1e6 / wall,
            "cuda_table": table, "cpu_table": cpu_table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default="8x256,8x256c,32x256,32x256c",
                        help="BATCHxANCHORS[c], comma separated (c: hidden states memoised)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--attention", default="auto")
    parser.add_argument("--loss-backend", default="inductor")
    parser.add_argument("--profile", default="32x256c", help="BATCHxANCHORS[c] to profile ('' for none)")
    parser.add_argument("--examples", type=int, default=512, help="synthetic sequences (repeated as epochs)")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, draft = build(device)
    examples = synthetic_examples(args.examples)
    rows = []
    for setting in filter(None, args.settings.split(",")):
        b, a = map(int, setting.rstrip("c").split("x"))
        rows.append(run(model, draft, examples, b, a, args.steps, args.attention, args.loss_backend,
                        setting.endswith("c")))
        r = rows[-1]
        print(f"batch {b:3d} anchors {a:4d} {'cached' if r['cached'] else 'online'}: {r['step_ms']:7.1f} ms/step  {r['seq_tokens_per_s']:9.0f} seq tok/s  "
              f"{r['block_tokens_per_s']:10.0f} block tok/s  (first 10 steps {r['first_steps_s']:.1f}s, peak "
              f"{r['peak_gib'] or 0:.1f} GiB of which cache {r['cached_gib']:.1f})", flush=True)
    prof = None
    if args.profile and device == "cuda":
        b, a = map(int, args.profile.rstrip("c").split("x"))
        prof = profile(model, draft, examples, b, a, args.attention, args.loss_backend, args.profile.endswith("c"))
        print(prof.pop("cuda_table"))
        print(prof.pop("cpu_table"))
        print(f"profiled {prof['steps']} steps: wall {prof['wall_s']:.3f}s, GPU busy {prof['gpu_busy_s']:.3f}s "
              f"({100 * prof['busy_fraction']:.0f} %)")
    print(json.dumps({"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                      "torch": torch.__version__, "rows": rows, "profile": prof}))


if __name__ == "__main__":
    main()
