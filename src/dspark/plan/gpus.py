"""The GPU catalogue: memory, bandwidth, dense tensor rates, NVLink domain and how many GPUs share a node.

Rates are dense (no 2:4 sparsity) per GPU, in TFLOPS; fp4 0 means no native FP4 tensor cores (Hopper, CDNA3).
Sources: NVIDIA H100/H200 datasheets (989 BF16 / 1979 FP8 TFLOPS, 3.35 / 4.8 TB/s); NVIDIA HGX B200 and
GB200 NVL72 datasheets (B200 2.25 / 4.5 / 9 PF, GB200 2.5 / 5 / 10 PF, 8 TB/s, GB200 NVL72 13.4 TB HBM over 72
GPUs); glennklockwood.com/garden/processors/B300 (HGX B300: 288 GB, 8 TB/s, ~13 PF dense FP4; GB300 NVL72
1.1 EF dense FP4 over 72 GPUs); AMD Instinct MI300X / MI325X / MI355X datasheets (192 GB 5.3 TB/s, 256 GB
6 TB/s, 288 GB 8 TB/s). Node capacities and the NVL72 one-domain fact: research brief §3.1 (SemiAnalysis).
Memory is the vendor's "GB" figure; engines can use `mem_fraction` of it. Prices live in `prices.json`.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.plan.errors import PlanError


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    memory_gb: float
    bandwidth_tbs: float  # HBM, TB/s
    bf16_tflops: float
    fp8_tflops: float
    fp4_tflops: float  # 0: no native FP4
    nvlink_domain: int  # GPUs that talk over NVLink / Infinity Fabric without leaving the fabric
    gpus_per_node: int  # GPUs in one server (HGX/MI board) or one NVL72 compute tray
    scaleout_gbps: float  # per-GPU network to other nodes, Gb/s
    vendor: str = "NVIDIA"

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    def peak_tflops(self, dtype: str) -> float:
        """Dense rate for a compute dtype; FP4 falls back to FP8 on GPUs without FP4 units."""
        if dtype == "fp4":
            return self.fp4_tflops or self.fp8_tflops
        return self.fp8_tflops if dtype == "fp8" else self.bf16_tflops


CATALOGUE: dict[str, Gpu] = {
    g.key: g
    for g in (
        Gpu("h100", "H100 SXM 80 GB", 80, 3.35, 989, 1979, 0, 8, 8, 400),
        Gpu("h200", "H200 SXM 141 GB", 141, 4.8, 989, 1979, 0, 8, 8, 400),
        Gpu("b200", "B200 (HGX) 180 GB", 180, 8.0, 2250, 4500, 9000, 8, 8, 400),
        Gpu("b300", "B300 (HGX) 288 GB", 288, 8.0, 2250, 4500, 13000, 8, 8, 800),
        Gpu("gb200", "GB200 NVL72 (186 GB/GPU)", 186, 8.0, 2500, 5000, 10000, 72, 4, 400),
        Gpu("gb300", "GB300 NVL72 (288 GB/GPU)", 288, 8.0, 2500, 5000, 15000, 72, 4, 800),
        Gpu("mi300x", "MI300X 192 GB", 192, 5.3, 1307, 2615, 0, 8, 8, 400, "AMD"),
        Gpu("mi325x", "MI325X 256 GB", 256, 6.0, 1307, 2615, 0, 8, 8, 400, "AMD"),
        Gpu("mi355x", "MI355X 288 GB", 288, 8.0, 2500, 5000, 10000, 8, 8, 400, "AMD"),
    )
}


def get_gpu(key: str) -> Gpu:
    """A catalogue entry by key (case-insensitive; 'H200', 'h200', '8xh200' all work)."""
    k = key.strip().lower().replace("-", "").replace(" ", "")
    if "x" in k and k.split("x", 1)[0].isdigit():
        k = k.split("x", 1)[1]
    if k not in CATALOGUE:
        raise PlanError(f"unknown GPU {key!r}; choose one of: {', '.join(CATALOGUE)}")
    return CATALOGUE[k]
