"""Incremental detokenization: new tokens in, new text out, never splitting a multi-byte character.

Decoding token by token breaks UTF-8 characters and SentencePiece word boundaries, and re-decoding the whole
completion each step costs O(n²). The decoder keeps a short window instead: it decodes
`tokens[prefix:]`, compares with the text of `tokens[prefix:read]` it already emitted, and emits the rest only
when it does not end in an incomplete character (U+FFFD). Special tokens are skipped. Stop strings are not
handled here (see `stop_strings`).
"""
from __future__ import annotations

from typing import Any

_INCOMPLETE = "\ufffd"


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Any, skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.tokens: list[int] = []
        self._prefix = 0  # window start: tokens before it are never decoded again
        self._read = 0  # tokens whose text has been emitted

    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=self.skip_special_tokens)

    def push(self, token: int) -> str:
        """Add one token; return the text it completes ('' while a character is still incomplete)."""
        self.tokens.append(token)
        done = self._decode(self.tokens[self._prefix:self._read])
        now = self._decode(self.tokens[self._prefix:])
        if len(now) <= len(done) or now.endswith(_INCOMPLETE):
            return ""
        self._prefix, self._read = self._read, len(self.tokens)
        return now[len(done):]

    def flush(self) -> str:
        """Text still held back at the end of the sequence (an incomplete character decodes as U+FFFD)."""
        done = self._decode(self.tokens[self._prefix:self._read])
        now = self._decode(self.tokens[self._prefix:])
        self._prefix = self._read = len(self.tokens)
        return now[len(done):] if len(now) > len(done) else ""
