"""The placement problem's own ``solve``/``evaluate`` options: what :func:`register_options` adds and :data:`OPTIONS` names.

Kept apart from :mod:`milp_partition.cli.placement` (its reader and commands) so that building the command line's parser
imports no solver, no problem module and no numpy (``milp-partition --help`` and ``--version`` stay fast:
``tests/test_startup.py``); the registry names this module in the problem's ``options``.
"""

from __future__ import annotations

import argparse

#: The placement heuristics ``--heuristic`` offers (``heuristics/placement.py``'s ``PLACEMENT_HEURISTICS``, named
#: here so that the parser imports no heuristic; ``tests/test_startup.py`` holds them equal).
HEURISTIC_NAMES = ("heft", "m-topo", "m-etf", "pardnn", "heft-iter")

#: Problem options this problem reads (besides those every problem takes).
OPTIONS = frozenset({"memory_model", "link_contention", "heuristic"})


def register_options(p: argparse.ArgumentParser, command: str) -> None:
    """Add the placement problem's own options to the ``solve`` or ``evaluate`` parser."""

    pl = p.add_argument_group("placement problem")
    pl.add_argument("--link-contention", action="store_true", help="serialize transfers leaving or entering one device")
    if command == "solve":
        pl.add_argument(
            "--heuristic",
            action="append",
            metavar="NAME",
            help=f"placement heuristics to run for the warm start ({', '.join(HEURISTIC_NAMES)}; repeat or "
            "comma-separate; default all)",
        )
