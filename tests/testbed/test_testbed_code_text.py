"""Comment and docstring stripping keeps the code verbatim and compilable."""
from __future__ import annotations

from dspark.testbed.code_text import strip_comments_and_docstrings

SOURCE = '''"""Module docstring
spanning lines."""
import os  # trailing comment

# a comment line


class A:
    """Class docstring."""

    def f(self, x):
        """Only a docstring."""

    def g(self):
        s = "# not a comment"
        return s  # comment


def h(): "kept: shares its line"
'''

EXPECTED = '''import os


class A:

    def f(self, x):
        pass

    def g(self):
        s = "# not a comment"
        return s


def h(): "kept: shares its line"
'''


def test_strips_comments_and_docstrings_and_keeps_code_verbatim():
    assert strip_comments_and_docstrings(SOURCE) == EXPECTED


def test_result_compiles_and_is_idempotent():
    once = strip_comments_and_docstrings(SOURCE)
    compile(once, "<test>", "exec")
    assert strip_comments_and_docstrings(once) == once


def test_unparsable_source_is_reported_as_none():
    assert strip_comments_and_docstrings("def broken(:\n    pass\n") is None
