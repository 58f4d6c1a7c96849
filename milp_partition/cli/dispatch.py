"""Command-line interface: ``milp-partition solve | evaluate | info`` and the further subcommands.

The problems come from the one registry, :data:`milp_partition.registry.PROBLEMS`
(name -> descriptor, in detection order); each descriptor's CLI module defines

* ``OPTIONS``: the problem options it reads (a frozenset of ``argparse`` dests);
  one it does not read, given on the command line, is refused (exit 2);
* ``register_options(parser, command)``: adds its own options to the ``solve`` or
  ``evaluate`` parser (``command`` is ``"solve"`` or ``"evaluate"``);
* ``claims(data) -> bool``: whether a parsed JSON instance is its format (the
  registry's order decides; ``pipeline`` is last and takes the rest);
* ``cmd_solve(args)``, ``cmd_evaluate(args)``, ``cmd_info(args)`` -> exit code.

Further subcommands (import, calibrate, gap) come from :data:`COMMAND_MODULES`: each
defines ``register(subparsers)``, which adds its parser and sets
``handler=<function(args) -> exit code>``.  Exit codes are in
:mod:`milp_partition.cli.exit_codes`.  Errors print one line, never a traceback;
SIGTERM is handled like Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from milp_partition import registry
from milp_partition.backends.cbc import stop_cbc_children
from milp_partition.cli.exit_codes import EXIT_ERROR, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK
from milp_partition.cli.flags import OneLineParser
from milp_partition.cli.options import COMMON, add_problem_options, add_solver_options, flag_name
from milp_partition.cli.output import check_writable
from milp_partition.errors import InputError, MilpPartitionError
from milp_partition.io.json_text import parse_json, read_text_file

#: Modules that add further subcommands through ``register(subparsers)``.
COMMAND_MODULES: tuple[str, ...] = (
    "milp_partition.cli.importer",
    "milp_partition.cli.calibrate",
    "milp_partition.cli.gap",
    "milp_partition.cli.plot",
    "milp_partition.cli.run",
)


def problem_module(name: str) -> ModuleType:
    """The CLI module of problem ``name`` (from the registry)."""
    return registry.problem(name).cli_module()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("milp_partition")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: ``solve``, ``evaluate``, ``info`` and the commands of :data:`COMMAND_MODULES`."""
    parser = OneLineParser(prog="milp-partition", description="Provably optimal partitioning of DNN graphs across GPUs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    instance_help = (
        "instance file: native graph JSON, Tarnawski JSON, PipeDream graph.txt, node-link JSON, strategy-tables/1, "
        "strategy-layers/1, placement-instance/1, Piper's joint JSON or milp-partition-joint/1"
    )
    s = sub.add_parser(
        "solve",
        help="solve an instance and print a verified report",
        description="Solve an instance and print a verified report.  The problem follows from the file (--problem "
        "overrides it): pipeline partitioning, layer-wise strategies, operator placement, or the joint planner "
        "(--problem joint: pipeline stages, data- and tensor-parallel degrees and recomputation per layer, for Piper's "
        "files, milp-partition-joint/1 and graphs written by 'milp-partition import --training --granularity layer').",
    )
    s.add_argument("instance", type=Path, help=instance_help)
    add_problem_options(s, tuple(registry.PROBLEMS))
    for name in registry.PROBLEMS:
        problem_module(name).register_options(s, "solve")
    add_solver_options(s)

    e = sub.add_parser("evaluate", help="verify a solution file and print its objective")
    e.add_argument("instance", type=Path, help=instance_help)
    e.add_argument("solution", type=Path, help="a result JSON (its 'assignment') or a JSON object node id -> device id")
    add_problem_options(e, tuple(registry.PROBLEMS))
    for name in registry.PROBLEMS:
        problem_module(name).register_options(e, "evaluate")

    i = sub.add_parser("info", help="describe an instance (sizes, work, memory, bounds)")
    i.add_argument("instance", type=Path, help=instance_help)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    return parser


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


def _refuse_unused_options(args: argparse.Namespace, kind: str) -> None:
    """Exit 2 on a problem option that ``kind`` does not read (it would be silently ignored)."""
    used = problem_module(kind).OPTIONS | COMMON | set(registry.COMMON_FLAGS.values())  # (those: ProblemEntry.common_settings)
    for dest, value in vars(args).items():
        if dest not in used and value is not None and value is not False:
            raise InputError(f"does not apply to the {kind} problem; leave it out", where=flag_name(dest))


def _problem_command(args: argparse.Namespace) -> int:
    kind = problem_kind(args)
    _refuse_unused_options(args, kind)
    if args.command == "solve":  # the one typed value of the common settings, from the flags (refused where unread)
        args.common = registry.problem(kind).common_settings(args)
    if getattr(args, "output", None) is not None:
        check_writable(args.output)
    return getattr(problem_module(kind), f"cmd_{args.command}")(args)


def _cmd_info(args: argparse.Namespace) -> int:
    args.problem = None
    return problem_module(problem_kind(args)).cmd_info(args)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def _interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt as Ctrl-C does; writes past ``ulimit -f`` fail with an error, not a signal."""
    previous: dict[int, Any] = {}
    for sig, handler in ((signal.SIGTERM, _raise_interrupt), (getattr(signal, "SIGXFSZ", None), signal.SIG_IGN)):
        if sig is None:
            continue
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread (e.g. called from a test runner's worker): leave signals alone
            pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``milp-partition``; returns the exit code."""
    with _interrupts():
        try:
            args = build_parser().parse_args(argv)
            if args.command in ("solve", "evaluate"):
                return _problem_command(args)
            return (getattr(args, "handler", None) or _cmd_info)(args)
        except MilpPartitionError as exc:
            print(f"milp-partition: error: {exc}", file=sys.stderr)
            return EXIT_INPUT
        except KeyboardInterrupt:
            stop_cbc_children()
            print("milp-partition: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly, as other command-line tools do
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the flush at exit cannot fail again
            except (OSError, ValueError):
                pass
            return EXIT_OK
        except OSError as exc:  # a file or folder the command reads or writes (e.g. an output folder that is a file)
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"milp-partition: error: {where}{exc.strerror or exc}; check the path", file=sys.stderr)
            return EXIT_INPUT
        except Exception as exc:  # a bug: one line, and the traceback only on request
            if os.environ.get("MILP_PARTITION_DEBUG"):
                raise
            print(
                f"milp-partition: internal error: {type(exc).__name__}: {str(exc)[:300]} (a bug; please report it; "
                "MILP_PARTITION_DEBUG=1 shows the traceback)",
                file=sys.stderr,
            )
            return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
