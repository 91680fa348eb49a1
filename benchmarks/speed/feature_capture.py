"""What capturing a target's features costs: `Target.forward` (forward hooks on the chosen layers and the final norm)
against the way it worked before c239f61, `output_hidden_states=True` (every layer's output kept, then the chosen ones
concatenated). Online training runs this forward once per sequence (no cache, logits for the last position only).

    python3 benchmarks/speed/feature_capture.py [--models smollm2,qwen3-8b] [--shapes 1x8192,8x2048]
                                                [--repeats 5] [--threads 2] [--out DIR]

Models have random weights and real shapes: `smollm2` (SmolLM2-135M's config, the shipped draft's five target layers
1/8/14/21/27) and `qwen3-8b` (Qwen3-8B's config, 36 layers, hidden 4,096; five layers spread like DSpark's;
GPU only, 16 GB in bf16). Per model, shape and method: the median forward time over the repeats (after one warm-up)
and the peak memory the forward adds above the weights (CUDA: the allocator's peak; CPU, Linux: the process's resident
high-water mark, reset before each forward through /proc/self/clear_refs after malloc_trim); both methods' features
are compared bit for bit (row sums at up to 64 positions).
Prints a table and one JSON line (also DIR/feature_capture.json). A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

MODELS = {  # name -> (HF config class, fields, target layer ids)
    "smollm2": ("LlamaConfig", dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                    num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True,
                                    max_position_embeddings=8192), (1, 8, 14, 21, 27)),
    "qwen3-8b": ("Qwen3Config", dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                                     num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                                     max_position_embeddings=32768), (1, 9, 17, 25, 33)),
}
METHODS = ("hooks", "all-layers")


def build(name: str, device: str):
    import torch
    import transformers

    from dspark import Target

    kind, fields, layers = MODELS[name]
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(getattr(transformers, kind)(**fields), dtype=dtype)
    return Target(model.eval(), layers)


def forward(target, method: str, ids):
    """[B, T] -> the chosen layers' features [B, T, m·d]."""
    import torch

    if method == "hooks":
        return target.forward(ids, logits_to_keep=1).features
    with torch.inference_mode():  # the pre-c239f61 capture, kept here as the baseline
        hidden = target.model(input_ids=ids, use_cache=False, output_hidden_states=True, logits_to_keep=1).hidden_states
        return torch.cat([hidden[i + 1] for i in target.layer_ids], dim=-1)


def _resident(field: str) -> int:
    """VmRSS / VmHWM of this process in bytes (Linux)."""
    return 1024 * int(re.search(field + r":\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def _reset_cpu_peak() -> int:
    """Give freed heap back, reset the resident high-water mark; returns the resident bytes now."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")
    return _resident("VmRSS")


def measure(target, name: str, method: str, rows: int, tokens: int, repeats: int, device: str) -> dict:
    import torch

    ids = torch.randint(0, target.vocab_size, (rows, tokens), generator=torch.Generator().manual_seed(0)).to(device)
    cuda = device == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _reset_cpu_peak()
    features = forward(target, method, ids)
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = _resident("VmHWM") - base
    checksum = features.float().sum(-1)[:, :: max(1, tokens // 64)].cpu()  # [B, ≤64] to compare the methods
    del features
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        began = time.perf_counter()
        forward(target, method, ids)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - began)
    return {"model": name, "method": method, "rows": rows, "tokens": tokens,
            "median_ms": 1000 * statistics.median(times), "peak_added_mib": peak / 2**20,
            "checksum": checksum.tolist()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=None, help="default: smollm2 on the CPU, smollm2,qwen3-8b on a GPU")
    parser.add_argument("--shapes", default=None, help="rows x tokens, comma-separated (default: 1x2048,8x512 on "
                                                       "the CPU, 1x8192,8x2048 on a GPU)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    models = (args.models or ("smollm2,qwen3-8b" if device == "cuda" else "smollm2")).split(",")
    shapes = [tuple(map(int, s.split("x"))) for s in (args.shapes or ("1x8192,8x2048" if device == "cuda"
                                                                       else "1x2048,8x512")).split(",")]
    rows = []
    for name in models:
        target = build(name, device)
        for r, t in shapes:
            for method in METHODS:
                rows.append(measure(target, name, method, r, t, args.repeats, device))
                if device == "cuda":
                    torch.cuda.empty_cache()
        del target
    print(f"{'model':>9} {'rows × tokens':>14} {'method':>11} {'median':>10} {'peak added':>11} {'same features':>14}")
    for i in range(0, len(rows), 2):
        hooks, baseline = rows[i], rows[i + 1]
        same = hooks["checksum"] == baseline["checksum"]  # bit for bit
        for row in (hooks, baseline):
            row["same_features"] = bool(same)
            print(f"{row['model']:>9} {row['rows']:>6} × {row['tokens']:<6} {row['method']:>11} "
                  f"{row['median_ms']:>7.1f} ms {row['peak_added_mib']:>7.0f} MiB {'yes' if same else 'NO':>14}")
    from dspark.bench.runinfo import device_name, git_commit

    commit, dirty = git_commit()
    report = {"device": device_name(device), "commit": commit, "dirty": dirty, "torch": torch.__version__,
              "repeats": args.repeats, "rows": [{k: v for k, v in r.items() if k != "checksum"} for r in rows]}
    if args.out:
        from dspark.files import write_json

        write_json(args.out / "feature_capture.json", report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
