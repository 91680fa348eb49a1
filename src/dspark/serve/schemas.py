"""Pydantic models of the OpenAI-compatible API: what requests may hold and what responses look like.

Requests are validated strictly (a string is not a number, 1 is not `true`), unknown fields are ignored as the
OpenAI API does, and every refusal names the field. Limits that depend on the served model (context length,
vocabulary) are checked later, in `request_plan`. Response models follow the OpenAI shapes; `metrics` carries the
per-request speculative stats (`metrics.speculative_decoding`, as vLLM's `--per-request-spec-decode-metrics`).
With vLLM's `return_token_ids` extension a response also carries the prompt's token ids (`prompt_token_ids`: on the
choice for completions, on the response for chat) and the completion's (`choices[i].token_ids`, its EOS included).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 1024  # per stop string: the matcher holds back up to this much text per streamed piece
MAX_SEED = 2**63 - 1


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class StreamOptions(_Request):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class SamplingRequest(_Request):
    """Fields shared by completions and chat completions."""

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)  # -1 or 0: off (vLLM / SGLang extension)
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    stop: Any = ()  # validated into a tuple of strings
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1)
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    ignore_eos: bool = False  # vLLM extension
    stop_token_ids: list[int] | None = None  # vLLM extension
    return_token_ids: bool = False  # vLLM extension: prompt and completion token ids in the (non-streamed) response
    user: str | None = None

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
            raise ValueError("stop must be a string or a list of strings")
        if len(items) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings are allowed, got {len(items)}")
        if any(s == "" for s in items):
            raise ValueError("stop strings must not be empty")
        if any(len(s) > MAX_STOP_CHARS for s in items):
            raise ValueError(f"a stop string may hold at most {MAX_STOP_CHARS} characters")
        return tuple(dict.fromkeys(items))


class CompletionRequest(SamplingRequest):
    prompt: Any = Field(...)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = Field(None, ge=1)
    logprobs: int | None = Field(None, ge=0)

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, value: Any) -> str | list[int]:
        """A string or a list of token ids; a batch holding exactly one prompt is unwrapped."""
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, list)):
            value = value[0]
        if isinstance(value, str):
            if not value:
                raise ValueError("prompt is empty; send at least one character")
            return value
        if isinstance(value, list):
            if not value:
                raise ValueError("prompt is empty; send a string or at least one token id")
            if all(isinstance(t, int) and not isinstance(t, bool) for t in value):
                return value
            if all(isinstance(p, (str, list)) for p in value):
                raise ValueError(f"batched prompts ({len(value)} in one request) are not supported; "
                                 f"send one request per prompt")
        raise ValueError("prompt must be a string or a list of token ids")


class ChatMessage(_Request):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Any = None
    name: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any) -> str:
        """A string, null (e.g. an assistant turn with tool calls) or a list of text parts -> one string."""
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            texts = []
            for part in value:
                if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise ValueError("only text content parts ({\"type\": \"text\", \"text\": ...}) are supported")
                texts.append(part["text"])
            return "".join(texts)
        raise ValueError("content must be a string or a list of text parts")


class ChatCompletionRequest(SamplingRequest):
    messages: list[ChatMessage] = Field(..., min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list[Any] | None = None
    response_format: dict[str, Any] | None = None


# --- responses ---------------------------------------------------------------------------------------------------

class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _Choice(BaseModel):
    index: int = 0
    logprobs: None = None
    finish_reason: str | None = None


class _Envelope(BaseModel):
    """What every completion response and stream chunk carries besides its object name and choices."""

    id: str
    created: int
    model: str
    usage: Usage | None = None
    metrics: dict[str, Any] | None = None


class CompletionChoice(_Choice):
    text: str
    prompt_token_ids: list[int] | None = None  # only with return_token_ids
    token_ids: list[int] | None = None  # only with return_token_ids


class CompletionResponse(_Envelope):
    object: Literal["text_completion"] = "text_completion"
    choices: list[CompletionChoice]
    system_fingerprint: str | None = None


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(_Choice):
    message: ChatMessageOut
    token_ids: list[int] | None = None  # only with return_token_ids


class ChatCompletionResponse(_Envelope):
    object: Literal["chat.completion"] = "chat.completion"
    choices: list[ChatChoice]
    system_fingerprint: str | None = None
    prompt_token_ids: list[int] | None = None  # only with return_token_ids


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChatChunkChoice(_Choice):
    delta: ChatDelta


class ChatCompletionChunk(_Envelope):
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    choices: list[ChatChunkChoice]


class CompletionChunk(_Envelope):
    object: Literal["text_completion"] = "text_completion"
    choices: list[CompletionChoice]


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "dspark"
    max_model_len: int
    speculative: dict[str, Any] | None = None  # draft facts (block size, mode) when a draft is served


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


_UNLESS_SET = ("metrics", "prompt_token_ids", "token_ids")


def dump(model: BaseModel) -> dict[str, Any]:
    """JSON-ready dict; a response's `metrics` and token ids are left out when there are none, chat deltas carry only
    what is set."""
    data = model.model_dump(mode="json")
    for part in (data, *data.get("choices", ())):
        for key in _UNLESS_SET:
            if part.get(key, 0) is None:
                del part[key]
    for choice in data.get("choices", ()):
        if isinstance(choice.get("delta"), dict):
            choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
    return data
