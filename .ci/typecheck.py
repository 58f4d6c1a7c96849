"""mypy over milp_partition/, formulations/ and heuristics/, the last two under their installed names.

formulations/ and heuristics/ are top-level folders that install as milp_partition.formulations and
milp_partition.heuristics (setuptools package-dir, pyproject.toml).  mypy maps files to modules by
their folders only, so a plain ``mypy`` checks them as ``formulations.*`` / ``heuristics.*`` and sees
every import of ``milp_partition.formulations`` / ``milp_partition.heuristics`` as a missing module
(Any).  This runs mypy with pyproject's [tool.mypy] settings and the two folders' files given their
installed module names, so every import between them and milp_partition is checked.

Usage (repository root): ``.venv/bin/python .ci/typecheck.py [mypy options]``; exit status as mypy's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]
MAPPED = ("formulations", "heuristics")  # folder -> milp_partition.<folder>


def _installed_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["milp_partition", *parts])


def main(argv: list[str]) -> int:
    fscache = FileSystemCache()
    sources, options = process_options(argv, fscache=fscache)
    if options.cache_dir == ".mypy_cache":  # the default: not the cache of a plain mypy, whose module names differ
        options.cache_dir = str(Path(".mypy_cache", "installed-names"))
    folders = [ROOT / name for name in MAPPED]
    sources = [s for s in sources if s.path is None or not any(Path(s.path).resolve().is_relative_to(d) for d in folders)]
    for folder in folders:
        sources += [BuildSource(str(f), _installed_name(f), None, str(ROOT)) for f in sorted(folder.rglob("*.py"))]
    messages: list[str] = []
    try:
        build.build(sources, options, fscache=fscache, flush_errors=lambda _file, new, _serious: messages.extend(new))
    except CompileError as e:
        messages.extend(e.messages)
    for line in messages:
        print(line)
    errors = sum(": error:" in line for line in messages)
    if errors:
        files = len({line.split(":", 1)[0] for line in messages if ": error:" in line})
        print(
            f"Found {errors} error{'s' * (errors != 1)} in {files} file{'s' * (files != 1)} (checked {len(sources)} source files)"
        )
        return 1
    print(f"Success: no issues found in {len(sources)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
