"""Command-line interface: ``milp-partition solve | evaluate | info`` and the further subcommands.

The problems come from the one registry, :data:`milp_partition.registry.PROBLEMS`
(name -> descriptor, in detection order); each descriptor names

* its options module (``options``): ``OPTIONS``, the problem options it reads (a frozenset
  of ``argparse`` dests; one it does not read, given on the command line, is refused, exit
  2), and ``register_options(parser, command)``, which adds its own options to the
  ``solve`` or ``evaluate`` parser (``command`` is ``"solve"`` or ``"evaluate"``);
* its CLI module: ``claims(data) -> bool``, whether a parsed JSON instance is its format
  (the registry's order decides; ``pipeline`` is last and takes the rest), and
  ``cmd_solve(args)``, ``cmd_evaluate(args)``, ``cmd_info(args)`` -> exit code;
* the common settings its search reads (the others' flags are refused for it).

``solve``, ``evaluate`` and ``info`` run in :mod:`milp_partition.cli.problem_commands`.
Further subcommands (import, calibrate, gap, plot, run) come from :data:`COMMANDS`: each
module defines ``register(subparsers)``, which adds its parser and sets
``handler=<function(args) -> exit code>``; only the module of the command that runs is
imported, so ``--help`` and ``--version`` import no solver, no problem module and no
numpy (``tests/test_startup.py``).  Exit codes are in :mod:`milp_partition.cli.exit_codes`.
Errors print one line, never a traceback; SIGTERM is handled like Ctrl-C.
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
from milp_partition.cli.exit_codes import EXIT_ERROR, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK
from milp_partition.cli.export_options import add_export_options
from milp_partition.cli.flags import OneLineParser
from milp_partition.cli.options import add_problem_options, add_solver_options
from milp_partition.errors import MilpPartitionError

#: The further subcommands: name -> (the module whose ``register(subparsers)`` adds its parser, its one-line help as
#: that module gives it; ``tests/test_startup.py`` holds them equal).  A module is imported only when its command
#: runs (or ``build_parser()`` builds every command): ``--help`` and ``--version`` list them from here.
COMMANDS: dict[str, tuple[str, str]] = {
    "import": (
        "milp_partition.cli.importer",
        "import a PyTorch or ONNX model as a graph file (to solve as a pipeline, or with --problem joint: the joint planner)",
    ),
    "calibrate": ("milp_partition.cli.calibrate", "measure this machine with microbenchmarks and write a device profile"),
    "gap": (
        "milp_partition.cli.gap",
        "run each heuristic and the exact solver over instances and a settings grid; write a gap table and charts",
    ),
    "plot": ("milp_partition.cli.plot", "draw a solved plan (result JSON) as PNG or SVG"),
    "run": (
        "milp_partition.cli.run",
        "run a joint plan of an imported PyTorch model on torch.distributed and compare with the prediction",
    ),
}
#: Modules that add further subcommands through ``register(subparsers)``.
COMMAND_MODULES: tuple[str, ...] = tuple(module for module, _ in COMMANDS.values())
#: Where ``solve``, ``evaluate`` and ``info`` run (it reads instance files and writes results: imported on use).
PROBLEM_COMMANDS = "milp_partition.cli.problem_commands"
#: Result files and the check that no output is an input (imported once a command runs, not for --help).
OUTPUT = "milp_partition.cli.output"


def problem_module(name: str) -> ModuleType:
    """The CLI module of problem ``name`` (from the registry)."""
    return registry.problem(name).cli_module()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("milp_partition")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked (``importlib.metadata`` is slow
    to import)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"{parser.prog} {_version()}")  # on stdout, as argparse's own version action does
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line: ``solve``, ``evaluate``, ``info`` and the commands of :data:`COMMANDS`.

    ``only``: build that one of :data:`COMMANDS` in full and the others as their names and help alone (``""``: all
    of them so), so that the parser imports none of their modules but the one that runs; ``None``: all in full.
    The problems' options come from their registry entries' light ``options`` modules: building the parser
    imports no solver, no problem module and no numpy (``tests/test_startup.py``).
    """
    parser = OneLineParser(prog="milp-partition", description="Provably optimal partitioning of DNN graphs across GPUs.")
    parser.add_argument("--version", action=_Version, help="show the program's version number and exit")
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
    for entry in registry.PROBLEMS.values():
        entry.options_module().register_options(s, "solve")
    add_solver_options(s)
    add_export_options(s)

    e = sub.add_parser("evaluate", help="verify a solution file and print its objective")
    e.add_argument("instance", type=Path, help=instance_help)
    e.add_argument("solution", type=Path, help="a result JSON (its 'assignment') or a JSON object node id -> device id")
    add_problem_options(e, tuple(registry.PROBLEMS))
    for entry in registry.PROBLEMS.values():
        entry.options_module().register_options(e, "evaluate")

    i = sub.add_parser("info", help="describe an instance (sizes, work, memory, bounds)")
    i.add_argument("instance", type=Path, help=instance_help + ", or Sailor's benchmark folder (hetero)")
    registry.problem("hetero").options_module().register_options(i, "info")  # one setting of the folder
    for name, (module_name, text) in COMMANDS.items():
        if only is None or only == name:
            importlib.import_module(module_name).register(sub)
        else:
            sub.add_parser(name, help=text)
    return parser


def _command_in(argv: list[str]) -> str:
    """The command of :data:`COMMANDS` that ``argv`` runs (its first word that is no option), or ``""``."""
    word = next((a for a in argv if not a.startswith("-")), "")
    return word if word in COMMANDS else ""


def _stop_cbc_children() -> None:
    """Stop CBC's processes, if the CBC back-end was loaded (without it there are none; the parser never loads it)."""
    cbc = sys.modules.get("milp_partition.backends.cbc")
    if cbc is not None:
        cbc.stop_cbc_children()


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
            argv = sys.argv[1:] if argv is None else argv
            args = build_parser(only=_command_in(argv)).parse_args(argv)
            # an output that is one of the inputs would replace it (cli/output.py: imported once a command runs)
            importlib.import_module(OUTPUT).refuse_outputs_among_inputs(args)
            if args.command in ("solve", "evaluate"):
                return importlib.import_module(PROBLEM_COMMANDS).problem_command(args)  # type: ignore[no-any-return]
            if args.command == "info":
                return importlib.import_module(PROBLEM_COMMANDS).cmd_info(args)  # type: ignore[no-any-return]
            return args.handler(args)  # type: ignore[no-any-return]
        except MilpPartitionError as exc:
            print(f"milp-partition: error: {exc}", file=sys.stderr)
            return EXIT_INPUT
        except KeyboardInterrupt:
            _stop_cbc_children()
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
