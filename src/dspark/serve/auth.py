"""Bearer API-key check as a plain ASGI middleware: every HTTP route but the open ones (`/health`) needs the key.

A plain ASGI wrapper (not Starlette's BaseHTTPMiddleware) so streamed responses and client disconnects pass
through untouched. Keys are compared in constant time. Nothing else here.
"""
from __future__ import annotations

import hmac
from typing import Any, Awaitable, Callable

from dspark.serve.errors import APIError, error_response

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
                 "was started with (--api-key)", code="invalid_api_key"))
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)
