"""Turn a completions prompt or a chat conversation into the target's prompt token ids.

Chat uses the tokenizer's own chat template when it has one (with the assistant generation prompt appended);
otherwise a plain fallback: one `Role: content` paragraph per message, then `Assistant:`. Token-id prompts are
checked against the vocabulary. Context-length limits are checked in `request_plan`, not here.
"""
from __future__ import annotations

from typing import Any, Sequence

from dspark.serve.errors import APIError
from dspark.serve.schemas import ChatMessage


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
