"""The ``plot`` command: ``milp-partition plot RESULT.json --output FILE.{png,svg} [--instance FILE] [--memory SIZE]``.

Placement: a Gantt chart per device with transfers (the task times come from the instance the result records,
found as recorded or beside the result, or from ``--instance``); pipeline:
stage loads and memory against the limit; strategy: configuration per layer; joint: each stage's time
per sample and one device's memory against the limit.
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys
from pathlib import Path

from milp_partition import registry
from milp_partition.cli import flags
from milp_partition.cli.output import check_writable
from milp_partition.errors import InputError
from milp_partition.io.atomic import write_atomic
from milp_partition.io.json_text import parse_json, read_text_file


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plot`` command."""
    p = subparsers.add_parser("plot", help="draw a solved plan (result JSON) as PNG or SVG")
    p.add_argument("result", type=Path, help="a result JSON written by 'solve --output'")
    p.add_argument("--output", "-o", type=Path, required=True, help="the image file: .png or .svg")
    p.add_argument(
        "--instance",
        help="the instance file (default: the one the result records, looked for as recorded and beside the result)",
    )
    p.add_argument(
        "--memory", type=flags.byte_size, help="pipeline, joint: memory limit per accelerator to draw (default: the instance's)"
    )
    p.set_defaults(handler=run_plot_command)


def run_plot_command(args: argparse.Namespace) -> int:
    """Handler of ``milp-partition plot``; returns the exit code."""
    if args.output.suffix.lower() not in (".png", ".svg"):
        raise InputError("the output must end in .png or .svg", source=str(args.output))
    check_writable(args.output)  # before drawing: a folder, a device or a symbolic link is refused
    result = parse_json(read_text_file(args.result), str(args.result))
    problem = result.get("problem") if isinstance(result, dict) else None
    plottable = registry.names("plot")
    if problem not in plottable:
        raise InputError(
            f"field 'problem' is {problem!r}; a result JSON of {', '.join(plottable)} is expected", source=str(args.result)
        )
    try:
        importlib.import_module("matplotlib")
        module = registry.problem(str(problem)).plot_module()
    except ImportError:
        raise InputError("plot needs matplotlib: pip install 'milp-partition[plot]'", where="plot") from None
    instance = args.instance or find_instance(result, args.result, required=problem == "placement")
    fig = module.figure(result, instance, {"memory": args.memory or ""})
    image = io.BytesIO()
    fig.savefig(image, dpi=120, format=args.output.suffix.lower()[1:])
    write_atomic(args.output, image.getvalue())  # the old image stays whole if the write fails
    print(f"wrote {args.output}")
    return 0


def find_instance(result: object, result_path: Path, *, required: bool = True) -> str | None:
    """The instance a result was solved on: its recorded ``instance.source``, as given or from the result's folder.

    ``None`` when the result records none.  When it records one that is at none of the places
    looked at (moved or deleted): an :class:`InputError` naming them if ``required``, else a note
    on stderr and ``None``.
    """
    inst = result.get("instance") if isinstance(result, dict) else None
    if not isinstance(inst, dict) or not isinstance(inst.get("source"), str) or not inst["source"]:
        return None
    source = inst["source"]
    folder = result_path.parent
    candidates = [Path(source)]
    if isinstance(inst.get("source_from_result"), str):
        candidates.append(folder / inst["source_from_result"])
    if not Path(source).is_absolute():
        candidates.append(folder / source)
    candidates.append(folder / Path(source).name)
    for path in candidates:
        if path.is_file() or path.is_dir():  # a Galvatron model is a folder
            return str(path)
    looked = ", ".join(dict.fromkeys(str(p) for p in candidates))
    message = f"the result's instance {source!r} is not found (looked at {looked}): it moved? give it with --instance FILE"
    if required:
        raise InputError(message, source=str(result_path), where="plot")
    print(f"note: {message}; drawn without it", file=sys.stderr)
    return None
