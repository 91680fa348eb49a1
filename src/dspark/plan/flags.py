"""Engine command lines (SGLang, vLLM) for a planned layout: parallelism, memory and speculative flags only.

Spellings come from SGLang `server_args.py` (--tp-size, --pp-size, --dp-size + --enable-dp-attention,
--ep-size, --dcp-size, --nnodes, --speculative-algorithm DSPARK, --speculative-dspark-block-size,
--enable-dp-lm-head) and vLLM `arg_utils.py` (--tensor-parallel-size, --pipeline-parallel-size,
--data-parallel-size, --enable-expert-parallel, --decode-context-parallel-size, --speculative-config with
method "dspark"); research brief on serving §1.8, §2.2, §2.3. Full launch commands with every check are
`dspark launch`'s job; this module only turns a layout into the flags that realise it.
"""
from __future__ import annotations

import json

from dspark.plan.errors import PlanError
from dspark.plan.layout import Layout

ENGINES = ("sglang", "vllm")


def engine_flags(layout: Layout, engine: str, *, model: str, draft: str | None, block_size: int, context: int,
                 kv_dtype: str, mem_fraction: float) -> str:
    """The flags that run `model` (+ `draft`) on `layout` with `engine`."""
    if engine == "sglang":
        parts = [f"python -m sglang.launch_server --model-path {model} --trust-remote-code", f"--tp-size {layout.tp}"]
        if layout.pp > 1:
            parts.append(f"--pp-size {layout.pp}")
        if layout.attn_dp > 1:
            parts.append(f"--dp-size {layout.attn_dp} --enable-dp-attention")
        if layout.ep > 1:
            parts.append(f"--ep-size {layout.ep}")
        if layout.dcp > 1:
            parts.append(f"--dcp-size {layout.dcp}")
        if layout.nodes > 1:
            parts.append(f"--nnodes {layout.nodes} --node-rank <0..{layout.nodes - 1}> --dist-init-addr <head>:5000")
        kv = {"fp8": "fp8_e4m3", "bf16": "auto"}.get(kv_dtype, kv_dtype)
        parts.append(f"--context-length {context} --kv-cache-dtype {kv} --mem-fraction-static {mem_fraction:.2f}")
        if draft:
            parts.append(f"--speculative-algorithm DSPARK --speculative-draft-model-path {draft} "
                         f"--speculative-dspark-block-size {block_size}")
            if layout.attn_dp > 1:
                parts.append("--enable-dp-lm-head")
        return " ".join(parts)
    if engine == "vllm":
        parts = [f"vllm serve {model} --trust-remote-code", f"--tensor-parallel-size {layout.attn_tp}"]
        if layout.pp > 1:
            parts.append(f"--pipeline-parallel-size {layout.pp}")
        if layout.attn_dp > 1:
            local = min(layout.attn_dp, layout.gpu.gpus_per_node)
            parts.append(f"--data-parallel-size {layout.attn_dp} --data-parallel-size-local {local}")
            if layout.nodes > 1:
                parts.append("--data-parallel-address <head> --data-parallel-start-rank <node x local>")
        if layout.ep > 1:
            parts.append("--enable-expert-parallel")
        if layout.dcp > 1:
            parts.append(f"--decode-context-parallel-size {layout.dcp}")
        if layout.nodes > 1 and layout.attn_dp == 1:
            parts.append(f"--nnodes {layout.nodes} --node-rank <0..{layout.nodes - 1}> --master-addr <head>")
        parts.append(f"--max-model-len {context} --kv-cache-dtype {'auto' if kv_dtype == 'bf16' else kv_dtype} "
                     f"--gpu-memory-utilization {mem_fraction:.2f}")
        if draft:
            config = {"method": "dspark", "model": draft, "num_speculative_tokens": block_size}
            parts.append(f"--speculative-config '{json.dumps(config, separators=(',', ':'))}'")
        return " ".join(parts)
    raise PlanError(f"unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}")


def engine_caveats(layout: Layout, engine: str, with_draft: bool) -> tuple[str, tuple[str, ...]]:
    """(reason the engine refuses the layout or "", warnings) for speculative serving on `layout`."""
    warnings = []
    if layout.tp_crosses_nodes:
        warnings.append(f"TP{layout.tp} spans {layout.nodes} nodes: every layer's all-reduce crosses the network")
    if with_draft and layout.pp > 1:
        if engine == "sglang":
            return ("SGLang rejects pipeline parallelism with speculative decoding "
                    "(check_server_args); use TP across nodes or vLLM", tuple(warnings))
        warnings.append("vLLM documents PP as not composable with speculative decoding (vllm<=0.15); the public "
                        "16xH200 PP2xTP8 DSpark run used patches")
    if with_draft and layout.dcp > 1 and engine == "vllm":
        warnings.append("vLLM's DSpark path was first scoped to dcp=1; check your version supports DCP with DSpark")
    if with_draft and layout.attn_dp > 1 and engine == "sglang":
        warnings.append("SGLang DSpark with DP attention needs --enable-dp-lm-head and moe_a2a_backend none")
    return "", tuple(warnings)
