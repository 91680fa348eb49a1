"""`dspark serve`: an OpenAI-compatible HTTP server with Prometheus metrics, an adapter over `dspark.engine`.

Modules: `model_source` (what is served; what runs with no model arguments is the command line's choice,
`dspark.cli.serve_default`), `settings`, `schemas` (API models), `request_plan` (request → engine request,
limits), `prompts`, `detokenize`, `stop_strings`, `spec_stats` (per-request acceptance), `metrics` (Prometheus),
`scheduler` (the queue and one engine thread decoding every request in one batch), `generation_job` (one request's tokens → events), `responses`
(JSON / SSE), `auth`, `errors`, `app` (routes), `server` (uvicorn). Nothing here implements speculative decoding itself.
"""
