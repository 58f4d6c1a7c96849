"""A solver-neutral integer program: variables, linear constraints, objective, hint.

Formulations build a :class:`Model`; back-ends translate it.  The model knows
variables and constraints only, never layers or devices.  Coefficients are real
numbers in the formulation's own units; the CP-SAT back-end scales them to
integers in one place (:mod:`milp_partition.backends.scaling`), the CBC back-end
by powers of two (:mod:`milp_partition.backends.cbc_scaling`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from milp_partition.budget import Budget
from milp_partition.errors import ModelError

#: Rows between two readings of the clock: constraints added under :func:`build_budget`, and rows translated for a
#: back-end (:func:`milp_partition.backends.base.ticking`).
TICK_ROWS = 4096
#: The budget of the model build in progress, set by :func:`build_budget` (``None``: no limit).
_BUILD_BUDGET: ContextVar[Budget | None] = ContextVar("build_budget", default=None)


@contextmanager
def build_budget(budget: Budget | None) -> Iterator[None]:
    """Within the block, :meth:`Model.add_constraint` reads ``budget`` every :data:`TICK_ROWS` constraints and
    raises :class:`TimeoutError` once it is spent: the chain builds a formulation under it, so that a model of
    hundreds of thousands of rows (4 s in Python on a 4,000-task placement with link contention) is not built past
    the time limit only to be dropped by the translation, which reads the same kind of budget."""
    token = _BUILD_BUDGET.set(budget)
    try:
        yield
    finally:
        _BUILD_BUDGET.reset(token)


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


@dataclass(frozen=True)
class Interval:
    """A time interval ``[start, start + size)`` (or ``[start, end)`` when ``end`` is a variable).

    ``start`` and ``end`` are indices of continuous variables; ``size`` is a real
    duration in the model's time unit; the interval exists only when the binary
    ``presence`` variable is 1 (always when ``None``).  Scheduling constraints
    (:class:`NoOverlap`, :class:`Cumulative`) refer to intervals by position in
    :attr:`Model.intervals`.  Only back-ends with native scheduling support (CP-SAT)
    accept them; a MILP formulation linearizes them itself.
    """

    start: int
    size: float
    end: int | None
    presence: int | None
    name: str


@dataclass(frozen=True)
class NoOverlap:
    """The present intervals listed do not overlap (zero-size ones are ignored)."""

    intervals: tuple[int, ...]
    name: str


@dataclass(frozen=True)
class Cumulative:
    """At every instant, the demands of the present intervals covering it sum to at most ``capacity``."""

    intervals: tuple[int, ...]
    demands: tuple[float, ...]
    capacity: float
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
    intervals: list[Interval] = field(default_factory=list)
    no_overlaps: list[NoOverlap] = field(default_factory=list)
    cumulatives: list[Cumulative] = field(default_factory=list)

    @property
    def has_scheduling(self) -> bool:
        """Whether the model uses intervals (which only CP-SAT accepts)."""
        return bool(self.intervals)

    def add_interval(
        self, start: Var, size: float = 0.0, *, end: Var | None = None, presence: Var | None = None, name: str = ""
    ) -> int:
        """Add an interval (see :class:`Interval`); returns its position."""
        if start.kind is not VarKind.CONTINUOUS or (end is not None and end.kind is not VarKind.CONTINUOUS):
            raise ModelError(f"interval {name!r}: start and end must be continuous (time) variables")
        if presence is not None and presence.kind is not VarKind.BINARY:
            raise ModelError(f"interval {name!r}: presence must be a binary variable")
        if not (math.isfinite(size) and size >= 0):
            raise ModelError(f"interval {name!r}: size must be finite and >= 0, got {size}")
        self.intervals.append(
            Interval(
                start.index,
                float(size),
                end.index if end is not None else None,
                presence.index if presence is not None else None,
                name,
            )
        )
        return len(self.intervals) - 1

    def add_no_overlap(self, intervals: Iterable[int], name: str = "") -> None:
        self.no_overlaps.append(NoOverlap(tuple(intervals), name))

    def add_cumulative(self, intervals: Iterable[int], demands: Iterable[float], capacity: float, name: str = "") -> None:
        ivs, dem = tuple(intervals), tuple(float(x) for x in demands)
        if len(ivs) != len(dem) or not math.isfinite(capacity) or any(not math.isfinite(x) or x < 0 for x in dem):
            raise ModelError(f"cumulative {name!r}: one finite, non-negative demand per interval and a finite capacity")
        self.cumulatives.append(Cumulative(ivs, dem, float(capacity), name))

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
        if len(self.constraints) % TICK_ROWS == 0:
            budget = _BUILD_BUDGET.get()
            if budget is not None and budget.expired():
                raise TimeoutError("the time limit ran out while the model was built")

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
