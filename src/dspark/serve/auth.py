"""Bearer API-key check as a plain ASGI middleware: every HTTP route but the open ones (`/health`) needs the key.

A plain ASGI wrapper (not Starlette's BaseHTTPMiddleware) so streamed responses and client disconnects pass
through untouched. Keys are compared in constant time. `resolve_api_key` picks the key from exactly one of
--api-key, --api-key-file or $DSPARK_API_KEY; no message here ever holds the key. Nothing else here.
"""
from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

from dspark.serve.errors import APIError, error_response
from dspark.serve.model_source import ServeSetupError

API_KEY_ENV = "DSPARK_API_KEY"


def resolve_api_key(flag: str | None, file: str | None, environ: Mapping[str, str]) -> str | None:
    """The API key from the one source given (--api-key, --api-key-file PATH or $DSPARK_API_KEY), None for none;
    two sources at once, an unreadable file or an empty key are refused (the message never holds the key)."""
    given = {name: value for name, value in (("--api-key", flag), ("--api-key-file", file),
                                               (f"${API_KEY_ENV}", environ.get(API_KEY_ENV))) if value is not None}
    if len(given) > 1:
        raise ServeSetupError(f"the API key is given {len(given)} ways ({', '.join(given)}); give it one way only")
    if not given:
        return None
    (source, value), = given.items()
    if source == "--api-key-file":
        try:
            value = Path(value).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise ServeSetupError(f"--api-key-file {file}: cannot read it ({reason})") from None
    if not value.strip():
        raise ServeSetupError(f"{source} is empty; give a non-empty key or leave it out")
    return value

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


class BearerAuth:
    def __init__(self, app: ASGIApp, api_key: str, open_paths: tuple[str, ...] = ("/health",)):
        self.app, self.open_paths = app, open_paths
        self._key = api_key.encode()

    def _authorized(self, scope: dict[str, Any]) -> bool:
        header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
        scheme, _, token = header.decode("latin-1").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self._key)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        response = error_response(APIError(
            401, "missing or wrong API key: send the header 'Authorization: Bearer <key>' with the key the server "
                 "was started with (--api-key, --api-key-file or $DSPARK_API_KEY)", code="invalid_api_key"))
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)
