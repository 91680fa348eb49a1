"""The testbed corpus: Python standard-library sources, chosen by a fixed rule and split by file.

Every machine with Python has the standard library's `.py` files, so they make a real code corpus that needs no
download. The rule is written to give (nearly) the same selection on Python 3.10–3.13:

* candidates: `*.py` under `sysconfig.get_paths()["stdlib"]`, outside test suites, vendored packages and
  modules that were removed in 3.12/3.13 (so their absence does not shift the selection), between
  `min_bytes` and `max_bytes` in size, decodable as UTF-8;
* split: a file is held out when a salted SHA-256 of its relative path falls in the first `heldout_percent`
  of 100 buckets, so train and held-out are disjoint by file and independent of the Python version;
* text: with `code_only` (the default) comments and docstrings are removed (`code_text`), which makes the
  tiny target's continuations far more predictable; files that then fail to compile are skipped;
* order and budget: within each split files are ordered by a second salted hash and taken until the byte budget
  (counted on the final text) is reached, so a file missing in one Python version changes the selection only
  locally.

Measured with the default spec: CPython 3.10.13 / 3.11.7 / 3.12.1 / 3.13.0 select 291 / 297 / 295 / 297 train
files (~3.0 MB each) and 33 / 33 / 33 / 34 held-out files, of which 32 / 33 / 33 / 32 are the 3.11 held-out files.
Distributions that package idlelib / tkinter separately (Debian, Ubuntu) give fewer files; the target card records
the exact lists. The texts still differ between versions: `fingerprint` hashes the documents used (recorded in
the card) and `source_fingerprint` cheaply hashes the raw candidate files (part of the target cache key).
This module reads files; it does not tokenize or train.
"""
from __future__ import annotations

import hashlib
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from dspark.testbed.code_text import strip_comments_and_docstrings


class CorpusError(ValueError):
    """The standard-library corpus cannot be built as asked."""


# Folders never used: test suites, third-party packages, generated tables/data, and packages removed in
# Python 3.12 / 3.13 (distutils, lib2to3), which would otherwise make the selection depend on the version.
EXCLUDED_DIRS = frozenset({
    "site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__", "encodings", "pydoc_data",
    "lib2to3", "distutils", "ensurepip", "venv", "turtledemo", "__phello__",
})
# Top-level modules removed in Python 3.12 (PEP 594 early removals, imp) and 3.13 (PEP 594 "dead batteries").
REMOVED_MODULES = frozenset({
    "asynchat.py", "asyncore.py", "smtpd.py", "imp.py", "aifc.py", "audioop.py", "cgi.py", "cgitb.py", "chunk.py",
    "crypt.py", "imghdr.py", "mailcap.py", "nntplib.py", "pipes.py", "sndhdr.py", "sunau.py", "telnetlib.py",
    "uu.py", "xdrlib.py",
})


@dataclass(frozen=True)
class CorpusSpec:
    """Which standard-library files the testbed uses (see the module docstring for the rule)."""

    train_bytes: int = 3_000_000
    heldout_bytes: int = 400_000
    heldout_percent: int = 10
    min_bytes: int = 2_000
    max_bytes: int = 60_000
    salt: str = "dspark-testbed-v1"
    code_only: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.heldout_percent < 100:
            raise CorpusError(f"heldout_percent must be in 1..99, got {self.heldout_percent}")
        if self.train_bytes <= 0 or self.heldout_bytes <= 0:
            raise CorpusError("train_bytes and heldout_bytes must be positive byte budgets")
        if not 0 <= self.min_bytes < self.max_bytes:
            raise CorpusError(f"need 0 <= min_bytes < max_bytes, got {self.min_bytes} and {self.max_bytes}")


@dataclass(frozen=True)
class Document:
    """One source file: its path relative to the stdlib root (POSIX style) and its text (newlines as \\n)."""

    path: str
    text: str


def stdlib_root() -> Path:
    """The running interpreter's standard-library folder."""
    root = Path(sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise CorpusError(f"the standard library folder {root} does not exist; the testbed needs Python's "
                          f"sources (install the python3 standard library, not only the .pyc files)")
    return root


def _bucket(path: str, salt: str) -> int:
    digest = hashlib.sha256(f"{salt}:{path}".encode()).hexdigest()
    return int(digest[:8], 16)


def split_of(path: str, spec: CorpusSpec = CorpusSpec()) -> str:
    """"heldout" or "train" for a relative path; depends on the path and the salt only."""
    return "heldout" if _bucket(path, spec.salt) % 100 < spec.heldout_percent else "train"


def candidate_paths(root: Path | None = None, spec: CorpusSpec = CorpusSpec()) -> list[str]:
    """Relative paths of the `.py` files the rule admits, sorted."""
    root = stdlib_root() if root is None else Path(root)
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in EXCLUDED_DIRS and not d.startswith("config-")]
        for name in files:
            if not name.endswith(".py") or name.startswith("test_"):
                continue
            file = Path(folder) / name
            rel = file.relative_to(root).as_posix()
            if rel in REMOVED_MODULES or not file.is_file():
                continue
            if spec.min_bytes <= file.stat().st_size <= spec.max_bytes:
                out.append(rel)
    return sorted(out)


def read_text(root: Path, path: str, spec: CorpusSpec = CorpusSpec()) -> str | None:
    """The corpus text of one file (None when it is unreadable, not UTF-8, or empty after the transform)."""
    try:
        text = (Path(root) / path).read_bytes().decode("utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if spec.code_only:
        text = strip_comments_and_docstrings(text)
    return text if text and text.strip() else None


def documents(split: str, spec: CorpusSpec = CorpusSpec(), root: Path | None = None) -> list[Document]:
    """The documents of one split ("train" or "heldout"), in hash order, within the split's byte budget."""
    if split not in ("train", "heldout"):
        raise CorpusError(f"split must be 'train' or 'heldout', got {split!r}")
    root = stdlib_root() if root is None else Path(root)
    budget = spec.train_bytes if split == "train" else spec.heldout_bytes
    paths = [p for p in candidate_paths(root, spec) if split_of(p, spec) == split]
    paths.sort(key=lambda p: (_bucket(p, spec.salt + ":order"), p))
    docs: list[Document] = []
    used = 0
    for path in paths:
        if used >= budget:
            break
        text = read_text(root, path, spec)
        if text is None:
            continue
        docs.append(Document(path, text))
        used += len(text.encode())
    if not docs:
        raise CorpusError(f"no {split} files found under {root} with the rule {spec}; is this a Python "
                          f"standard-library folder?")
    return docs


def train_documents(spec: CorpusSpec = CorpusSpec(), root: Path | None = None) -> list[Document]:
    """The training documents (disjoint by file from `heldout_documents`)."""
    return documents("train", spec, root)


def heldout_documents(spec: CorpusSpec = CorpusSpec(), root: Path | None = None) -> list[Document]:
    """The held-out documents, for evaluation only: never used to train the tokenizer or the target."""
    return documents("heldout", spec, root)


def fingerprint(docs: list[Document]) -> str:
    """SHA-256 over the paths and texts, in order: identifies the exact corpus a target was trained on."""
    h = hashlib.sha256()
    for doc in docs:
        h.update(doc.path.encode() + b"\0" + doc.text.encode() + b"\0")
    return h.hexdigest()


def source_fingerprint(spec: CorpusSpec = CorpusSpec(), root: Path | None = None) -> str:
    """SHA-256 over the candidate files' paths and raw bytes: cheap (no parsing), and it changes whenever the
    documents could. Used in the target cache key."""
    root = stdlib_root() if root is None else Path(root)
    h = hashlib.sha256()
    for path in candidate_paths(root, spec):
        h.update(path.encode() + b"\0")
        try:
            h.update((root / path).read_bytes())
        except OSError:
            h.update(b"<unreadable>")
        h.update(b"\0")
    return h.hexdigest()
