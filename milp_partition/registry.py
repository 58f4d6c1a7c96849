"""The one table of problems: a descriptor per problem, naming its modules by path (imported only when used).

A new problem is one folder (its ``problem.py``, ``solve.py``, ``gap.py``, a reader
in ``io/``, a verifier in ``verifiers/``, a CLI module in ``cli/``, a plot module in
``plots/``) and one line in :data:`PROBLEMS`.  The command line (``solve``,
``evaluate``, ``info``), the gap sweep and ``plot`` find problems here and nowhere else.

Layering: this module sits on top, with ``cli/``, ``plots/`` and ``sweep/`` (it names
their modules and every problem's solve module); nothing below them imports it.
Importing it is cheap: it imports no problem module until one is asked for.

The modules a descriptor names provide:

* ``options`` (else ``cli``): ``OPTIONS`` (the problem options it reads, a frozenset of
  ``argparse`` dests) and ``register_options(parser, command)``; a module that imports no
  problem module, so that the parser is built without them (``tests/test_startup.py``);
* ``cli``: ``claims(data) -> bool`` (whether a
  parsed JSON instance is its format; :data:`PROBLEMS`' order decides, the last entry
  takes the rest), optionally ``claims_path(folder) -> bool`` (an instance that is a
  folder), ``problem_from_args(args)`` (the reader under the command line's
  settings) and ``cmd_solve``, ``cmd_evaluate``, ``cmd_info`` (``args -> exit code``);
* ``solve``: ``"module:function"``, ``function(problem, settings) -> Result`` through
  :func:`milp_partition.chain.run_chain`; ``settings`` derives from
  :class:`~milp_partition.settings.CommonSettings`, whose fields the entry's ``common`` names are
  read by the search (:meth:`ProblemEntry.common_settings` builds them from the flags and refuses
  the others' flags; the CLI module's ``cmd_solve`` finds them in ``args.common``);
* ``verifier``: ``"module:function"``, the independent verifier;
* ``gap``: a module satisfying :class:`milp_partition.sweep.registry.GapProblem`;
* ``plot``: a module with ``figure(result, instance_path, options)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from milp_partition.errors import InputError
from milp_partition.settings import CommonSettings

if TYPE_CHECKING:
    import argparse

#: Each field of :class:`~milp_partition.settings.CommonSettings` -> the ``argparse`` dest of its ``solve`` flag
#: (``cli/options.py:add_solver_options``).
COMMON_FLAGS: dict[str, str] = {
    "solver": "solver",
    "time_limit_s": "time_limit",
    "threads": "threads",
    "seed": "seed",
    "warm_start": "no_warm_start",
    "progress_interval_s": "progress",
}
#: Every field of :class:`~milp_partition.settings.CommonSettings` a search can read.
ALL_COMMON = frozenset(COMMON_FLAGS)
#: The command line's defaults of the common settings (the parser's are ``None``, so that "given" can be told).
DEFAULT_TIME_LIMIT_S = 60.0
DEFAULT_THREADS = 2
DEFAULT_SEED = 0
DEFAULT_PROGRESS_S = 5.0


def _attribute(path: str) -> Any:
    """The object at ``"module:name"``."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class ProblemEntry:
    """One problem: its name and the paths of its modules (see the module docstring for what each provides)."""

    name: str
    cli: str
    solve: str
    verifier: str
    gap: str | None = None
    plot: str | None = None
    #: The fields of :class:`~milp_partition.settings.CommonSettings` its search reads (their flags are refused for it
    #: otherwise), and its back-end when ``--solver`` is not given.
    common: frozenset[str] = ALL_COMMON
    solver_default: str = "cpsat"
    #: The module with its ``OPTIONS`` and ``register_options`` (``None``: the CLI module): a light one, so that the
    #: parser is built without importing the problem's modules.
    options: str | None = None

    def options_module(self) -> ModuleType:
        """``OPTIONS`` and ``register_options(parser, command)`` (the parser is built from these alone)."""
        return importlib.import_module(self.options or self.cli)

    def common_settings(self, args: argparse.Namespace) -> CommonSettings:
        """The common settings from the command line's flags (``solve``); a flag of a field its search does not read
        is refused (:class:`InputError` naming the problem)."""
        return _common_from_flags(args, self.name, self.common, CommonSettings(solver=self.solver_default))

    def cli_module(self) -> ModuleType:
        """The CLI module (options, reader, claims, commands)."""
        return importlib.import_module(self.cli)

    def claims(self, data: object) -> bool:
        """Whether a parsed JSON instance is this problem's format."""
        return bool(self.cli_module().claims(data))

    def claims_path(self, path: Path) -> bool:
        """Whether a folder is this problem's instance (the CLI module's optional ``claims_path``)."""
        check = getattr(self.cli_module(), "claims_path", None)
        return check is not None and bool(check(path))

    @property
    def reader(self) -> Callable[..., Any]:
        """``problem_from_args(args)``: the instance read under the command line's settings."""
        return self.cli_module().problem_from_args  # type: ignore[no-any-return]

    def solve_function(self) -> Callable[..., Any]:
        """``solve(problem, settings) -> Result``."""
        return _attribute(self.solve)  # type: ignore[no-any-return]

    def verifier_function(self) -> Callable[..., Any]:
        """The independent verifier."""
        return _attribute(self.verifier)  # type: ignore[no-any-return]

    def gap_module(self) -> ModuleType:
        """The gap-sweep module (:class:`InputError` when the problem has none)."""
        if self.gap is None:
            raise InputError(f"the {self.name} problem has no gap sweep", where="gap --problem")
        return importlib.import_module(self.gap)

    def plot_module(self) -> ModuleType:
        """The plot module (:class:`InputError` when the problem has none)."""
        if self.plot is None:
            raise InputError(f"the {self.name} problem has no plot", where="plot")
        return importlib.import_module(self.plot)


#: Every problem, in detection order (the last one takes every instance file the others do not claim).
PROBLEMS: dict[str, ProblemEntry] = {
    e.name: e
    for e in (
        ProblemEntry(
            "placement",
            cli="milp_partition.cli.placement",
            options="milp_partition.cli.placement_options",
            solve="milp_partition.placement.solve:solve_placement",
            verifier="milp_partition.verifiers.placement:verify_placement",
            gap="milp_partition.placement.gap",
            plot="milp_partition.plots.placement",
        ),
        ProblemEntry(
            "strategy",
            cli="milp_partition.cli.strategy",
            options="milp_partition.cli.strategy_options",
            solve="milp_partition.strategy.solve:solve_strategy",
            verifier="milp_partition.verifiers.strategy:verify_strategy",
            gap="milp_partition.strategy.gap",
            plot="milp_partition.plots.strategy",
        ),
        ProblemEntry(
            "joint",
            cli="milp_partition.cli.joint",
            options="milp_partition.cli.joint_options",
            solve="milp_partition.joint.solve:solve_joint",
            verifier="milp_partition.verifiers.joint:verify_joint",
            gap="milp_partition.joint.gap",
            plot="milp_partition.plots.joint",
        ),
        ProblemEntry(
            "galvatron",
            cli="milp_partition.cli.galvatron",
            options="milp_partition.cli.galvatron_options",
            solve="milp_partition.galvatron.solve:solve_galvatron",
            verifier="milp_partition.verifiers.galvatron:verify_galvatron",
            gap="milp_partition.galvatron.gap",
            plot="milp_partition.plots.galvatron",
            # its exact search runs on one thread and no back-end runs: no --solver, --threads or --seed
            common=frozenset({"time_limit_s", "warm_start", "progress_interval_s"}),
            solver_default="none",
        ),
        ProblemEntry(
            "hetero",
            cli="milp_partition.cli.hetero",
            options="milp_partition.cli.hetero_options",
            solve="milp_partition.hetero.solve:solve_hetero",
            verifier="milp_partition.verifiers.hetero:verify_hetero",
            gap="milp_partition.hetero.gap",
            plot="milp_partition.plots.hetero",
            # its exact search runs on one thread and no back-end runs: no --solver, --threads, --seed or --no-warm-start
            common=frozenset({"time_limit_s", "progress_interval_s"}),
            solver_default="none",
        ),
        ProblemEntry(
            "pipeline",
            cli="milp_partition.cli.pipeline",
            options="milp_partition.cli.pipeline_options",
            solve="milp_partition.pipeline.solve:solve_pipeline",
            verifier="milp_partition.verifiers.pipeline:verify_pipeline",
            gap="milp_partition.pipeline.gap",
            plot="milp_partition.plots.pipeline",
        ),
    )
}


def _common_from_flags(
    args: argparse.Namespace, problem: str, used: frozenset[str], defaults: CommonSettings | None = None
) -> CommonSettings:
    """The common settings from the flags, for ``problem``, whose search reads the fields ``used``.

    A flag of a field the problem does not read is refused (:class:`InputError`, exit 2, naming the problem):
    accepting it would let it be silently ignored.  Flags not given take the command line's defaults
    (:data:`DEFAULT_TIME_LIMIT_S`, :data:`DEFAULT_THREADS`, :data:`DEFAULT_SEED`, :data:`DEFAULT_PROGRESS_S`) and,
    for ``--solver``, ``defaults.solver`` (the problem's; ``"cpsat"`` when ``None``); ``--quiet`` or ``--progress 0``
    silence progress lines.
    """
    for name, dest in COMMON_FLAGS.items():
        value = getattr(args, dest, None)
        if name not in used and value is not None and value is not False:
            raise InputError(
                f"does not apply to the {problem} problem (its search does not read it); leave it out",
                where="--" + dest.replace("_", "-"),
            )
    base = defaults if defaults is not None else CommonSettings()
    progress = args.progress if getattr(args, "progress", None) is not None else DEFAULT_PROGRESS_S
    return CommonSettings(
        solver=args.solver if args.solver is not None else base.solver,
        time_limit_s=args.time_limit if args.time_limit is not None else DEFAULT_TIME_LIMIT_S,
        threads=args.threads if args.threads is not None else DEFAULT_THREADS,
        seed=args.seed if args.seed is not None else DEFAULT_SEED,
        warm_start=not args.no_warm_start,
        progress_interval_s=None if (getattr(args, "quiet", False) or progress <= 0) else progress,
    )


def problem(name: str, where: str = "--problem") -> ProblemEntry:
    """The descriptor of ``name``; :class:`InputError` for an unknown one."""
    try:
        return PROBLEMS[name]
    except KeyError:
        raise InputError(f"unknown problem {name!r}; known: {', '.join(PROBLEMS)}", where=where) from None


def names(feature: str | None = None) -> list[str]:
    """Problem names in detection order; with ``feature`` (``"gap"`` or ``"plot"``), those that have that module."""
    return [name for name, e in PROBLEMS.items() if feature is None or getattr(e, feature) is not None]
