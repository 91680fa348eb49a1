"""User prompts from a JSONL file: one object per line with `prompt` (text) or `messages` (chat turns).

Optional fields: `id` (default: the line number) and `suite` (default: the file's stem), so one file can hold several
suites. `messages` is a list of {"role": "system"|"user"|"assistant", "content": text} ending with a user turn.
"""
from __future__ import annotations

import json
from pathlib import Path

from dspark.bench.errors import BenchError
from dspark.bench.prompts import ROLES, BenchPrompt


def _messages(raw: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, list) or not raw:
        raise BenchError(f"{where}: 'messages' must be a non-empty list of {{'role', 'content'}} objects")
    turns = []
    for turn in raw:
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str) or \
                not isinstance(turn.get("content"), str):
            raise BenchError(f"{where}: each message needs a text 'role' and a text 'content', got {turn!r:.80}")
        if turn["role"] not in ROLES:
            raise BenchError(f"{where}: role {turn['role']!r} is not one of {ROLES}")
        turns.append((turn["role"], turn["content"]))
    if turns[-1][0] != "user":
        raise BenchError(f"{where}: the last message must come from the user (the model answers it)")
    return tuple(turns)


def jsonl_prompts(path: str | Path) -> list[BenchPrompt]:
    """Read every prompt in `path`; a malformed line raises `BenchError` naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"prompt file {path} does not exist")
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise BenchError(f"{where}: not valid JSON ({err.msg}); write one JSON object per line") from None
        if not isinstance(row, dict) or ("prompt" in row) == ("messages" in row):
            raise BenchError(f"{where}: give exactly one of 'prompt' (text) or 'messages' (chat turns)")
        if "prompt" in row and not isinstance(row["prompt"], str):
            raise BenchError(f"{where}: 'prompt' must be text")
        messages = (("user", row["prompt"]),) if "prompt" in row else _messages(row["messages"], where)
        prompts.append(BenchPrompt(str(row.get("id", number)), str(row.get("suite", path.stem)), messages))
    if not prompts:
        raise BenchError(f"prompt file {path} holds no prompts")
    return prompts
