"""Turn a job's events into OpenAI responses: one JSON body, or a Server-Sent-Events stream of chunks.

Streams follow the OpenAI conventions: `data: {chunk}` lines, the chat stream opens with the assistant role,
the last content chunk carries `finish_reason`, then — only with `stream_options.include_usage` — a chunk with
empty `choices`, the `usage` and `metrics.speculative_decoding` (where vLLM puts them), then `data: [DONE]`.
An engine failure mid-stream, or a stream cut by the server's shutdown, becomes a `data: {"error": ...}` event
(then `data: [DONE]`). No generation or validation here.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, AsyncIterator, Sequence

from dspark.serve.errors import APIError, error_body
from dspark.serve.generation_job import EventChannel, Failed, Finished
from dspark.serve.schemas import (ChatChoice, ChatChunkChoice, ChatCompletionChunk, ChatCompletionResponse, ChatDelta,
                                  ChatMessageOut, CompletionChoice, CompletionChunk, CompletionResponse, Usage, dump)


def _usage(finished: Finished) -> Usage:
    return Usage(prompt_tokens=finished.prompt_tokens, completion_tokens=finished.completion_tokens,
                 total_tokens=finished.prompt_tokens + finished.completion_tokens)


def _metrics(finished: Finished) -> dict[str, Any] | None:
    return None if finished.spec is None else {"speculative_decoding": finished.spec}


@dataclass(frozen=True)
class ResponseHeader:
    chat: bool
    model: str
    id: str
    created: int

    @classmethod
    def new(cls, chat: bool, model: str) -> "ResponseHeader":
        prefix = "chatcmpl" if chat else "cmpl"
        return cls(chat, model, f"{prefix}-{uuid.uuid4().hex}", int(time.time()))


async def collect(channel: EventChannel) -> tuple[str, Finished]:
    """Wait for the whole completion: its text and how it finished (an engine failure is a 500, a request cut by the
    server's shutdown a 503)."""
    pieces: list[str] = []
    while True:
        event = await channel.get()
        if isinstance(event, str):
            pieces.append(event)
        elif isinstance(event, Failed):
            raise APIError(event.status, event.message, code=event.code)
        else:
            return "".join(pieces), event


def full_response(header: ResponseHeader, text: str, finished: Finished,
                  prompt_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """The whole completion as one body; with `prompt_ids` (return_token_ids) it carries them and the completion's
    token ids where vLLM puts them (completions: on the choice; chat: the prompt's on the response)."""
    common = dict(id=header.id, created=header.created, model=header.model, usage=_usage(finished),
                  metrics=_metrics(finished))
    ids = None if prompt_ids is None else list(finished.token_ids)
    prompt = None if prompt_ids is None else list(prompt_ids)
    if header.chat:
        return dump(ChatCompletionResponse(
            choices=[ChatChoice(message=ChatMessageOut(content=text), finish_reason=finished.reason, token_ids=ids)],
            prompt_token_ids=prompt, **common))
    return dump(CompletionResponse(choices=[CompletionChoice(text=text, finish_reason=finished.reason,
                                                             prompt_token_ids=prompt, token_ids=ids)], **common))


def _chunk(header: ResponseHeader, text: str | None = None, finish: str | None = None, role: bool = False,
           finished: Finished | None = None) -> str:
    common = dict(id=header.id, created=header.created, model=header.model)
    if finished is not None:  # the usage chunk: no choices
        common.update(usage=_usage(finished), metrics=_metrics(finished))
        chunk = (ChatCompletionChunk if header.chat else CompletionChunk)(choices=[], **common)
    elif header.chat:
        delta = ChatDelta(role="assistant" if role else None, content=text)
        chunk = ChatCompletionChunk(choices=[ChatChunkChoice(delta=delta, finish_reason=finish)], **common)
    else:
        chunk = CompletionChunk(choices=[CompletionChoice(text=text or "", finish_reason=finish)], **common)
    return f"data: {json.dumps(dump(chunk), ensure_ascii=False)}\n\n"


async def sse_stream(header: ResponseHeader, channel: EventChannel, include_usage: bool) -> AsyncIterator[str]:
    """The SSE body of a streamed completion, chunk by chunk as the engine commits tokens."""
    if header.chat:
        yield _chunk(header, text="", role=True)
    while True:
        event = await channel.get()
        if isinstance(event, str):
            yield _chunk(header, text=event)
        elif isinstance(event, Failed):
            yield f"data: {json.dumps(error_body(APIError(event.status, event.message, code=event.code)))}\n\n"
            break
        else:
            yield _chunk(header, text=None if header.chat else "", finish=event.reason)
            if include_usage:
                yield _chunk(header, finished=event)
            break
    yield "data: [DONE]\n\n"
