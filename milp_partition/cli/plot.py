"""The ``plot`` command: ``milp-partition plot RESULT.json --output FILE.{png,svg} [--instance FILE] [--memory SIZE]``.

Placement: a Gantt chart per device with transfers (needs ``--instance``); pipeline:
stage loads and memory against the limit; strategy: configuration per layer; joint: each stage's time
per sample and one device's memory against the limit.
"""

from __future__ import annotations

import argparse
import importlib
import io
from pathlib import Path

from milp_partition.cli import flags
from milp_partition.cli.output import check_writable
from milp_partition.errors import InputError
from milp_partition.io.atomic import write_atomic
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.plots import PLOT_MODULES


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plot`` command."""
    p = subparsers.add_parser("plot", help="draw a solved plan (result JSON) as PNG or SVG")
    p.add_argument("result", type=Path, help="a result JSON written by 'solve --output'")
    p.add_argument("--output", "-o", type=Path, required=True, help="the image file: .png or .svg")
    p.add_argument("--instance", help="the instance file (placement: required; pipeline: default the result's source)")
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
    if problem not in PLOT_MODULES:
        raise InputError(
            f"field 'problem' is {problem!r}; a result JSON of {', '.join(PLOT_MODULES)} is expected", source=str(args.result)
        )
    try:
        module = importlib.import_module(PLOT_MODULES[str(problem)])
    except ImportError:
        raise InputError("plot needs matplotlib: pip install 'milp-partition[plot]'", where="plot") from None
    fig = module.figure(result, args.instance, {"memory": args.memory or ""})
    image = io.BytesIO()
    fig.savefig(image, dpi=120, format=args.output.suffix.lower()[1:])
    write_atomic(args.output, image.getvalue())  # the old image stays whole if the write fails
    print(f"wrote {args.output}")
    return 0
