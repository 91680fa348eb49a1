"""`dspark launch`: print a launch command for SGLang, vLLM or TensorRT-LLM that passes `dspark doctor`.

Parsing and printing only; the layout, the commands and the doctor check live in `dspark.deploy.launch`.
"""
from __future__ import annotations

import argparse
import json
import sys

EPILOG = """\
examples:
  dspark launch --engine sglang --draft kimi-k3-dspark --target kimi-k3 --gpus-per-node 8 --nodes 2
  dspark launch --engine vllm --draft ./my-draft --target ./Qwen3-8B --gpus-per-node 1
  dspark launch --engine trtllm --draft kimi-k3-dspark --target kimi-k3 --nodes 2 --output run.sh

--draft / --target take a preset name (kimi-k3-dspark / kimi-k3) or a checkpoint folder (config.json).
The printed script is checked by the doctor first; a plan with an error is refused (exit status 2).
"""


def _size(text: str) -> int:
    from dspark.deploy.cmdline import parse_int

    try:
        return parse_int(text, "value")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def register(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--engine", required=True, choices=("sglang", "vllm", "trtllm"), help="serving engine")
    parser.add_argument("--draft", required=True, help="draft preset (kimi-k3-dspark) or checkpoint folder")
    parser.add_argument("--target", required=True, help="target preset (kimi-k3) or checkpoint folder")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument("--nodes", type=int, default=1, help="nodes (default 1); TP = GPUs per node x nodes")
    parser.add_argument("--context", type=_size, help="longest prompt + output to serve (default: the smaller "
                        "of the target's and the draft's range); accepts 128k, 1M")
    parser.add_argument("--max-running-requests", type=int, default=64,
                        help="concurrent requests (SGLang --max-running-requests, vLLM --max-num-seqs, "
                        "TensorRT-LLM --max_batch_size; default 64)")
    parser.add_argument("--chunked-prefill-size", type=_size,
                        help="prefill chunk / step token budget (default 8192, raised to fit a full verify batch)")
    parser.add_argument("--dcp-size", type=int, help="decode context parallel size (default: GPUs per node "
                        "for DSpark drafts on SGLang/vLLM)")
    parser.add_argument("--sps-table", help="profiled SPS / cost table for confidence scheduling")
    parser.add_argument("--draft-path", help="path or repo id the command should load the draft from")
    parser.add_argument("--target-path", help="path or repo id the command should load the target from")
    parser.add_argument("--host", default="0.0.0.0", help="bind address (default 0.0.0.0)")
    parser.add_argument("--port", type=int, help="port (default 30000 SGLang, 8000 vLLM / TensorRT-LLM)")
    parser.add_argument("--head-addr", default="$HEAD_IP", help="node 0's address for multi-node (default $HEAD_IP)")
    parser.add_argument("--config-path", default="dspark_trtllm.yaml",
                        help="TensorRT-LLM options file the script writes (default dspark_trtllm.yaml)")
    parser.add_argument("--output", help="also write the script to this file (executable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the script")


def _write_script(path: str, text: str) -> None:
    from dspark.files import write_text

    write_text(path, "#!/usr/bin/env bash\n" + text, mode=0o755)

def run(args: argparse.Namespace) -> int:
    from dspark.deploy.launch import LaunchRequest, plan_launch

    request = LaunchRequest(
        engine=args.engine, draft=args.draft, target=args.target, gpus_per_node=args.gpus_per_node,
        nodes=args.nodes, context=args.context, max_running_requests=args.max_running_requests,
        chunked_prefill_size=args.chunked_prefill_size, dcp_size=args.dcp_size, draft_path=args.draft_path,
        target_path=args.target_path, sps_table=args.sps_table, host=args.host, port=args.port,
        head_addr=args.head_addr, config_path=args.config_path,
    )
    try:
        plan = plan_launch(request)
        if args.output:
            _write_script(args.output, plan.script)
    except (ValueError, OSError) as exc:
        print(f"dspark launch: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        lay = plan.layout
        print(json.dumps({
            "engine": plan.engine, "script": plan.script, "llm_api_options": plan.llm_api_options,
            "config_path": plan.config_path,
            "layout": {"tp": lay.tp, "dcp": lay.dcp, "nodes": lay.nodes, "gpus_per_node": lay.gpus_per_node,
                       "context": lay.context, "max_running_requests": lay.max_running,
                       "chunked_prefill_size": lay.chunk, "block_size": lay.draft.block_size,
                       "draft": lay.draft_path, "target": lay.target_path},
            "doctor": plan.report.to_dict(),
        }))
        return 0
    print(plan.script, end="")
    report = plan.report
    print(f"# dspark doctor on this script: {report.count('error')} errors, {report.count('warning')} warnings")
    for finding in report.findings:
        print(f"#   {finding.severity}: [{finding.rule}] {finding.what}; fix: {finding.fix}")
    return 0
