"""The stdlib corpus: a fixed selection rule, a split by file that is deterministic and disjoint, budgets."""
from __future__ import annotations

from pathlib import Path

import pytest

from dspark.testbed.corpus import (CorpusError, CorpusSpec, candidate_paths, documents, fingerprint,
                                   heldout_documents, source_fingerprint, split_of, stdlib_root, train_documents)

from testbed_tiny import SMALL_CORPUS

CODE = "import os\n\n\ndef f(x):\n    return os.path.join(x, 'a')\n" * 60  # ~3.4 KB of valid code


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_selection_rule_skips_tests_vendored_removed_and_out_of_size_files(tmp_path):
    root = _tree(tmp_path, {
        "os.py": CODE, "email/parser.py": CODE, "json/__init__.py": CODE,
        "test/test_os.py": CODE, "idlelib/idle_test/htest.py": CODE, "site-packages/pkg/mod.py": CODE,
        "lib2to3/fixer.py": CODE, "distutils/core.py": CODE, "pipes.py": CODE, "encodings/cp1252.py": CODE,
        "test_other.py": CODE, "tiny.py": "x = 1\n", "huge.py": CODE * 30, "notes.txt": CODE,
        "config-3.11-x86_64-linux-gnu/python-config.py": CODE,
    })
    assert candidate_paths(root) == ["email/parser.py", "json/__init__.py", "os.py"]


def test_split_depends_on_the_path_only_and_is_disjoint():
    paths = candidate_paths(stdlib_root())
    first = {p: split_of(p) for p in paths}
    assert first == {p: split_of(p) for p in reversed(paths)}
    heldout = {p for p, s in first.items() if s == "heldout"}
    assert 0 < len(heldout) < len(paths) / 4  # 10 % of the files, give or take
    # the rule is a pure function of the path: known assignments never change between Python versions
    assert split_of("json/tool.py") == "heldout" and split_of("os.py") == "train"


def test_train_and_heldout_documents_are_deterministic_and_disjoint_by_file():
    train_a, held_a = train_documents(SMALL_CORPUS), heldout_documents(SMALL_CORPUS)
    train_b, held_b = train_documents(SMALL_CORPUS), heldout_documents(SMALL_CORPUS)
    assert train_a == train_b and held_a == held_b
    assert not {d.path for d in train_a} & {d.path for d in held_a}
    assert all(split_of(d.path) == "train" for d in train_a)
    assert all(split_of(d.path) == "heldout" for d in held_a)
    assert fingerprint(train_a) == fingerprint(train_b) != fingerprint(held_a)


def test_byte_budget_is_reached_by_whole_files_in_hash_order():
    docs = train_documents(SMALL_CORPUS)
    sizes = [len(d.text.encode()) for d in docs]
    assert sum(sizes) >= SMALL_CORPUS.train_bytes > sum(sizes[:-1])
    bigger = train_documents(CorpusSpec(train_bytes=2 * SMALL_CORPUS.train_bytes))
    assert bigger[:len(docs)] == docs  # a larger budget extends the same ordered list


def test_code_only_documents_have_no_comment_lines_or_module_docstrings():
    for doc in heldout_documents(SMALL_CORPUS):
        lines = doc.text.split("\n")
        assert not any(line.lstrip().startswith("#") for line in lines), doc.path
        assert not doc.text.lstrip().startswith(('"""', "'''", 'r"""')), doc.path
        compile(doc.text, doc.path, "exec")


def test_a_missing_file_only_shifts_the_selection_locally(tmp_path):
    files = {f"pkg{i}/mod.py": CODE.replace("'a'", f"'{i}'") for i in range(40)}
    spec = CorpusSpec(train_bytes=10 * len(CODE), heldout_bytes=len(CODE), heldout_percent=20)
    full = [d.path for d in documents("train", spec, _tree(tmp_path / "a", files))]
    dropped = full[3]
    fewer = [d.path for d in documents("train", spec, _tree(tmp_path / "b", {k: v for k, v in files.items()
                                                                               if k != dropped}))]
    assert [p for p in full if p != dropped] == fewer[:len(full) - 1]


def test_source_fingerprint_changes_when_a_file_changes(tmp_path):
    root = _tree(tmp_path, {"os.py": CODE, "json/tool.py": CODE})
    before = source_fingerprint(root=root)
    assert source_fingerprint(root=root) == before
    (root / "os.py").write_text(CODE + "y = 2\n")
    assert source_fingerprint(root=root) != before


def test_bad_specs_and_empty_trees_raise_one_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="heldout_percent"):
        CorpusSpec(heldout_percent=0)
    with pytest.raises(CorpusError, match="split must be"):
        documents("validation")
    with pytest.raises(CorpusError, match="no train files"):
        documents("train", CorpusSpec(), tmp_path)
