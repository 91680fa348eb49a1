"""Latency of `dspark serve` under a burst of mixed requests against the same burst all greedy.

    python benchmarks/serve/mixed_load.py --out DIR [--requests 200] [--max-concurrency 4] [--repeats 5]

Serves the CPU testbed pair (the testbed target and its DSpark draft, built and cached on first use) with `dspark
serve` on 127.0.0.1, then sends two bursts of `--requests` requests at once, each waiting for its answer: "mixed"
(greedy and sampled with assorted temperature / top-p / top-k / seed, completions and chat, streamed or not) and
"greedy" (the same requests with temperature 0); with --repeats N, N such pairs in turn on the same server after a
discarded warm-up burst, each kind's row the burst with its median p99. Prints the latency percentiles and the
mixed / greedy p99 ratio, and writes result.json with them. Loopback only; the bursts are bounded in count and time.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from dspark.testbed.draft_build import build_draft
from dspark.testbed.target_build import build_target


def requests(count: int, seed: int, greedy: bool) -> list[tuple[str, dict]]:
    """(route, body) pairs: a seeded mix of completions / chat, streamed or not, greedy or sampled."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        text = f"def function_{i}(values):\n    "
        body: dict = {"model": "target", "max_tokens": rng.choice((16, 32, 48)), "stream": rng.random() < 0.5}
        if not greedy and rng.random() < 0.6:
            body.update(temperature=rng.choice((0.5, 0.8, 1.0, 1.2)), top_p=rng.choice((1.0, 0.95, 0.9)),
                        top_k=rng.choice((0, 20, 50)))
            if rng.random() < 0.3:
                body["seed"] = rng.randrange(1 << 30)
        else:
            body["temperature"] = 0
        if rng.random() < 0.5:
            out.append(("/v1/completions", {**body, "prompt": text}))
        else:
            out.append(("/v1/chat/completions", {**body, "messages": [{"role": "user", "content": text}]}))
    return out


async def one(client: httpx.AsyncClient, route: str, body: dict) -> float:
    began = time.perf_counter()
    if body["stream"]:
        async with client.stream("POST", route, json=body) as response:
            response.raise_for_status()
            async for _ in response.aiter_lines():
                pass
    else:
        (await client.post(route, json=body)).raise_for_status()
    return time.perf_counter() - began


async def burst(base: str, batch: list[tuple[str, dict]]) -> dict:
    async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(600.0)) as client:
        model = (await client.get("/v1/models")).json()["data"][0]["id"]
        began = time.perf_counter()
        latencies = sorted(await asyncio.gather(*(one(client, route, {**body, "model": model})
                                                  for route, body in batch)))
        wall = time.perf_counter() - began
    q = statistics.quantiles(latencies, n=100)
    return {"requests": len(latencies), "wall_s": round(wall, 2), "p50_s": round(q[49], 2), "p90_s": round(q[89], 2),
            "p99_s": round(q[98], 2), "max_s": round(latencies[-1], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for result.json")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--max-concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1,
                        help="pairs of bursts (greedy, mixed) on the same server, after a discarded warm-up burst; "
                             "each kind's row is the burst with its median p99")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    target = build_target()
    draft = build_draft(target)
    server = subprocess.Popen([sys.executable, "-m", "dspark.cli", "serve", "--target", str(target), "--draft",
                               str(draft), "--port", "0", "--max-concurrency", str(args.max_concurrency),
                               "--max-queue", str(args.requests + 8)], stdout=subprocess.PIPE, text=True)
    bursts: dict[str, list[dict]] = {"greedy": [], "mixed": []}
    try:
        found = re.search(r"(http://127\.0\.0\.1:\d+)", server.stdout.readline())
        if found is None:
            raise RuntimeError("dspark serve printed no URL")
        base = found.group(1)
        if args.repeats > 1:  # warm-up, discarded: the first burst on a fresh server pays one-time costs
            asyncio.run(burst(base, requests(min(args.requests, 40), args.seed + 1, greedy=False)))
        for _ in range(args.repeats):
            for name in ("greedy", "mixed"):
                batch = requests(args.requests, args.seed, greedy=name == "greedy")
                bursts[name].append(asyncio.run(burst(base, batch)))
    finally:
        server.terminate()
        server.wait(60)
    results = {name: sorted(rows, key=lambda r: r["p99_s"])[(len(rows) - 1) // 2] for name, rows in bursts.items()}
    ratio = results["mixed"]["p99_s"] / results["greedy"]["p99_s"]
    print(f"{'burst':8s} {'p50 s':>7s} {'p90 s':>7s} {'p99 s':>7s} {'max s':>7s} {'wall s':>7s}")
    for name, row in results.items():
        print(f"{name:8s} {row['p50_s']:7.2f} {row['p90_s']:7.2f} {row['p99_s']:7.2f} {row['max_s']:7.2f} "
              f"{row['wall_s']:7.2f}")
    every = {name: [r["p99_s"] for r in rows] for name, rows in bursts.items()}
    print(f"mixed / greedy p99: {ratio:.2f}" + (f" (median bursts of {args.repeats} pairs; every p99: {every})"
                                                 if args.repeats > 1 else ""))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"claim": "mixed sampling settings share one batch: p99 latency of a mixed burst within 2x of the same "
                       "burst all greedy", "command": " ".join(["python", *sys.argv]), "commit": commit,
              "device": "CPU", "max_concurrency": args.max_concurrency, "bursts": results,
              "every_p99_s": every,
              "p99_ratio_mixed_over_greedy": round(ratio, 2)}
    (args.out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
