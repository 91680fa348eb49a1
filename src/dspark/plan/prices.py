"""The editable price table: GPU $/hour per tier and API $/Mtok, shipped as `prices.json`, overridable by a file.

A user file has the same shape; its entries replace the shipped ones key by key (so a file holding only
`{"gpu_hour": {"h200": {"on_demand": 2.1}}}` changes one number). `write_prices` dumps the merged table
atomically as a starting point. The arithmetic that uses prices is in `cost`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspark.files import write_json
from dspark.plan.errors import PlanError

DEFAULT_PRICES = Path(__file__).with_name("prices.json")
TIERS = ("on_demand", "reserved", "tco")


@dataclass(frozen=True)
class ApiPrice:
    """USD per million tokens; `cached_input` None means the provider lists no cache-hit price."""

    name: str
    input: float
    output: float
    cached_input: float | None = None
    source: str = ""


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(f"price file {path} not found; create one with `dspark plan cost --write-prices {path}`") \
            from None
    except (OSError, json.JSONDecodeError) as err:
        raise PlanError(f"cannot read price file {path} ({err}); it must be JSON shaped like the shipped "
                        "prices.json (`dspark plan cost --write-prices FILE` writes one)") from None
    if not isinstance(data, dict):
        raise PlanError(f"price file {path} must hold a JSON object with 'gpu_hour' and/or 'api'")
    return data


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_prices(path: str | Path | None = None) -> dict[str, Any]:
    """The shipped table, with `path`'s entries on top."""
    table = _read(DEFAULT_PRICES)
    if path is not None:
        table = _merge(table, _read(Path(path)))
    return table


def gpu_hour(table: dict[str, Any], gpu: str, tier: str = "on_demand") -> float:
    """USD per GPU-hour of `gpu` at `tier` (on_demand, reserved, tco)."""
    if tier not in TIERS:
        raise PlanError(f"unknown price tier {tier!r}; choose one of: {', '.join(TIERS)}")
    entry = table.get("gpu_hour", {}).get(gpu)
    value = entry.get(tier) if isinstance(entry, dict) else None
    if value is None:
        raise PlanError(f"no {tier} price for {gpu} in the price table; pass --gpu-hour USD, another --price-tier, "
                        "or add it to a price file (--write-prices FILE, edit, then --prices FILE)")
    if not isinstance(value, (int, float)) or value < 0:
        raise PlanError(f"price of {gpu} ({tier}) must be a number >= 0, got {value!r}")
    return float(value)


def api_price(table: dict[str, Any], name: str) -> ApiPrice:
    entry = table.get("api", {}).get(name)
    if not isinstance(entry, dict):
        known = ", ".join(table.get("api", {}))
        raise PlanError(f"no API price called {name!r}; known: {known} (or give --api-input/--api-output)")
    try:
        cached = entry.get("cached_input")
        return ApiPrice(name, float(entry["input"]), float(entry["output"]),
                        None if cached is None else float(cached), str(entry.get("source", "")))
    except (KeyError, TypeError, ValueError):
        raise PlanError(f"API price {name!r} needs numeric 'input' and 'output' (USD per million tokens)") from None


def write_prices(table: dict[str, Any], path: str | Path) -> Path:
    """Write `table` as JSON to `path` atomically (temp file in the same folder, then rename)."""
    return write_json(path, table)

