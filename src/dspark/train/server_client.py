"""HTTP to an OpenAI-compatible server (vLLM, SGLang, `dspark serve`) for regeneration: the probe and retried POSTs.

`ServerClient.probe` asks GET /v1/models once and turns an unreachable server, a refused API key or a model the
server does not serve into one `ServerError` that says what to do. `ServerClient.post` retries 429, 408 and 5xx
answers, timeouts and dropped connections with capped exponential backoff and jitter, honouring a Retry-After header
(seconds or an HTTP date); what still fails, or fails for good (another 4xx), raises `RequestFailed`. The HTTP is
httpx's; no prompts, examples or files here (see `regenerate_server`).
"""
from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Awaitable, Callable

import httpx

RETRYABLE = frozenset({408, 429, 500, 502, 503, 504})
PROBE_TIMEOUT = 30.0  # seconds: GET /v1/models answers at once on a server that is up


class ServerError(ValueError):
    """The server cannot be used at all (unreachable, refused key, unknown model); the message says what to do."""


class RequestFailed(Exception):
    """One request failed for good or after every retry; `too_long`: the server said it exceeds the context."""

    def __init__(self, message: str, too_long: bool = False):
        super().__init__(message)
        self.too_long = too_long


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8  # tries per request, the first included
    base_delay: float = 1.0  # seconds before the second try; doubles with every try
    max_delay: float = 60.0  # cap on one wait, Retry-After included
    timeout: float = 600.0  # seconds one request may take (a long generation on a busy server)

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.max_delay < 0 or self.timeout <= 0:
            raise ValueError(f"retries need attempts >= 1, delays >= 0 and a timeout > 0, got {self}")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed try `attempt` (0-based): the server's Retry-After, else half to all of the
        doubled step (jitter spreads out clients that failed together); never more than `max_delay`."""
        if retry_after is not None:
            return min(self.max_delay, retry_after)
        step = min(self.max_delay, self.base_delay * 2 ** attempt)
        return step * rng.uniform(0.5, 1.0)


def retry_after(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def error_message(response: httpx.Response) -> str:
    """The OpenAI-style error message of a response (its body's start when it has none)."""
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = None
    return str(message or response.text[:200] or response.reason_phrase)


def _too_long(response: httpx.Response) -> bool:
    text = response.text.lower()
    return response.status_code == 400 and ("context_length_exceeded" in text or "context length" in text)


class ServerClient:
    """One server's `/v1` routes over an httpx.AsyncClient; `sleep` and `rng` are the waits' (tests pass their own)."""

    def __init__(self, http: httpx.AsyncClient, policy: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep, rng: random.Random | None = None):
        self.http, self.policy, self.sleep = http, policy, sleep
        self.rng = rng or random.Random()

    @property
    def url(self) -> str:
        return str(self.http.base_url).rstrip("/")

    async def probe(self, model: str | None) -> str:
        """The model to ask for: `model` if the server lists it, else the only one it lists; or a `ServerError`."""
        try:
            response = await self._send("GET", "/v1/models", probe=True)
        except httpx.TransportError as exc:
            raise ServerError(f"cannot reach a server at {self.url} ({type(exc).__name__}: {exc}); start it or fix "
                              f"--server") from None
        except RequestFailed as exc:
            raise ServerError(f"GET {self.url}/v1/models kept failing ({exc}); check the server's log") from None
        if response.status_code in (401, 403):
            given = "authorization" in self.http.headers
            hint = "pass the key it was started with as --api-key" if given else "it needs --api-key"
            raise ServerError(f"{self.url} refused the API key (HTTP {response.status_code}: "
                              f"{error_message(response)}); {hint}")
        try:
            served = [str(card["id"]) for card in response.json()["data"]] if response.status_code == 200 else None
        except (ValueError, KeyError, TypeError):
            served = None
        if served is None:
            raise ServerError(f"GET {self.url}/v1/models answered HTTP {response.status_code}, not a model list: is "
                              f"{self.url} an OpenAI-compatible server (vLLM, SGLang, dspark serve)?")
        if model is not None and model not in served:
            raise ServerError(f"{self.url} does not serve the model `{model}`; it serves: "
                              f"{', '.join(served) or 'nothing'} (pass one of them as --model)")
        if model is None and len(served) != 1:
            raise ServerError(f"{self.url} serves {len(served)} models ({', '.join(served) or 'none'}); choose one "
                              f"with --model")
        return model or served[0]

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The JSON answer to POST `path`; retried as the policy says; `RequestFailed` when it does not come."""
        response = await self._send("POST", path, body)
        if response.status_code != 200:
            raise RequestFailed(f"HTTP {response.status_code}: {error_message(response)}", _too_long(response))
        try:
            return response.json()
        except ValueError:
            raise RequestFailed(f"the answer to POST {path} is not JSON: {response.text[:200]!r}") from None

    async def _send(self, method: str, path: str, body: dict[str, Any] | None = None,
                    probe: bool = False) -> httpx.Response:
        """The first answer not worth retrying, else `RequestFailed` after the last try. For the probe a transport
        error is raised at once (nothing answers there) and a try waits at most `PROBE_TIMEOUT` seconds."""
        timeout = min(self.policy.timeout, PROBE_TIMEOUT) if probe else self.policy.timeout
        for attempt in range(self.policy.attempts):
            wait = None
            try:
                response = await self.http.request(method, path, json=body, timeout=timeout)
            except httpx.TransportError as exc:  # timeouts, refused / reset connections, broken answers
                if probe:
                    raise
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code not in RETRYABLE:
                    return response
                problem, wait = f"HTTP {response.status_code}: {error_message(response)}", retry_after(response)
            if attempt + 1 < self.policy.attempts:
                await self.sleep(self.policy.delay(attempt, wait, self.rng))
        raise RequestFailed(f"{problem} (after {self.policy.attempts} tries)")
