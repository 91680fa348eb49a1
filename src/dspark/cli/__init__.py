"""The `dspark` command line: one file per subcommand, imported lazily.

Each subcommand module exposes `register(parser)` (adds its arguments) and `run(args) -> int`
(does the work, returns the exit status). This file only dispatches; it holds no algorithm code.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module under dspark.cli, one-line help). Modules are imported only when their command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("info", "print a draft preset's architecture, parameter count and weight bytes"),
    "demo": ("demo", "SmolLM2-135M-Instruct + its DSpark draft on the CPU: τ, speedup and the lossless check per suite"),
    "plan": ("plan", "plan VRAM, cluster layout and cost (pure arithmetic)"),
    "launch": ("launch", "print a launch command for SGLang / vLLM / TensorRT-LLM"),
    "doctor": ("doctor", "find silent misconfigurations in an engine launch command or live server"),
    "monitor": ("monitor", "watch acceptance live from a dspark / vLLM / SGLang /metrics endpoint"),
    "serve": ("serve", "OpenAI-compatible server (speculative decoding, Prometheus /metrics) on a local target"),
    "bench": ("bench", "prompt suites, acceptance runs (τ per suite and temperature), paired draft comparisons and "
                       "reports with plots"),
    "export": ("export", "write a draft in the DeepSpec / SpecForge / speculators / DFlash layout an engine loads"),
    "import": ("import_", "read a DeepSpec / SpecForge / speculators / DFlash draft into dspark's native folder"),
    "train": ("train", "regenerate data with the target, capture hidden states, train and calibrate a draft"),
    "testbed": ("testbed", "train the tiny testbed target on the Python standard library (CPU, about a minute)"),
}


def _build_root() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="dspark", description="DSpark speculative decoding toolkit")
    sub = root.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return root


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        root = _build_root()
        if argv and argv[0] not in ("-h", "--help"):
            root.error(f"unknown command {argv[0]!r}; choose one of: {', '.join(COMMANDS)}")
        root.print_help()
        return 0 if argv else 2
    name = argv[0]
    module = importlib.import_module(f"dspark.cli.{COMMANDS[name][0]}")
    parser = argparse.ArgumentParser(prog=f"dspark {name}", description=COMMANDS[name][1])
    module.register(parser)
    args = parser.parse_args(argv[1:])
    return int(module.run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
