"""Every solver back-end in one table, with what it can do; the ``--solver`` choices and every lookup come from it.

A back-end's entry names the module and class that solve a :class:`~milp_partition.backends.model.Model`, the Python
package it needs and the pip extra that installs it, and its capabilities:

- ``MILP``: solves a mixed-integer linear :class:`Model` (``Backend.solve``); these are the ``--solver`` choices.
- ``LP``: solves linear programs (the bound passes' LPs with duals: :mod:`milp_partition.backends.ortools_direct`).
- ``CP``: takes intervals, no-overlap and cumulative constraints (a formulation may then state its scheduling
  natively instead of its disjunctive linear variant) and needs no continuous variables to be exact (it scales them).
- ``CANCEL``: a solve can be stopped from outside (Ctrl-C, SIGTERM) and still returns its incumbent.

Nothing here imports a solver, nor any module of the project but ``errors``: looking up names and capabilities is
free (the CLI builds its parser from them, settings check their ``solver`` against them), and the table is plain data
(layer 2 of ``tests/test_layering.py``).  :func:`milp_partition.backends.get_backend` imports a back-end's module on
first use.
"""

from __future__ import annotations

import enum
import importlib.util
from dataclasses import dataclass

from milp_partition.errors import InputError


class Capability(enum.Enum):
    """What a back-end can do (module docstring)."""

    MILP = "milp"
    LP = "lp"
    CP = "cp"
    CANCEL = "cancel"


@dataclass(frozen=True)
class BackendEntry:
    """One back-end.

    Attributes
    ----------
    name
        Its ``--solver`` name.
    summary
        One line for ``--help`` and the docs.
    capabilities
        See :class:`Capability`.
    module, cls
        The module and class whose ``solve(model, params)`` solves a :class:`Model` (``cls`` ``None``: an LP engine
        used by the bound passes only, not a ``--solver`` choice).
    package
        The import name of the Python package it needs.
    extra
        The pip extra of milp-partition that installs that package (``None``: a core dependency).
    options
        The name of its own options class in :mod:`milp_partition.backends.options` (``None``: it has none; any
        options object given to it is refused).  Solver specifics live there, not in ``SolveParams``.
    """

    name: str
    summary: str
    capabilities: frozenset[Capability]
    module: str
    cls: str | None
    package: str
    extra: str | None = None
    options: str | None = None

    def can(self, capability: Capability) -> bool:
        return capability in self.capabilities


_M, _L, _C, _X = Capability.MILP, Capability.LP, Capability.CP, Capability.CANCEL

#: Every back-end, the default first.
BACKENDS: tuple[BackendEntry, ...] = (
    BackendEntry(
        "cpsat",
        "OR-Tools CP-SAT (integer grid, exact bound after scaling; scheduling constraints natively)",
        frozenset({_M, _C, _X}),
        "milp_partition.backends.cpsat",
        "CpSatBackend",
        "ortools",
        options="CpSatOptions",
    ),
    BackendEntry(
        "cbc",
        "COIN-OR CBC through PuLP (floating point, power-of-two scaling, proof checked against its log)",
        frozenset({_M, _X}),
        "milp_partition.backends.cbc",
        "CbcBackend",
        "pulp",
        options="CbcOptions",
    ),
    BackendEntry(
        "highs",
        "HiGHS through highspy (floating point, the same scaling as CBC, bound lowered by its tolerances)",
        frozenset({_M, _L, _X}),
        "milp_partition.backends.highs",
        "HighsBackend",
        "highspy",
        extra="highs",
    ),
    BackendEntry(
        "glop",
        "OR-Tools GLOP (LP only, with duals: the joint and placement bound passes)",
        frozenset({_L}),
        "milp_partition.backends.ortools_direct",
        None,
        "ortools",
    ),
)

#: ``--solver none``: no formulation is solved (heuristics, DPs and bounds only).
NO_SOLVER = "none"


def entry(name: str) -> BackendEntry:
    """The entry of back-end ``name``; an :class:`InputError` naming the choices when there is none."""
    for e in BACKENDS:
        if e.name == name:
            return e
    raise InputError(f"unknown solver {name!r}; choose one of {', '.join(model_solvers())}", where="--solver")


def with_capability(capability: Capability) -> tuple[str, ...]:
    """Names of the back-ends that have ``capability``, in table order."""
    return tuple(e.name for e in BACKENDS if e.can(capability))


def model_solvers() -> tuple[str, ...]:
    """The back-ends that solve a :class:`Model` (the ``--solver`` choices, :data:`NO_SOLVER` aside)."""
    return tuple(e.name for e in BACKENDS if e.cls is not None and e.can(Capability.MILP))


def solver_choices() -> tuple[str, ...]:
    """Every value ``--solver`` accepts: :func:`model_solvers` and :data:`NO_SOLVER`."""
    return (*model_solvers(), NO_SOLVER)


def has(name: str, capability: Capability) -> bool:
    """Whether back-end ``name`` has ``capability`` (``False`` for :data:`NO_SOLVER`)."""
    return name != NO_SOLVER and entry(name).can(capability)


def installed(name: str) -> bool:
    """Whether the package back-end ``name`` needs is installed (found, not imported)."""
    return importlib.util.find_spec(entry(name).package) is not None
