"""The project's source files parsed once per process, for the tests that read the code (layering, function length,
one cluster, settings path, ...): each of them parsed every file again, some more than once a test (the layering
test's walk through optional imports parsed a module at every import of it)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path`` as it reads now: parsed once per distinct text (an edited file is parsed again).

    The tree is shared between callers: read it, never change it."""
    return _parse(path.read_text(), str(path))


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename=filename)
