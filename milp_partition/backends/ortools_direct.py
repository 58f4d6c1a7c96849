"""OR-Tools models that bound passes build themselves: GLOP linear programs with duals and small CP-SAT models.

The joint bounds (:mod:`milp_partition.joint.column_bound`, ``segment_bound``, ``stage_bound``) and the placement
bounds (:mod:`milp_partition.placement.bounds`) grow LPs column by column and read their duals, which the
solver-neutral :class:`~milp_partition.backends.model.Model` does not carry; they build them on the solver objects
this module hands out (``pywraplp`` for GLOP, ``cp_model`` for CP-SAT) and read every status through
:func:`lp_status` / :func:`cp_status`.  So the OR-Tools imports and the translation of its raw status codes stay in
``backends/`` (``tests/test_layering.py`` checks that no other module imports OR-Tools or PuLP).  The imports are
here, inside the functions: OR-Tools takes a quarter second to import and small cases never need it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from milp_partition.backends.base import SolveStatus
from milp_partition.backends.cpsat import translate_status
from milp_partition.errors import SolverUnavailableError


def _pywraplp() -> ModuleType:
    try:
        from ortools.linear_solver import pywraplp
    except ImportError as exc:  # pragma: no cover - ortools is a core dependency
        raise SolverUnavailableError(f"OR-Tools is not installed: {exc}; pip install ortools") from exc
    return pywraplp


def glop_solver() -> Any:
    """A new, empty GLOP linear program (an OR-Tools ``pywraplp.Solver``): build on it, ``Solve()``, read duals."""
    solver = _pywraplp().Solver.CreateSolver("GLOP")
    if solver is None:  # pragma: no cover - GLOP ships with OR-Tools
        raise SolverUnavailableError("OR-Tools' GLOP is not available")
    return solver


def lp_status(code: int) -> SolveStatus:
    """The :class:`SolveStatus` of a ``pywraplp`` ``Solve()`` return code.

    OPTIMAL, FEASIBLE and INFEASIBLE are themselves; NOT_SOLVED (a time limit before an answer) is UNKNOWN;
    UNBOUNDED (no minimization here is), ABNORMAL and MODEL_INVALID are ERROR.
    """
    s = _pywraplp().Solver
    if code == s.OPTIMAL:
        return SolveStatus.OPTIMAL
    if code == s.FEASIBLE:
        return SolveStatus.FEASIBLE
    if code == s.INFEASIBLE:
        return SolveStatus.INFEASIBLE
    if code == s.NOT_SOLVED:
        return SolveStatus.UNKNOWN
    return SolveStatus.ERROR


def cp_sat() -> ModuleType:
    """OR-Tools' ``cp_model`` module (``CpModel``, ``CpSolver``), for a small model a bound pass builds itself."""
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:  # pragma: no cover - ortools is a core dependency
        raise SolverUnavailableError(f"OR-Tools is not installed: {exc}; pip install ortools") from exc
    return cp_model


def cp_status(code: int) -> SolveStatus:
    """The :class:`SolveStatus` of a ``CpSolver.Solve`` return code (the CP-SAT back-end's own translation)."""
    cp_model = cp_sat()
    return translate_status(code, code in (cp_model.OPTIMAL, cp_model.FEASIBLE))
