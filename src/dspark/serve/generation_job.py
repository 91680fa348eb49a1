"""One request's generation on an engine worker, reported to the HTTP side as a stream of events.

A `TokenSink` turns the request's committed tokens into text (`detokenize`), applies stop strings
(`stop_strings`), updates the Prometheus metrics live (tokens, every verify round's drafts / accepted, TTFT,
inter-token latency) and tallies the per-request speculative stats; the scheduler feeds the sink from its decode
loop (`scheduler`). Events cross from the engine thread to the event loop through an `EventChannel`: text pieces (`str`), then one `Finished` or
`Failed`. A cancelled job (the client went away) stops between tokens with finish reason "abort"; a job the
server cut while shutting down fails with a 503 (`shut_out`).
No HTTP and no queueing here (see `app` and `scheduler`); no speculative algorithm either (see `dspark.engine`).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from dspark.engine.stats import StatsRecorder
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
    token_ids: tuple[int, ...] = ()  # the completion's tokens (an EOS that ended it included)


@dataclass(frozen=True)
class Failed:
    message: str
    status: int = 500  # the HTTP status of a non-streamed answer
    code: str = "generation_failed"  # the error body's code


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


class TokenSink:
    """One request's new tokens in, events out: text (detokenized, stop strings applied), live metrics (tokens,
    TTFT, one inter-token latency and one spec-decode observation per verify round) and the per-request spec tally.
    Fed token batches by either scheduler; `recorder` is the engine's live acceptance record of this request."""

    def __init__(self, job: GenerationJob, recorder: StatsRecorder):
        self.job, self.recorder = job, recorder
        self.tally = SpecTally(job.num_spec_tokens)
        self.detokenizer = IncrementalDetokenizer(job.served.tokenizer)
        self.stops = StopStringMatcher(job.request.stop)
        self.eos = set(job.request.generation.eos_token_ids)
        self.count, self.rounds, self.last, self.reason = 0, 0, None, "length"
        self.tokens: list[int] = []
        job.metrics.prompt_tokens.inc(len(job.request.prompt_ids))

    def push(self, tokens: list[int]) -> bool:
        """Feed newly committed tokens; False once generation must stop (an EOS or a stop string; tokens after it
        are ignored)."""
        metrics, recorder = self.job.metrics, self.recorder
        for token in tokens:
            if self.reason == "stop":
                return False
            now = time.perf_counter()
            self.count += 1
            self.tokens.append(token)
            metrics.generation_tokens.inc()
            if self.last is None:
                metrics.ttft.observe(now - self.job.arrival)
                self.last = now
            while self.rounds < len(recorder.accepted):  # the verify round that produced this token
                self.tally.add_round(recorder.proposed[self.rounds], recorder.accepted[self.rounds])
                metrics.observe_round(recorder.proposed[self.rounds], recorder.accepted[self.rounds])
                metrics.itl.observe(now - self.last)
                self.last, self.rounds = now, self.rounds + 1
            if token in self.eos:
                self.reason = "stop"
                return False
            piece = self.stops.push(self.detokenizer.push(token))
            if piece:
                self.job.channel.put(piece)
            if self.stops.matched is not None:
                self.reason = "stop"
                return False
        return True

    def finish(self, aborted: bool = False) -> None:
        """Flush held-back text (unless aborted) and report the finish: metrics and the `Finished` event."""
        job = self.job
        reason = "abort" if aborted else self.reason
        if self.stops.matched is None and reason != "abort":
            tail = self.stops.push(self.detokenizer.flush())
            tail += self.stops.flush()
            if tail:
                job.channel.put(tail)
            if self.stops.matched is not None:
                reason = "stop"
        job.metrics.finished(reason)
        spec = None
        if job.num_spec_tokens and job.spec_level != "none":
            spec = self.tally.to_dict(detailed=job.spec_level == "detailed")
        job.channel.put(Finished(reason, len(job.request.prompt_ids), self.count, spec, tuple(self.tokens)))


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

    def shut_out(self) -> None:
        """The server is shutting down before this request finished (queued or running): tell the client (503)."""
        self.metrics.finished("abort")
        self.channel.put(Failed("the server shut down before this request finished; retry it", status=503,
                                code="server_shutting_down"))

    def fail(self, exc: Exception) -> None:
        """The engine refused or failed this request: tell the client."""
        self.metrics.finished("abort")
        self.channel.put(Failed(f"generation failed: {exc}"))
