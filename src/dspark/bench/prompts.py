"""A benchmark prompt (a chat conversation ending with a user turn) and the seeded, nested prompt selection.

Selection is deterministic: a shuffle seeded by (suite, seed), then the first `limit`; so `--limit 10` picks a prefix
of what `--limit 20` picks with the same seed. Tokenisation lives in `encode.py`.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence, TypeVar

from dspark.bench.errors import BenchError

ROLES = ("system", "user", "assistant")
T = TypeVar("T")


@dataclass(frozen=True)
class BenchPrompt:
    """One prompt: `messages` are (role, content) pairs, the last one from the user."""

    id: str
    suite: str
    messages: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.messages:
            raise BenchError(f"prompt {self.id!r} has no messages")
        for role, content in self.messages:
            if role not in ROLES:
                raise BenchError(f"prompt {self.id!r}: role {role!r} is not one of {ROLES}")
            if not isinstance(content, str):
                raise BenchError(f"prompt {self.id!r}: message content must be text")

    @classmethod
    def user(cls, id: str, suite: str, text: str) -> "BenchPrompt":
        return cls(id, suite, (("user", text),))

    @property
    def text(self) -> str:
        """The conversation as plain text (for tokenizers without a chat template)."""
        return "\n\n".join(content for _, content in self.messages)


def select(items: Sequence[T], limit: int | None, seed: int, suite: str) -> list[T]:
    """Seeded shuffle of `items`, then the first `limit` (all if None)."""
    if limit is not None and limit < 1:
        raise BenchError(f"--limit must be at least 1, got {limit}")
    order = list(range(len(items)))
    random.Random(f"{suite}:{seed}").shuffle(order)
    return [items[i] for i in order[: limit if limit is not None else len(order)]]
