"""Turn a completions prompt or a chat conversation into the target's prompt token ids.

Chat uses the tokenizer's own chat template when it has one (with the assistant generation prompt appended);
otherwise a plain fallback: one `Role: content` paragraph per message, then `Assistant:`. Token-id prompts are
checked against the vocabulary. Context-length limits are checked in `request_plan`, not here; `max_token_bytes`
gives it the bound that refuses a text too long to fit before it is tokenized.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

from dspark.serve.errors import APIError
from dspark.serve.schemas import ChatMessage


@functools.lru_cache(maxsize=8)
def max_token_bytes(tokenizer: Any) -> int | None:
    """The most UTF-8 bytes one token of `tokenizer` spells (its longest vocabulary entry, special tokens included),
    so a text of B bytes encodes to at least B / this many tokens; None when the vocabulary cannot be listed.

    A vocabulary entry's own spelling is never shorter than the input it covers (byte-level BPE spells a byte with one
    character, SentencePiece a space with `▁`, a byte-fallback token a byte with `<0xNN>`), so the bound is safe."""
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # a tokenizer without a listable vocabulary: no bound, the prompt is tokenized
        return None
    longest = max((len(token.encode("utf-8", "surrogatepass")) for token in vocab), default=0)
    return longest or None


def completion_prompt_ids(prompt: str | list[int], tokenizer: Any, vocab_size: int) -> list[int]:
    if isinstance(prompt, str):
        ids = list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    else:
        bad = next((t for t in prompt if not 0 <= t < vocab_size), None)
        if bad is not None:
            raise APIError(400, f"prompt token id {bad} is outside the vocabulary [0, {vocab_size})", param="prompt",
                           code="invalid_token_id")
        ids = list(prompt)
    if not ids:
        raise APIError(400, "the prompt encodes to no tokens; send some text", param="prompt", code="empty_prompt")
    return ids


def render_plain_chat(messages: Sequence[ChatMessage]) -> str:
    """The fallback chat format for tokenizers without a chat template."""
    turns = [f"{m.role.capitalize()}: {m.content}" for m in messages]
    return "\n\n".join(turns) + "\n\nAssistant:"


def chat_prompt_ids(messages: Sequence[ChatMessage], tokenizer: Any) -> list[int]:
    if getattr(tokenizer, "chat_template", None):
        conversation = [{"role": m.role, "content": m.content, **({"name": m.name} if m.name else {})}
                        for m in messages]
        try:
            text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        except Exception as exc:  # jinja templates raise their own errors for conversations they refuse
            raise APIError(400, f"the model's chat template refused these messages: {exc}", param="messages",
                           code="chat_template_error") from None
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    else:
        ids = list(tokenizer(render_plain_chat(messages), add_special_tokens=True)["input_ids"])
    if not ids:
        raise APIError(400, "the messages encode to no tokens", param="messages", code="empty_prompt")
    return ids
