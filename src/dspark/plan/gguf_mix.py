"""Which ggml type llama.cpp's `llama-quantize` gives each tensor for a GGUF file type such as Q4_K_M.

A file type ("ftype") is a *mix*: a base type plus rules that keep sensitive tensors (attn_v, ffn_down, the
output head, ...) at more bits. The rules below restate, for the ftypes a planner is asked about, the logic of
`llama_tensor_get_type_impl` and `tensor_type_fallback` in `src/llama-quant.cpp` (github ggml-org/llama.cpp),
including `use_more_bits` (first and last eighth of the layers plus every third layer in between) and the
fallback for rows whose length is not a multiple of the block. Tensors llama.cpp never quantizes (norms,
biases, conv1d, the MoE router) are handled by the caller. This module does not know byte counts.
"""
from __future__ import annotations

from dspark.plan.errors import PlanError
from dspark.plan.quant import QUANT_TYPES
from dspark.plan.spec import (
    ATTN_K,
    ATTN_KV_B,
    ATTN_OUTPUT,
    ATTN_Q,
    ATTN_V,
    EMBED,
    FFN_DOWN,
    OUTPUT,
)

# ftype -> base ggml type (llama.cpp `llama_model_quantize_impl` switch).
FTYPE_BASE = {
    "F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K_M": "Q5_K", "Q5_K_S": "Q5_K",
    "Q5_0": "Q5_0", "Q4_K_M": "Q4_K", "Q4_K_S": "Q4_K", "Q4_0": "Q4_0", "Q3_K_L": "Q3_K", "Q3_K_M": "Q3_K",
    "Q3_K_S": "Q3_K", "Q2_K": "Q2_K", "IQ4_XS": "IQ4_XS", "IQ4_NL": "IQ4_NL", "IQ3_M": "IQ3_S", "IQ3_S": "IQ3_S",
    "IQ3_XXS": "IQ3_XXS", "IQ2_M": "IQ2_S", "IQ2_S": "IQ2_XS", "IQ2_XS": "IQ2_XS", "IQ2_XXS": "IQ2_XXS",
    "IQ1_M": "IQ1_M", "IQ1_S": "IQ1_S", "MXFP4_MOE": "MXFP4",
}
_LOW_IQ = {"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"}
_FALLBACK = {  # tensor_type_fallback: row length not a multiple of a 256-block
    "IQ1_S": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ2_XXS": "IQ4_NL", "IQ2_XS": "IQ4_NL", "IQ2_S": "IQ4_NL",
    "IQ3_XXS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q2_K": "Q4_0", "Q3_K": "Q4_0",
    "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
}


def is_ftype(name: str) -> bool:
    return name in FTYPE_BASE


def use_more_bits(i_layer: int, n_layers: int) -> bool:
    """llama.cpp's choice of layers that get more bits in the _M mixes."""
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


def _block(type_name: str) -> int:
    return 32 if type_name == "MXFP4" else QUANT_TYPES[type_name].block


def _output_type(ftype: str, base: str, row: int) -> str:
    if ftype == "MXFP4_MOE" or row % _block(base):
        return "Q8_0"
    if ftype in _LOW_IQ or ftype == "IQ3_XXS":
        return "Q5_K"
    return base if base == "Q8_0" else "Q6_K"


def _attn_v_type(ftype: str, base: str, i: int, n: int, n_gqa: int, n_expert: int) -> str:
    if ftype in _LOW_IQ:
        if n_gqa >= 4 or n_expert >= 4:
            return "Q4_K"
        return "IQ3_S" if ftype in ("IQ2_S", "IQ2_M") else "Q2_K"
    new = base
    if ftype == "Q2_K":
        new = "Q4_K" if n_gqa >= 4 else "Q3_K"
    elif ftype == "IQ3_XXS":
        new = "Q4_K" if n_gqa >= 4 else "IQ3_S"
    elif ftype in ("IQ3_S",) and n_gqa >= 4:
        new = "Q4_K"
    elif ftype == "IQ3_M":
        new = "Q4_K"
    elif ftype == "Q3_K_M":
        new = "Q5_K" if i < 2 else "Q4_K"
    elif ftype == "Q3_K_L":
        new = "Q5_K"
    elif ftype in ("IQ4_NL", "IQ4_XS") and n_gqa >= 4:
        new = "Q5_K"
    elif ftype in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, n):
        new = "Q6_K"
    elif ftype == "Q4_K_S" and i < 4:
        new = "Q5_K"
    return "Q8_0" if n_expert == 8 else new


def _ffn_down_type(ftype: str, base: str, i: int, n: int) -> str:
    if ftype in _LOW_IQ:
        return ("IQ3_S" if ftype in ("IQ2_S", "IQ2_M") else "Q2_K") if i < n // 8 else base
    rules = {
        "Q2_K": "Q3_K",
        "IQ3_XXS": "Q4_K" if i < n // 8 else "Q3_K",
        "Q3_K_M": "Q5_K" if i < n // 16 else "Q4_K",
        "IQ3_M": "Q4_K" if i < n // 8 else base,
        "Q3_K_L": "Q5_K",
        "Q4_K_M": "Q6_K" if use_more_bits(i, n) else base,
        "Q5_K_M": "Q6_K" if use_more_bits(i, n) else base,
        "IQ4_NL": "Q5_K" if i < n // 8 else base,
        "IQ4_XS": "Q5_K" if i < n // 8 else base,
        "Q4_K_S": "Q5_K" if i < n // 8 else base,
    }
    return rules.get(ftype, base)


def _attn_output_type(ftype: str, base: str, n_expert: int) -> str:
    if n_expert == 8:
        eight = {"Q2_K", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M", "IQ4_XS"}
        return "Q5_K" if ftype in eight else base
    if ftype in ("IQ1_S", "IQ1_M"):
        return "IQ2_XXS"
    if ftype in ("IQ2_S", "IQ2_M"):
        return "IQ3_S"
    return {"Q2_K": "Q3_K", "IQ3_XXS": "IQ3_S", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K", "IQ3_M": "Q4_K"}.get(ftype, base)


def _embed_type(ftype: str, base: str) -> str:
    if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
        return "Q2_K"
    if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
        return "IQ3_S"
    return base


def tensor_type(ftype: str, category: str, i_layer: int, n_layers: int, row: int, *, n_gqa: int = 1,
                n_expert: int = 0, is_expert_stack: bool = False, tied: bool = False, pure: bool = False) -> str:
    """The ggml type of one quantizable matrix (`row` = its ne[0]) in a GGUF of file type `ftype`."""
    if ftype in FTYPE_BASE:
        base = FTYPE_BASE[ftype]
    elif ftype in QUANT_TYPES and QUANT_TYPES[ftype].family == "gguf":
        base, pure = ftype, True  # a single ggml type (Q4_K, IQ4_NL ...): no mix
    else:
        raise PlanError(f"unknown GGUF file type {ftype!r}; choose one of: {', '.join(FTYPE_BASE)}")
    if base in ("F32", "F16", "BF16"):
        return base
    if pure:
        new = base
    elif category == OUTPUT or (tied and category == EMBED):
        return _output_type(ftype, base, row)
    elif ftype == "MXFP4_MOE":
        return "MXFP4" if is_expert_stack else "Q8_0"
    elif category == EMBED:
        new = _embed_type(ftype, base)
    elif category in (ATTN_V, ATTN_KV_B):
        new = _attn_v_type(ftype, base, i_layer, n_layers, n_gqa, n_expert)
    elif category == ATTN_K and n_expert == 8:
        new = "Q8_0" if ftype not in _LOW_IQ else "Q4_K"
    elif category == FFN_DOWN:
        new = _ffn_down_type(ftype, base, i_layer, n_layers)
    elif category == ATTN_OUTPUT:
        new = _attn_output_type(ftype, base, n_expert)
    elif category in (ATTN_Q, ATTN_K) and ftype == "IQ3_XXS":
        new = "IQ2_S"
    else:
        new = base
    if row % _block(new):
        new = _FALLBACK.get(new, new)
        if row % _block(new):
            new = "F16"
    return new
