"""The τ a draft is expected to reach, read from its folder (`card.json`, else `config.json`).

Accepted shapes, first match wins:
- `{"expected_tau": 4.2}` at the top level of `card.json` or `config.json`;
- a measured τ under `tau`, `mean_tau` or `measured_tau` in `card.json`: a number, or one entry per
  suite (`{"humaneval": 5.1, "mtbench": 3.9}` or `{"humaneval": {"mean_tau": 5.1}, …}`); with several
  suites the lowest is used, since live traffic can look like any of them.
Only reads JSON; no alert logic.
"""
from __future__ import annotations

import json
from pathlib import Path

_TAU_KEYS = ("expected_tau", "tau", "mean_tau", "measured_tau")


class ExpectedTauError(ValueError):
    """A draft folder that does not say which τ to expect."""


def _as_tau(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        if any(key in value for key in _TAU_KEYS):
            return next((t for key in _TAU_KEYS if (t := _as_tau(value.get(key))) is not None), None)
        suites = [t for t in (_as_tau(v) for v in value.values()) if t is not None]
        return min(suites) if suites else None
    return None


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ExpectedTauError(f"cannot read {path}: {exc}; fix the file or pass --expected-tau") from exc
    return data if isinstance(data, dict) else {}


def expected_tau_from_draft(folder: str | Path) -> tuple[float, str]:
    """(expected τ, where it came from) for the draft in `folder`, or ExpectedTauError saying what to do."""
    root = Path(folder)
    if not root.is_dir():
        raise ExpectedTauError(f"draft folder {root} does not exist; pass an existing --draft folder or --expected-tau")
    card, config = root / "card.json", root / "config.json"
    candidates = []
    if card.is_file():
        data = _read_json(card)
        candidates += [(data.get(key), f"{card} [{key}]") for key in _TAU_KEYS]
    if config.is_file():
        candidates.append((_read_json(config).get("expected_tau"), f"{config} [expected_tau]"))
    for value, source in candidates:
        tau = _as_tau(value)
        if tau is not None:
            if tau < 1.0:
                raise ExpectedTauError(f"{source} says τ = {tau}, but τ ≥ 1.0 always; fix the card or pass --expected-tau")
            return tau, source
    raise ExpectedTauError(
        f"draft folder {root} records no τ (looked for {', '.join(_TAU_KEYS)} in card.json and expected_tau in "
        "config.json); pass --expected-tau instead")
