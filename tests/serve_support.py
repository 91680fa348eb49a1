"""Helpers for tests/serve (no tests here): the tiny synthetic model pair, built once, and real loopback servers.

The tests serve `dspark.testbed.successor_pair` explicitly rather than the embedded default, so they stay fast and
exact whatever the default becomes; the default itself is covered by the CLI tests."""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Iterator

import httpx
import openai
import pytest
import torch

from dspark.deploy.prom_scrape import Samples, parse_samples
from dspark.serve.app import create_app
from dspark.testbed import successor_pair as tiny_successor
from dspark.serve.model_source import ServedModel, served_model
from dspark.serve.server import BackgroundServer
from dspark.serve.settings import ServeSettings


@pytest.fixture(autouse=True)
def single_thread():
    """Engine workers share the CPU: one intra-op thread each (runs after the root conftest's autouse fixture)."""
    torch.set_num_threads(1)
    yield


@functools.lru_cache(maxsize=None)
def tiny_served() -> ServedModel:
    return served_model(*tiny_successor.load(), name=tiny_successor.MODEL_NAME)


@contextmanager
def running_server(served: ServedModel | None = None, **settings) -> Iterator[str]:
    """A real uvicorn server for `served` (default: the tiny pair) on 127.0.0.1:<free port>."""
    app = create_app(served or tiny_served(), ServeSettings(port=0, **settings))
    with BackgroundServer(app) as url:
        yield url


def client(url: str, api_key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, timeout=60)


def scrape(url: str, headers: dict | None = None) -> Samples:
    response = httpx.get(f"{url}/metrics", headers=headers)
    assert response.status_code == 200
    return parse_samples(response.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples called `name` whose labels include `labels`."""
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == w for k, w in labels.items()))
