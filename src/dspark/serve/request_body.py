"""A request body off the network and into a JSON object, within the limits a hostile client meets.

`read_body` runs on the event loop: at most `limit` bytes, and the whole body within `timeout` seconds (a body
shorter than its Content-Length, or one sent too slowly, is a 408). `parse_json_object` is CPU work and runs in a
worker thread: strict JSON (no NaN / Infinity), an object, and every string valid Unicode (JSON's `\\ud800` escapes
can spell lone surrogates, which no tokenizer or UTF-8 encoder takes). Every refusal is an APIError (errors.py).
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request

from dspark.serve.errors import APIError


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def _receive(request: Request, limit: int) -> bytearray:
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise APIError(413, f"the request body ({length} bytes) exceeds the {limit}-byte limit", code="body_too_large")
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise APIError(413, f"the request body exceeds the {limit}-byte limit", code="body_too_large")
    return body


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The whole request body, or 413 past `limit` bytes, or 408 when it has not all arrived after `timeout` s."""
    try:
        async with asyncio.timeout(timeout):
            body = await _receive(request, limit)
    except TimeoutError:
        raise APIError(408, f"the request body did not arrive within {timeout:g} s (is Content-Length larger than "
                            f"the body?)", code="request_timeout", headers={"Connection": "close"}) from None
    return bytes(body)


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _bad_unicode(text: str) -> int | None:
    """The index of the first character UTF-8 cannot encode (a lone surrogate), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_unicode(data: Any) -> None:
    """400 naming the first string (key or value) in `data` that holds a lone surrogate; iterative (any depth)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if _bad_unicode(key) is not None:
                    raise APIError(400, f"a field name in {where or 'the body'} is not valid Unicode (it holds a "
                                        f"lone surrogate); send UTF-8 text", param=where or None, code="invalid_unicode")
                stack.append((_path(where, key), item))
        elif isinstance(value, list):
            stack.extend((_path(where, i), item) for i, item in enumerate(value))
        elif isinstance(value, str) and (at := _bad_unicode(value)) is not None:
            raise APIError(400, f"{where}: the text is not valid Unicode (a lone surrogate U+{ord(value[at]):04X} at "
                                f"character {at}); send UTF-8 text", param=where or None, code="invalid_unicode")


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object whose strings are all valid Unicode, or a 400 saying what is wrong with it."""
    if not body.strip():
        raise APIError(400, "the request body is empty; send a JSON object", code="invalid_json")
    try:
        data = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and bad UTF-8 are ValueErrors
        raise APIError(400, f"malformed JSON body: {exc}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise APIError(400, f"the request body must be a JSON object, got a JSON {type(data).__name__}",
                       code="invalid_json")
    check_unicode(data)
    return data
