"""The pipeline problem's own ``solve``/``evaluate`` options: what :func:`register_options` adds and :data:`OPTIONS` names.

Kept apart from :mod:`milp_partition.cli.pipeline` (its reader and commands) so that building the command line's parser
imports no solver, no problem module and no numpy (``milp-partition --help`` and ``--version`` stay fast:
``tests/test_startup.py``); the registry names this module in the problem's ``options``.
"""

from __future__ import annotations

import argparse

from milp_partition.cli import flags

#: Problem options this problem reads (besides those every problem takes).
OPTIONS = frozenset(
    {"memory_model", "optimizer_factor", "profile", "cluster", "devices", "memory", "memory_reserve", "cpu_cores", "link_latency"}
    | {"bandwidth", "no_contiguous", "objective", "max_time_per_sample", "max_ideals"}
)

MEMORY_MODELS = ("static", "1f1b")

#: Default cap on ideals enumerated by the ideal DP.
DEFAULT_MAX_IDEALS = 20000


def register_options(p: argparse.ArgumentParser, command: str) -> None:
    """Add the pipeline's own options to the ``solve`` or ``evaluate`` parser."""
    g = p.add_argument_group("pipeline problem")
    g.add_argument("--no-contiguous", action="store_true", help="drop the contiguity rule (any split of forward nodes)")
    g.add_argument(
        "--objective",
        choices=["time", "memory", "piper", "run", "sailor", "sound"],
        help="pipeline: time (default): least time per sample; memory: least peak memory with time per sample <= "
        "--max-time-per-sample. joint: piper (default): Piper's time per sample; run (an imported graph): the step of "
        "the global batch as 'run' executes it (milp_partition/costmodel). hetero: sailor (default: Sailor's simulator) "
        "or sound (gradients sized by a stage's input, no doubled sends)",
    )
    g.add_argument(
        "--max-time-per-sample",
        type=flags.positive_number,
        help="bound on time per sample for --objective memory (graph time unit)",
    )
    if command == "solve":
        g.add_argument(
            "--max-ideals",
            type=flags.count,
            help=f"cap on ideals enumerated by the ideal DPs (pipeline default {DEFAULT_MAX_IDEALS}; joint default 200000)",
        )
