"""The Galvatron problem's own ``solve``/``evaluate`` options: what :func:`register_options` adds and :data:`OPTIONS` names.

Kept apart from :mod:`milp_partition.cli.galvatron` (its reader and commands) so that building the command line's parser
imports no solver, no problem module and no numpy (``milp-partition --help`` and ``--version`` stay fast:
``tests/test_startup.py``); the registry names this module in the problem's ``options``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from milp_partition.cli.export_options import EXPORT_OPTIONS

#: Problem options this problem reads (besides those every problem takes).
OPTIONS = frozenset(
    {"devices", "memory", "hardware", "global_batch", "seq_length", "hidden_size", "layer_counts", *EXPORT_OPTIONS}
)
#: The models Galvatron ships, whose hidden size and layer counts the reader knows (``io/galvatron.py``'s
#: ``KNOWN_MODELS``, named here so that the parser imports no reader; ``tests/test_startup.py`` holds them equal).
SHIPPED_MODELS = ("llama2-7b", "bert-large", "t5-3B")


def register_options(parser: argparse.ArgumentParser, command: str = "solve") -> None:
    """Add Galvatron's own options to the ``solve`` or ``evaluate`` parser."""
    g = parser.add_argument_group("galvatron problem (a Galvatron model profile folder)")
    g.add_argument("--hardware", type=Path, help="galvatron: Galvatron's hardware profile folder")
    g.add_argument("--global-batch", type=int, help="galvatron: global batch size")
    g.add_argument("--seq-length", type=int, help="galvatron: profiled sequence length to plan for (default: the model's)")
    g.add_argument(
        "--hidden-size",
        type=int,
        help="galvatron: hidden size of a model Galvatron does not ship (known: " + ", ".join(SHIPPED_MODELS) + ")",
    )
    g.add_argument("--layer-counts", help="galvatron: layers per layer type of a model Galvatron does not ship, e.g. 32 or 24,24")
