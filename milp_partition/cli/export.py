"""``solve --export ENGINE --export-to PATH``: the verified plan in a training engine's configuration.

The engines and what each takes are in :mod:`milp_partition.io.export` (``galvatron``: a Galvatron plan;
``torchtitan``, ``megatron``: a joint plan).  The export runs after the report and the result file: a plan outside the
engine's space is refused with the reason (exit 2), the solve's own output stays.  ``--global-batch-size`` (joint)
sets the samples per step the micro-batch size is derived from (default: one sample per micro-batch).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from milp_partition.cli.export_options import BATCH_OPTION
from milp_partition.errors import InputError
from milp_partition.io.atomic import write_atomic
from milp_partition.io.export import export


def write_export(args: argparse.Namespace, problem: Any, plan: Any) -> None:
    """Write ``plan`` for ``args.export`` to ``args.export_to`` (nothing without ``--export``)."""
    engine = getattr(args, "export", None)
    if engine is None:
        if getattr(args, "export_to", None) is not None:
            raise InputError("--export-to needs --export ENGINE", where="--export-to")
        return
    if getattr(args, "export_to", None) is None:
        raise InputError(f"--export {engine} needs --export-to PATH (or '-' for standard output)", where="--export")
    if plan is None:
        raise InputError(f"no plan to export to {engine}: the solve found none", where="--export")
    data = export(engine, problem, plan, global_batch_size=getattr(args, BATCH_OPTION, None))
    text = json.dumps(data, indent=2) + "\n"
    if args.export_to == "-":
        print(text, end="")
    else:
        write_atomic(args.export_to, text, what="--export-to")
