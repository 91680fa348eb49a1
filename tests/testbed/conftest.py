"""Shared fixtures for the testbed tests: one target built from the tiny recipe per session."""
from __future__ import annotations

import pytest
from testbed_tiny import TINY


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("testbed-cache")


@pytest.fixture(scope="session")
def tiny_target(tiny_cache):
    """A target built once per session from the tiny recipe, in a session cache folder (one thread: tiny matrices
    gain nothing from more, and lose a lot on a busy machine)."""
    from dspark.testbed.target_build import build_target

    return build_target(tiny_cache, TINY, threads=1)
