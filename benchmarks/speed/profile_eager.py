"""Where the time goes in the eager (no CUDA graphs) engine on one GPU, for SmolLM2-135M's shape.

Random weights with SmolLM2-135M's exact shape: step latencies do not depend on the weights, acceptance does (it is
not measured here). Measures, in one run: transformers `generate` (dynamic cache), our plain decoding (`generate`
with max_drafts 0), a one-row eager engine's round latency (draft block + verify) for verify widths 1…8 after a
512-token context (`measure_step_costs`: the step-cost table confidence scheduling needs), and its draft step (2
layers, block 7, Markov rank 32: propose per round of a generation, `profile_engine_rounds`). Table + one JSON line.

    python benchmarks/speed/profile_eager.py
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from dspark import GenerationConfig, Target, generate  # noqa: E402
from dspark.bench.round_profile import profile_engine_rounds  # noqa: E402
from dspark.engine.batch import engine_for  # noqa: E402
from dspark.model.draft import DSparkDraft  # noqa: E402
from dspark.train.recipe import draft_config_from_target  # noqa: E402

SHAPE = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
             num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5, tie_word_embeddings=True,
             rope_theta=100000.0)


def timed(fn, repeat: int, device) -> float:
    """Median seconds of `fn` over `repeat` runs (synchronised)."""
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def main() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    small = "--small" in sys.argv
    shape = dict(SHAPE, **(dict(num_hidden_layers=4, vocab_size=1024) if small else {}))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**shape)).to(device=device, dtype=dtype).eval()
    config = draft_config_from_target(model.config, num_layers=2, block_size=7, markov_rank=32, mask_token_id=16)
    draft = DSparkDraft(config).to(device=device, dtype=dtype).eval()
    draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    target = Target(model, config.target_layer_ids)
    prompt = torch.randint(17, shape["vocab_size"], (1, 512), device=device)
    new = 32 if small else 128
    results = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "dtype": str(dtype),
               "torch": torch.__version__, "new_tokens": new, "command": " ".join(sys.argv)}

    def hf():
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new, min_new_tokens=new,
                       do_sample=False, pad_token_id=0)

    hf()
    results["hf_generate_dynamic_tok_s"] = new / timed(hf, 3, device)
    plain = GenerationConfig(max_new_tokens=new, max_drafts=0, eos_token_ids=())
    generate(target, None, prompt[0].tolist(), plain)
    results["dspark_plain_tok_s"] = new / timed(lambda: generate(target, None, prompt[0].tolist(), plain), 3, device)
    engine = engine_for(target, draft, [prompt[0].tolist()], new, max_batch=1, cuda_graphs=False)
    round_ms = engine.measure_step_costs(1, range(1, 9), repeats=10, context=512).latency_ms()
    results["round_ms_by_width"] = round_ms
    speculative = GenerationConfig(max_new_tokens=new, eos_token_ids=())
    results["draft_step_ms"] = profile_engine_rounds(engine, [prompt[0].tolist()], speculative).propose_ms
    print(f"{'what':42s} value")
    print(f"{'transformers generate (dynamic cache)':42s} {results['hf_generate_dynamic_tok_s']:.1f} tok/s")
    print(f"{'dspark plain decoding (max_drafts 0)':42s} {results['dspark_plain_tok_s']:.1f} tok/s")
    for width, ms in round_ms.items():
        print(f"{'round (draft block + verify), width ' + str(width):42s} {ms:.2f} ms")
    print(f"{'draft step (2 layers, block 7, Markov 32)':42s} {results['draft_step_ms']:.2f} ms")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
