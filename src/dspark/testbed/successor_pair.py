"""A tiny synthetic target + DSpark draft + tokenizer, built on the CPU in about a second with no files or network.

It is the serving tests' model, because its acceptance is real but
partial, which exercises every serving code path: accepted drafts at every position, rejections, EOS,
stop strings, sampling.

- tokenizer: byte-level (id = byte value, 0…255) plus ChatML specials `<|endoftext|>` 256, `<|im_start|>` 257,
  `<|im_end|>` 258 (the EOS) and `<|mask|>` 259 (the draft's mask token), with a ChatML chat template;
- target: a random 4-layer Qwen3 (hidden 64) whose embedding and LM head are rewritten so that it continues text
  with the *next printable ASCII character* (`a` → `b`, `~` → `<|im_end|>`; other bytes continue with `A`):
  every token sits on a circle, the LM head points one step further round it, and the random layers perturb the
  angle, so the target usually, not always, follows the rule;
- draft: a DSpark draft (block 4) whose backbone output is silenced and whose Markov head encodes the exact rule,
  so greedy τ ≈ 2.5–3 of at most 5.

It says nothing about real models. Nothing else in `dspark.serve` may assume any of this.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from dspark.model.draft import DSparkDraft

MODEL_NAME = "dspark-tiny-successor"

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>")  # ids 256 … 259
EOS_ID, MASK_ID, VOCAB_SIZE = 258, 259, 256 + len(SPECIAL_TOKENS)
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_CIRCLE = tuple(range(32, 127)) + (EOS_ID,)  # printable ASCII, then the EOS; everything else reads as '@'
_RADIUS = 1.5  # embedding radius: larger follows the rule more exactly (2.0 ≈ always), smaller less
_SHARPNESS = 150.0  # LM-head scale: the logit gap between the next character and its neighbours
_CONTEXT = 2048


def _byte_alphabet() -> list[str]:
    """The printable stand-in character of each byte 0…255, as byte-level BPE tokenizers spell bytes."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = iter(range(256, 512))
    chars = {b: chr(b) for b in kept}
    for b in range(256):
        if b not in chars:
            chars[b] = chr(next(extra))
    return [chars[b] for b in range(256)]


def build_tokenizer() -> Any:
    """The default byte-level tokenizer with ChatML specials and chat template (a transformers fast tokenizer)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(vocab={c: b for b, c in enumerate(_byte_alphabet())}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", mask_token="<|mask|>",
        clean_up_tokenization_spaces=False, model_max_length=_CONTEXT)
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def _angles() -> torch.Tensor:
    """Each token's angle on the circle [V]; tokens off the circle share '@''s angle, so they continue with 'A'."""
    angle = torch.full((VOCAB_SIZE,), 2 * math.pi * _CIRCLE.index(ord("@")) / len(_CIRCLE))
    for i, token in enumerate(_CIRCLE):
        angle[token] = 2 * math.pi * i / len(_CIRCLE)
    return angle


def _successor_head(weight: torch.Tensor, angle: torch.Tensor) -> None:
    """Rows of an LM head / Markov W2 [V, ≥2]: token j scores highest for inputs one step before it on the circle."""
    ahead = angle - 2 * math.pi / len(_CIRCLE)
    weight.zero_()
    weight[list(_CIRCLE), 0] = _SHARPNESS * torch.cos(ahead[list(_CIRCLE)])
    weight[list(_CIRCLE), 1] = _SHARPNESS * torch.sin(ahead[list(_CIRCLE)])


@torch.no_grad()
def build_pair(seed: int = 0) -> tuple[nn.Module, DSparkDraft]:
    """The default target (HF Qwen3ForCausalLM) and its draft, both fp32 on the CPU in eval mode."""
    from dspark.testbed.random_pair import draft_config_for, random_draft, tiny_target

    target = tiny_target("qwen3", vocab_size=VOCAB_SIZE, hidden_size=64, num_layers=4, seed=seed)
    target.config.max_position_embeddings = _CONTEXT  # default RoPE: the limit is only a declared context
    angle = _angles()
    embed = target.get_input_embeddings().weight
    embed.copy_(0.05 * torch.randn(embed.shape, generator=torch.Generator().manual_seed(seed + 1)))
    embed[:, 0], embed[:, 1] = _RADIUS * torch.cos(angle), _RADIUS * torch.sin(angle)
    _successor_head(target.get_output_embeddings().weight, angle)

    config = draft_config_for(target, block_size=4).replace(mask_token_id=MASK_ID)
    draft = random_draft(config, seed=seed)
    draft.norm.weight.zero_()  # no backbone logits: the draft is its Markov head
    w1 = draft.markov_head.markov_w1.weight
    w1.zero_()
    w1[:, 0], w1[:, 1] = torch.cos(angle), torch.sin(angle)
    _successor_head(draft.markov_head.markov_w2.weight, angle)
    return target.eval(), draft.eval()


def load() -> tuple[nn.Module, Any, DSparkDraft]:
    """(hf_model, tokenizer, draft); the draft is not yet tied to the target's embedding / LM head."""
    target, draft = build_pair()
    return target, build_tokenizer(), draft
