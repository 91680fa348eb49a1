"""`dspark serve`: an OpenAI-compatible HTTP server with Prometheus metrics, an adapter over `dspark.engine`.

Modules: `default_model` (what runs with no model arguments: SmolLM2 + its shipped draft, else the testbed pair),
`model_source` (what is served), `settings`, `schemas` (API models), `request_plan` (request → engine request,
limits), `prompts`, `detokenize`, `stop_strings`, `spec_stats` (per-request acceptance), `metrics` (Prometheus),
`batch_scheduler` (queue + one batched decode loop, for Llama / Qwen3 / Qwen2 / Mistral targets), `scheduler`
(queue + batch-1 engine workers, for other targets), `generation_job` (one request's tokens → events), `responses`
(JSON / SSE), `auth`, `errors`, `app` (routes), `server` (uvicorn). Nothing here implements speculative decoding itself.
"""
