"""The FastAPI application: OpenAI-compatible routes over the engine scheduler, plus /health and /metrics.

Routes: POST /v1/completions, POST /v1/chat/completions (both with SSE streaming), GET /v1/models, GET /health
(always open), GET /metrics (Prometheus text). A request's body is read here, within --request-timeout (else 408);
it is parsed, validated (bad input → 4xx with an OpenAI error body) and planned (`request_plan`, which tokenizes) in
a worker thread, so no request holds up the event loop; then it is queued to the scheduler
(`scheduler.BatchScheduler`, one engine batch for every target; a full queue is a 429 with Retry-After) and answered
from the job's events (`responses`). A client that disconnects cancels its job, which frees its row. The scheduler
starts and stops with the app's
lifespan. No generation logic here.
"""
from __future__ import annotations

import asyncio
import threading
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError

from dspark.engine.static_target import is_supported
from dspark.engine.tree import TreeShape
from dspark.serve.auth import BearerAuth
from dspark.serve.errors import APIError, install_error_handlers, validation_error
from dspark.serve.generation_job import EventChannel, GenerationJob
from dspark.serve.metrics import CONTENT_TYPE, ServerMetrics
from dspark.serve.model_source import ServedModel, ServeSetupError
from dspark.serve.prompts import max_token_bytes
from dspark.serve.request_body import parse_json_object, read_body
from dspark.serve.request_plan import EngineRequest, plan_request
from dspark.serve.responses import ResponseHeader, collect, full_response, sse_stream
from dspark.serve.scheduler import BatchScheduler, QueueFullError
from dspark.serve.schemas import ChatCompletionRequest, CompletionRequest, ModelCard, ModelList, dump
from dspark.serve.settings import ServeSettings


def spec_tokens_per_round(served: ServedModel, settings: ServeSettings) -> int:
    """Drafts verified per round at most with these settings (0: no speculative decoding)."""
    if settings.max_drafts is None:
        return served.num_spec_tokens
    if settings.max_drafts > served.num_spec_tokens and served.draft is not None:
        raise ServeSetupError(f"--max-drafts {settings.max_drafts} exceeds the {served.num_spec_tokens} drafts the "
                              f"draft proposes per block")
    return min(settings.max_drafts, served.num_spec_tokens)


def start_scheduler(served: ServedModel, settings: ServeSettings, metrics: ServerMetrics) -> BatchScheduler:
    """The engine's scheduler over the served pair; with --algorithm1 it measures its round-cost tables here, once."""
    if settings.algorithm1:
        _require_confidence_head(served)
    return BatchScheduler(served, settings.max_concurrency, settings.max_queue, metrics.set_queue,
                          algorithm1=settings.algorithm1, tree=tree_shape(served, settings))


def tree_shape(served: ServedModel, settings: ServeSettings) -> TreeShape | None:
    """--tree-nodes / --tree-beam as the batched engine's TreeShape (None: the chain), refused here, before the server
    starts, when the served pair cannot verify trees."""
    if not settings.tree_nodes:
        return None
    if served.draft is None:
        raise ServeSetupError("--tree-nodes verifies trees of the draft's tokens; give --draft (or leave --tree-nodes "
                              "out for plain decoding)")
    if not is_supported(served.hf_model):
        raise ServeSetupError(f"--tree-nodes needs a Llama / Qwen3 / Qwen2 / Mistral target (the static backend); "
                              f"{type(served.hf_model).__name__} verifies the chain: leave --tree-nodes out")
    shape = TreeShape(settings.tree_nodes, settings.tree_beam, settings.tree_max_rows or None,
                      settings.tree_score_temperature)
    try:
        shape.check(served.draft.config.num_draft_tokens)
    except ValueError as exc:
        raise ServeSetupError(f"--tree-nodes / --tree-beam: {exc}") from None
    return shape


def _require_confidence_head(served: ServedModel) -> None:
    if served.draft is None or not served.draft.config.enable_confidence_head:
        raise ServeSetupError("--algorithm1 schedules on the draft's confidence head; this draft has none")


async def _cancel_on_disconnect(request: Request, job: GenerationJob) -> None:
    """Cancel `job` when the client disconnects (the body is already read, so the next message is the close)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            job.cancel()
            return


def create_app(served: ServedModel, settings: ServeSettings = ServeSettings()) -> FastAPI:
    served = served.limited(settings.max_model_len)
    spec_tokens = spec_tokens_per_round(served, settings)
    if settings.algorithm1:
        _require_confidence_head(served)  # refused before the server starts, as every other setup error
    tree_shape(served, settings)  # likewise
    max_token_bytes(served.tokenizer)  # the prompt byte bound (request_plan), listed once here rather than on a request
    metrics = ServerMetrics(served.name, spec_tokens)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.pool = start_scheduler(served, settings, metrics)
        try:
            yield
        finally:
            app.state.pool.close()

    app = FastAPI(title="dspark serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.served, app.state.settings, app.state.metrics = served, settings, metrics
    install_error_handlers(app)
    if settings.api_key:
        app.add_middleware(BearerAuth, api_key=settings.api_key)

    tokenizing = threading.Lock()  # one tokenizer call at a time: HF fast tokenizers are not reentrant

    def prepare(body: bytes, chat: bool) -> EngineRequest:
        """JSON → validated request → EngineRequest: CPU work, run in a worker thread off the event loop."""
        data = parse_json_object(body)
        try:
            parsed = (ChatCompletionRequest if chat else CompletionRequest).model_validate(data)
        except ValidationError as exc:
            raise validation_error(exc) from None
        with tokenizing:
            return plan_request(parsed, served, settings)

    async def generate(request: Request, chat: bool) -> Response:
        body = await read_body(request, settings.max_request_bytes, settings.request_timeout)
        plan = await asyncio.to_thread(prepare, body, chat)
        del body
        channel = EventChannel(asyncio.get_running_loop())
        job = GenerationJob(plan, served, metrics, channel, spec_tokens, settings.spec_metrics)
        try:
            request.app.state.pool.submit(job)
        except QueueFullError as exc:
            raise APIError(429, f"the server is busy: {exc}; retry after {settings.retry_after} s", code="queue_full",
                           headers={"Retry-After": str(settings.retry_after)}) from None
        header = ResponseHeader.new(chat, served.name)
        watcher = asyncio.create_task(_cancel_on_disconnect(request, job))
        if plan.stream:
            async def events():
                try:
                    async for chunk in sse_stream(header, channel, plan.include_usage):
                        yield chunk
                finally:  # finished, failed or the client went away: stop generating either way
                    job.cancel()
                    watcher.cancel()

            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        try:
            text, finished = await collect(channel)
        finally:
            job.cancel()
            watcher.cancel()
        return JSONResponse(full_response(header, text, finished,
                                          plan.prompt_ids if plan.return_token_ids else None))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await generate(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await generate(request, chat=True)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        speculative = None
        if served.draft is not None and spec_tokens:
            cfg = served.draft.config
            speculative = {"method": "dspark", "mode": cfg.mode, "num_speculative_tokens": spec_tokens,
                           "block_size": cfg.block_size, "target_layer_ids": list(cfg.target_layer_ids)}
        card = ModelCard(id=served.name, created=served.created, max_model_len=served.context_length,
                         speculative=speculative)
        return dump(ModelList(data=[card]))

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": served.name}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return app
