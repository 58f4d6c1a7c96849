"""A solver-neutral integer program: variables, linear constraints, objective, hint.

Formulations build a :class:`Model`; back-ends translate it.  The model knows
variables and constraints only, never layers or devices.  Coefficients are real
numbers in the formulation's own units; the CP-SAT back-end scales them to
integers in one place (:mod:`milp_partition.backends.scaling`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from milp_partition.errors import ModelError


class VarKind(enum.Enum):
    """Domain of a variable."""

    BINARY = "binary"
    INTEGER = "integer"
    #: A real quantity (a time, a memory peak): CP-SAT sees it on a scaled integer grid.
    CONTINUOUS = "continuous"


class Sense(enum.Enum):
    LE = "<="
    GE = ">="
    EQ = "=="


@dataclass(frozen=True)
class Var:
    """A variable handle: its position in :attr:`Model.variables` plus its domain."""

    index: int
    name: str
    kind: VarKind
    lb: float
    ub: float


@dataclass(frozen=True)
class Constraint:
    """``sum(coef * var) sense rhs``; ``terms`` maps variable index to coefficient."""

    terms: dict[int, float]
    sense: Sense
    rhs: float
    name: str


@dataclass
class Model:
    """A mixed-integer linear program under construction (minimization).

    Attributes
    ----------
    variables, constraints
        In creation order.
    objective
        Map from variable index to coefficient; the model minimizes ``sum(coef * var)``.
    hint
        A full or partial warm start: variable index -> value.
    """

    name: str = "model"
    variables: list[Var] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    objective: dict[int, float] = field(default_factory=dict)
    hint: dict[int, float] = field(default_factory=dict)

    def add_var(self, name: str, kind: VarKind = VarKind.BINARY, lb: float = 0.0, ub: float = 1.0) -> Var:
        """Add a variable; binaries are forced to [0, 1]."""
        if kind is VarKind.BINARY:
            lb, ub = 0.0, 1.0
        if not (math.isfinite(lb) and math.isfinite(ub)) or lb > ub:
            raise ModelError(f"variable {name!r} needs finite bounds with lb <= ub, got [{lb}, {ub}]")
        var = Var(len(self.variables), name, kind, float(lb), float(ub))
        self.variables.append(var)
        return var

    def add_constraint(self, terms: Iterable[tuple[Var, float]], sense: Sense, rhs: float, name: str = "") -> None:
        """Add ``sum(coef * var) sense rhs``; repeated variables are summed, zero terms dropped."""
        merged: dict[int, float] = {}
        for var, coef in terms:
            merged[var.index] = merged.get(var.index, 0.0) + float(coef)
        merged = {k: v for k, v in merged.items() if v != 0.0}
        if not math.isfinite(rhs) or any(not math.isfinite(c) for c in merged.values()):
            raise ModelError(f"constraint {name!r} has a non-finite coefficient or right-hand side")
        self.constraints.append(Constraint(merged, sense, float(rhs), name))

    def minimize(self, terms: Iterable[tuple[Var, float]]) -> None:
        """Set the objective ``min sum(coef * var)``."""
        self.objective = {}
        for var, coef in terms:
            self.objective[var.index] = self.objective.get(var.index, 0.0) + float(coef)

    def set_hint(self, var: Var, value: float) -> None:
        self.hint[var.index] = float(value)

    def objective_value(self, values: list[float]) -> float:
        """The objective at ``values`` (one per variable)."""
        return sum(c * values[i] for i, c in self.objective.items())
