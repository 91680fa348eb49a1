"""Turn benchmark prompts into target token ids: through the tokenizer's chat template when it has one, else as
plain text. Also gives a token counter for sizing long-context prompts. It does not generate or measure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from dspark.bench.prompts import BenchPrompt


@dataclass(frozen=True)
class EncodedPrompt:
    id: str
    suite: str
    token_ids: tuple[int, ...]


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def encode_prompt(tokenizer: Any, prompt: BenchPrompt, use_chat_template: bool = True,
                  template_kwargs: Mapping[str, Any] | None = None) -> EncodedPrompt:
    """Chat-formatted (with the generation prompt for the assistant turn) when the tokenizer has a template and
    `use_chat_template`; `template_kwargs` go to the template (e.g. {"enable_thinking": False} for Qwen3)."""
    if use_chat_template and has_chat_template(tokenizer):
        messages = [{"role": role, "content": content} for role, content in prompt.messages]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             **dict(template_kwargs or {}))
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    else:
        ids = tokenizer(prompt.text, verbose=False)["input_ids"]
    return EncodedPrompt(prompt.id, prompt.suite, tuple(int(i) for i in ids))


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """Counts the tokens of plain text (no special tokens) with `tokenizer`."""
    return lambda text: len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
