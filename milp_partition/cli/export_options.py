"""The options of ``solve --export ENGINE --export-to PATH`` (kept apart from :mod:`milp_partition.cli.export`, which
writes the export, so that building the parser imports no problem module: ``tests/test_startup.py``).

The engines and what each takes are in :mod:`milp_partition.io.export` (``galvatron``: a Galvatron plan;
``torchtitan``, ``megatron``: a joint plan).  The export runs after the report and the result file: a plan outside the
engine's space is refused with the reason (exit 2), the solve's own output stays.  ``--global-batch-size`` (joint)
sets the samples per step the micro-batch size is derived from (default: one sample per micro-batch).
"""

from __future__ import annotations

import argparse

from milp_partition.cli import flags

#: The options below, as ``argparse`` dests (a problem that exports lists them in its ``OPTIONS``).
EXPORT_OPTIONS = frozenset({"export", "export_to"})
#: The engines ``--export`` offers and the problem whose plans each takes (:data:`milp_partition.io.export.EXPORTS`,
#: named here so that building the parser imports no problem module; ``tests/test_startup.py`` holds them equal).
ENGINES: dict[str, str] = {"galvatron": "galvatron", "torchtitan": "joint", "megatron": "joint"}
#: The joint exports also read this one.
BATCH_OPTION = "global_batch_size"


def add_export_options(p: argparse.ArgumentParser) -> None:
    """Add ``--export``, ``--export-to`` and ``--global-batch-size`` (solve only)."""
    g = p.add_argument_group("export (joint and galvatron plans)")
    g.add_argument(
        "--export",
        choices=list(ENGINES),
        help="write the plan in a training engine's configuration: "
        + ", ".join(f"{engine} ({problem} plans)" for engine, problem in ENGINES.items()),
    )
    g.add_argument("--export-to", help="the file --export writes (JSON; '-' = standard output)")
    g.add_argument(
        "--global-batch-size",
        type=flags.count,
        help="joint --export: samples per training step (a multiple of the data-parallel degree times the "
        "micro-batches; default: one sample per micro-batch)",
    )
