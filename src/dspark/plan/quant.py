"""Exact bits per weight of every storage type a planner meets, and bytes per element of KV-cache dtypes.

A *type* is one storage format (BF16, FP8, GGUF Q4_K, MXFP4 ...). Its `bits` include the block scales, so
`params * bits / 8` is the byte count of a tensor stored in it. Which tensors a quantizer actually stores in
which type (mixes such as Q4_K_M, tensors kept in higher precision) is decided in `dspark.plan.weights` and
`dspark.plan.gguf_mix`; this module only knows the types.

Sources:
- GGUF block sizes: the `static_assert`s in `ggml/src/ggml-common.h` (github ggml-org/llama.cpp), e.g.
  Q8_0 = 34 B per 32 weights = 8.5 bpw, Q4_K = 144 B / 256 = 4.5, Q6_K = 210 B / 256 = 6.5625, MXFP4 = 17 B / 32.
- OCP Microscaling (MXFP4: 32 FP4 values + one E8M0 scale), NVIDIA NVFP4 (16 FP4 values + one FP8 scale),
  DeepSeek-V3-style FP8 (E4M3 with one fp32 scale per 128x128 block), compressed-tensors W4A16 (int4, one
  bf16 scale per group).
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.plan.errors import PlanError


@dataclass(frozen=True)
class QuantType:
    """One storage type: exact bits per weight (scales included) and, for GGUF, the block length."""

    name: str
    bits: float
    family: str  # "float" (dense IEEE / bf16), "gguf" (llama.cpp blocks) or "hf" (safetensors quantizer formats)
    block: int = 1  # weights per block; a GGUF row must be a multiple of it
    layout: str = ""


def _gguf(name: str, block_bytes: int, block: int) -> QuantType:
    return QuantType(name, block_bytes * 8 / block, "gguf", block, f"{block_bytes} B per {block} weights")


QUANT_TYPES: dict[str, QuantType] = {
    t.name: t
    for t in (
        QuantType("F32", 32.0, "float", 1, "IEEE fp32"),
        QuantType("F16", 16.0, "float", 1, "IEEE fp16"),
        QuantType("BF16", 16.0, "float", 1, "bfloat16"),
        # --- safetensors quantizer formats (vLLM / SGLang / TensorRT-LLM) ---
        QuantType("FP8", 8 + 32 / (128 * 128), "hf", 1, "E4M3 + one fp32 scale per 128x128 block (DeepSeek-V3 style)"),
        QuantType("INT8", 8.0, "hf", 1, "W8A8 int8, per-channel scale (negligible)"),
        QuantType("MXFP4", 4 + 8 / 32, "hf", 32, "OCP MX: 32 FP4 (E2M1) + one E8M0 scale = 17 B / 32"),
        QuantType("NVFP4", 4 + 8 / 16, "hf", 16, "16 FP4 (E2M1) + one FP8 E4M3 scale; per-tensor scale negligible"),
        QuantType("INT4_W4A16", 4 + 16 / 128, "hf", 128, "int4, one bf16 scale per group of 128 (GPTQ/AWQ sym.)"),
        QuantType("INT4_W4A16_G32", 4 + 16 / 32, "hf", 32, "int4, one bf16 scale per 32 (Kimi K2-Thinking QAT)"),
        # --- GGUF block types (ggml-common.h) ---
        _gguf("Q8_0", 34, 32),
        _gguf("Q4_0", 18, 32),
        _gguf("Q4_1", 20, 32),
        _gguf("Q5_0", 22, 32),
        _gguf("Q5_1", 24, 32),
        _gguf("Q2_K", 84, 256),
        _gguf("Q3_K", 110, 256),
        _gguf("Q4_K", 144, 256),
        _gguf("Q5_K", 176, 256),
        _gguf("Q6_K", 210, 256),
        _gguf("IQ1_S", 50, 256),
        _gguf("IQ1_M", 56, 256),
        _gguf("IQ2_XXS", 66, 256),
        _gguf("IQ2_XS", 74, 256),
        _gguf("IQ2_S", 82, 256),
        _gguf("IQ3_XXS", 98, 256),
        _gguf("IQ3_S", 110, 256),
        _gguf("IQ4_NL", 18, 32),
        _gguf("IQ4_XS", 136, 256),
        _gguf("TQ1_0", 54, 256),
        _gguf("TQ2_0", 66, 256),
    )
}

# ggml's own MXFP4 block is the same 17 B / 32 as the OCP format; GGUF files name it MXFP4 too.
GGUF_MXFP4 = QuantType("MXFP4", 4.25, "gguf", 32, "17 B per 32 weights")

_ALIASES = {
    "FP32": "F32", "FLOAT32": "F32", "FP16": "F16", "FLOAT16": "F16", "HALF": "F16", "BFLOAT16": "BF16",
    "FP8_E4M3": "FP8", "F8_E4M3": "FP8", "FP8_BLOCK": "FP8", "W8A8": "INT8", "INT8_W8A8": "INT8",
    "W4A16": "INT4_W4A16", "INT4": "INT4_W4A16", "INT4_G128": "INT4_W4A16", "INT4_G32": "INT4_W4A16_G32",
}


def canonical_name(name: str) -> str:
    """Upper-case a type or GGUF file-type name and resolve aliases (fp16 -> F16, w4a16 -> INT4_W4A16)."""
    key = name.strip().upper().replace("-", "_")
    return _ALIASES.get(key, key)


def quant_type(name: str) -> QuantType:
    """The storage type called `name` (case-insensitive, aliases allowed)."""
    key = canonical_name(name)
    if key not in QUANT_TYPES:
        raise PlanError(f"unknown quant type {name!r}; choose one of: {', '.join(QUANT_TYPES)}")
    return QUANT_TYPES[key]


# --- KV cache -------------------------------------------------------------------------------------------------

# Bytes per cached element. fp8 ignores the per-tensor scale; q8_0 / q4_0 are llama.cpp's quantized KV types.
KV_DTYPES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
}


def kv_bytes_per_element(dtype: str) -> float:
    """Bytes one KV-cache element takes in `dtype` (bf16 -> 2, fp8 -> 1, q8_0 -> 1.0625 ...)."""
    key = dtype.strip().lower().replace("-", "_")
    key = {"auto": "bf16", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "f16": "fp16"}.get(key, key)
    if key not in KV_DTYPES:
        raise PlanError(f"unknown KV-cache dtype {dtype!r}; choose one of: {', '.join(KV_DTYPES)}")
    return KV_DTYPES[key]
