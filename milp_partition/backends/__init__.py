"""Solver back-ends behind one interface (:class:`Backend`) and one table (:mod:`milp_partition.backends.registry`).

Every call into OR-Tools, PuLP or highspy is made in this package (``tests/test_layering.py`` checks it); the
back-ends' raw statuses become :class:`SolveStatus` here and nowhere else.  Importing it imports no solver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from milp_partition.backends.registry import (
    BACKENDS,
    Capability,
    entry,
    has,
    installed,
    model_solvers,
    solver_choices,
    with_capability,
)
from milp_partition.errors import InputError, SolverUnavailableError

if TYPE_CHECKING:
    from milp_partition.backends.base import Backend, SolveOutput, SolveParams, SolveStatus, relative_gap
    from milp_partition.backends.model import Model, Sense, Var, VarKind
    from milp_partition.backends.options import CbcOptions, CpSatOptions

#: Names this package hands out from its modules on first use (PEP 562), so that importing the registry (the parser
#: does, for ``--solver``'s choices) imports neither numpy nor the interface: ``tests/test_startup.py``.
_LAZY = {
    "Backend": "base",
    "SolveOutput": "base",
    "SolveParams": "base",
    "SolveStatus": "base",
    "relative_gap": "base",
    "Model": "model",
    "Sense": "model",
    "Var": "model",
    "VarKind": "model",
    "CpSatOptions": "options",
    "CbcOptions": "options",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"milp_partition.backends.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'milp_partition.backends' has no attribute {name!r}")


def get_backend(name: str) -> Backend:
    """A new instance of back-end ``name`` (its module imported now); a clear error for an unknown name, an LP-only
    engine, or one whose package is not installed (naming the pip extra)."""
    e = entry(name)
    if e.cls is None:
        raise InputError(f"{name!r} solves linear programs for the bound passes only, not a model", where="--solver")
    if not installed(name):
        how = f"pip install 'milp-partition[{e.extra}]'" if e.extra else f"pip install {e.package}"
        raise SolverUnavailableError(f"solver {name!r} needs the Python package {e.package!r}: {how}")
    backend: Backend = getattr(importlib.import_module(e.module), e.cls)()
    return backend


__all__ = [
    "BACKENDS",
    "Backend",
    "Capability",
    "CbcOptions",
    "CpSatOptions",
    "Model",
    "Sense",
    "SolveOutput",
    "SolveParams",
    "SolveStatus",
    "Var",
    "VarKind",
    "get_backend",
    "has",
    "model_solvers",
    "relative_gap",
    "solver_choices",
    "with_capability",
]
