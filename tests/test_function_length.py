"""No function is over 100 lines (issue 23 item 6), checked on the source.

A function's length is its body, from the first statement after the docstring to the last line of
the last statement (nested functions and classes count inside the function that holds them, and are
measured on their own too). The one exemption: functions named ``build`` in the ``formulations/``
modules, where a formulation's labelled constraints stay together in one place.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_trees import parsed

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 100
# formulations/ and heuristics/ install as milp_partition.formulations / .heuristics (package-dir)
FOLDERS = ("milp_partition", "formulations", "heuristics")


def _files() -> list[Path]:
    seen: dict[Path, Path] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            seen.setdefault(path.resolve(), path)
    return sorted(seen.values())


def _body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = fn.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    if not body:
        return 0
    end = body[-1].end_lineno
    assert end is not None
    return end - body[0].lineno + 1


def _exempt(path: Path, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A formulation's ``build``: a function named build in a formulations/ module."""
    return fn.name == "build" and path.resolve().parent == (ROOT / "formulations").resolve()


def _long_functions() -> list[tuple[str, int]]:
    out = []
    for path in _files():
        tree = parsed(path)
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    name = f"{prefix}{child.name}."
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = _body_lines(child)
                    if n > LIMIT and not _exempt(path, child):
                        rel = path.resolve().relative_to(ROOT)
                        out.append((f"{rel}:{child.lineno} {prefix}{child.name}", n))
                stack.append((child, name))
    return sorted(out)


def test_no_function_over_100_lines() -> None:
    long = _long_functions()
    assert not long, "functions over 100 lines (docstring aside):\n" + "\n".join(f"  {n:4d}  {name}" for name, n in long)


def test_the_measure_skips_the_docstring_and_counts_nested_code() -> None:
    src = 'def f():\n    """doc\n    more doc\n    """\n    x = 1\n\n    def g():\n        return x\n    return g\n'
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert _body_lines(fn) == 5


def test_only_formulation_builds_are_exempt() -> None:
    fn = ast.parse("def build():\n    pass\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert _exempt(ROOT / "formulations" / "joint.py", fn)
    assert not _exempt(ROOT / "heuristics" / "placement.py", fn)
    assert not _exempt(ROOT / "milp_partition" / "chain.py", fn)
