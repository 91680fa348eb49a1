"""The one writer of SGLang, vLLM and TensorRT-LLM launch commands, for `dspark launch` and `dspark plan cluster`.

Given a `LaunchLayout` (resolved and checked by `launch.py`, or made from a planned layout by
`planned_layout`), each builder returns the argv of one command as groups of tokens (one group per printed
line), and `render` turns groups into a copy-pasteable shell command. Flag spellings follow `engine_flags.py`:

- SGLang: `python -m sglang.launch_server` with `--speculative-algorithm DSPARK`, the block size and
  `--speculative-num-draft-tokens` = gamma + 1, the draft attention backend, `--tp-size`, `--pp-size`,
  `--dp-size` + `--enable-dp-attention`, `--ep-size`, `--dcp-size`, chunked prefill,
  `--max-running-requests`; multi-node via `--nnodes/--node-rank/--dist-init-addr`.
- vLLM: `vllm serve` with `--speculative-config` JSON (`method`, `model`, `num_speculative_tokens`),
  `--tensor-parallel-size`, `--pipeline-parallel-size`, `--data-parallel-size`, `--enable-expert-parallel`,
  `--decode-context-parallel-size`, chunked prefill; multi-node via Ray.
- TensorRT-LLM: `trtllm-serve` plus an LLM-API options YAML holding `DSparkDecodingConfig`.

No validation here: `launch.py` checks the request and runs the doctor on the result; the planner ranks layouts.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from dspark.deploy.checkpoint_facts import DFLASH, DSPARK, DraftFacts
from dspark.deploy.engine_flags import SGLANG_RAGGED_VERIFY_ENV
from dspark.plan.cluster import Candidate, ClusterRequest
from dspark.plan.layout import Layout

SGLANG_DIST_PORT = 50000
RAY_PORT = 6379
NODE_RANK = "$NODE_RANK"  # multi-node scripts run unchanged on every node, told apart by this variable
DEFAULT_CHUNK = 8192  # SGLang's auto value on 80-160 GB GPUs (server_args.py), vLLM/TRT-LLM step budget
DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000, "trtllm": 8000}


@dataclass(frozen=True)
class LaunchLayout:
    """Everything a command needs, already resolved and checked."""

    target_path: str
    draft_path: str
    draft: DraftFacts | None  # None: no speculative decoding
    trust_remote_code: bool
    gpus_per_node: int
    nodes: int
    tp: int
    dcp: int
    context: int
    max_running: int
    chunk: int
    sps_table: str | None
    host: str
    port: int
    head_addr: str
    pp: int = 1
    attn_dp: int = 1  # data-parallel attention ranks (their TP is tp // attn_dp)
    ep: int = 1
    kv_dtype: str | None = None  # None: the engine's default
    mem_fraction: float | None = None  # None: the engine's default

    @property
    def dflash(self) -> bool:
        return self.draft is not None and self.draft.anchor_layout == DFLASH

    @property
    def gamma(self) -> int:
        """Drafts proposed per round: block_size for DSpark, block_size - 1 for DFlash-aligned drafts."""
        block = (self.draft.block_size or 0) if self.draft is not None else 0
        return block - 1 if self.dflash else block


def planned_layout(layout: Layout, *, target_path: str, draft_path: str | None, block_size: int,
                   trust_remote_code: bool, context: int, concurrency: int, kv_dtype: str, mem_fraction: float,
                   engine: str) -> LaunchLayout:
    """The LaunchLayout of a layout from `dspark.plan.cluster` (a DSpark draft of `block_size`, or none)."""
    draft = (DraftFacts(source="plan", layout="deepspec", anchor_layout=DSPARK, block_size=block_size,
                        target_layer_ids=None, mask_token_id=None) if draft_path else None)
    width = block_size + 1 if draft_path else 1
    return LaunchLayout(
        target_path=target_path, draft_path=draft_path or "", draft=draft, trust_remote_code=trust_remote_code,
        gpus_per_node=layout.gpu.gpus_per_node, nodes=layout.nodes, tp=layout.tp, dcp=layout.dcp, context=context,
        max_running=concurrency, chunk=max(DEFAULT_CHUNK, -(-concurrency * width // 256) * 256), sps_table=None,
        host=DEFAULT_HOST, port=DEFAULT_PORTS[engine], head_addr="$HEAD_IP", pp=layout.pp, attn_dp=layout.attn_dp,
        ep=layout.ep, kv_dtype=kv_dtype, mem_fraction=mem_fraction)


def plan_command(candidate: Candidate, req: ClusterRequest) -> str:
    """The one-line engine command that runs a layout `dspark plan cluster` found (`req.engine`)."""
    draft = req.draft
    lay = planned_layout(candidate.layout, target_path=req.target.hf_repo or req.target.name,
                         draft_path=(draft.hf_repo or draft.name) if draft is not None else None,
                         block_size=draft.block_size if draft is not None else 0,
                         trust_remote_code=req.target.trust_remote_code, context=req.context,
                         concurrency=req.concurrency, kv_dtype=req.kv_dtype, mem_fraction=req.mem_fraction,
                         engine=req.engine)
    return command(lay, req.engine, one_line=True)


def command(lay: LaunchLayout, engine: str, one_line: bool = False) -> str:
    """The SGLang or vLLM command of `lay` (TensorRT-LLM needs its options file: see `trtllm_groups`)."""
    if engine == "sglang":
        groups, env = sglang_groups(lay)
    elif engine == "vllm":
        groups, env = vllm_groups(lay), {}
    else:
        raise ValueError(f"no single-command writer for engine {engine!r}; choose sglang or vllm")
    return render(groups, env, one_line)


def _quote(value: str) -> str:
    if value.startswith("$"):
        return f'"{value}"'  # keep shell variables (e.g. $HEAD_IP) expandable
    return shlex.quote(value)


def render(groups: list[list[str]], env: dict[str, str] | None = None, one_line: bool = False) -> str:
    """Groups of tokens -> one shell command, one group per line joined with backslashes (or all on one line)."""
    prefix = " ".join(f"{k}={_quote(v)}" for k, v in (env or {}).items())
    lines = [" ".join(_quote(tok) for tok in group) for group in groups]
    first = f"{prefix} {lines[0]}" if prefix else lines[0]
    return (" " if one_line else " \\\n  ").join([first, *lines[1:]])


def sglang_groups(lay: LaunchLayout) -> tuple[list[list[str]], dict[str, str]]:
    """argv groups and environment of the SGLang command (every node runs it with its own $NODE_RANK)."""
    groups = [["python", "-m", "sglang.launch_server"], ["--model-path", lay.target_path]]
    if lay.trust_remote_code:
        groups.append(["--trust-remote-code"])
    groups.append(["--tp-size", str(lay.tp)] + (["--pp-size", str(lay.pp)] if lay.pp > 1 else [])
                  + (["--dcp-size", str(lay.dcp)] if lay.dcp > 1 else []))
    if lay.attn_dp > 1:
        groups.append(["--dp-size", str(lay.attn_dp), "--enable-dp-attention"]
                      + (["--enable-dp-lm-head"] if lay.draft is not None else []))
    if lay.ep > 1:
        groups.append(["--ep-size", str(lay.ep)])
    if lay.nodes > 1:
        groups.append(["--nnodes", str(lay.nodes), "--node-rank", NODE_RANK,
                       "--dist-init-addr", f"{lay.head_addr}:{SGLANG_DIST_PORT}"])
    block = lay.draft.block_size if lay.draft is not None else 0
    if lay.dflash:
        groups += [["--speculative-algorithm", "DFLASH"], ["--speculative-draft-model-path", lay.draft_path],
                   ["--speculative-dflash-block-size", str(block)],
                   ["--speculative-draft-attention-backend", "flashinfer"]]
    elif lay.draft is not None:
        groups += [["--speculative-algorithm", "DSPARK"], ["--speculative-draft-model-path", lay.draft_path],
                   ["--speculative-dspark-block-size", str(block), "--speculative-num-draft-tokens", str(block + 1)],
                   ["--speculative-draft-attention-backend", "trtllm_mha"]]
        if lay.sps_table:
            groups.append(["--speculative-dspark-sps-table-path", lay.sps_table])
    groups += [["--chunked-prefill-size", str(lay.chunk)],
               ["--max-running-requests", str(lay.max_running), "--cuda-graph-max-bs", str(lay.max_running)],
               ["--context-length", str(lay.context)] + _sglang_memory(lay),
               ["--enable-metrics", "--host", lay.host, "--port", str(lay.port)]]
    env = {SGLANG_RAGGED_VERIFY_ENV: "compact"} if lay.sps_table and not lay.dflash else {}
    return groups, env


def _sglang_memory(lay: LaunchLayout) -> list[str]:
    out = []
    if lay.kv_dtype is not None:
        out += ["--kv-cache-dtype", {"fp8": "fp8_e4m3", "bf16": "auto"}.get(lay.kv_dtype, lay.kv_dtype)]
    if lay.mem_fraction is not None:
        out += ["--mem-fraction-static", f"{lay.mem_fraction:.2f}"]
    return out


def _vllm_memory(lay: LaunchLayout) -> list[str]:
    out = []
    if lay.kv_dtype is not None:
        out += ["--kv-cache-dtype", "auto" if lay.kv_dtype == "bf16" else lay.kv_dtype]
    if lay.mem_fraction is not None:
        out += ["--gpu-memory-utilization", f"{lay.mem_fraction:.2f}"]
    return out


def vllm_spec_config(lay: LaunchLayout) -> dict:
    """The --speculative-config JSON object (vllm/config/speculative.py keys)."""
    return {"method": "dflash" if lay.dflash else "dspark", "model": lay.draft_path,
            "num_speculative_tokens": lay.gamma}


def vllm_groups(lay: LaunchLayout) -> list[list[str]]:
    """argv groups of the `vllm serve` command (run on the head node when nodes > 1)."""
    groups = [["vllm", "serve", lay.target_path]]
    if lay.trust_remote_code:
        groups.append(["--trust-remote-code"])
    groups.append(["--tensor-parallel-size", str(lay.tp // lay.attn_dp)]
                  + (["--pipeline-parallel-size", str(lay.pp)] if lay.pp > 1 else [])
                  + (["--decode-context-parallel-size", str(lay.dcp)] if lay.dcp > 1 else []))
    if lay.attn_dp > 1:
        groups.append(["--data-parallel-size", str(lay.attn_dp),
                       "--data-parallel-size-local", str(min(lay.attn_dp, lay.gpus_per_node))])
    if lay.ep > 1:
        groups.append(["--enable-expert-parallel"])
    if lay.nodes > 1:
        groups.append(["--distributed-executor-backend", "ray"])
    if lay.draft is not None:
        groups.append(["--speculative-config", json.dumps(vllm_spec_config(lay), separators=(", ", ": "))])
    groups += [["--enable-chunked-prefill", "--max-num-batched-tokens", str(lay.chunk)],
               ["--max-num-seqs", str(lay.max_running), "--max-model-len", str(lay.context)] + _vllm_memory(lay),
               ["--host", lay.host, "--port", str(lay.port)]]
    return groups


def ray_lines(lay: LaunchLayout) -> list[str]:
    """Ray cluster start-up for a multi-node vLLM launch: workers join and block, node 0 starts the head."""
    return [f'if [ "{NODE_RANK}" != 0 ]; then ray start --block --address "{lay.head_addr}:{RAY_PORT}"; exit; fi',
            f"ray start --head --port {RAY_PORT}"]


def trtllm_options(lay: LaunchLayout) -> dict:
    """The LLM-API options (YAML) with a DSparkDecodingConfig (TensorRT-LLM API reference field names)."""
    draft = lay.draft
    spec: dict = {"decoding_type": "DSpark", "speculative_model": lay.draft_path,
                  "max_draft_len": draft.block_size, "block_size": draft.block_size}
    if draft.mask_token_id is not None:
        spec["mask_token_id"] = draft.mask_token_id
    if draft.target_layer_ids:
        spec["target_layer_ids"] = list(draft.target_layer_ids)
    if draft.markov_rank is not None:
        spec["markov_rank"] = draft.markov_rank
    if draft.markov_head_type:
        spec["markov_head_type"] = draft.markov_head_type
    spec["attention_backend"] = "TRTLLM"
    if lay.sps_table:
        spec["enable_confidence_scheduling"] = True
        spec["confidence_cost_table_path"] = lay.sps_table
    return {"speculative_config": spec, "enable_chunked_prefill": True,
            "cuda_graph_config": {"enable_padding": True, "max_batch_size": lay.max_running}}


def trtllm_groups(lay: LaunchLayout, config_path: str) -> list[list[str]]:
    """argv groups of `trtllm-serve` (under srun + trtllm-llmapi-launch when nodes > 1)."""
    groups: list[list[str]] = []
    if lay.nodes > 1:
        groups.append(["srun", "--nodes", str(lay.nodes), "--ntasks-per-node", str(lay.gpus_per_node),
                       "--mpi", "pmix", "trtllm-llmapi-launch"])
    groups.append(["trtllm-serve", lay.target_path])
    groups.append(["--backend", "pytorch"] + (["--trust_remote_code"] if lay.trust_remote_code else []))
    groups += [["--tp_size", str(lay.tp)],
               ["--max_batch_size", str(lay.max_running), "--max_num_tokens", str(lay.chunk)],
               ["--max_seq_len", str(lay.context)],
               ["--extra_llm_api_options", config_path],
               ["--host", lay.host, "--port", str(lay.port)]]
    return groups


def trtllm_yaml(options: dict) -> str:
    """The options as YAML with a header comment."""
    import yaml

    header = ("# TensorRT-LLM LLM-API options written by `dspark launch --engine trtllm`\n"
              "# (DSparkDecodingConfig fields: nvidia.github.io/TensorRT-LLM/llm-api/reference/"
              "DSparkDecodingConfig.html)\n")
    return header + yaml.safe_dump(options, sort_keys=False, default_flow_style=None)
