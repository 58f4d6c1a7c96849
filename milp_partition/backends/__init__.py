"""Solver back-ends behind one interface (:class:`Backend`)."""

from __future__ import annotations

from milp_partition.backends.base import Backend, SolveOutput, SolveParams, SolveStatus, relative_gap
from milp_partition.backends.cbc import CbcBackend
from milp_partition.backends.cpsat import CpSatBackend
from milp_partition.backends.model import Model, Sense, Var, VarKind
from milp_partition.errors import InputError

BACKEND_NAMES = ("cpsat", "cbc")


def get_backend(name: str) -> Backend:
    """The back-end called ``name`` (``"cpsat"`` or ``"cbc"``)."""
    if name == "cpsat":
        return CpSatBackend()
    if name == "cbc":
        return CbcBackend()
    raise InputError(f"unknown solver {name!r}; choose one of {', '.join(BACKEND_NAMES)}", where="--solver")


__all__ = [
    "Backend",
    "Model",
    "Sense",
    "SolveOutput",
    "SolveParams",
    "SolveStatus",
    "Var",
    "VarKind",
    "get_backend",
    "relative_gap",
]
