"""Human tables and JSON objects for `dspark plan vram|cluster|cost` results.

Pure formatting of results computed elsewhere: plain-text tables (no terminal library, so commands stay
fast) and JSON-ready dicts. It computes nothing new.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dspark.plan.cluster import Candidate, ClusterRequest, GpuChoice, why
from dspark.plan.cost import CostResult
from dspark.plan.examples import WorkedExample
from dspark.plan.seed import SeedExplanation
from dspark.plan.throughput import SeedDecodeCheck
from dspark.plan.vram import GB, GIB, VramEstimate


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Columns padded to width; text left-aligned, numbers right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_num(r[i]) for r in cells[1:]) for i in range(len(headers))]
    out = []
    for n, row in enumerate(cells):
        out.append("  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return [line.rstrip() for line in out]


def _is_num(text: str) -> bool:
    return text.replace(",", "").replace(".", "").replace("%", "").replace("+", "").replace("-", "").replace(
        "$", "").replace("x", "").strip().isdigit()


def gb(x: float) -> str:
    return f"{x / GB:,.2f}"


# --- vram -------------------------------------------------------------------------------------------------------

def vram_lines(est: VramEstimate, title: str) -> list[str]:
    rows = [(i.label, i.kind, gb(i.bytes), f"{i.bytes / GIB:,.2f}", f"{i.bytes / est.total:.1%}", i.note)
            for i in est.items]
    lines = [title, *table(("item", "kind", "GB", "GiB", "share", "note"), rows), ""]
    for kind in ("weights", "kv", "state", "overhead"):
        if est.by_kind(kind):
            lines.append(f"  {kind:<9} {gb(est.by_kind(kind)):>12} GB")
    lines.append(f"  {'TOTAL':<9} {gb(est.total):>12} GB = {est.total / GIB:,.2f} GiB = {est.total / 1e12:.3f} TB"
                 + (f"  ({gb(est.per_gpu)} GB per GPU over {est.gpus})" if est.gpus > 1 else ""))
    lines += ["assumptions: " + "; ".join(est.assumptions)]
    return lines


def vram_json(est: VramEstimate) -> dict[str, Any]:
    return {
        "context": est.context, "concurrency": est.concurrency, "kv_dtype": est.kv_dtype, "gpus": est.gpus,
        "items": [{"label": i.label, "kind": i.kind, "bytes": round(i.bytes), "note": i.note} for i in est.items],
        "by_kind": {k: round(est.by_kind(k)) for k in ("weights", "kv", "state", "overhead")},
        "total_bytes": round(est.total), "total_gb": round(est.total / GB, 3), "assumptions": list(est.assumptions),
    }


def quant_table_lines(rows: list[tuple[str, float, float]], model: str) -> list[str]:
    body = [(q, f"{bits:.3f}", gb(size), f"{size / GIB:,.2f}") for q, bits, size in rows]
    return [f"weight bytes of {model} per quantization (real sizes: mixes, scales and kept tensors included)",
            *table(("quant", "bits/weight", "GB", "GiB"), body)]


def seed_lines(e: SeedExplanation) -> list[str]:
    rows = [(r.quant, f"{r.seed_figure:.3f}", gb(r.weights), gb(r.kv), gb(r.overhead), f"{r.total_gib:.3f}",
             f"{r.error_pct:+.2f}%", f"{r.kv_share:.0%}", f"{r.fit_gib:.3f}") for r in e.rows]
    real = [(r.quant, f"{r.gguf_weights:.3f}", f"{r.standalone_1m_fp16:.2f}", f"{r.colocated_128k_fp8:.2f}",
             f"{r.colocated_per_gpu_tp8:.3f}") for r in e.realistic]
    return [
        f"The seed's 'minimum VRAM by quant' for the {e.params:,}-parameter draft, rebuilt "
        f"(1,000,000 tokens of fp16 KV at {e.kv_per_token_fp16:,.0f} B/token, flat 2 GB, nominal bits, GiB):",
        *table(("quant", "seed 'GB'", "weights GB", "KV GB", "overhead GB", "rebuilt GiB", "error", "KV share",
                "best fit"), rows),
        "", "Realistic (decimal GB): real GGUF sizes; alone = + borrowed embed/lm_head, 1M fp16 KV, real overheads; "
            "colocated = draft weights + 128K fp8 KV next to its target:",
        *table(("quant", "GGUF weights", "alone, 1M fp16", "colocated, 128K fp8", "per GPU, TP8"), real),
        "", "Findings:", *(f"- {f}" for f in e.findings),
    ]


def seed_json(e: SeedExplanation) -> dict[str, Any]:
    return {
        "params": e.params, "kv_bytes_per_token_fp16": e.kv_per_token_fp16,
        "rows": [{"quant": r.quant, "seed_figure": r.seed_figure, "weights_bytes": round(r.weights),
                  "kv_bytes": round(r.kv), "overhead_bytes": round(r.overhead), "total_gib": round(r.total_gib, 4),
                  "error_pct": round(r.error_pct, 3), "kv_share": round(r.kv_share, 4),
                  "best_fit_gib": round(r.fit_gib, 4)} for r in e.rows],
        "realistic_gb": [r.__dict__ for r in e.realistic], "findings": list(e.findings),
    }


# --- cluster ----------------------------------------------------------------------------------------------------

def _decode_cell(c: Candidate, draft: bool) -> str:
    d = c.decode
    return f"{d.ar_tok_s:,.0f} -> {d.spec_tok_s:,.0f} ({d.speedup:.2f}x)" if draft else f"{d.ar_tok_s:,.0f}"


def compare_lines(choices: list[GpuChoice], req: ClusterRequest) -> list[str]:
    draft = req.draft is not None
    rows = []
    for ch in choices:
        c = ch.best
        if c is None:
            rows.append((ch.gpu.key, "-", "does not fit", "-", "-"))
        else:
            rows.append((ch.gpu.key, c.layout.footprint, c.layout.name,
                         f"{gb(c.memory.total)} / {gb(c.memory.usable)}", _decode_cell(c, draft)))
    return [f"Smallest layout per GPU type for {_what(req)}:",
            *table(("gpu", "nodes x GPUs", "layout", "GB per GPU used / usable",
                    "tok/s per user" + (" no draft -> DSpark" if draft else "")), rows),
            "", "Why:", *(f"- {why(ch, req)}" for ch in choices)]


def _what(req: ClusterRequest) -> str:
    d = f" + {req.draft.name}" if req.draft is not None else ""
    return (f"{req.target.name} ({req.target_plan.label}){d}, context {req.context:,} x concurrency "
            f"{req.concurrency}, KV {req.kv_dtype}, {req.engine}")


def candidates_lines(cands: list[Candidate], req: ClusterRequest, top: int,
                     command: Callable[[Candidate], str] | None = None) -> list[str]:
    """The ranked table, the best layout's per-GPU memory and (given `command`) its engine command."""
    draft = req.draft is not None
    rows = [(c.layout.name, c.layout.nodes, c.layout.gpus, gb(c.memory.total), gb(c.memory.usable),
             "yes" if c.memory.fits else "no", c.blocked[:40] or "-", _decode_cell(c, draft),
             f"{c.decode.spec_total_tok_s if draft else c.decode.ar_total_tok_s:,.0f}") for c in cands[:top]]
    lines = [f"Layouts on {cands[0].layout.gpu.name} for {_what(req)} (best first):",
             *table(("layout", "nodes", "GPUs", "GB/GPU", "usable", "fits", "engine", "tok/s per user",
                     "tok/s total"), rows)]
    best = next((c for c in cands if c.usable), None)
    if best is None:
        return lines + ["", f"nothing fits within {req.max_nodes} node(s); raise --max-nodes or use fp8 KV"]
    m = best.memory
    parts = [("target weights", m.target_weights), ("draft weights", m.draft_weights), ("target KV", m.kv),
             ("recurrent state", m.state), ("draft KV", m.draft_kv), ("overheads", m.overhead),
             ("total", m.total), ("usable", m.usable)]
    lines += ["", f"Per-GPU memory of {best.layout.name} ({best.layout.footprint}):",
              *table(("part", "GB"), [(p, gb(v)) for p, v in parts if v or p in ("total", "usable")])]
    if command is not None:
        lines += ["", f"{req.engine} command:", f"  {command(best)}"]
    lines += [f"warning: {w}" for w in best.warnings]
    return lines


def candidate_json(c: Candidate, command: Callable[[Candidate], str] | None = None) -> dict[str, Any]:
    m, d, lay = c.memory, c.decode, c.layout
    return {
        "gpu": lay.gpu.key, "layout": lay.name, "nodes": lay.nodes, "gpus": lay.gpus, "tp": lay.tp, "pp": lay.pp,
        "ep": lay.ep, "attn_dp": lay.attn_dp, "dcp": lay.dcp, "fits": m.fits, "blocked": c.blocked,
        "warnings": list(c.warnings), **({"flags": command(c)} if command else {}),
        "per_gpu_bytes": {"target_weights": round(m.target_weights), "draft_weights": round(m.draft_weights),
                          "kv": round(m.kv), "state": round(m.state), "draft_kv": round(m.draft_kv),
                          "overhead": round(m.overhead), "total": round(m.total), "usable": round(m.usable)},
        "decode": {"tok_s_per_user_no_draft": round(d.ar_tok_s, 2), "tok_s_per_user_dspark": round(d.spec_tok_s, 2),
                   "speedup": round(d.speedup, 3), "tau": d.tau, "verify_width": d.verify_width,
                   "tok_s_total_no_draft": round(d.ar_total_tok_s, 1),
                   "tok_s_total_dspark": round(d.spec_total_tok_s, 1),
                   "bound_no_draft": d.ar_bound, "roofline_tok_s": round(d.roofline_tok_s, 1)},
    }


def seed_decode_lines(checks: list[SeedDecodeCheck], tau: float) -> list[str]:
    rows = [(f"TP{c.tp}", f"{c.measured_ar:.0f} -> {c.measured_spec:.0f}",
             f"{c.estimate.ar_tok_s:.0f} -> {c.estimate.spec_tok_s:.0f}", f"{c.estimate.speedup:.2f}x",
             f"{c.implied_tau:.2f}", f"{c.estimate.roofline_tok_s:,.0f}") for c in checks]
    return [f"Decode check against the seed's ~118 -> ~370 tok/s (vLLM K3 blog: GB300, batch 1, 8K in; "
            f"model at tau {tau}):",
            *table(("layout", "measured", "this model", "speedup", "tau needed", "bandwidth roofline"), rows),
            "The no-draft rows are the calibration points; the DSpark rows are predictions. Single-stream decode is "
            "latency-bound (per-layer kernels and all-reduces), far below the bandwidth roofline."]


# --- cost -------------------------------------------------------------------------------------------------------

def cost_lines(r: CostResult, header: str) -> list[str]:
    i = r.inputs
    api_cached = "" if r.api.cached_input is None else f" (${r.api.cached_input:.2f} cached)"
    rows = [("$ per M output tokens", f"${r.per_m_without:,.2f}", f"${r.per_m_with:,.2f}",
             f"${r.api_per_m_output:,.2f}"),
            ("output tok/s at 100 %", f"{i.tok_s_without:,.0f}", f"{i.tok_s_with:,.0f}", "-"),
            ("break-even utilisation", f"{r.break_even_util_without:.1%}", f"{r.break_even_util_with:.1%}", "-")]
    lines = [header,
             f"cluster ${i.cluster_hour:,.2f}/h -> ${r.monthly:,.0f} per month ({i.hours_per_month:g} h); "
             f"utilisation {i.utilisation:.0%}",
             *table(("", "no draft", "DSpark", f"API {r.api.name}"), rows),
             f"API {r.api.name}: ${r.api.input:.2f} in{api_cached} / ${r.api.output:.2f} out per M -> "
             f"${r.api_per_m_output:.2f} per M output tokens with {r.input_per_output:g} input tokens each "
             f"(${r.api_per_m_total:.2f} per M total tokens, {r.cache_hit:.0%} cache hits)",
             f"break-even: {r.break_even_output_tokens / 1e9:,.2f}B output tokens/month "
             f"({r.break_even_total_tokens / 1e9:,.2f}B total) = {r.break_even_tok_s:,.0f} output tok/s sustained"]
    if r.break_even_util_with > 1:
        lines.append("this cluster cannot reach break-even even at 100 % utilisation with DSpark: the API is cheaper")
    return lines


def cost_json(r: CostResult) -> dict[str, Any]:
    i = r.inputs
    return {
        "gpu_hour": i.gpu_hour, "gpus": i.gpus, "cluster_hour": round(i.cluster_hour, 4), "utilisation": i.utilisation,
        "tok_s_no_draft": round(i.tok_s_without, 2), "tok_s_dspark": round(i.tok_s_with, 2),
        "usd_per_m_no_draft": round(r.per_m_without, 4), "usd_per_m_dspark": round(r.per_m_with, 4),
        "monthly_usd": round(r.monthly, 2), "api": r.api.name, "api_usd_per_m_output": round(r.api_per_m_output, 4),
        "api_usd_per_m_total": round(r.api_per_m_total, 4), "input_per_output": r.input_per_output,
        "cache_hit": r.cache_hit, "break_even_output_tokens_per_month": round(r.break_even_output_tokens),
        "break_even_total_tokens_per_month": round(r.break_even_total_tokens),
        "break_even_tok_s": round(r.break_even_tok_s, 2),
        "break_even_utilisation_no_draft": round(r.break_even_util_without, 4),
        "break_even_utilisation_dspark": round(r.break_even_util_with, 4),
    }


def examples_lines(examples: list[WorkedExample]) -> list[str]:
    rows = [(e.name, e.inputs, f"{e.published:,.4g}", f"{e.computed:,.4g}", e.unit, f"{e.error_pct:+.2f}%", e.source)
            for e in examples]
    return ["Public worked examples, recomputed:",
            *table(("example", "inputs", "published", "computed", "unit", "diff", "source"), rows)]
