"""Fetch a server's Prometheus `/metrics` text and parse it into plain samples.

Two functions, shared by `dspark doctor --url` and the live monitor:

- `fetch_metrics_text(url, timeout)`: one HTTP GET with urllib (environment proxies bypassed, so a
  loopback or cluster-internal address is reached directly); `url` may be the server root or its
  `/metrics` path.
- `parse_samples(text)`: the exposition text as `sample name -> [(labels, value), ...]`, using
  `prometheus_client.parser`. Counters appear under their `_total` sample names (and `_created`),
  histograms under `_bucket` / `_sum` / `_count`, exactly as the server wrote them.

It does not interpret metric names (see `monitor_readings.py`) and keeps no state between scrapes.
"""
from __future__ import annotations

import math
import urllib.error
import urllib.request

Samples = dict[str, list[tuple[dict[str, str], float]]]


class ScrapeError(ValueError):
    """The URL could not be read or its body is not Prometheus text."""


def metrics_url(url: str) -> str:
    """`http://host:port` or `http://host:port/metrics` -> the `/metrics` URL."""
    if not url.startswith(("http://", "https://")):
        raise ScrapeError(f"--url must start with http:// or https://, got {url!r}")
    base = url.rstrip("/")
    return base if base.endswith("/metrics") else base + "/metrics"


def fetch_metrics_text(url: str, timeout: float = 5.0, api_key: str | None = None) -> str:
    """GET the `/metrics` body of `url` as text (with a Bearer key when the server wants one); raise ScrapeError
    with what to check if it fails."""
    target = metrics_url(url)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    headers = {"Accept": "text/plain", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    request = urllib.request.Request(target, headers=headers)
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        hint = {404: " (SGLang serves /metrics only with --enable-metrics)",
                401: " (the server wants an API key: pass --api-key)"}.get(exc.code, "")
        raise ScrapeError(f"GET {target} answered HTTP {exc.code}{hint}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ScrapeError(f"cannot reach {target}: {reason}; is the server up and the port right?") from exc


def parse_samples(text: str) -> Samples:
    """Parse Prometheus exposition text into `sample name -> [(labels, value)]` (NaN samples dropped)."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as exc:  # pragma: no cover - prometheus_client is in the [serve]/[dev] extras
        raise ScrapeError("reading /metrics needs prometheus_client: pip install 'dspark[serve]'") from exc
    samples: Samples = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                value = float(sample.value)
                if math.isnan(value):
                    continue
                samples.setdefault(sample.name, []).append((dict(sample.labels), value))
    except ValueError as exc:
        raise ScrapeError(f"the /metrics body is not Prometheus text: {exc}") from exc
    return samples
