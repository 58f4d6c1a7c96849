"""Integer scaling of a :class:`Model` for CP-SAT: the one documented place.

(CBC, which works in floating point, gets exact power-of-two row and objective scaling
and explicit tolerances instead: :mod:`milp_partition.backends.cbc_scaling`.)

CP-SAT accepts integer coefficients only.  Times and other real quantities are
put on one integer grid with a global scale ``s`` (a power of ten):

- A constraint whose coefficients and right-hand side are all integers and that
  has no continuous variable (a memory row in bytes, an assignment row) is kept
  as it is.
- Every other row is multiplied by ``s``: a coefficient ``a`` of an integer
  variable becomes ``round(a * s)``, the right-hand side ``round(rhs * s)``; a
  continuous variable ``y`` becomes the integer ``Y = y * s`` (so its coefficient
  must be +1 or -1 in every row, and is kept: with a larger one, ``d y >= rhs`` has its real
  optimum off the grid and the integer model's optimum would be a false bound).
- A row with non-integral coefficients but no continuous variable (a bound on time
  per sample, say) gets its own power of ten, chosen by the same rule, so a memory
  row in bytes and a time row in milliseconds do not compete for one grid.
- Data that are already integers (costs in FLOPs, bytes) are kept at ``s = 1`` as long
  as every row fits 64-bit integers.
- Otherwise ``s`` is the smallest power of ten at which every scaled coefficient is integral
  (to a relative 1e-9) -- then the scaled model is exact -- provided no scaled row
  exceeds ``max_magnitude`` in absolute value over the variables' bounds.  Otherwise
  ``s`` is the largest power of ten that keeps every row within ``max_magnitude``
  (a negative power for very large data), and rounding is recorded: each row's worst-case error in real units is
  ``sum |a*s - round(a*s)| * max|x| / s`` (plus the right-hand side's).

The back-end lowers the bound it reports by the objective's rounding error plus the
largest row error, so a bound stays a proven bound in real units for the min-max
programs of this project (the objective is a continuous variable bounded by rows).

Scheduling models (intervals, no-overlap, cumulative; see :class:`~milp_partition.backends.model.Interval`):

- Interval sizes are times on the shared grid: the exactness test above includes them.
  When no exact scale fits, a size is rounded *up*, so every schedule of the
  integer model is feasible in real units (the caller re-simulates it in real units).
  Errors then add up along a chain of tasks, so the reported bound is lowered by
  the *sum* of every shared row's error and every interval's rounding (not the
  largest one): a real schedule maps to an integer one longer by at most that sum.
- Cumulative demands and capacities get their own power of ten (integers stay as they
  are).  If none is exact, demands are rounded up and the capacity down (schedules stay
  feasible in real units) and ``bound_valid`` is False: the integer model is then
  tighter than the real one and its bound proves nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from milp_partition.backends.base import ticking
from milp_partition.backends.model import Model, VarKind
from milp_partition.budget import Budget
from milp_partition.errors import ModelError

_INTEGRAL_REL_TOL = 1e-9  # a scaled value within this relative distance of an integer is integral
_MAX_DECIMAL_EXPONENT = 15
_HARD_MAGNITUDE = 2.0**62  # CP-SAT's integer arithmetic must not overflow int64


@dataclass(frozen=True)
class ScaledRow:
    terms: dict[int, int]
    sense: str
    rhs: int
    name: str


@dataclass(frozen=True)
class ScaledModel:
    """The integer image of a :class:`Model`.

    Attributes
    ----------
    scale
        Real value of a continuous variable = integer value / scale.
    bounds
        Integer bounds per variable.
    rows
        Integer rows.
    objective
        Integer objective; real objective = integer objective / scale.
    exact
        Whether no coefficient was rounded.
    max_error
        Worst-case error of the reported objective bound in real units (0 when exact).
    """

    scale: float
    bounds: list[tuple[int, int]]
    rows: list[ScaledRow]
    objective: dict[int, int]
    exact: bool
    max_error: float
    intervals: list[ScaledInterval] = field(default_factory=list)
    no_overlaps: list[tuple[int, ...]] = field(default_factory=list)
    cumulatives: list[tuple[tuple[int, ...], tuple[int, ...], int, str]] = field(default_factory=list)
    bound_valid: bool = True


@dataclass(frozen=True)
class ScaledInterval:
    """An interval on the integer grid: ``start``/``end``/``presence`` are variable indices."""

    start: int
    size: int
    end: int | None
    presence: int | None
    name: str


def _is_integral(x: float) -> bool:
    return abs(x - round(x)) <= _INTEGRAL_REL_TOL * max(1.0, abs(x))


def _choose_exponent(largest: float, max_magnitude: float, integral_at: object) -> int:
    """The power of ten for a group of rows whose largest magnitude at scale 1 is ``largest``.

    Integer data are taken as they are (exponent 0) while they fit CP-SAT's 64-bit
    arithmetic; otherwise the smallest exponent at which ``integral_at(10**j)`` holds
    and the rows stay within ``max_magnitude``; otherwise the largest exponent that
    keeps them within ``max_magnitude`` (negative for very large data), with rounding.
    """
    check = integral_at  # a callable: scale -> bool
    if check(1.0) and largest <= _HARD_MAGNITUDE:  # type: ignore[operator]
        return 0
    if largest == 0:
        return 0
    j_max = min(math.floor(math.log10(max_magnitude / largest)), _MAX_DECIMAL_EXPONENT)
    exact = next((j for j in range(1, j_max + 1) if check(10.0**j)), None)  # type: ignore[operator]
    return exact if exact is not None else j_max


def scale_model(model: Model, max_magnitude: float, budget: Budget | None = None) -> ScaledModel:
    """Scale ``model`` to integers (see the module docstring).

    Reads ``budget`` every few thousand rows and raises :class:`TimeoutError` once it is spent.
    """
    maxabs = [max(abs(v.lb), abs(v.ub)) for v in model.variables]
    continuous = [v.kind is VarKind.CONTINUOUS for v in model.variables]

    def has_continuous(terms: dict[int, float]) -> bool:
        return any(continuous[i] for i in terms)

    def integral_row(terms: dict[int, float], rhs: float, s: float) -> bool:
        return _is_integral(rhs * s) and all(continuous[i] or _is_integral(a * s) for i, a in terms.items())

    def magnitude(terms: dict[int, float], rhs: float) -> float:
        return sum(abs(a) * maxabs[i] for i, a in terms.items()) + abs(rhs)

    # A continuous variable lives on the grid 1/s.  With a coefficient of +-1 a real solution's value
    # can be rounded onto the grid within the row errors accounted for below; with 2 or more it can
    # not (d T >= 7 has the real optimum T = 7/d, off the grid for d = 4 at s = 10, and the integer
    # model's optimum then exceeds the real one: a false bound), so such models are refused.
    _check_continuous_coefficients(model, continuous)

    # The shared grid: rows with a continuous variable, and the objective.
    shared = [c for c in ticking(model.constraints, budget) if has_continuous(c.terms)]
    largest = max([magnitude(c.terms, c.rhs) for c in shared] + [magnitude(model.objective, 0.0)])
    exponent = _choose_exponent(
        largest,
        max_magnitude,
        lambda s: (
            all(integral_row(c.terms, c.rhs, s) for c in ticking(shared, budget))
            and integral_row(model.objective, 0.0, s)
            and all(_is_integral(iv.size * s) for iv in model.intervals)
        ),
    )
    s = 10.0**exponent

    bounds = _integer_bounds(model, continuous, s)

    def scale_terms(terms: dict[int, float], rhs: float, row_scale: float) -> tuple[dict[int, int], int, float]:
        out: dict[int, int] = {}
        error = 0.0
        for i, a in terms.items():
            if continuous[i]:
                out[i] = round(a)
            else:
                out[i] = round(a * row_scale)
                error += abs(a * row_scale - out[i]) * maxabs[i]
        rhs_int = round(rhs * row_scale)
        error += abs(rhs * row_scale - rhs_int)
        return {i: t for i, t in out.items() if t != 0}, rhs_int, error / row_scale

    rows: list[ScaledRow] = []
    max_row_error = 0.0
    sum_row_error = 0.0
    for c in ticking(model.constraints, budget):
        if has_continuous(c.terms):
            row_scale = s
        elif integral_row(c.terms, c.rhs, 1.0):
            row_scale = 1.0
        else:
            row_scale = 10.0 ** _choose_exponent(
                magnitude(c.terms, c.rhs), max_magnitude, lambda r, c=c: integral_row(c.terms, c.rhs, r)
            )
        terms, rhs, error = scale_terms(c.terms, c.rhs, row_scale)
        if row_scale == s:
            max_row_error = max(max_row_error, error)
            sum_row_error += error
        rows.append(ScaledRow(terms, c.sense.value, rhs, c.name))

    objective, _, obj_error = scale_terms(model.objective, 0.0, s)
    max_error = max_row_error + obj_error
    if not model.intervals:
        return ScaledModel(s, bounds, rows, objective, max_error == 0.0, max_error)

    intervals, interval_error = _scale_intervals(model, s)
    if max_error > 0 or interval_error > 0:
        max_error = sum_row_error + interval_error + obj_error
    cumulatives, bound_valid = _scale_cumulatives(model, max_magnitude)
    return ScaledModel(
        s,
        bounds,
        rows,
        objective,
        max_error == 0.0,
        max_error,
        intervals,
        [no.intervals for no in model.no_overlaps],
        cumulatives,
        bound_valid,
    )


def _check_continuous_coefficients(model: Model, continuous: list[bool]) -> None:
    """ModelError unless each continuous variable has a coefficient of +-1 in its rows and an integral one in the objective."""
    for c in model.constraints:
        for i, coef in c.terms.items():
            if continuous[i] and abs(coef) != 1.0:
                raise ModelError(f"row {c.name!r}: a continuous variable needs a coefficient of +1 or -1, got {coef}")
    for i, coef in model.objective.items():
        if continuous[i] and not _is_integral(coef):
            raise ModelError(f"objective: a continuous variable needs an integral coefficient, got {coef}")


def _integer_bounds(model: Model, continuous: list[bool], s: float) -> list[tuple[int, int]]:
    """Each variable's bounds on the integer grid: a continuous one's widened to the grid 1/s, an integer one's rounded in."""
    bounds: list[tuple[int, int]] = []
    for v, cont in zip(model.variables, continuous):
        if cont:
            bounds.append((math.floor(v.lb * s), math.ceil(v.ub * s)))
        else:
            bounds.append((math.ceil(v.lb - 1e-9), math.floor(v.ub + 1e-9)))
    return bounds


def _scale_intervals(model: Model, s: float) -> tuple[list[ScaledInterval], float]:
    """The intervals with their sizes on the grid (rounded up when not integral) and the sum of the rounding, in model units."""
    intervals: list[ScaledInterval] = []
    interval_error = 0.0
    for iv in model.intervals:
        exact_size = iv.size * s
        size = round(exact_size) if _is_integral(exact_size) else math.ceil(exact_size)
        interval_error += (size - exact_size) / s
        intervals.append(ScaledInterval(iv.start, size, iv.end, iv.presence, iv.name))
    return intervals, interval_error


def _scale_cumulatives(
    model: Model, max_magnitude: float
) -> tuple[list[tuple[tuple[int, ...], tuple[int, ...], int, str]], bool]:
    """Each cumulative on its own integer scale, and False when one had to be rounded (demands up, capacity down)."""
    cumulatives: list[tuple[tuple[int, ...], tuple[int, ...], int, str]] = []
    bound_valid = True
    for cu in model.cumulatives:
        largest = sum(cu.demands) + abs(cu.capacity)
        r = 10.0 ** _choose_exponent(
            largest, max_magnitude, lambda r, cu=cu: all(_is_integral(x * r) for x in (*cu.demands, cu.capacity))
        )
        if all(_is_integral(x * r) for x in (*cu.demands, cu.capacity)):
            demands = tuple(round(x * r) for x in cu.demands)
            capacity = round(cu.capacity * r)
        else:
            demands = tuple(math.ceil(x * r) for x in cu.demands)
            capacity = math.floor(cu.capacity * r)
            bound_valid = False
        cumulatives.append((cu.intervals, demands, capacity, cu.name))
    return cumulatives, bound_valid
