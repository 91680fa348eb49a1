"""The batched engine's CUDA-graph wrapper with capture replaced by the step itself, for CPU tests: everything a
graphed engine does (warm-up on a side stream, buffer restore, replay by key) runs, minus CUDA capture and replay."""
from __future__ import annotations

from dspark.engine.graphs import RoundGraphs


class EagerReplay(RoundGraphs):
    def _record(self, step):
        return step
