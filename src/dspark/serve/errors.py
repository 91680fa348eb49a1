"""OpenAI-style error bodies and the exception handlers that guarantee every failure answers with one.

Body shape (as the OpenAI API and vLLM answer): `{"error": {"message", "type", "param", "code"}}`.
Bad requests are 4xx with a message that says what to change; anything unexpected is logged and becomes a 500 with
the same shape, so no request can crash the server or leak a traceback. No routing or generation here.
"""
from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("dspark.serve")

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
          405: "invalid_request_error", 408: "invalid_request_error", 413: "invalid_request_error",
          429: "rate_limit_error"}


class APIError(Exception):
    """A request the server refuses; `status` is the HTTP status, the rest goes into the error body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 type_: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers  # e.g. Retry-After on a 429
        self.type = type_ or _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def _utf8(text: str | None) -> str | None:
    """`text` with anything UTF-8 cannot encode (lone surrogates a client sent) spelled as an escape."""
    return None if text is None else text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(error: APIError) -> dict[str, Any]:
    return {"error": {"message": _utf8(error.message), "type": error.type, "param": _utf8(error.param),
                      "code": error.code}}


def error_response(error: APIError) -> JSONResponse:
    return JSONResponse(error_body(error), status_code=error.status, headers=error.headers)


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def _location(loc: tuple[Any, ...]) -> str:
    """('messages', 0, 'content', 'str') -> 'messages[0].content': pydantic's union-branch tags are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (part in _TYPE_TAGS or not part.isidentifier() or part[:1].isupper()):
            out += f".{part}" if out else part
    return out


def validation_error(exc: ValidationError | RequestValidationError) -> APIError:
    """The first problem of a pydantic validation failure as a 400 naming the field."""
    first = exc.errors()[0]
    where = _location(tuple(first.get("loc", ())))
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if first.get("type") == "missing":
        message = "this field is required"
    elif first.get("type") == "extra_forbidden":
        message = "unknown field"
    named = where and not message.startswith(where)
    return APIError(400, f"{where}: {message}" if named else message, param=where or None,
                    code="invalid_parameter")


def install_error_handlers(app: FastAPI) -> None:
    """Make APIError, validation errors, unknown routes / methods and unexpected exceptions OpenAI-shaped."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _request_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        messages = {404: f"no route {request.url.path}; see GET /v1/models, POST /v1/completions, "
                         f"POST /v1/chat/completions", 405: f"{request.method} is not allowed on {request.url.path}"}
        error = APIError(exc.status_code, messages.get(exc.status_code, str(exc.detail)))
        return JSONResponse(error_body(error), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(APIError(500, f"internal error ({type(exc).__name__}); see the server log"))
