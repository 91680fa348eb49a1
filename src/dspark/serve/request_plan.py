"""From a validated API request to an `EngineRequest`: prompt ids, GenerationConfig, stop strings and limits.

Applies the limits that depend on the served model: the prompt must leave room in the context, and
prompt + max_tokens must fit in it (a request that does not fit is a 400, as in vLLM, never a silent clamp). A text
whose UTF-8 bytes cannot fit (more than context × the longest token's bytes) is refused before it is tokenized.
Sampling values too small for float32 arithmetic: a temperature below MIN_TEMPERATURE is greedy (as vLLM), a top_p
below MIN_TOP_P is a 400; a top_k at or above the vocabulary is off. Refuses the OpenAI features the engine does not
have (n > 1, logprobs, penalties, tools, ...). CPU work (tokenizing) but no I/O: the app runs it in a worker thread.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.config import ConfigError, GenerationConfig
from dspark.serve.errors import APIError
from dspark.serve.model_source import ServedModel
from dspark.serve.prompts import chat_prompt_ids, completion_prompt_ids, max_token_bytes
from dspark.serve.schemas import ChatCompletionRequest, CompletionRequest, SamplingRequest
from dspark.serve.settings import ServeSettings

DEFAULT_TEMPERATURE = 1.0  # the OpenAI API's default
MIN_TEMPERATURE = 1e-5  # below this a temperature is greedy (vLLM's _SAMPLING_EPS): logits / T would overflow
MIN_TOP_P = 1e-5  # the smallest top_p accepted: float32 rounds much smaller values to 0, which keeps no token


@dataclass(frozen=True)
class EngineRequest:
    prompt_ids: tuple[int, ...]
    generation: GenerationConfig
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    return_token_ids: bool = False  # answer with the prompt's and the completion's token ids (vLLM extension)


def _unsupported(request: SamplingRequest) -> str | None:
    checks = [
        (request.n != 1, "n > 1 (send n requests)"),
        (request.presence_penalty != 0 or request.frequency_penalty != 0, "presence / frequency penalties"),
        (bool(request.logit_bias), "logit_bias"),
        (request.return_token_ids and request.stream, "return_token_ids with stream (ask without streaming)"),
    ]
    if isinstance(request, CompletionRequest):
        checks += [(request.echo, "echo"), (request.suffix is not None, "suffix"),
                   (request.best_of not in (None, 1), "best_of > 1"), (request.logprobs is not None, "logprobs")]
    if isinstance(request, ChatCompletionRequest):
        checks += [(request.logprobs or request.top_logprobs is not None, "logprobs"),
                   (bool(request.tools), "tools"),
                   (request.response_format is not None and request.response_format.get("type") != "text",
                    "response_format other than text")]
    return next((what for failed, what in checks if failed), None)


def check_model(requested: str | None, served: ServedModel) -> None:
    if requested is not None and requested != served.name:
        raise APIError(404, f"the model `{requested}` does not exist; this server serves `{served.name}` "
                            f"(GET /v1/models)", param="model", code="model_not_found")


def _max_tokens(request: SamplingRequest, prompt_len: int, served: ServedModel, settings: ServeSettings) -> int:
    limit = served.context_length
    if prompt_len >= limit:
        raise APIError(400, f"this model's maximum context length is {limit} tokens and the prompt has {prompt_len}; "
                            f"shorten the prompt", param="messages" if isinstance(request, ChatCompletionRequest)
                       else "prompt", code="context_length_exceeded")
    room = limit - prompt_len
    asked = request.max_tokens
    if isinstance(request, ChatCompletionRequest) and request.max_completion_tokens is not None:
        asked = request.max_completion_tokens
    if asked is None:
        return room if isinstance(request, ChatCompletionRequest) else min(room, settings.default_completion_tokens)
    if asked > room:
        raise APIError(400, f"this model's maximum context length is {limit} tokens; the prompt has {prompt_len} and "
                            f"max_tokens asks for {asked} more; lower max_tokens to at most {room}",
                       param="max_tokens", code="context_length_exceeded")
    return asked


def _prompt_bytes(request: CompletionRequest | ChatCompletionRequest) -> int:
    if isinstance(request, ChatCompletionRequest):
        return sum(len(m.content.encode("utf-8")) + len((m.name or "").encode("utf-8")) for m in request.messages)
    return len(request.prompt.encode("utf-8")) if isinstance(request.prompt, str) else 0


def check_prompt_bytes(request: CompletionRequest | ChatCompletionRequest, served: ServedModel) -> None:
    """400 `context_length_exceeded` when the prompt's text has more UTF-8 bytes than the context's tokens can spell,
    without tokenizing it."""
    per_token = max_token_bytes(served.tokenizer)
    size = _prompt_bytes(request)
    if per_token is None or size <= served.context_length * per_token:
        return
    chat = isinstance(request, ChatCompletionRequest)
    raise APIError(400, f"this model's maximum context length is {served.context_length} tokens and the "
                        f"{'messages hold' if chat else 'prompt holds'} {size} bytes of text, more than "
                        f"{served.context_length} tokens can spell (a token spells at most {per_token} bytes); shorten "
                        f"the prompt", param="messages" if chat else "prompt", code="context_length_exceeded")


def _sampling(request: SamplingRequest, served: ServedModel) -> tuple[float, float, int]:
    """temperature, top_p and top_k as the engine takes them (see the module docstring for tiny values)."""
    temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
    if temperature < MIN_TEMPERATURE:
        temperature = 0.0
    top_p = 1.0 if request.top_p is None else request.top_p
    if top_p < MIN_TOP_P:
        raise APIError(400, f"top_p must be at least {MIN_TOP_P:g} (got {top_p:g}); top_k 1 keeps only the most "
                            f"likely token", param="top_p", code="invalid_parameter")
    top_k = max(0, request.top_k or 0)
    return temperature, top_p, 0 if top_k >= served.vocab_size else top_k


def plan_request(request: CompletionRequest | ChatCompletionRequest, served: ServedModel,
                 settings: ServeSettings) -> EngineRequest:
    """Check the request against the served model and build what the engine worker runs."""
    check_model(request.model, served)
    what = _unsupported(request)
    if what is not None:
        raise APIError(400, f"{what} is not supported by dspark serve", code="unsupported_parameter")
    if isinstance(request, ChatCompletionRequest):
        if all(not m.content for m in request.messages):
            raise APIError(400, "every message is empty; send some content", param="messages", code="empty_prompt")
    temperature, top_p, top_k = _sampling(request, served)
    check_prompt_bytes(request, served)
    if isinstance(request, ChatCompletionRequest):
        prompt = chat_prompt_ids(request.messages, served.tokenizer)
    else:
        prompt = completion_prompt_ids(request.prompt, served.tokenizer, served.vocab_size)
    max_tokens = _max_tokens(request, len(prompt), served, settings)
    extra_eos = tuple(request.stop_token_ids or ())
    if any(not 0 <= t < served.vocab_size for t in extra_eos):
        raise APIError(400, f"stop_token_ids must lie in [0, {served.vocab_size})", param="stop_token_ids",
                       code="invalid_parameter")
    eos = extra_eos if request.ignore_eos else tuple(dict.fromkeys(served.eos_token_ids + extra_eos))
    try:
        generation = GenerationConfig(
            max_new_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=request.seed,
            eos_token_ids=eos,
            max_drafts=settings.max_drafts,
            confidence_threshold=settings.confidence_threshold,
        )
    except ConfigError as exc:
        raise APIError(400, str(exc), code="invalid_parameter") from None
    include_usage = bool(request.stream_options and request.stream_options.include_usage)
    return EngineRequest(tuple(prompt), generation, request.stop, request.stream, include_usage,
                         request.return_token_ids)
