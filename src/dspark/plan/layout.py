"""A parallel layout (TP, PP, EP, DP attention, DCP) and the share of weights and cache each GPU holds.

Conventions follow SGLang / vLLM: `tp` GPUs form one model-parallel group per pipeline stage (so a layout
uses tp x pp GPUs); with DP attention the attention runs data-parallel over `attn_dp` ranks inside that group
(attention TP = tp / attn_dp, each rank owning its own sequences, attention weights and lm_head replicated);
routed experts are spread over all tp ranks (by EP when `ep` > 1, else by TP: same memory); decode context
parallelism shards the KV over `dcp` attention-TP ranks. Facts this rests on: MLA's single latent is
replicated on every attention-TP rank (hence DCP), GQA KV splits by KV head up to the number of KV heads,
linear-attention state splits by head (vLLM and SGLang docs, research brief on serving §1.8 / §2.3).
Fitting, ranking and timing are in `cluster` and `throughput`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import ceil

from dspark.plan.gpus import Gpu
from dspark.plan.kv import kv_bytes
from dspark.plan.spec import EMBED, OUTPUT, ModelSpec
from dspark.plan.weights import QuantPlan, group_bytes


@dataclass(frozen=True)
class Layout:
    gpu: Gpu
    tp: int = 1
    pp: int = 1
    ep: int = 1
    attn_dp: int = 1
    dcp: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def nodes(self) -> int:
        return ceil(self.gpus / self.gpu.gpus_per_node)

    @property
    def attn_tp(self) -> int:
        return self.tp // self.attn_dp

    @property
    def name(self) -> str:
        if self.attn_dp > 1:
            core = f"DEP{self.tp}" if self.attn_dp == self.tp and self.ep == self.tp else \
                f"TP{self.tp} (DP-attn {self.attn_dp}, EP{self.ep})"
        else:
            core = f"TEP{self.tp}" if self.ep > 1 else f"TP{self.tp}"
        core += f" x PP{self.pp}" if self.pp > 1 else ""
        return core + (f" + DCP{self.dcp}" if self.dcp > 1 else "")

    @property
    def footprint(self) -> str:
        """'2 x 8 = 16' for whole nodes (or NVL72 trays), '1 GPU' / '4 GPUs' inside one."""
        per = self.gpu.gpus_per_node
        if self.gpus % per == 0:
            return f"{self.nodes} x {per} = {self.gpus}"
        return f"{self.gpus} GPU" + ("s" if self.gpus > 1 else "")

    @property
    def tp_crosses_nodes(self) -> bool:
        """Whether the TP / EP group leaves one NVLink domain (collectives go over the network)."""
        return self.tp > self.gpu.nvlink_domain


@dataclass(frozen=True)
class WeightSplit:
    """A model's weight bytes split by how they shard."""

    attention: float  # attention + embeddings + lm_head: replicated across DP-attention ranks
    dense: float  # dense MLP, shared experts, router, other matrices: sharded over tp
    routed: float  # routed experts: sharded over tp (EP or TP)
    embed: float  # the embedding table (read only a few rows per step)
    lm_head: float


@lru_cache(maxsize=64)
def split_weights(spec: ModelSpec, plan: QuantPlan) -> WeightSplit:
    """Weight bytes by sharding rule (cached: specs and plans are frozen)."""
    attn = dense = routed = embed = lm_head = 0.0
    for g in spec.tensors:
        size = group_bytes(spec, g, plan)
        if g.routed:
            routed += size
        elif g.category.startswith("attn") or g.category in (EMBED, OUTPUT):
            attn += size
        else:
            dense += size
        embed += size if g.category == EMBED else 0.0
        lm_head += size if g.category == OUTPUT or (spec.tied_embeddings and g.category == EMBED) else 0.0
    return WeightSplit(attn, dense, routed, embed, lm_head)


def weights_per_gpu(split: WeightSplit, layout: Layout) -> float:
    """Weight bytes on the fullest GPU (stages assumed balanced)."""
    return (split.attention / layout.attn_tp + (split.dense + split.routed) / layout.tp) / layout.pp


def sequences_per_rank(concurrency: int, layout: Layout) -> int:
    return ceil(concurrency / layout.attn_dp)


def kv_per_gpu(spec: ModelSpec, kv_dtype: str, context: int, concurrency: int, layout: Layout) -> tuple[float, float]:
    """(attention KV, recurrent state) bytes on one GPU."""
    kv = kv_bytes(spec.kv, kv_dtype, context, sequences_per_rank(concurrency, layout))
    full_share = spec.kv.full_layers + spec.kv.window_layers
    mla_share = spec.kv.mla_layers
    total_layers = full_share + mla_share or 1
    # GQA KV splits by KV head (at most kv_heads ways, then replicated); MLA's latent never splits by head.
    gqa_split = min(layout.attn_tp, max(spec.kv.kv_heads, 1) * layout.dcp)
    gqa = kv.attention * full_share / total_layers / gqa_split
    mla = kv.attention * mla_share / total_layers / layout.dcp
    return (gqa + mla) / layout.pp, kv.state / layout.attn_tp / layout.pp
