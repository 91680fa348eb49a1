"""Server settings as one frozen dataclass, validated on construction (the CLI builds it from its flags).

Holds no model and starts nothing; see `model_source` for what is served and `app` for how.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspark.serve.model_source import ServeSetupError

SPEC_METRICS_LEVELS = ("none", "summary", "detailed")


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None  # Bearer token required on every route but /health
    max_concurrency: int = 4  # sequences generated at the same time (the engine's batch rows)
    max_queue: int = 1024  # requests waiting for a worker before new ones get 429
    max_model_len: int | None = None  # prompt + completion tokens per request (None: the model's own context)
    max_drafts: int | None = None  # drafts verified per round at most (None: the draft's own; 0: no drafting)
    confidence_threshold: float = 0.0  # cut a block at the first slot whose confidence is below this
    algorithm1: bool = False  # schedule blocks with the paper's Algorithm 1 on round costs measured at startup
    tree_nodes: int = 0  # > 0: verify a tree of this many drafts per round (engine/tree.py; the batched engine)
    tree_beam: int = 4  # the tree's nodes kept per depth
    tree_max_rows: int = 2  # rounds over more rows than this verify the chain (0: trees at every batch size)
    tree_score_temperature: float = 1.0  # the tree's node scores: log-softmax(logits / this) (TreeShape)
    spec_metrics: str = "summary"  # per-request `metrics.speculative_decoding`: none | summary | detailed
    default_completion_tokens: int = 16  # /v1/completions max_tokens when the request leaves it out (OpenAI's)
    max_request_bytes: int = 8 * 1024 * 1024
    request_timeout: float = 30.0  # seconds a client has to send its whole request body (else 408)
    retry_after: int = 1  # the Retry-After header (seconds) on a 429

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ServeSetupError(f"--port {self.port} is not a TCP port (0 … 65535; 0 picks a free one)")
        if self.api_key is not None and not self.api_key.strip():
            raise ServeSetupError("--api-key is empty; give a non-empty key or leave the flag out")
        if self.max_concurrency < 1:
            raise ServeSetupError("--max-concurrency must be >= 1")
        if self.max_queue < 1:
            raise ServeSetupError("--max-queue must be >= 1")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ServeSetupError("--max-model-len must be >= 2 (prompt + completion tokens per request)")
        if self.max_drafts is not None and self.max_drafts < 0:
            raise ServeSetupError("--max-drafts must be >= 0 (0 turns drafting off)")
        if not 0 <= self.confidence_threshold <= 1:
            raise ServeSetupError("--confidence-threshold must be in [0, 1]")
        if self.algorithm1 and self.confidence_threshold > 0:
            raise ServeSetupError("--algorithm1 and --confidence-threshold are two block schedulers; choose one")
        if self.tree_nodes < 0 or self.tree_beam < 1 or self.tree_max_rows < 0:
            raise ServeSetupError("--tree-nodes must be >= 0 (0: the block's chain), --tree-beam >= 1 and "
                                  "--tree-max-rows >= 0 (0: trees at every batch size)")
        if not self.tree_score_temperature > 0:
            raise ServeSetupError("--tree-score-temperature must be > 0 (1: the draft's own log-probabilities)")
        if self.tree_nodes and (self.max_drafts is not None or self.confidence_threshold > 0 or self.algorithm1):
            raise ServeSetupError("a tree verifies the draft's whole block every round: drop --max-drafts, "
                                  "--confidence-threshold and --algorithm1, or --tree-nodes")
        if self.spec_metrics not in SPEC_METRICS_LEVELS:
            raise ServeSetupError(f"--per-request-spec-metrics must be one of {', '.join(SPEC_METRICS_LEVELS)}")
        if not 0 < self.request_timeout < float("inf"):
            raise ServeSetupError("--request-timeout must be > 0 seconds")
        if self.retry_after < 1:
            raise ServeSetupError("retry_after must be >= 1 second")
        if self.default_completion_tokens < 1 or self.max_request_bytes < 1024:
            raise ServeSetupError("default_completion_tokens must be >= 1 and max_request_bytes >= 1024")
