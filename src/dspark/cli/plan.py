"""`dspark plan vram|cluster|cost`: parse arguments, call `dspark.plan`, print tables or JSON.

No arithmetic lives here. Bad input (a `ValueError` such as `PlanError`) prints one line and exits 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

DEFAULT_CONTEXT = 131_072
QUANT_TABLE = ("F32", "BF16", "FP8", "INT8", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "IQ4_XS", "MXFP4", "NVFP4",
               "INT4_W4A16", "Q3_K_M", "Q2_K", "IQ2_XXS")


def _models(p: argparse.ArgumentParser, model: str, draft: str | None) -> None:
    p.add_argument("--model", default=model, help=f"preset name or path to an HF config.json (default {model})")
    p.add_argument("--draft", default=draft, help="draft preset or config.json; 'none' for no draft"
                   + (f" (default {draft})" if draft else ""))
    p.add_argument("--quant", help="weights: BF16, FP8, NVFP4, INT4_W4A16, a GGUF type such as Q4_K_M ... "
                   "(default: the model's native storage)")
    p.add_argument("--expert-quant", help="routed experts stored differently (Kimi K3 ships MXFP4)")
    p.add_argument("--draft-quant", help="the draft's weights (default BF16)")
    p.add_argument("--kv-dtype", default="fp8", help="KV-cache dtype: bf16, fp16, fp8, fp32, q8_0, q4_0")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


EPILOG = """examples:
  dspark plan vram --model kimi-k3-dspark --context 131072
  dspark plan vram --model ./Qwen3-8B/config.json --draft qwen3-8b-dspark --quant Q4_K_M
  dspark plan cluster --model kimi-k3 --draft kimi-k3-dspark --gpu h200
  dspark plan cost --model kimi-k3 --gpu h200 --utilisation 0.6
"""
_EXAMPLES = {
    "vram": "dspark plan vram --model kimi-k3-dspark --context 131072 --concurrency 4",
    "cluster": "dspark plan cluster --model kimi-k3 --draft kimi-k3-dspark --gpu b300 --engine vllm",
    "cost": "dspark plan cost --model kimi-k3 --gpu h200 --gpu-hour 3.5 --api kimi-k3",
}


def _sub(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, epilog=f"example:\n  {_EXAMPLES[name]}\n",
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def register(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    sub = parser.add_subparsers(dest="plan_command", metavar="{vram,cluster,cost}")
    parser.set_defaults(plan_help=parser.format_help())

    v = _sub(sub, "vram", "memory of a target and/or draft, itemised; --seed explains the seed's table")
    _models(v, "kimi-k3-dspark", None)
    v.set_defaults(kv_dtype="bf16")
    v.add_argument("--context", type=int, default=DEFAULT_CONTEXT, help="tokens per sequence (default 131072)")
    v.add_argument("--concurrency", type=int, default=1, help="sequences held at once (default 1)")
    v.add_argument("--draft-kv-dtype", help="the draft's KV dtype (default: --kv-dtype)")
    v.add_argument("--gpus", type=int, default=1, help="GPUs (per-GPU overheads are counted this many times)")
    v.add_argument("--overhead-gb", type=float, help="one flat overhead instead of context/graphs/activations")
    v.add_argument("--no-borrow", action="store_true", help="a draft alone: leave out the target's embed/lm_head")
    v.add_argument("--seed", action="store_true", help="rebuild the seed's four 'minimum VRAM' figures, then the "
                   "realistic ones")
    v.add_argument("--quant-table", action="store_true", help="weight bytes of --model at every common quant")

    c = _sub(sub, "cluster", "layouts that fit target + draft per GPU type, engine command, decode tok/s")
    _models(c, "kimi-k3", "kimi-k3-dspark")
    c.add_argument("--gpu", default="all", help="h100, h200, b200, b300, gb200, gb300, mi300x, mi325x, mi355x or all")
    c.add_argument("--context", type=int, default=DEFAULT_CONTEXT)
    c.add_argument("--concurrency", type=int, default=16)
    c.add_argument("--engine", default="sglang", choices=("sglang", "vllm"))
    c.add_argument("--tau", type=float, help="acceptance length τ = accepted + 1 (default 3.85)")
    c.add_argument("--max-nodes", type=int, default=8)
    c.add_argument("--mem-fraction", type=float, default=0.90, help="share of GPU memory the engine may use")
    c.add_argument("--top", type=int, default=8, help="layouts to list with --gpu")

    k = _sub(sub, "cost", "$ per Mtok with and without DSpark, monthly cost, break-even vs an API")
    _models(k, "kimi-k3", "kimi-k3-dspark")
    k.add_argument("--gpu", default="h200")
    k.add_argument("--gpus", type=int, help="use exactly this many GPUs (default: the smallest layout that fits)")
    k.add_argument("--price-tier", default="on_demand", choices=("on_demand", "reserved", "tco"))
    k.add_argument("--gpu-hour", type=float, help="USD per GPU-hour (overrides the price table)")
    k.add_argument("--prices", help="JSON price file merged over the shipped table")
    k.add_argument("--write-prices", metavar="FILE", help="write the price table to FILE (to edit) and exit")
    k.add_argument("--utilisation", type=float, default=0.5, help="share of time the cluster does useful work")
    k.add_argument("--context", type=int, default=32_768)
    k.add_argument("--concurrency", type=int, default=64)
    k.add_argument("--engine", default="sglang", choices=("sglang", "vllm"))
    k.add_argument("--tau", type=float)
    k.add_argument("--max-nodes", type=int, default=8)
    k.add_argument("--tps", type=float, help="measured output tok/s without the draft (whole cluster)")
    k.add_argument("--tps-dspark", type=float, help="measured output tok/s with DSpark (whole cluster)")
    k.add_argument("--api", default="kimi-k3", help="API price entry (default kimi-k3: $3 in / $0.30 cached / $15 out)")
    k.add_argument("--api-input", type=float, help="API USD per M input tokens (with --api-output)")
    k.add_argument("--api-output", type=float, help="API USD per M output tokens")
    k.add_argument("--api-cached", type=float, help="API USD per M cached input tokens")
    k.add_argument("--input-per-output", type=float, default=3.0, help="prompt tokens per output token (default 3)")
    k.add_argument("--cache-hit", type=float, default=0.0, help="share of input tokens billed at the cached price")
    k.add_argument("--ops-overhead", type=float, default=0.0, help="fraction added to GPU cost for egress, ops ...")
    k.add_argument("--prefill-share", type=float, default=0.0, help="share of GPU time spent on prefill")
    k.add_argument("--plot", metavar="PATH.png", help="write cost per Mtok vs utilisation (PNG)")
    k.add_argument("--examples", action="store_true", help="recompute the public worked examples and exit")


def _emit(args: argparse.Namespace, lines: list[str], obj: dict[str, Any]) -> int:
    print(json.dumps(obj) if args.json else "\n".join(lines))
    return 0


def _draft(args: argparse.Namespace) -> Any:
    from dspark.plan.models import load_model

    return None if args.draft in (None, "", "none") else load_model(args.draft)


def _run_vram(args: argparse.Namespace) -> int:
    from dspark.plan import report
    from dspark.plan.models import load_model
    from dspark.plan.seed import explain_seed
    from dspark.plan.vram import Overheads, estimate_vram
    from dspark.plan.weights import QuantPlan, plan_for, weight_bytes

    spec = load_model(args.model)
    if args.seed:
        e = explain_seed(spec if spec.role == "draft" else load_model("kimi-k3-dspark"))
        return _emit(args, report.seed_lines(e), report.seed_json(e))
    if args.quant_table:
        rows = []
        for q in QUANT_TABLE:
            w = weight_bytes(spec, QuantPlan(q, args.expert_quant))
            rows.append((q + (f" + experts {args.expert_quant}" if args.expert_quant else ""), w.bits_per_weight,
                         w.total))
        obj = {"model": spec.name, "params": spec.params,
               "quants": [{"quant": q, "bits_per_weight": round(b, 4), "bytes": round(s)} for q, b, s in rows]}
        return _emit(args, report.quant_table_lines(rows, f"{spec.name} ({spec.params:,} parameters)"), obj)
    if spec.role == "draft" and args.draft not in (None, "", "none"):
        raise ValueError(f"--model {args.model} is a draft; give a target as --model to size it with --draft")
    target, draft = (None, spec) if spec.role == "draft" else (spec, _draft(args))
    quant = args.quant if target is not None else None
    overheads = Overheads(flat_bytes=args.overhead_gb * 1e9) if args.overhead_gb is not None else Overheads()
    est = estimate_vram(
        target, draft, target_plan=plan_for(target, quant, args.expert_quant) if target else None,
        draft_plan=plan_for(draft, args.draft_quant or (args.quant if target is None else None)) if draft else None,
        context=args.context, concurrency=args.concurrency, kv_dtype=args.kv_dtype, draft_kv_dtype=args.draft_kv_dtype,
        gpus=args.gpus, overheads=overheads, borrow_embeddings=not args.no_borrow)
    names = " + ".join(m.name for m in (target, draft) if m is not None)
    title = f"VRAM of {names}: context {args.context:,} x {args.concurrency}, KV {args.kv_dtype}, {args.gpus} GPU(s)"
    obj = {"models": names, **report.vram_json(est)}
    return _emit(args, report.vram_lines(est, title), obj)


def _request(args: argparse.Namespace):
    from dspark.plan.cluster import ClusterRequest
    from dspark.plan.models import load_model
    from dspark.plan.throughput import DEFAULT_TAU
    from dspark.plan.weights import plan_for

    target = load_model(args.model)
    draft = _draft(args)
    return ClusterRequest(target, plan_for(target, args.quant, args.expert_quant), draft,
                          plan_for(draft, args.draft_quant) if draft else None, context=args.context,
                          concurrency=args.concurrency, kv_dtype=args.kv_dtype,
                          mem_fraction=getattr(args, "mem_fraction", 0.90), max_nodes=args.max_nodes,
                          tau=args.tau or DEFAULT_TAU, engine=args.engine)


def _run_cluster(args: argparse.Namespace) -> int:
    from functools import partial

    from dspark.deploy.launch_commands import plan_command
    from dspark.plan import report
    from dspark.plan.cluster import compare, search, why
    from dspark.plan.gpus import get_gpu
    from dspark.plan.throughput import seed_decode_check

    req = _request(args)
    command = partial(plan_command, req=req)
    if args.gpu != "all":
        cands = search(req, get_gpu(args.gpu))
        obj = {"gpu": args.gpu, "candidates": [report.candidate_json(c, command) for c in cands[: args.top]]}
        return _emit(args, report.candidates_lines(cands, req, args.top, command), obj)
    choices = compare(req)
    lines = report.compare_lines(choices, req)
    obj: dict[str, Any] = {"choices": [{"gpu": ch.gpu.key, "why": why(ch, req),
                                        "best": report.candidate_json(ch.best, command) if ch.best else None} for ch in choices]}
    if req.target.name == "kimi-k3":
        checks = seed_decode_check(req.target, req.target_plan, req.draft, req.draft_plan, get_gpu("gb300"), req.tau)
        lines += ["", *report.seed_decode_lines(checks, req.tau)]
        obj["seed_check"] = [{"tp": c.tp, "measured": [c.measured_ar, c.measured_spec],
                              "estimate": [round(c.estimate.ar_tok_s, 1), round(c.estimate.spec_tok_s, 1)],
                              "implied_tau": round(c.implied_tau, 3)} for c in checks]
    lines += ["", "Run with --gpu <type> for the ranked layouts, the per-GPU memory breakdown and engine flags."]
    return _emit(args, lines, obj)


def _run_cost(args: argparse.Namespace) -> int:
    from dspark.plan import report
    from dspark.plan.cost import CostInputs, analyse, cost_curve
    from dspark.plan.examples import reproduce
    from dspark.plan.gpus import get_gpu
    from dspark.plan.prices import ApiPrice, api_price, gpu_hour, load_prices, write_prices

    if args.write_prices:
        path = write_prices(load_prices(args.prices), args.write_prices)
        return _emit(args, [f"wrote {path}; edit it and pass --prices {path}"], {"written": str(path)})
    if args.examples:
        ex = reproduce()
        obj = {"examples": [{**e.__dict__, "error_pct": round(e.error_pct, 3)} for e in ex]}
        return _emit(args, report.examples_lines(ex), obj)
    table = load_prices(args.prices)
    gpu = get_gpu(args.gpu)
    price = args.gpu_hour if args.gpu_hour is not None else gpu_hour(table, gpu.key, args.price_tier)
    if args.api_input is not None or args.api_output is not None:
        if args.api_input is None or args.api_output is None:
            raise ValueError("give both --api-input and --api-output (USD per million tokens)")
        api = ApiPrice("custom", args.api_input, args.api_output, args.api_cached)
    else:
        api = api_price(table, args.api)
    if args.tps is not None or args.tps_dspark is not None:
        if args.tps is None or args.tps_dspark is None or args.gpus is None:
            raise ValueError("measured throughput needs --tps, --tps-dspark and --gpus together")
        gpus, tps, tps_d, layout = args.gpus, args.tps, args.tps_dspark, "measured"
    else:
        from dspark.plan.cluster import pick

        req = _request(args)
        cand = pick(req, gpu, args.gpus)
        gpus, tps, layout = cand.layout.gpus, cand.decode.ar_total_tok_s, cand.layout.name
        tps_d = cand.decode.spec_total_tok_s if req.draft is not None else tps
    inputs = CostInputs(price, gpus, tps, tps_d, args.utilisation, ops_overhead=args.ops_overhead,
                        prefill_share=args.prefill_share)
    result = analyse(inputs, api, args.input_per_output, args.cache_hit)
    header = (f"Cost of {args.model} + {args.draft} on {gpus} x {gpu.key} ({layout}), "
              f"${price:.2f}/GPU-h ({'given' if args.gpu_hour is not None else args.price_tier}); throughput "
              + ("measured" if layout == "measured" else f"estimated at concurrency {args.concurrency}, "
                 f"context {args.context:,}"))
    lines = report.cost_lines(result, header)
    obj = {"model": args.model, "draft": args.draft, "gpu": gpu.key, "layout": layout, **report.cost_json(result)}
    if args.plot:
        from dspark.plan.plot import plot_cost

        path = plot_cost(cost_curve(inputs), result.api_per_m_output, args.plot,
                         f"{args.model} on {gpus} x {gpu.key} at ${price:.2f}/GPU-h vs API {api.name}")
        lines.append(f"plot written to {path}")
        obj["plot"] = str(path)
    return _emit(args, lines, obj)


def run(args: argparse.Namespace) -> int:
    commands = {"vram": _run_vram, "cluster": _run_cluster, "cost": _run_cost}
    if args.plan_command not in commands:
        print(args.plan_help, file=sys.stderr)
        return 2
    try:
        return commands[args.plan_command](args)
    except ValueError as err:  # PlanError and dspark.config.ConfigError
        print(f"dspark plan {args.plan_command}: error: {err}", file=sys.stderr)
        return 2
