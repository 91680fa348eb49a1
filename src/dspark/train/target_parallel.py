"""The frozen target sharded over the ranks of a torchrun job (FSDP2), so that a target larger than one GPU can train a
draft online while the draft trains data parallel (DDP, trainer.py).

Every decoder layer is one `fully_shard` unit: its weights live on each rank as a 1/N shard, are all-gathered for the
layer's forward and freed after it. Each rank runs the whole forward on its own sequences, so the features that
`Target.forward` hooks are the tensors a one-process target gives for those sequences (bit-identical on CPU). The
embedding, the final norm and the LM head stay whole on every rank (FSDP ignores them): the draft shares them
(`tie_embeddings`) and applies the LM head to its own hidden states, which a head sharded over the ranks could not
do while each rank holds other sequences.

Loading never holds the whole target on a GPU: every rank builds the model on the meta device and shards it, rank 0
alone reads the checkpoint (one copy in CPU memory), and the weights reach the other ranks tensor by tensor
(`set_model_state_dict` with `broadcast_from_rank0`), each rank keeping its shard.

Tensor parallelism (transformers' `tp_plan="auto"`) also runs the target on CPU gloo, but every rank of a TP group
must feed it the same tokens while DDP gives each rank its own, its LM head is split by vocabulary (the size must be
divisible by N) where the draft needs it whole, and only architectures with a `tp_plan` load that way; FSDP needs
none of this.

Each sharded forward is collective: every rank must run the target at every micro-batch. A rank that skipped one
(the online source's memo of hidden states) would stall the others, so `check_target_parallel` refuses that memo.
"""
from __future__ import annotations

import inspect
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from dspark.config import ConfigError
from dspark.model.target import TargetMismatchError, decoder_parts

TARGET_PARALLEL = ("none", "fsdp")  # how the online target is spread over the ranks of a torchrun job


def check_target_parallel(mode: str, world: int, online: bool, hidden_cache_bytes: int = 0) -> None:
    """Raise `ConfigError` when `mode` cannot run: no torchrun job of several ranks, an offline run (the target
    never runs) or a memo of hidden states (some ranks would skip a collective forward)."""
    if mode not in TARGET_PARALLEL:
        raise ConfigError(f"target parallel mode {mode!r} is not one of {TARGET_PARALLEL}")
    if mode == "none":
        return
    if world < 2:
        raise ConfigError(
            f"--target-parallel {mode} shards the target over the ranks of a torchrun job, but this process is alone "
            f"(world size {world}): run `torchrun --nproc_per_node N -m dspark.cli train fit … --target-parallel "
            f"{mode}` with N ≥ 2, or drop the flag")
    if not online:
        raise ConfigError(f"--target-parallel {mode} shards the target that runs inside the job (--data); with "
                          f"--hidden the target never runs: drop the flag")
    if hidden_cache_bytes:
        raise ConfigError(
            f"--target-parallel {mode}: every rank must run the sharded target at every micro-batch (its forward is "
            f"collective), and --hidden-cache-gib skips it for memoised sequences, which would stall the other ranks; "
            f"drop --hidden-cache-gib")


def shardable_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layers FSDP shards one by one; `ConfigError` for a model they cannot be found in or a quantized
    one (its weights load through a quantizer that the meta-device build skips)."""
    if getattr(model.config, "quantization_config", None) is not None:
        raise ConfigError(f"--target-parallel fsdp loads unquantized checkpoints only; {type(model).__name__} has a "
                          f"quantization_config: dequantize it (e.g. to bfloat16) first")
    try:
        layers, _ = decoder_parts(model)
    except TargetMismatchError as error:
        raise ConfigError(f"--target-parallel fsdp shards a target by its decoder layers: {error}") from error
    if not any(True for _ in layers.parameters()):
        raise ConfigError(f"--target-parallel fsdp: the decoder layers of {type(model).__name__} hold no weights")
    return layers


def shard_target(model: nn.Module, mesh) -> nn.Module:
    """`fully_shard` each decoder layer of `model` over `mesh`, and the model as the root with every other weight
    (embedding, final norm, LM head) left whole on each rank. Returns `model` (now an FSDP module)."""
    from torch.distributed.fsdp import fully_shard

    if "ignored_params" not in inspect.signature(fully_shard).parameters:
        raise ConfigError(f"--target-parallel fsdp needs torch >= 2.7 (fully_shard's ignored_params); this is "
                          f"torch {torch.__version__}")
    layers = shardable_layers(model)
    in_layers = {id(p) for p in layers.parameters()}
    whole = {p for p in model.parameters() if id(p) not in in_layers}
    for layer in layers:
        fully_shard(layer, mesh=mesh)  # reshard after forward: one layer's full weights on a rank at a time
    fully_shard(model, mesh=mesh, ignored_params=whole)  # the root: one lazy init, the layers' all-gathers in order
    return model


def load_sharded_target(path: str | Path, dtype: torch.dtype, device: torch.device) -> nn.Module:
    """Load the HF causal LM in `path` sharded over the default process group (see the module docstring); every rank
    calls it. The layers hold a 1/N shard of their weights on `device`; the other weights are whole there."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from transformers import AutoConfig, AutoModelForCausalLM

    if not (dist.is_available() and dist.is_initialized()):
        raise ConfigError("--target-parallel fsdp needs torch.distributed initialised (run under torchrun)")
    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a Hugging Face model folder (no config.json)")
    rank, world = dist.get_rank(), dist.get_world_size()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path, local_files_only=True), dtype=dtype)
    shard_target(model, init_device_mesh(device.type, (world,)))  # every rank checks the architecture: all raise
    model.to_empty(device=device)  # shards and whole weights allocated, uninitialised
    model.tie_weights()  # to_empty gives tied weights (embedding = LM head) separate tensors again
    full = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True) if rank == 0 else None
    set_model_state_dict(model, full.state_dict() if full is not None else {},
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    buffers = dict(full.named_buffers()) if full is not None else {}
    for name, buffer in model.named_buffers():  # RoPE tables etc.: not in the state dict, so not broadcast above
        if full is not None:
            buffer.copy_(buffers[name])
        dist.broadcast(buffer, src=0)
    del full, buffers
    return model.eval()
