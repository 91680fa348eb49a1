"""`dspark serve`: an OpenAI-compatible server with speculative decoding and Prometheus metrics.

Parsing and printing only; the server lives in `dspark.serve`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

EPILOG = """\
endpoints: POST /v1/completions, POST /v1/chat/completions (both with "stream": true), GET /v1/models,
  GET /health (no key needed), GET /metrics (Prometheus: dspark:spec_decode_* counters, TTFT, ITL, queue)

examples:
  dspark serve                                   # the embedded default model, http://127.0.0.1:8000/v1
  dspark serve --target ./Qwen3-8B --draft ./qwen3-8b-dspark --port 8001 --api-key secret
  dspark serve --dry-run --json                  # load and check the pair, print what would be served
  dspark serve --device cuda --dtype bfloat16 --tree-nodes 31 --tree-beam 8   # trees at 1-2 rows, chains above
  dspark monitor http://127.0.0.1:8000           # watch τ live
"""


def register(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    models = parser.add_argument_group("model (none: the embedded default)")
    models.add_argument("--target", help="local Hugging Face model folder (its tokenizer is loaded from it too)")
    models.add_argument("--draft", help="dspark draft folder for the target (leave out for plain decoding)")
    models.add_argument("--served-model-name", help="the model id clients send (default: the target folder's name)")
    models.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0 (default cpu)")
    models.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    models.add_argument("--draft-vocab", type=int, default=0, metavar="K",
                        help="the draft scores only the K tokens its target writes most (FR-Spec; needs "
                             "token_counts.safetensors beside the draft, which the embedded default ships); default "
                             "0: the whole vocabulary. Output stays lossless")
    net = parser.add_argument_group("network")
    net.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    net.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    net.add_argument("--drain-timeout", type=float, default=30.0, metavar="S",
                     help="on SIGTERM / SIGINT stop taking requests (503) and let in-flight ones finish for up to S "
                          "seconds, then cut them with an error; a second signal stops at once (default 30)")
    net.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on every route but /health (visible to "
                                        "other users in the process list: prefer --api-key-file or $DSPARK_API_KEY)")
    net.add_argument("--api-key-file", metavar="PATH",
                     help="read the API key from this file (surrounding whitespace dropped); give the key one way "
                          "only: --api-key, --api-key-file or $DSPARK_API_KEY")
    net.add_argument("--request-timeout", type=float, default=30.0, metavar="S",
                     help="seconds a client has to send its whole request body, else 408 (default 30)")
    net.add_argument("--idle-timeout", type=float, default=5.0, metavar="S",
                     help="seconds an idle keep-alive connection stays open (default 5)")
    engine = parser.add_argument_group("engine")
    engine.add_argument("--max-concurrency", type=int, default=4, help="sequences generated at once (default 4)")
    engine.add_argument("--max-model-len", type=int,
                        help="prompt + completion tokens per request at most (default: the model's context; the "
                             "batched engine's KV cache holds --max-concurrency rows of this length)")
    engine.add_argument("--max-queue", type=int, default=1024, help="waiting requests before 429 (default 1024)")
    engine.add_argument("--max-drafts", type=int, help="verify at most this many drafts per round (0: no drafting)")
    engine.add_argument("--confidence-threshold", type=float, default=0.0,
                        help="cut each block at the first slot whose confidence is below this (default 0: off)")
    engine.add_argument("--algorithm1", action="store_true",
                        help="schedule each block with the DSpark paper's Algorithm 1 on round costs measured "
                             "at startup (instead of --confidence-threshold)")
    engine.add_argument("--tree-nodes", type=int, default=0, metavar="N",
                        help="verify a tree of N drafts per round instead of the block's chain (the batched engine; a "
                             "DSpark draft branches on its Markov head, a DFlash-mode one on each slot's own "
                             "distribution; greedy or sampled, lossless either way); default 0: the chain. On a GPU "
                             "at batch 1, 31 nodes with --tree-beam 8 decode fastest")
    engine.add_argument("--tree-beam", type=int, default=4, metavar="K",
                        help="the tree's nodes kept per depth (default 4)")
    engine.add_argument("--tree-max-rows", type=int, default=2, metavar="R",
                        help="rounds over more than R rows verify the block's chain instead of trees (default 2: "
                             "a tree's extra slots cost little at a row or two, not at 16; 0: trees at every "
                             "batch size)")
    engine.add_argument("--tree-score-temperature", type=float, default=1.0, metavar="T",
                        help="score the tree's nodes by log-softmax(logits / T): below 1 the trees grow deeper along "
                             "the draft's greedy path (default 1)")
    engine.add_argument("--per-request-spec-metrics", default="summary", choices=("none", "summary", "detailed"),
                        help="metrics.speculative_decoding in each response, as vLLM's flag (default summary)")
    engine.add_argument("--threads", type=int,
                        help="torch CPU threads (default: all CPU cores)")
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    parser.add_argument("--dry-run", action="store_true", help="load and check everything, print it, do not serve")
    parser.add_argument("--json", action="store_true", help="with --dry-run: print one JSON object")


def _describe(served, settings) -> dict:
    from dspark.serve.app import spec_tokens_per_round

    draft = None
    if served.draft is not None:
        cfg = served.draft.config
        vocab = served.draft.draft_vocab
        draft = {"mode": cfg.mode, "block_size": cfg.block_size, "num_speculative_tokens":
                 spec_tokens_per_round(served, settings), "target_layer_ids": list(cfg.target_layer_ids),
                 "draft_vocab": cfg.vocab_size if vocab is None else len(vocab.token_ids),
                 "tree": {"nodes": settings.tree_nodes, "beam": settings.tree_beam,
                          "max_rows": settings.tree_max_rows or None,
                          "score_temperature": settings.tree_score_temperature} if settings.tree_nodes else None}
    return {"model": served.name, "url": f"http://{settings.host}:{settings.port}", "context_length":
            served.context_length, "draft": draft, "max_concurrency": settings.max_concurrency,
            "api_key_required": settings.api_key is not None}


def run(args: argparse.Namespace) -> int:
    try:
        import torch

        from dspark.cli.serve_default import load_default
        from dspark.serve.app import create_app
        from dspark.serve.auth import resolve_api_key
        from dspark.serve.model_source import load_served_model
        from dspark.serve.server import serve_forever
        from dspark.serve.settings import ServeSettings

        settings = ServeSettings(
            host=args.host, port=args.port, api_key=resolve_api_key(args.api_key, args.api_key_file, os.environ),
            request_timeout=args.request_timeout, max_concurrency=args.max_concurrency,
            max_queue=args.max_queue, max_model_len=args.max_model_len, max_drafts=args.max_drafts,
            confidence_threshold=args.confidence_threshold, algorithm1=args.algorithm1,
            tree_nodes=args.tree_nodes, tree_beam=args.tree_beam, tree_max_rows=args.tree_max_rows,
            tree_score_temperature=args.tree_score_temperature, spec_metrics=args.per_request_spec_metrics)
        if args.threads is not None and args.threads < 1:
            raise ValueError("--threads must be >= 1")
        from dspark.serve.drain import check_drain_timeout

        check_drain_timeout(args.drain_timeout)
        if not 0 < args.idle_timeout < float("inf"):
            raise ValueError(f"--idle-timeout must be a positive number of seconds, got {args.idle_timeout}")
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # loading bars would garble stderr, which carries our one-line errors
        served = load_served_model(args.target, args.draft, args.served_model_name, args.device, args.dtype,
                                   args.draft_vocab, default=load_default)
        if str(args.device).startswith("cpu"):  # one engine thread decodes every request
            torch.set_num_threads(args.threads or max(1, os.cpu_count() or 1))
        app = create_app(served, settings)
        served = app.state.served  # held to --max-model-len
        summary = _describe(served, settings)
        if args.dry_run:
            if args.json:
                print(json.dumps(summary))
            else:
                for key, value in summary.items():
                    print(f"{key:>17}: {value}")
            return 0

        def ready(url: str) -> None:
            draft = summary["draft"]
            spec = f"dspark draft, {draft['num_speculative_tokens']} drafts per round" if draft else "no draft"
            print(f"dspark serve: {served.name} ({spec}) on {url} — OpenAI base URL {url}/v1, metrics {url}/metrics",
                  flush=True)

        return serve_forever(app, settings.host, settings.port, args.log_level, on_ready=ready,
                             drain_timeout=args.drain_timeout, idle_timeout=args.idle_timeout)
    except (ValueError, OSError) as exc:  # setup errors say what to change; OSError: unreadable model files
        print(f"dspark serve: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0
