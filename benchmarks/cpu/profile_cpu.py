"""Where a speculative round's time goes on the CPU: SmolLM2-135M-Instruct + the shipped draft in fp32, the demo's
prompts, one DSpark generation per prompt under torch's profiler. Every matrix product is put in one bucket by its
shape (the target's and the draft's LM heads, each one's layers), the rest in "other"; then the draft's LM head is
timed over a vocabulary subset of K rows (the fastest CPU call, as the demo's timed layout picks), the cost a
frequency-ranked draft vocabulary (FR-Spec, arXiv 2502.14856) would pay instead. It measures; it changes nothing in
the engine.

    python benchmarks/cpu/profile_cpu.py [--prompts 1] [--max-new-tokens 96] [--threads 1] [--out DIR]

Prints a table and one JSON line (also written to DIR/profile_cpu.json). A benchmark, not a test.
"""
from __future__ import annotations

from collections import defaultdict

from torch import nn
from torch.profiler import ProfilerActivity, profile

from dspark.bench.runinfo import device_name, git_commit
from dspark.demo import timed_generate
from dspark.engine.cpu_layout import plan_cpu_layout
from dspark.files import write_json
from warm_demo import demo_parser, warm_demo


def bucket(shapes: list, vocab: int, block: int) -> str:
    """The bucket of one matrix product by its two operands' shapes: [rows, k] × [k, n], or [n, k] × [k, rows] for
    the weight-first call (`W @ xᵀ`) of the timed CPU layout. The draft runs `block` rows; the target's verifies
    run block + 1 (every block verified whole, as this script generates), its prefills and plain steps other counts;
    only a generation's last, shortened verify can share the draft's row count."""
    (a, _), (_, b) = shapes
    head = vocab in (a, b)
    rows = (b if a == vocab else a) if head else min(a, b)
    who = "draft" if rows == block else "target"
    return f"{who} LM head" if head else f"{who} layers"


def head_ms(hidden: int, rows: int, k: int) -> float:
    """Milliseconds of the draft's LM head over k vocabulary rows at `rows` rows: the fastest of the three calls
    `plan_cpu_layout` times at load (the demo's own choice)."""
    plan = plan_cpu_layout(nn.Linear(hidden, k, bias=False), rows=(rows,), layout="auto")[k, hidden]
    return 1e3 * min(seconds[0] for seconds in plan.seconds.values())


def main() -> None:
    parser = demo_parser(__doc__, prompts=1, out="benchmarks/results/cpu_profile")
    args = parser.parse_args()
    setup, config, _ = warm_demo(args.prompts, args.max_new_tokens, args.threads)
    vocab, block = setup.target.model.config.vocab_size, setup.draft.config.block_size
    hidden = setup.draft.config.hidden_size
    buckets: dict[str, float] = defaultdict(float)
    rounds = tokens = 0
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for prompts in setup.prompts.values():
            for prompt in prompts:
                run = timed_generate(setup.target, setup.draft, prompt, config)
                rounds, tokens = rounds + run.stats.rounds, tokens + len(run.tokens)
    total_ms = 0.0
    for event in prof.key_averages(group_by_input_shape=True):
        total_ms += event.self_cpu_time_total / 1e3
        operands = [shape for shape in event.input_shapes if len(shape) == 2][-2:]  # addmm: after its bias
        if event.key in ("aten::mm", "aten::addmm") and len(operands) == 2:
            buckets[bucket(operands, vocab, block)] += event.self_cpu_time_total / 1e3
    buckets["other"] = total_ms - sum(buckets.values())
    subset = {k: head_ms(hidden, block, k) for k in (4096, 8192, 16384, vocab)}
    print(f"{rounds} rounds, {tokens} tokens, {total_ms:.0f} ms under the profiler ({args.threads} thread(s))")
    print(f"{'bucket':16s} {'ms':>8s} {'share':>7s} {'ms/round':>9s}")
    for name, ms in sorted(buckets.items(), key=lambda item: -item[1]):
        print(f"{name:16s} {ms:8.0f} {ms / total_ms:7.1%} {ms / rounds:9.2f}")
    print("draft LM head over K vocabulary rows: " + ", ".join(f"K={k}: {ms:.1f} ms" for k, ms in subset.items()))
    result = {"device": device_name("cpu"), "commit": git_commit()[0], "threads": args.threads, "rounds": rounds,
              "tokens": tokens, "total_ms": total_ms, "buckets_ms": dict(buckets),
              "draft_head_ms_by_rows": subset, "command": "python benchmarks/cpu/profile_cpu.py " +
              f"--prompts {args.prompts} --max-new-tokens {args.max_new_tokens} --threads {args.threads}"}
    write_json(args.out / "profile_cpu.json", result)
    print(result)


if __name__ == "__main__":
    main()
