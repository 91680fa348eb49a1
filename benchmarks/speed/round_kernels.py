"""Where a batch-1 round's GPU time goes, kernel by kernel: SmolLM2-135M's shape with random weights + the shipped draft.

Timing a round does not depend on the weights (only how many rounds a text takes does), so this needs no model files
and runs in one device call. It reports:
  steps    graphed replays (CUDA events, median of repeats) of the engine's own steps at batch 1: propose, verify at
           widths 1 … γ+1 (and at γ+1 with the draft's context extension in line rather than on its own stream),
           and their parts captured alone: the target forward at each width, the draft's context
           extension, the block forward, the Markov decode, greedy acceptance
  kernels  an eager torch.profiler pass over verify (width 1 and γ+1) and propose at each of --kernel-rows (default
           1): kernels launched and their summed GPU time, the heaviest kernels by name
  batch    propose and verify (widths 1 and γ+1) at each of --batch-rows (default 64), graphed
  gemm     the target's matrix shapes at M = 1 and M = γ+1 rows, graphed
  torch    the same steps with the Triton kernels off (engine/cache_attention.py, layer_kernels.py: SDPA and torch
           ops instead), and how far the target's logits move between the two
  markov   the greedy Markov decode through the fused kernel (engine/markov_kernel.py) and through the eager loop,
           at 1 and 64 rows: time per call, and how many drafted tokens differ between the two (random hidden states)
  tree     tree verification (engine/tree.py) at several (nodes, beam): propose (block + tree build), the tree
           verify, and the tree build and the target's tree forward alone
Prints a table per section and ends with one JSON line.

    python3 benchmarks/speed/round_kernels.py            # on the GPU
    python3 benchmarks/speed/round_kernels.py --markov-head gated   # the shipped draft with a gated head (random
                                                                    # gate): what the gated head costs a round
    python3 benchmarks/speed/round_kernels.py --draft-intermediate 3072 --only steps,batch   # what a wider (or,
                                                                    # --draft-layers, deeper) draft costs a round
    python benchmarks/speed/round_kernels.py --smoke     # CPU: tiny shapes, eager timing, the same code path
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dspark.config import DraftConfig, GenerationConfig  # noqa: E402
from dspark.engine.accept import accept_greedy  # noqa: E402
from dspark.engine.batch import BatchEngine  # noqa: E402
from dspark.engine import cache_attention, markov_kernel  # noqa: E402
from dspark.engine.draft_step import decode_blocks  # noqa: E402
from dspark.model.draft import DSparkDraft  # noqa: E402
from dspark.model.target import Target  # noqa: E402

SHIPPED = ROOT / "src/dspark/assets/smollm2-135m-instruct-dspark"


def smollm2_config(smoke: bool):
    from transformers import LlamaConfig

    if smoke:
        return LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                           tie_word_embeddings=True)
    return LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                       rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True)


def build(smoke: bool, device: str, dtype: torch.dtype, markov_head: str | None = None, layers: int | None = None,
          intermediate: int | None = None) -> tuple[Target, DSparkDraft]:
    """SmolLM2's shape with random weights and the shipped draft (smoke: tiny shapes); markov_head: that head type
    instead of the draft's own, the rest of the draft kept and the new head's extra weights random; layers /
    intermediate: the draft grown to that depth / widened to that many MLP units (dspark.train.grow)."""
    from transformers import LlamaForCausalLM

    from dspark.formats.native import load_draft
    from dspark.train.grow import grow_draft, widen_draft

    torch.manual_seed(0)
    model = LlamaForCausalLM(smollm2_config(smoke)).to(device=device, dtype=dtype)
    if smoke:
        cfg = DraftConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=16, vocab_size=512, block_size=7, target_layer_ids=(1, 3),
                          num_target_layers=6, mask_token_id=3, markov_rank=8, enable_confidence_head=True)
        draft = DSparkDraft(cfg).to(device=device, dtype=dtype)
    else:
        draft = load_draft(SHIPPED, device=device, dtype=dtype)
    if markov_head and markov_head != draft.config.markov_head_type:
        swapped = DSparkDraft(draft.config.replace(markov_head_type=markov_head))
        kept = swapped.load_state_dict(draft.state_dict(), strict=False)
        assert not kept.unexpected_keys, kept.unexpected_keys  # only the new head's own weights are left random
        draft = swapped.to(device=device, dtype=dtype).eval()
    draft = grow_draft(draft, layers) if layers else draft
    draft = widen_draft(draft, intermediate) if intermediate else draft
    return Target(model, draft.config.target_layer_ids), draft.eval()


class Timer:
    """Median milliseconds per call of a step, graphed on CUDA (replays timed with events), eager elsewhere."""

    def __init__(self, device: str, calls: int):
        self.cuda, self.calls = device == "cuda", calls
        self.pool = None
        self.graphs: list = []  # kept alive: the shared pool needs its graphs

    def __call__(self, step: Callable[[], None]) -> float:
        if self.cuda:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step(), step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                step()
            self.pool = graph.pool()
            self.graphs.append(graph)
            run = graph.replay
        else:
            run = step
        samples = []
        for _ in range(5):
            run()
            if self.cuda:
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                for _ in range(self.calls):
                    run()
                end.record()
                end.synchronize()
                samples.append(begin.elapsed_time(end) / self.calls)
            else:
                began = time.perf_counter()
                for _ in range(self.calls):
                    run()
                samples.append(1000 * (time.perf_counter() - began) / self.calls)
        return statistics.median(samples)


def idle_rows(engine: BatchEngine, rows: int) -> None:
    """Set up `rows` rows that compute everything and move nothing (inactive), at position 200."""
    r = engine.round
    r.begin(GenerationConfig(), r.gamma_max)
    r.active[:rows], r.budget[:rows], r.start[:rows] = False, 10**6, 200


def batch_times(target: Target, draft: DSparkDraft, timer: Timer, window: int, rows: int) -> dict[str, float]:
    """Propose and verify (widths 1 and γ+1) with `rows` rows, graphed."""
    engine = BatchEngine(target, draft, max_batch=rows, max_length=2048, cuda_graphs=False)
    idle_rows(engine, rows)
    r, gamma = engine.round, engine.round.gamma_max
    return {f"propose, {rows} rows": timer(lambda: r.propose(rows, window)),
            f"verify t=1, {rows} rows": timer(lambda: r.verify(rows, 1, window)),
            f"verify t={gamma + 1}, {rows} rows": timer(lambda: r.verify(rows, gamma + 1, window))}


def step_times(engine: BatchEngine, timer: Timer, window: int) -> dict[str, float]:
    r, gamma = engine.round, engine.round.gamma_max
    idle_rows(engine, 1)
    out: dict[str, float] = {"propose": timer(lambda: r.propose(1, window))}
    for t in range(1, gamma + 2):
        out[f"verify t={t}"] = timer(lambda t=t: r.verify(1, t, window))
    stream, r.extend_stream = r.extend_stream, None  # the draft's context extension in line, not beside acceptance
    out[f"verify t={gamma + 1}, extension in line"] = timer(lambda: r.verify(1, gamma + 1, window))
    r.extend_stream = stream
    for t in (1, gamma + 1):
        ids = torch.zeros(1, t, dtype=torch.long, device=r.anchor.device)
        out[f"  target.forward t={t}"] = timer(lambda ids=ids: engine.backend.forward(ids, r.start[:1],
                                                                                              window=window))
    features = torch.zeros(1, gamma + 1, engine.target.hidden_size * len(engine.target.layer_ids),
                           dtype=engine.backend.keys[0].dtype, device=r.anchor.device)
    out[f"  draft.extend t={gamma + 1}"] = timer(lambda: engine.static_draft.extend(features, r.start[:1]))
    logits = torch.zeros(1, gamma + 1, engine.target.vocab_size, device=r.anchor.device)
    out["  accept_greedy"] = timer(lambda: accept_greedy(r.drafts[:1], r.lengths[:1], logits))
    sd = engine.static_draft
    out["  block forward"] = timer(lambda: sd.block_states(r.anchor[:1], r.start[:1], None, window))
    hidden = torch.zeros(1, sd.block_size, sd.draft.config.hidden_size, dtype=features.dtype, device=r.anchor.device)
    out["  markov decode + confidence"] = timer(lambda: decode_blocks(sd.draft, hidden, r.anchor[:1],
                                                                        GenerationConfig(), None))
    out["  base logits (lm_head)"] = timer(lambda: sd.draft.base_logits(hidden).float())
    return out


TREE_SHAPES = ((15, 4), (23, 4), (27, 4), (31, 8), (47, 8))


def tree_times(target: Target, draft: DSparkDraft, timer: Timer, window: int, shapes) -> dict[str, float]:
    """Batch 1 with tree verification (engine/tree.py), per (nodes, beam): the propose step (block + tree build),
    the tree verify (target over nodes + 1 slots, acceptance, path move, draft extension), and the parts alone."""
    from dspark.engine.tree import TreeShape, build_tree

    out: dict[str, float] = {}
    for nodes, beam in shapes:
        engine = BatchEngine(target, draft, max_batch=1, max_length=2048, cuda_graphs=False,
                             tree=TreeShape(nodes, beam))
        idle_rows(engine, 1)
        r, sd, name = engine.round, engine.static_draft, f"tree {nodes}/{beam}"
        out[f"{name} propose"] = timer(lambda: r.propose(1, window))
        out[f"{name} verify t={nodes + 1}"] = timer(lambda: r.verify(1, nodes + 1, window))
        hidden = sd.block_states(r.anchor[:1], r.start[:1], None, window)
        out[f"  {name} build_tree"] = timer(lambda: build_tree(sd.draft, hidden, r.anchor[:1], r.tree))
        tree = r.trees.rows(1)
        out[f"  {name} target.forward"] = timer(lambda: engine.backend.forward(tree.tokens, r.start[:1],
                                                                                      window=window, tree=tree))
        del engine
    return out


def switched_off(module, run: Callable[[], object]) -> object:
    """Run a step with a kernel module's `usable` answering False (the eager / SDPA path)."""
    usable = module.usable
    module.usable = lambda *args: False
    try:
        return run()
    finally:
        module.usable = usable


def eager_markov(run: Callable[[], object]) -> object:
    return switched_off(markov_kernel, run)


def sdpa_rows(engine: BatchEngine, timer: Timer, window: int) -> tuple[dict[str, float], dict[str, float]]:
    """Propose and verify (widths 1 and γ+1) with the torch ops (SDPA) instead of the Triton kernels (switching off
    the attention kernel switches off the layer kernels too); and the largest logit difference and argmax agreement
    of the target forward at width γ+1 between the two paths."""
    r, gamma = engine.round, engine.round.gamma_max
    times = switched_off(cache_attention, lambda: {
        "propose (torch ops)": timer(lambda: r.propose(1, window)),
        "verify t=1 (torch ops)": timer(lambda: r.verify(1, 1, window)),
        f"verify t={gamma + 1} (torch ops)": timer(lambda: r.verify(1, gamma + 1, window))})
    gen = torch.Generator(device=r.anchor.device).manual_seed(0)
    ids = torch.randint(0, engine.target.vocab_size, (1, gamma + 1), generator=gen, device=r.anchor.device)
    start = torch.tensor([300], device=r.anchor.device)
    fast, _ = engine.backend.forward(ids, start, window=window)
    slow, _ = switched_off(cache_attention, lambda: engine.backend.forward(ids, start, window=window))
    agree = {"max |logit difference|": float((fast - slow).abs().max()),
             "argmax agreement": float((fast.argmax(-1) == slow.argmax(-1)).float().mean())}
    return times, agree


def markov_rows(engine: BatchEngine, timer: Timer) -> tuple[dict[str, float], dict[str, int]]:
    """The greedy decode + confidence, fused kernel vs eager loop, at 1 and 64 rows; and their token agreement."""
    draft, times, differ = engine.static_draft.draft, {}, {}
    weight = draft.fc.weight
    for rows in (1, 64):
        gen = torch.Generator(device=weight.device).manual_seed(rows)
        hidden = torch.randn(rows, draft.config.block_size, draft.config.hidden_size, generator=gen,
                             device=weight.device).to(weight.dtype)  # [N, γ, d]
        anchors = torch.randint(0, draft.config.vocab_size, (rows,), generator=gen, device=weight.device)  # [N]
        step = lambda: decode_blocks(draft, hidden, anchors, GenerationConfig(), None)  # noqa: E731
        times[f"fused kernel, {rows} rows"] = timer(step)
        times[f"eager loop, {rows} rows"] = eager_markov(lambda: timer(step))
        fused, eager = step().tokens, eager_markov(step).tokens
        differ[f"{rows} rows: tokens differing of {fused.numel()}"] = int((fused != eager).sum())
    return times, differ


def kernel_profile(engine: BatchEngine, window: int, rows: int = 1) -> dict[str, dict]:
    from torch.profiler import ProfilerActivity, profile

    idle_rows(engine, rows)
    r, gamma = engine.round, engine.round.gamma_max
    cuda = engine.backend.device.type == "cuda"
    steps = {"verify t=1": lambda: r.verify(rows, 1, window),
             f"verify t={gamma + 1}": lambda: r.verify(rows, gamma + 1, window),
             "propose": lambda: r.propose(rows, window)}
    out = {}
    for name, step in steps.items():
        step()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            for _ in range(10):
                step()
            if cuda:
                torch.cuda.synchronize()
        by_kernel: dict[str, list[float]] = defaultdict(list)
        for event in prof.events():
            if cuda and event.device_type == torch.autograd.DeviceType.CUDA:
                by_kernel[event.name[:90]].append(event.device_time_total / 1000.0)
            elif not cuda and event.cpu_parent is None:
                by_kernel[event.name[:90]].append(event.cpu_time_total / 1000.0)
        total = sum(sum(v) for v in by_kernel.values()) / 10
        count = sum(len(v) for v in by_kernel.values()) / 10
        top = sorted(by_kernel.items(), key=lambda kv: -sum(kv[1]))[:14]
        out[name] = {"kernels_per_call": count, "kernel_ms_per_call": total,
                     "top": [{"kernel": k, "per_call": len(v) / 10, "ms_per_call": sum(v) / 10} for k, v in top]}
    return out


def gemm_times(target: Target, timer: Timer, gamma: int) -> dict[str, float]:
    layer = target.model.model.layers[0]
    linears = {"q": layer.self_attn.q_proj, "k": layer.self_attn.k_proj, "o": layer.self_attn.o_proj,
               "gate": layer.mlp.gate_proj, "down": layer.mlp.down_proj, "lm_head": target.model.lm_head}
    out = {}
    for name, linear in linears.items():
        for m in (1, gamma + 1):
            x = torch.zeros(1, m, linear.in_features, dtype=linear.weight.dtype, device=linear.weight.device)
            out[f"{name} {linear.in_features}->{linear.out_features} M={m}"] = timer(lambda x=x, f=linear: f(x))
    return out


def compiled_times(engine: BatchEngine, timer: Timer, window: int) -> dict[str, float]:
    """The same target forward and propose compiled by torch.compile (inductor fuses the elementwise kernels), then
    captured and replayed: how much kernel fusion would buy, and what it costs to compile."""
    r, gamma, out = engine.round, engine.round.gamma_max, {}
    # the undecorated functions under no_grad: inductor cannot trace through inference-mode tensors
    forward = torch.compile(type(engine.backend).forward.__wrapped__.__get__(engine.backend),
                            dynamic=False)
    for t in (1, gamma + 1):
        ids = torch.zeros(1, t, dtype=torch.long, device=r.anchor.device)
        began = time.perf_counter()
        forward(ids, r.start[:1], window=window)
        out[f"compile s target.forward t={t}"] = (time.perf_counter() - began) / 1000  # shown as ms*1000 = s
        out[f"compiled target.forward t={t}"] = timer(lambda ids=ids: forward(ids, r.start[:1], window=window))
        print(f"  {t}: {out[f'compiled target.forward t={t}'] * 1000:.1f} µs", flush=True)
    propose = torch.compile(type(engine.static_draft).propose.__wrapped__.__get__(engine.static_draft), dynamic=False)
    config = GenerationConfig()
    began = time.perf_counter()
    propose(r.anchor[:1], r.start[:1], None, config, None, window)
    out["compile s propose"] = (time.perf_counter() - began) / 1000
    out["compiled propose"] = timer(lambda: propose(r.anchor[:1], r.start[:1], None, config, None, window))
    return out


def table(title: str, rows: dict[str, float]) -> None:
    print(f"\n{title}")
    for name, ms in rows.items():
        print(f"  {name:<40} {ms * 1000:9.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny shapes")
    parser.add_argument("--window", type=int, default=512, help="attention window (positions)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd forward and propose")
    parser.add_argument("--calls", type=int, default=200, help="replays per timing sample")
    parser.add_argument("--markov-head", choices=("vanilla", "gated", "rnn"),
                        help="time the draft with this Markov head (its extra weights random) instead of its own")
    parser.add_argument("--draft-layers", type=int, help="time the draft grown to this many layers")
    parser.add_argument("--draft-intermediate", type=int, help="time the draft widened to this many MLP units")
    parser.add_argument("--draft-vocab", type=int, default=0, metavar="K",
                        help="the draft scores only the K tokens SmolLM2 writes most (FR-Spec, as the speed runs)")
    parser.add_argument("--batch-rows", default="64", help="batch: rows (comma-separated)")
    parser.add_argument("--kernel-rows", default="1", help="kernels: rows (comma-separated)")
    parser.add_argument("--only", default="steps,batch,gemm,markov,torch,kernels,tree",
                        help="comma-separated sections to run (default all)")
    args = parser.parse_args()
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    target, draft = build(args.smoke, device, dtype, args.markov_head, args.draft_layers, args.draft_intermediate)
    only = set(args.only.split(","))
    if args.draft_vocab and not args.smoke:
        from dspark.formats.token_counts import restrict_by_counts

        draft.tie_embeddings(target.embed_tokens, target.lm_head)
        restrict_by_counts(draft, SHIPPED, args.draft_vocab)
    engine = BatchEngine(target, draft, max_batch=1, max_length=2048, cuda_graphs=False)
    timer = Timer(device, 5 if args.smoke else args.calls)
    gamma = engine.round.gamma_max
    result = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
              "window": args.window, "gamma": gamma, "markov_head": draft.config.markov_head_type,
              "draft_layers": draft.config.num_hidden_layers, "draft_intermediate": draft.config.intermediate_size}
    with torch.inference_mode():
        if "steps" in only:
            result["steps_ms"] = steps = step_times(engine, timer, args.window)
            table("graphed steps, batch 1 (per call)", steps)
        if "batch" in only:
            result["batch_ms"] = batch = {}
            for rows in ([4] if args.smoke else [int(n) for n in args.batch_rows.split(",")]):
                batch.update(batch_times(target, draft, timer, args.window, rows))
            table("graphed steps, many rows (per call)", batch)
        if "gemm" in only:
            result["gemm_ms"] = gemms = gemm_times(target, timer, gamma)
            table("target GEMMs alone (graphed)", gemms)
        if "markov" in only:
            result["propose_eager_markov_ms"] = eager_markov(
                lambda: timer(lambda: engine.round.propose(1, args.window)))
            result["markov_ms"], result["markov_differ"] = markov, differ = markov_rows(engine, timer)
            table("greedy Markov decode + confidence (graphed)", {**markov, "propose, eager Markov loop":
                                                                  result["propose_eager_markov_ms"]})
            print("  fused vs eager drafted tokens:", differ)
        if "torch" in only:
            result["sdpa_ms"], result["kernel_vs_sdpa"] = sdpa, agree = sdpa_rows(engine, timer, args.window)
            table("the same steps with the torch ops instead of the Triton kernels (graphed)", sdpa)
            print("  target forward, kernels vs torch ops:", agree)
        if "kernels" in only:
            result["kernels"] = kernels = {}
            for rows in ([1, 4] if args.smoke else [int(n) for n in args.kernel_rows.split(",")]):
                many = engine if rows == 1 else BatchEngine(target, draft, max_batch=rows, max_length=2048,
                                                             cuda_graphs=False)
                kernels.update({f"{name}, {rows} rows": info
                                for name, info in kernel_profile(many, args.window, rows).items()})
            print_kernels(kernels)
        if "tree" in only:
            shapes = ((6, 2),) if args.smoke else TREE_SHAPES
            result["tree_ms"] = trees = tree_times(target, draft, timer, args.window, shapes)
            table("tree verification, batch 1 (graphed, per call)", trees)
    if args.compile:
        with torch.no_grad():
            result["compiled_ms"] = compiled = compiled_times(engine, timer, args.window)
        table("torch.compile'd, graphed (compile rows: seconds)", compiled)
    print(json.dumps(result))


def print_kernels(kernels: dict[str, dict]) -> None:
    for name, info in kernels.items():
        print(f"\n{name}: {info['kernels_per_call']:.0f} kernels, {info['kernel_ms_per_call'] * 1000:.0f} µs of kernel "
              f"time per call")
        for row in info["top"]:
            print(f"  {row['per_call']:5.1f} × {row['ms_per_call'] * 1000:8.1f} µs  {row['kernel']}")


if __name__ == "__main__":
    main()
