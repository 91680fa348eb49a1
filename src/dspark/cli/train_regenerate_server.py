"""`dspark train regenerate --server URL`: its options and the call into `dspark.train.regenerate_server`.

    dspark train regenerate --server URL [--api-key K] [--model NAME] --concurrency N --prompts … --out data.jsonl

Registered on `cli/train.py`'s `regenerate` parser, which also owns the options both paths share (--prompts, --out,
--max-new-tokens, --temperature, --top-p, --seed). Parsing only; the requests, retries and files are the train
package's.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def add_server_options(regen: argparse.ArgumentParser) -> None:
    server = regen.add_argument_group("through a server (--server)")
    server.add_argument("--server", metavar="URL",
                        help="generate through this OpenAI-compatible server (vLLM, SGLang, dspark serve) instead of "
                             "loading --target here")
    server.add_argument("--api-key", help="the server's API key")
    server.add_argument("--model", help="the model to ask for (default: the only one the server lists)")
    server.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    server.add_argument("--tokenizer", metavar="DIR",
                        help="the target's tokenizer, read only when the server sends no token ids (SGLang); default "
                             "--target")
    server.add_argument("--retries", type=int, default=7,
                        help="retries of a request after a 429 / 5xx / timeout / dropped connection (default 7)")
    server.add_argument("--request-timeout", type=float, default=600.0, metavar="SECONDS",
                        help="how long one request may take (default 600)")


def regenerate_through_server(args: argparse.Namespace, prompts):
    """`regenerate_via_server` with the parsed options; bad options raise ValueError (the CLI's exit 2)."""
    try:
        from dspark.train.regenerate_server import Sampling, regenerate_via_server
        from dspark.train.server_client import RetryPolicy
    except ImportError as exc:
        raise ValueError(f"--server needs httpx ({exc}): pip install 'dspark[serve]'") from None
    if args.retries < 0:
        raise ValueError(f"--retries must be >= 0, got {args.retries}")
    folder = args.tokenizer or args.target
    tokenizer = None
    if folder:
        if not Path(folder).is_dir():
            raise ValueError(f"--tokenizer {folder}: no such folder (give the target's model or tokenizer folder)")
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(folder)
        except OSError as exc:
            raise ValueError(f"--tokenizer {folder}: no tokenizer there ({exc})") from None
    sampling = Sampling(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                        seed=args.seed)
    return regenerate_via_server(args.server, prompts, args.out, api_key=args.api_key, model=args.model,
                                 concurrency=args.concurrency, sampling=sampling, tokenizer=tokenizer,
                                 tokenizer_name=f"the tokenizer in {folder}",
                                 retry=RetryPolicy(attempts=args.retries + 1, timeout=args.request_timeout))
