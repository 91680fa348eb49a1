"""The engine on a CUDA device, both backends, on tiny random targets: greedy output equals HF `generate`, CUDA graphs
on the static backend, and per-row sampling (a greedy row stays exact and a seeded row equals itself decoded alone
in a batch beside rows of other settings). A correctness check for a GPU lease, not a speed measurement; prints one
JSON line. Run: `python benchmarks/speed/engine_cuda_check.py` (needs CUDA; dspark importable)."""
from __future__ import annotations

import json

import torch

from dspark import GenerationConfig, Target
from dspark.engine.batch import BatchEngine
from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target


def hf_greedy(model: torch.nn.Module, prompt: list[int], n: int) -> list[int]:
    ids = torch.tensor([prompt], device="cuda")
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def check(arch: str) -> dict:
    model = tiny_target(arch, seed=3).cuda()
    cfg = draft_config_for(model, block_size=5)
    draft = random_draft(cfg, scale=5.0).cuda()
    engine = BatchEngine(Target(model, cfg.target_layer_ids), draft, max_batch=4, max_length=128)
    prompts = [[(7 * i + j) % 97 for i in range(5 + 3 * j)] for j in range(5)]
    greedy = GenerationConfig(max_new_tokens=24, eos_token_ids=())
    batched = engine.generate(prompts, greedy)
    seeded = GenerationConfig(max_new_tokens=24, temperature=1.0, seed=77, eos_token_ids=())
    alone = engine.generate([prompts[1]], seeded)[0].tokens
    session = engine.open(greedy)
    session.add("g", prompts[0], 24, sampling=greedy)
    session.add("s", prompts[1], 24, sampling=seeded)
    session.add("x", prompts[2], 24, sampling=GenerationConfig(max_new_tokens=24, temperature=0.7, top_k=10, top_p=0.9))
    session.add("y", prompts[3], 24, sampling=GenerationConfig(max_new_tokens=24, temperature=1.3))
    while not session.idle:
        session.step()
    return {"backend": type(engine.backend).__name__, "cuda_graphs": engine.cuda_graphs,
            "greedy_equals_hf_generate": [r.tokens for r in batched] == [hf_greedy(model, p, 24) for p in prompts],
            "mixed_batch_greedy_row_exact": session.release("g").tokens == batched[0].tokens,
            "mixed_batch_seeded_row_equals_alone": session.release("s").tokens == alone}


if __name__ == "__main__":
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      **{arch: check(arch) for arch in ("qwen3", "deepseek_v3")}}))
