"""Data-parallel draft training throughput: the same job on 1 process and under torchrun on N GPUs.

The target is a randomly initialised Llama with SmolLM2-135M's exact shape (30 layers, hidden 576, 9 / 3 heads,
vocab 49152): the point is the training loop's parallel throughput, not acceptance. Sequences are random tokens of
fixed length with the loss on everything after a 64-token prompt. Prints a table and one JSON line.

    python benchmarks/ddp/train_ddp.py --steps 40                                  # 1 GPU
    torchrun --standalone --nproc_per_node 2 benchmarks/ddp/train_ddp.py --steps 40  # 2 GPUs
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from dspark import Target  # noqa: E402
from dspark.config import TrainConfig  # noqa: E402
from dspark.model.draft import DSparkDraft  # noqa: E402
from dspark.train.data import Example  # noqa: E402
from dspark.train.hidden import OnlineHiddenStates  # noqa: E402
from dspark.train.recipe import draft_config_from_target  # noqa: E402
from dspark.train.trainer import init_distributed, train  # noqa: E402

SMOLLM2_SHAPE = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                     num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                     rms_norm_eps=1e-5, tie_word_embeddings=True, rope_theta=100000.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--anchors", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--small", action="store_true", help="a tiny shape, for a CPU check of the script")
    args = parser.parse_args()
    rank, world, device = init_distributed()
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = dict(SMOLLM2_SHAPE)
    if args.small:
        shape.update(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                     num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = LlamaForCausalLM(LlamaConfig(**shape)).to(device=device, dtype=dtype).eval()
    config = draft_config_from_target(model.config, num_layers=2, block_size=7, markov_rank=32, mask_token_id=16)
    draft = DSparkDraft(config).to(device)
    draft.tie_embeddings(model.get_input_embeddings(), model.get_output_embeddings())
    gen = torch.Generator().manual_seed(1)
    examples = [Example(str(i), tuple(torch.randint(17, shape["vocab_size"], (args.seq_len,), generator=gen).tolist()),
                        (0,) * 64 + (1,) * (args.seq_len - 64)) for i in range(args.batch * world * args.steps)]
    source = OnlineHiddenStates(Target(model, config.target_layer_ids), examples)
    cfg = TrainConfig(steps=args.steps, batch_size=args.batch, num_anchors=args.anchors, max_length=args.seq_len,
                      log_every=1000)
    if device.type == "cuda":
        torch.cuda.synchronize()
    began = time.perf_counter()
    result = train(draft, source, cfg, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    steady = result.history[5:] or result.history
    tokens_per_s = sum(m.tokens_per_s for m in steady) / len(steady)
    if rank == 0:
        record = {"world_size": world, "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                  "steps": args.steps, "sequences_per_step": args.batch * world, "seq_len": args.seq_len,
                  "anchors_per_sequence": args.anchors, "steady_tokens_per_s": tokens_per_s,
                  "wall_s": seconds, "first_loss": result.history[0].loss, "last_loss": result.history[-1].loss,
                  "torch": torch.__version__, "command": " ".join(sys.argv)}
        print(f"world {world}: {tokens_per_s:,.0f} sequence tokens/s (steady), {seconds:.1f}s for {args.steps} steps, "
              f"loss {record['first_loss']:.3f} -> {record['last_loss']:.3f}")
        out = os.environ.get("OUT")
        if out:
            Path(out, f"ddp_world{world}.json").write_text(json.dumps(record, indent=2))
        print(json.dumps(record))


if __name__ == "__main__":
    main()
