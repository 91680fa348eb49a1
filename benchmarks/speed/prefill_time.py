"""How long a request's admission takes in the batched engine (stage + graphed prefill of the target and the draft's
context + the first token's read-back), SmolLM2's shape with random weights and the shipped draft, batch 1.

Run it twice to compare the prefill's paths: as is (a prefill too long for the attention kernel's tile runs the layer
kernels with SDPA for the attention) and with DSPARK_KERNELS=0 (every kernel off: the torch ops, which is how such a
prefill ran before 5efed12). Prints one JSON line: median ms per admission by prompt length.

    python3 benchmarks/speed/prefill_time.py; DSPARK_KERNELS=0 python3 benchmarks/speed/prefill_time.py
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from round_kernels import build  # noqa: E402  (also puts src/ on the path)

from dspark.engine.batch import BatchEngine  # noqa: E402


def main() -> None:
    smoke = "--smoke" in sys.argv
    device = "cuda" if torch.cuda.is_available() else "cpu"
    target, draft = build(smoke, device, torch.bfloat16 if device == "cuda" else torch.float32)
    engine = BatchEngine(target, draft, max_batch=1, max_length=1024)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    vocab = target.vocab_size
    out = {}
    for length in (60, 180, 400):
        prompt = [(7919 * i) % vocab for i in range(length)]
        times = []
        for i in range(25):
            engine.round.retire(0)
            sync()
            began = time.perf_counter()
            engine.admit([0], [prompt], [16])  # stage, prefill (graphed on CUDA), read the first token
            sync()
            if i >= 5:  # the first calls capture the graph
                times.append(1000 * (time.perf_counter() - began))
        out[str(length)] = round(statistics.median(times), 3)
    print(json.dumps({"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                      "kernels": os.environ.get("DSPARK_KERNELS", "1"), "admit_ms_by_prompt_tokens": out}))


if __name__ == "__main__":
    main()
