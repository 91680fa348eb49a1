"""Stop strings over streamed text: emit what is certainly before any stop string, cut at the first match.

The first match is the stop string that completes first in the text (the longest, if several complete at the
same character); the text is cut where it starts. This does not depend on how the text is split into pieces.

Text that could still be the start of a stop string is held back until the next piece decides it, so a client
never sees part of a stop sequence. The matched stop string itself is not returned (OpenAI behaviour). No tokens
or decoding here: this works on text pieces from `detokenize`.
"""
from __future__ import annotations

from typing import Sequence


class StopStringMatcher:
    def __init__(self, stops: Sequence[str]):
        self.stops = tuple(stops)
        self._held = ""  # text received but not emitted yet
        self.matched: str | None = None

    def _holdback(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of some stop string."""
        best = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best

    def push(self, piece: str) -> str:
        """Feed a text piece; return the text now safe to emit. After a match, `matched` is set and the text
        up to the earliest stop string has been returned; further pieces return ''."""
        if self.matched is not None:
            return ""
        text = self._held + piece
        hits = [(at + len(stop), at, stop) for stop, at in ((stop, text.find(stop)) for stop in self.stops) if at >= 0]
        if hits:  # generation stops where a stop string first completes (the longest one if several end there)
            _, at, self.matched = min(hits)
            self._held = ""
            return text[:at]
        keep = self._holdback(text)
        self._held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """At the end of generation: the held-back text (it did not become a stop string)."""
        text, self._held = ("" if self.matched is not None else self._held), ""
        return text
