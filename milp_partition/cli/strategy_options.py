"""The strategy problem's own ``solve``/``evaluate`` options: what :func:`register_options` adds and :data:`OPTIONS` names.

Kept apart from :mod:`milp_partition.cli.strategy` (its reader and commands) so that building the command line's parser
imports no solver, no problem module and no numpy (``milp-partition --help`` and ``--version`` stay fast:
``tests/test_startup.py``); the registry names this module in the problem's ``options``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from milp_partition.cli import flags

#: Problem options this problem reads (besides those every problem takes).
OPTIONS = frozenset(
    {"memory_model", "optimizer_factor", "profile", "devices", "memory", "memory_reserve", "bytes_per_element", "tie_blocks"}
    | {"write_tables", "no_reduce", "dp_bound", "cutoff"}
)

#: Options that only a strategy-layers file takes (a strategy-tables file carries p, costs and memory itself).
LAYERS_ONLY = ("devices", "profile")

#: Default element size in bytes when memory is derived from layer shapes.
DEFAULT_BYTES_PER_ELEMENT = 4


def register_options(p: argparse.ArgumentParser, command: str) -> None:
    """Add the strategy problem's own options to the ``solve`` or ``evaluate`` parser."""
    st = p.add_argument_group("strategy problem")
    st.add_argument(
        "--bytes-per-element",
        type=flags.bytes_per_element,
        help=f"element size when memory is derived from layer shapes (default {DEFAULT_BYTES_PER_ELEMENT})",
    )
    if command == "solve":
        st.add_argument(
            "--tie-blocks",
            action="store_true",
            help="give layers of identical repeated blocks one configuration (an approximation; the report says so)",
        )
        st.add_argument("--write-tables", type=Path, help="also write the (generated) problem as strategy-tables/1 JSON")
        st.add_argument("--no-reduce", action="store_true", help="skip the exact reductions")
        st.add_argument("--dp-bound", action="store_true", help="bound the objective below by the exact DP's value")
        st.add_argument("--cutoff", action="store_true", help="bound the objective above by the DP solution's value")
