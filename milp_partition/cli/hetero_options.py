"""The hetero problem's own ``solve``/``evaluate`` options: what :func:`register_options` adds and :data:`OPTIONS` names.

Kept apart from :mod:`milp_partition.cli.hetero` (its reader and commands) so that building the command line's parser
imports no problem module (``tests/test_startup.py``); the registry names this module in the problem's ``options``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from milp_partition.cli import flags

#: Problem options this problem reads (besides those every problem takes).
OPTIONS = frozenset({"setting", "setting_file", "trace", "row", "model", "global_batch", "objective", "stop_gap"})


def register_options(parser: argparse.ArgumentParser, command: str = "solve") -> None:
    """Add the hetero problem's own options (``--global-batch`` and ``--objective`` are shared with other problems; on
    ``info``, whose parser has no other problem's options, they are added here: ``info FOLDER --setting-file FILE``
    shows that one setting)."""
    g = parser.add_argument_group("hetero problem (Sailor's benchmark folder: mixed GPU kinds)")
    g.add_argument("--setting", help="hetero: a setting name of reference/settings.json (or of --setting-file)")
    g.add_argument("--setting-file", type=Path, help="hetero: a JSON setting {model, global_batch, gpus: {'<kind>_<zone>': n}}")
    g.add_argument("--trace", type=Path, help="hetero: a Sailor trace CSV (with --row and --model)")
    g.add_argument("--row", type=int, help="hetero: the trace row (default 0)")
    g.add_argument("--model", help="hetero: the model of a trace row (OPT-350, GPT-Neo-2.7)")
    if command == "info":  # info has no problem options of its own: the two the others share are added here
        g.add_argument("--global-batch", type=int, help="hetero: the global batch (default: the setting's)")
        g.add_argument("--objective", choices=("sailor", "sound"), help="hetero: the objective the setting is shown for")
    if command == "solve":
        g.add_argument(
            "--stop-gap",
            type=flags.fraction_below_one,
            metavar="FRACTION",
            help="hetero: where the zones are pooled, stop once the plan is proven within this relative gap "
            "(default 0.01, issue 40's 1%% bar; 0: prove as close as the time limit allows)",
        )
