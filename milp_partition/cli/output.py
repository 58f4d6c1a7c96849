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


#: The options (``argparse`` dests) that name a file a command writes.
OUTPUT_OPTIONS: tuple[str, ...] = ("output", "write_tables")


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one existing file (symbolic links, ``./x`` against ``x``, hard links)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def input_paths(value: object) -> list[Path]:
    """The existing regular files an option's value names (a path, a ``FILE.py:FACTORY`` spec, or a list of them)."""
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in input_paths(v)]
    if not isinstance(value, (str, Path)) or not str(value):
        return []
    text = str(value)
    candidates = [Path(text)]
    module, sep, attr = text.rpartition(":")
    if sep and module and attr:  # MODULE:FACTORY: a .py path, or a dotted module under the current folder
        candidates.append(Path(module) if module.endswith(".py") else Path(*module.split(".")).with_suffix(".py"))
    found = []
    for c in candidates:
        try:
            if c.is_file():
                found.append(c)
        except (OSError, ValueError):
            pass
    return found


def check_not_an_input(path: Path, inputs: list[Path], what: str = "--output") -> None:
    """Raise :class:`InputError` when ``path`` is the same file as one of ``inputs`` (the input would be replaced)."""
    for source in inputs:
        if _same_file(Path(path), source):
            raise InputError(
                f"is the input file {str(source)!r} itself; writing it would replace that input: give another file name",
                source=str(path),
                where=what,
            )


def refuse_outputs_among_inputs(args: argparse.Namespace) -> None:
    """Raise :class:`InputError` when an output option of ``args`` (:data:`OUTPUT_OPTIONS`) names an input file.

    Every other option's value that names an existing file (the instance, the solution, a plan, a graph, a model file,
    a config, a profile, a ``FILE.py:FACTORY``) counts as an input; files are compared as the system resolves them.
    """
    options = vars(args)
    inputs = [p for dest, value in options.items() if dest not in OUTPUT_OPTIONS for p in input_paths(value)]
    for dest in OUTPUT_OPTIONS:
        target = options.get(dest)
        if isinstance(target, (str, Path)):
            check_not_an_input(Path(target), inputs, "--" + dest.replace("_", "-"))


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
