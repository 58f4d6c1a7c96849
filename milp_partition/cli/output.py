"""Writing the command's output files: checked before the work, replaced atomically after it.

A result file is written to a temporary file beside it and renamed over the target,
so a failed write (a full disk, ``ulimit -f``) leaves the previous file as it was.
Whether the target can be written is checked before solving, so an unwritable path
does not lose a finished solve.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from milp_partition.cli.exit_codes import EXIT_INTERRUPTED, exit_code_for_status
from milp_partition.errors import InputError
from milp_partition.io.atomic import check_target, write_atomic
from milp_partition.report import fmt
from milp_partition.result import Result


def check_writable(path: Path, what: str = "--output") -> None:
    """Raise :class:`InputError` unless a file can be created or replaced at ``path`` (nothing is left behind)."""
    path = Path(path)
    check_target(path, what)  # a folder, a device, a pipe or a symbolic link is refused
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"the folder {str(parent)!r} does not exist (or is not a folder)", source=str(path), where=what)
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError("the file is not writable", source=str(path), where=what)
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=parent)
    except OSError as exc:
        raise InputError(f"cannot write in its folder: {exc.strerror or exc}", source=str(path), where=what) from None
    os.close(fd)
    os.unlink(probe)


def write_text_atomic(path: Path, text: str, what: str = "--output") -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename (only over a regular file).

    Raises :class:`InputError` (one line) when the write fails; the old file, if any, is then untouched.
    """
    write_atomic(path, text, what)


def emit(result: Result, args: argparse.Namespace, report: Callable[[], str]) -> int:
    """Write the result JSON (``--output``, atomically), print the report (or the ``-q`` line); return the exit code.

    A result stopped by an interrupt (``stopped_by == "interrupt"``) exits with :data:`EXIT_INTERRUPTED` after both.
    """
    if args.output is not None:
        source = result.instance.get("source")
        if source and Path(source).exists():
            # where the instance is seen from the result's folder, for 'plot' after both moved together
            result.instance["source_from_result"] = os.path.relpath(Path(source).resolve(), Path(args.output).resolve().parent)
        write_text_atomic(args.output, json.dumps(result.to_json_dict(), indent=2) + "\n")
    if args.quiet:
        unit = result.time_unit if result.objective_name != "peak_memory_bytes" else "bytes"
        print(
            f"{result.status} objective={fmt(result.objective, 15)} bound={fmt(result.bound, 15)} gap={fmt(result.gap, 3)} "
            f"seconds={result.solve_seconds:.2f} unit={unit if unit not in ('', 'unitless') else 'unknown'}"
        )
    else:
        print(report())
    if result.stopped_by == "interrupt":
        return EXIT_INTERRUPTED
    return exit_code_for_status(result.status)
