"""The one error type of `dspark.plan`: bad planning input, with a message that says what to do.

It holds no checks itself; every module raises it where the bad value is first seen.
"""
from __future__ import annotations


class PlanError(ValueError):
    """Planning input that cannot be used (unknown preset, bad number, unreadable file)."""
