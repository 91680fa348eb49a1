"""Where the shared test fixtures live (a uniquely named module: test folders have conftest.py files of their own)."""
from pathlib import Path

CONFORMANCE = Path(__file__).parent / "fixtures" / "conformance"
VARIANTS = ("vanilla", "gated", "rnn")
