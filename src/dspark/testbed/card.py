"""The card of a built testbed target: `testbed.json`, written last into the target's folder, so its presence means
the build finished. It records the recipe, the corpus rule and the held-out files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CARD_NAME = "testbed.json"


class TestbedError(ValueError):
    """A testbed target cannot be built or read as asked."""

    __test__ = False  # not a pytest test class


def is_built(path: str | Path) -> bool:
    """True when `path` holds a finished target (its card is written last)."""
    return (Path(path) / CARD_NAME).is_file()


def read_card(path: str | Path) -> dict[str, Any]:
    """The `testbed.json` card of a built target."""
    card = Path(path) / CARD_NAME
    if not card.is_file():
        raise TestbedError(f"{path} is not a built testbed target (no {CARD_NAME}); build one with "
                           f"`dspark testbed target` or dspark.testbed.build_target()")
    return json.loads(card.read_text())
