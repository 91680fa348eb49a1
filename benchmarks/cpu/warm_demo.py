"""The CPU benchmarks' common start: their shared command-line options, and the demo's models and prompts
(`dspark.demo.load_demo`: SmolLM2 fp32 + the shipped draft, weights laid out by the timed CPU plan), torch's thread
count set first, and one short untimed generation both ways."""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from dspark.config import GenerationConfig
from dspark.demo import DemoOptions, DemoSetup, load_demo, warm_up


def demo_parser(description: str, prompts: int, out: str) -> argparse.ArgumentParser:
    """A parser with the options every CPU benchmark takes: --prompts (per suite), --max-new-tokens, --threads, --out."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=prompts, help="prompts per suite (code, chat, math)")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(out))
    return parser


def warm_demo(prompts: int, max_new_tokens: int, threads: int) -> tuple[DemoSetup, GenerationConfig, list[int]]:
    """(setup, greedy config, the first prompt) with `prompts` prompts per suite, ready to time."""
    torch.set_num_threads(threads)
    setup = load_demo(DemoOptions(prompts_per_suite=prompts, max_new_tokens=max_new_tokens), print)
    config = GenerationConfig(max_new_tokens=max_new_tokens, eos_token_ids=setup.eos_token_ids)
    first = next(p for suite in setup.prompts.values() for p in suite)
    warm_up(setup.target, setup.draft, first, config)
    return setup, config, first
