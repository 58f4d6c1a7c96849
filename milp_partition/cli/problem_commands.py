"""``solve``, ``evaluate`` and ``info``: which problem a file is, the options it refuses, and the problem's command.

:mod:`milp_partition.cli.dispatch` builds the parser and hands the parsed arguments here (imported only when one of
these commands runs: detection reads the file, and the commands write results, which the parser does not need).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from milp_partition import registry
from milp_partition.cli.flags import SAME_IDEA
from milp_partition.cli.options import COMMON, flag_name
from milp_partition.cli.output import check_writable
from milp_partition.errors import InputError
from milp_partition.io.json_text import parse_json, read_text_file


def problem_kind(args: argparse.Namespace) -> str:
    """``--problem``, else the first problem of the registry whose ``claims`` takes the parsed file."""
    if getattr(args, "problem", None) is not None:
        return str(args.problem)

    if Path(args.instance).is_dir():
        for name, entry in registry.PROBLEMS.items():
            if entry.claims_path(args.instance):
                return name
    text = read_text_file(args.instance)
    data = parse_json(text, str(args.instance)) if text.lstrip()[:1] == "{" else None
    for name, entry in registry.PROBLEMS.items():
        if data is not None and entry.claims(data):
            return name
    return list(registry.PROBLEMS)[-1]


def refuse_unused_options(args: argparse.Namespace, kind: str) -> None:
    """Exit 2 on a problem option that ``kind`` does not read (it would be silently ignored).

    The flags of the common settings are checked by :meth:`~milp_partition.registry.ProblemEntry.common_settings`.
    """
    used = registry.problem(kind).options_module().OPTIONS | COMMON | set(registry.COMMON_FLAGS.values())
    for dest, value in vars(args).items():
        if dest not in used and value is not None and value is not False:
            other = SAME_IDEA.get(dest, {}).get(kind)
            instead = f"; the {kind} problem takes it as {other}" if other else ""
            raise InputError(f"does not apply to the {kind} problem; leave it out{instead}", where=flag_name(dest))


def problem_command(args: argparse.Namespace) -> int:
    """``solve`` or ``evaluate``: the problem's ``cmd_solve`` or ``cmd_evaluate``, after the checks."""
    kind = problem_kind(args)
    refuse_unused_options(args, kind)
    entry = registry.problem(kind)
    if args.command == "solve":  # the one typed value of the common settings, from the flags (refused where unread)
        args.common = entry.common_settings(args)
    if getattr(args, "output", None) is not None:
        check_writable(args.output)
    return getattr(entry.cli_module(), f"cmd_{args.command}")(args)  # type: ignore[no-any-return]


def cmd_info(args: argparse.Namespace) -> int:
    """``info``: the detected problem's ``cmd_info`` (the hetero options, which choose one setting of Sailor's folder,
    refused for the other problems)."""
    args.problem = None
    kind = problem_kind(args)
    if kind != "hetero":
        refuse_unused_options(args, kind)
    return registry.problem(kind).cli_module().cmd_info(args)  # type: ignore[no-any-return]
