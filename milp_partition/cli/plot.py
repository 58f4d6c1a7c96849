"""The ``plot`` command: ``milp-partition plot RESULT.json --output FILE.{png,svg} [--instance FILE] [--memory SIZE]``.

Placement: a Gantt chart per device with transfers (needs ``--instance``); pipeline:
stage loads and memory against the limit; strategy: configuration per layer; joint: each stage's time
per sample and one device's memory against the limit.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from milp_partition import registry
from milp_partition.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plot`` command."""
    p = subparsers.add_parser("plot", help="draw a solved plan (result JSON) as PNG or SVG")
    p.add_argument("result", type=Path, help="a result JSON written by 'solve --output'")
    p.add_argument("--output", "-o", type=Path, required=True, help="the image file: .png or .svg")
    p.add_argument("--instance", help="the instance file (placement: required; pipeline: default the result's source)")
    p.add_argument("--memory", help="pipeline, joint: memory limit per accelerator to draw (default: the instance's)")
    p.set_defaults(handler=run_plot_command)


def run_plot_command(args: argparse.Namespace) -> int:
    """Handler of ``milp-partition plot``; returns the exit code."""
    if args.output.suffix.lower() not in (".png", ".svg"):
        raise InputError("the output must end in .png or .svg", source=str(args.output))
    try:
        result = json.loads(args.result.read_text())
    except OSError as exc:
        raise InputError(f"cannot read the result: {exc.strerror or exc}", source=str(args.result)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg} at line {exc.lineno}", source=str(args.result)) from None
    problem = result.get("problem") if isinstance(result, dict) else None
    plottable = registry.names("plot")
    if problem not in plottable:
        raise InputError(
            f"field 'problem' is {problem!r}; a result JSON of {', '.join(plottable)} is expected", source=str(args.result)
        )
    try:
        module = registry.problem(str(problem)).plot_module()
    except ImportError:
        raise InputError("plot needs matplotlib: pip install 'milp-partition[plot]'", where="plot") from None
    fig = module.figure(result, args.instance, {"memory": args.memory or ""})
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")
    return 0
