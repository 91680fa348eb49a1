"""Read SGLang / vLLM / TensorRT-LLM launch commands out of shell text.

Accepts what users paste or keep in scripts: backslash continuations, comments, `export VAR=value`
lines, `VAR=value` prefixes, launcher prefixes (`srun …`, `mpirun …`, `trtllm-llmapi-launch`), and
several commands in one text (one per node, `ray start` lines). Each engine command becomes a
`LaunchCommand` whose options are keyed by canonical flag names (see `engine_flags.py`).

It does not judge the options (that is the doctor's rules) and never runs anything.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from dspark.deploy.engine_flags import FLAGS, normalize_flag


class CommandError(ValueError):
    """The text holds no launch command we can read, or a flag value is malformed."""


_NUMBER = re.compile(r"^-?\d+(\.\d+)?([kKmMgG])?$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {";", "&&", "||", "|", "&"}
_SIZE_SUFFIX = {"k": 1000, "m": 1000**2, "g": 1000**3, "K": 1024, "M": 1024**2, "G": 1024**3}
_HEREDOC = re.compile(r"""<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)\1""")
_HEREDOC_TARGET = re.compile(r">\s*(\S+)")


@dataclass(frozen=True)
class LaunchCommand:
    """One engine launch: canonical option name -> values in the order given ("true"/"false" for switches)."""

    engine: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    positionals: tuple[str, ...] = ()

    def has(self, name: str) -> bool:
        return name in self.options

    def get(self, name: str, default: str | None = None) -> str | None:
        """The last value given for `name` (later flags win, as in argparse)."""
        values = self.options.get(name)
        return values[-1] if values else default

    def get_int(self, name: str) -> int | None:
        value = self.get(name)
        return None if value is None else parse_int(value, f"--{name}")

    def switch(self, name: str) -> bool | None:
        """True / False for a boolean flag that was given (`--x`, `--no-x`, `--x=false`), None if absent."""
        value = self.get(name)
        if value is None:
            return None
        return value.strip().lower() not in ("false", "0", "no", "off")


def parse_int(value: str, what: str) -> int:
    """An integer flag value; accepts vLLM-style size suffixes (`128k` = 128000, `1M` = 1048576)."""
    text = value.strip()
    if not _NUMBER.match(text) or "." in text:
        raise CommandError(f"{what} expects an integer, got {value!r}")
    suffix = text[-1] if text[-1] in _SIZE_SUFFIX else ""
    number = int(text[: -1] if suffix else text)
    return number * _SIZE_SUFFIX[suffix] if suffix else number


def _split_heredocs(text: str) -> tuple[list[str], dict[str, str]]:
    """Shell lines outside here-documents, and `cat > FILE <<'EOF'` bodies keyed by FILE."""
    lines: list[str] = []
    files: dict[str, str] = {}
    raw = text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines()
    i = 0
    while i < len(raw):
        line = raw[i]
        i += 1
        match = _HEREDOC.search(line)
        if not match:
            lines.append(line)
            continue
        body: list[str] = []
        while i < len(raw) and raw[i].strip() != match.group(2):
            body.append(raw[i])
            i += 1
        i += 1  # the terminator
        target = _HEREDOC_TARGET.search(line[match.end():]) or _HEREDOC_TARGET.search(line[: match.start()])
        if target:
            files[target.group(1).strip("'\"")] = "\n".join(body) + "\n"
        lines.append(line[: match.start()])
    return lines, files


def heredoc_files(text: str) -> dict[str, str]:
    """Files a script writes with here-documents (`cat > FILE <<'EOF' … EOF`): name -> content."""
    return _split_heredocs(text)[1]


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError as exc:
        raise CommandError(f"cannot split this line like a shell would ({exc}): {line.strip()[:120]}") from exc


def _split_segments(tokens: list[str]) -> list[list[str]]:
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(token)
    return [s for s in segments if s]


def _find_engine(tokens: list[str]) -> tuple[str, int] | None:
    """(engine, index of the first option token) if this segment launches an engine."""
    for i, token in enumerate(tokens):
        base = token.rsplit("/", 1)[-1]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if base == "-m" and nxt == "sglang.launch_server":
            return "sglang", i + 2
        if base == "sglang" and nxt == "serve":
            return "sglang", i + 2
        if base == "-m" and nxt == "vllm.entrypoints.openai.api_server":
            return "vllm", i + 2
        if base == "vllm" and nxt == "serve":
            return "vllm", i + 2
        if base == "trtllm-serve":
            return "trtllm", i + 2 if nxt == "serve" else i + 1
    return None


def _parse_options(engine: str, args: list[str]) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    flags = FLAGS[engine]
    options: dict[str, list[str]] = {}
    positionals: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not token.startswith("-") or _NUMBER.match(token) or token == "-":
            positionals.append(token)
            continue
        name, eq, inline = token.partition("=")
        key = normalize_flag(name)
        if key in flags.negations:
            options.setdefault(flags.negations[key], []).append("false")
            continue
        key = flags.aliases.get(key, key)
        if eq:
            options.setdefault(key, []).append(inline)
        elif key in flags.booleans:
            options.setdefault(key, []).append("true")
        elif i < len(args) and (not args[i].startswith("-") or _NUMBER.match(args[i])):
            options.setdefault(key, []).append(args[i])
            i += 1
        else:
            options.setdefault(key, []).append("true")
    return {k: tuple(v) for k, v in options.items()}, tuple(positionals)


def parse_commands(text: str) -> list[LaunchCommand]:
    """Every engine launch in `text`, in order; `export` lines before a command become its environment."""
    env: dict[str, str] = {}
    found: list[LaunchCommand] = []
    for line in _split_heredocs(text)[0]:
        for segment in _split_segments(_tokens(line)):
            if segment[0] == "export":
                for item in segment[1:]:
                    if "=" in item:
                        key, _, value = item.partition("=")
                        env[key] = value
                continue
            if all(_ASSIGNMENT.match(tok) for tok in segment):  # `VAR=value` alone sets a shell variable
                env.update(tok.split("=", 1) for tok in segment)  # type: ignore[misc]
                continue
            hit = _find_engine(segment)
            if hit is None:
                continue
            engine, start = hit
            local_env = dict(env)
            for tok in segment[:start]:
                if _ASSIGNMENT.match(tok):
                    key, _, value = tok.partition("=")
                    local_env[key] = value
            options, positionals = _parse_options(engine, segment[start:])
            found.append(LaunchCommand(engine=engine, argv=tuple(segment), env=local_env,
                                       options=options, positionals=positionals))
    return found


def parse_command(text: str) -> list[LaunchCommand]:
    """Like `parse_commands`, but raise CommandError when there is none or the engines differ."""
    commands = parse_commands(text)
    if not commands:
        raise CommandError(
            "no SGLang (`python -m sglang.launch_server`), vLLM (`vllm serve`) or TensorRT-LLM "
            "(`trtllm-serve`) launch found in the given text; pass the command as a string or with --file"
        )
    engines = {c.engine for c in commands}
    if len(engines) > 1:
        raise CommandError(f"the text launches several engines ({', '.join(sorted(engines))}); give one at a time")
    return commands
