"""One request's generation on an engine worker, reported to the HTTP side as a stream of events.

The job runs `dspark.engine.generate_stream` with the worker's own Target, turns tokens into text
(`detokenize`), applies stop strings (`stop_strings`), updates the Prometheus metrics live (tokens, every verify
round's drafts / accepted, TTFT, inter-token latency) and tallies the per-request speculative stats. Events cross
from the worker thread to the event loop through an `EventChannel`: text pieces (`str`), then one `Finished` or
`Failed`. A cancelled job (the client went away) stops between tokens with finish reason "abort".
No HTTP and no queueing here (see `app` and `scheduler`); no speculative algorithm either (see `dspark.engine`).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from dspark.engine.generate import generate_stream
from dspark.engine.stats import StatsRecorder
from dspark.model.target import Target
from dspark.serve.detokenize import IncrementalDetokenizer
from dspark.serve.metrics import ServerMetrics
from dspark.serve.model_source import ServedModel
from dspark.serve.request_plan import EngineRequest
from dspark.serve.spec_stats import SpecTally
from dspark.serve.stop_strings import StopStringMatcher

log = logging.getLogger("dspark.serve")


@dataclass(frozen=True)
class Finished:
    reason: str  # "stop" (EOS or a stop string), "length" (max_tokens) or "abort" (cancelled)
    prompt_tokens: int
    completion_tokens: int
    spec: dict[str, Any] | None  # metrics.speculative_decoding, None when not reported


@dataclass(frozen=True)
class Failed:
    message: str


Event = str | Finished | Failed


class EventChannel:
    """Thread-safe hand-over of events from a worker thread to an asyncio consumer."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._queue: asyncio.Queue[Event] = asyncio.Queue()

    def put(self, event: Event) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # the event loop is gone (server shutting down): nobody is listening
            pass

    async def get(self) -> Event:
        return await self._queue.get()


class GenerationJob:
    def __init__(self, request: EngineRequest, served: ServedModel, metrics: ServerMetrics,
                 channel: EventChannel, num_spec_tokens: int, spec_level: str = "summary"):
        self.request, self.served, self.metrics, self.channel = request, served, metrics, channel
        self.num_spec_tokens = num_spec_tokens
        self.spec_level = spec_level
        self.arrival = time.perf_counter()
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def skip(self) -> None:
        self.metrics.finished("abort")
        self.channel.put(Finished("abort", len(self.request.prompt_ids), 0, None))

    def run(self, target: Target) -> None:
        try:
            self._generate(target)
        except Exception as exc:  # the engine refused or failed: tell the client, keep the worker alive
            log.exception("generation failed")
            self.metrics.finished("abort")
            self.channel.put(Failed(f"generation failed: {exc}"))

    def _generate(self, target: Target) -> None:
        request, metrics = self.request, self.metrics
        metrics.prompt_tokens.inc(len(request.prompt_ids))
        recorder, tally = StatsRecorder(), SpecTally(self.num_spec_tokens)
        detokenizer = IncrementalDetokenizer(self.served.tokenizer)
        stops = StopStringMatcher(request.stop)
        eos = set(request.generation.eos_token_ids)
        count, rounds, last, reason = 0, 0, None, "length"
        stream = generate_stream(target, self.served.draft, request.prompt_ids, request.generation, recorder)
        try:
            for token in stream:
                now = time.perf_counter()
                count += 1
                metrics.generation_tokens.inc()
                if last is None:
                    metrics.ttft.observe(now - self.arrival)
                    last = now
                while rounds < len(recorder.accepted):  # the verify round that produced this token
                    tally.add_round(recorder.proposed[rounds], recorder.accepted[rounds])
                    metrics.observe_round(recorder.proposed[rounds], recorder.accepted[rounds])
                    metrics.itl.observe(now - last)
                    last, rounds = now, rounds + 1
                if token in eos:
                    reason = "stop"
                    break
                piece = stops.push(detokenizer.push(token))
                if piece:
                    self.channel.put(piece)
                if stops.matched is not None:
                    reason = "stop"
                    break
                if self.cancelled():
                    reason = "abort"
                    break
        finally:
            stream.close()
        if stops.matched is None and reason != "abort":
            tail = stops.push(detokenizer.flush())
            tail += stops.flush()
            if tail:
                self.channel.put(tail)
            if stops.matched is not None:
                reason = "stop"
        metrics.finished(reason)
        spec = None
        if self.num_spec_tokens and self.spec_level != "none":
            spec = tally.to_dict(detailed=self.spec_level == "detailed")
        self.channel.put(Finished(reason, len(request.prompt_ids), count, spec))
