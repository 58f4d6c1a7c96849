"""The Galvatron problem's own ``solve``/``evaluate`` options: what :func:`register_options` adds and :data:`OPTIONS` names.

Kept apart from :mod:`milp_partition.cli.galvatron` (its reader and commands) so that building the command line's parser
imports no solver, no problem module and no numpy (``milp-partition --help`` and ``--version`` stay fast:
``tests/test_startup.py``); the registry names this module in the problem's ``options``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OPTIONS = frozenset({"devices", "memory", "hardware", "global_batch", "seq_length"})


def register_options(parser: argparse.ArgumentParser, command: str = "solve") -> None:
    g = parser.add_argument_group("galvatron problem (a Galvatron model profile folder)")
    g.add_argument("--hardware", type=Path, help="galvatron: Galvatron's hardware profile folder")
    g.add_argument("--global-batch", type=int, help="galvatron: global batch size")
    g.add_argument("--seq-length", type=int, help="galvatron: profiled sequence length to plan for (default: the model's)")
