"""The server's Prometheus metrics, one `CollectorRegistry` per app, named like vLLM's with a `dspark:` prefix.

Counters (prometheus_client appends `_total`), all labelled `model_name`:
- `dspark:spec_decode_num_drafts`: verify rounds that checked at least one draft (vLLM `num_drafts`);
- `dspark:spec_decode_num_draft_tokens`: drafts verified; `dspark:spec_decode_num_accepted_tokens`: drafts accepted
  (bonus excluded); `dspark:spec_decode_num_accepted_tokens_per_pos{position=k}`: rounds whose position-k draft was
  accepted — so τ = 1 + accepted / drafts, as `dspark monitor` (deploy/monitor_readings.py) computes it;
- `dspark:prompt_tokens`, `dspark:generation_tokens`, `dspark:request_success{finished_reason}` (stop, length, abort).
Histograms `dspark:time_to_first_token_seconds` (arrival → first token) and `dspark:inter_token_latency_seconds`
(one observation per verify round: the time since the previous tokens, as vLLM observes per engine step), gauges
`dspark:num_requests_waiting` / `dspark:num_requests_running`.
The spec-decode counters exist only when a draft is served, so a monitor can tell drafting is off. Updated live
from the engine thread (prometheus_client is thread-safe). No HTTP here: `render()` gives the exposition text.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

FINISH_REASONS = ("stop", "length", "abort")
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServerMetrics:
    def __init__(self, model_name: str, num_spec_tokens: int):
        self.registry = registry = CollectorRegistry()
        label = ["model_name"]

        def counter(name: str, doc: str):
            return Counter(name, doc, label, registry=registry).labels(model_name)

        self.prompt_tokens = counter("dspark:prompt_tokens", "Prompt tokens processed")
        self.generation_tokens = counter("dspark:generation_tokens", "Tokens generated")
        success = Counter("dspark:request_success", "Finished requests by finish reason",
                          ["model_name", "finished_reason"], registry=registry)
        self._finished = {reason: success.labels(model_name, reason) for reason in FINISH_REASONS}
        self.ttft = Histogram("dspark:time_to_first_token_seconds", "Request arrival to first token", label,
                              buckets=TTFT_BUCKETS, registry=registry).labels(model_name)
        self.itl = Histogram("dspark:inter_token_latency_seconds", "Time between a request's token batches", label,
                             buckets=ITL_BUCKETS, registry=registry).labels(model_name)
        self.waiting = Gauge("dspark:num_requests_waiting", "Requests queued for an engine worker", label,
                             registry=registry).labels(model_name)
        self.running = Gauge("dspark:num_requests_running", "Requests being generated", label,
                             registry=registry).labels(model_name)
        self.speculative = num_spec_tokens > 0
        if self.speculative:
            self.drafts = counter("dspark:spec_decode_num_drafts", "Verify rounds with at least one draft")
            self.draft_tokens = counter("dspark:spec_decode_num_draft_tokens", "Draft tokens verified")
            self.accepted = counter("dspark:spec_decode_num_accepted_tokens", "Draft tokens accepted (no bonus)")
            per_pos = Counter("dspark:spec_decode_num_accepted_tokens_per_pos",
                              "Verify rounds whose draft at this position was accepted",
                              ["model_name", "position"], registry=registry)
            self._per_pos = [per_pos.labels(model_name, str(k)) for k in range(num_spec_tokens)]

    def observe_round(self, proposed: int, accepted: int) -> None:
        """One verify round with `proposed` > 0 drafts, of which the first `accepted` were kept."""
        if not self.speculative or proposed <= 0:
            return
        self.drafts.inc()
        self.draft_tokens.inc(proposed)
        self.accepted.inc(accepted)
        for k in range(min(accepted, len(self._per_pos))):
            self._per_pos[k].inc()

    def finished(self, reason: str) -> None:
        self._finished[reason].inc()

    def set_queue(self, waiting: int, running: int) -> None:
        self.waiting.set(waiting)
        self.running.set(running)

    def render(self) -> bytes:
        return generate_latest(self.registry)
