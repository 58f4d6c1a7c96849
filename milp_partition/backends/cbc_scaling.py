"""Row and objective scaling of a :class:`Model` for CBC, CBC's tolerances, and the check of its proofs.

This is the CBC counterpart of :mod:`milp_partition.backends.scaling` (which puts a
model on CP-SAT's integer grid).  CBC works in floating point with absolute
tolerances, so a model whose rows mix bytes (1e9) with seconds (1e-5) defeats it:
the liveness strategy model on ``examples/gpt4_layers.json`` made CBC report
``Dual inf 1.09e15``, warn ``Postprocessing changed objective ... possible tolerance
issue`` and stop with a false proof.  Its default cutoff increment (1e-5, absolute)
also prunes every node whose bound is within 1e-5 of the incumbent: on an objective
of 0.05 s, a 2e-4 relative error called "optimal".

Scaling (exact: only powers of two, which change no bit of a mantissa)

- Each continuous variable ``y`` (a time, a makespan) is replaced by ``y' = y / c`` with
  ``c = 2**round(log2(max(|lb|, |ub|)))``, so it ranges over about ``[-1, 1]``: a makespan
  of 3e-6 s beside binaries made CBC's cuts remove the optimum (random placement
  instances, ``tests/test_proof_soundness.py``).  Its coefficients are multiplied by ``c``,
  its bounds and hint divided by ``c``, and its value multiplied by ``c`` when read back.
  Binary and integer variables are not scaled.
- Each row ``sum a_i x_i (<=, =, >=) b`` is divided by ``2**round(log2(max_i |a_i|))``,
  so its largest coefficient lies in ``[1/sqrt(2), sqrt(2)]``.  The feasible set does
  not change; a primal tolerance ``tol`` on a scaled row allows a violation of
  ``tol * 2**k`` in the row's own units (the verifier re-checks every answer in real units).
- The objective is multiplied by ``w = 2**(-round(log2(r)))`` where ``r`` is the hint's
  objective value when the hint is complete and that value is non-zero, else the median
  objective coefficient (not the largest: a configuration 1e4 times dearer than the one
  chosen would make the stopping gaps below large against the optimum); so the objective
  values CBC compares are of order one.  CBC's
  objective and bound are divided by ``w`` when read back; the incumbent's objective is
  recomputed from the solution in model units.

Tolerances (:class:`CbcTolerances`, passed on CBC's command line and stated in its log):
integer tolerance, primal and dual feasibility tolerances (on the scaled rows and
objective), absolute and relative stopping gaps, and the cutoff increment (coarser when a
warm start set the objective's scale, :meth:`CbcTolerances.for_model`).  A bound
that CBC proves is lowered by ``(allowable_gap + increment) / w`` (:func:`stopping_slack`;
a time-limited run's best possible too) and, for an optimal run, by the relative gap and
the precision of the values it prints (:func:`optimal_bound_slack`), so a proof within
CBC's own stopping rule stays a proof in model units.

A proof is doubtful (:func:`doubtful_proof`, recorded as ``notes["proof_doubtful"]``;
the back-end then reports optimal as feasible, infeasible as unknown, and no bound)
when CBC's log shows a postprocessing / tolerance warning, when the objective CBC
prints differs from the objective of the values it returns, or when its bound lies
above that objective, beyond the tolerances.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from milp_partition.backends.base import ticking
from milp_partition.backends.model import Model, VarKind
from milp_partition.budget import Budget

#: CBC writes solution values with 8 significant digits (``%15.8g``); proven bounds are lowered by this much.
SOLUTION_PRECISION_REL = 1e-7
#: CBC's objective and the solution's recomputed objective may differ by this much (relative) before the proof is doubted.
OBJECTIVE_AGREEMENT_REL = 1e-6

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_TOLERANCE_WARNINGS = (
    re.compile(r"Postprocessing changed objective[^\n]*", re.I),
    re.compile(r"[^\n]*possible tolerance issue[^\n]*", re.I),
)
_FINAL_OBJECTIVE = re.compile(r"^Objective value:\s+" + _NUMBER, re.M)


@dataclass(frozen=True)
class CbcTolerances:
    """CBC's tolerances, set explicitly on its command line.

    Attributes
    ----------
    integer
        ``-integerTolerance``: how far from an integer a value of an integer variable may be.
    primal
        ``-primalTolerance``: allowed violation of a (scaled) row.
    dual
        ``-dualTolerance``: allowed dual infeasibility (on the scaled objective).
    allowable_gap
        ``-allowableGap``: absolute gap at which CBC stops, in scaled objective units.
    ratio_gap
        ``-ratioGap``: relative gap at which CBC stops (0: prove optimality).
    increment
        ``-increment``: CBC prunes a node whose bound is within this of the incumbent (scaled
        objective units); CBC's default, 1e-5 whatever the objective's size, is far too
        coarse for objectives of order 1e-2.
    increment_hinted
        The increment when the objective was scaled by a complete hint's value (the scaled
        optimum is then of order one, so this is about a relative gap): coarser pruning, as
        fast as CBC's default on the pipeline benchmarks, and still far inside the chain's
        proof tolerance.
    """

    integer: float = 1e-7
    primal: float = 1e-9
    dual: float = 1e-9
    allowable_gap: float = 1e-10
    ratio_gap: float = 0.0
    increment: float = 1e-10
    increment_hinted: float = 1e-7

    def for_model(self, scaled: CbcScaledModel) -> CbcTolerances:
        """The tolerances CBC runs under for ``scaled`` (``increment_hinted`` when its objective scale came from a hint)."""
        return replace(self, increment=self.increment_hinted) if scaled.objective_from_hint else self

    def options(self) -> list[str]:
        """CBC command-line options (PuLP's ``options``; PuLP adds the leading dashes)."""
        return [
            f"integerTolerance {self.integer:g}",
            f"primalTolerance {self.primal:g}",
            f"dualTolerance {self.dual:g}",
            f"allowableGap {self.allowable_gap:g}",
            f"ratioGap {self.ratio_gap:g}",
            f"increment {self.increment:g}",
        ]


@dataclass(frozen=True)
class CbcRow:
    """A scaled row: ``sum terms[i] * x_i sense rhs`` (sense ``"<="``, ``">="`` or ``"=="``)."""

    terms: dict[int, float]
    sense: str
    rhs: float
    scale: float  #: the power of two the row was divided by


@dataclass(frozen=True)
class CbcScaledModel:
    """A :class:`Model` with its continuous columns, every row and the objective scaled by powers of two.

    Attributes
    ----------
    column_scale
        ``c`` per variable: model value = ``c`` * CBC's value (1 for binary and integer variables).
    bounds
        ``(lb / c, ub / c)`` per variable.
    rows
        One per model constraint, in order, in CBC's variables.
    objective
        ``w`` times the model's objective coefficients, in CBC's variables.
    objective_scale
        ``w``: scaled objective = ``w`` * model objective.
    """

    column_scale: list[float]
    bounds: list[tuple[float, float]]
    rows: list[CbcRow]
    objective: dict[int, float]
    objective_scale: float
    objective_from_hint: bool = False

    def to_cbc_value(self, index: int, value: float) -> float:
        """A model value of variable ``index`` (a hint) in CBC's variable, within CBC's bounds."""
        lb, ub = self.bounds[index]
        return min(max(value / self.column_scale[index], lb), ub)

    def to_model_values(self, values: list[float]) -> list[float]:
        """CBC's values in model units."""
        return [v * c for v, c in zip(values, self.column_scale)]

    def to_model_units(self, scaled_objective: float) -> float:
        """A scaled objective value (CBC's incumbent or bound) in model units."""
        return scaled_objective / self.objective_scale


def _power_of_two_near(x: float) -> float:
    """``2**round(log2(x))`` for ``x > 0``; 1 for 0."""
    if x <= 0 or not math.isfinite(x):
        return 1.0
    return math.ldexp(1.0, round(math.log2(x)))


def scale_for_cbc(model: Model, budget: Budget | None = None) -> CbcScaledModel:
    """Scale ``model``'s continuous columns, rows and objective by powers of two (see the module docstring).

    Reads ``budget`` every few thousand rows and raises :class:`TimeoutError` once it is spent.
    """
    cs = [_power_of_two_near(max(abs(v.lb), abs(v.ub))) if v.kind is VarKind.CONTINUOUS else 1.0 for v in model.variables]
    bounds = [(v.lb / c, v.ub / c) for v, c in zip(model.variables, cs)]
    rows = []
    for c in ticking(model.constraints, budget):
        terms = {i: a * cs[i] for i, a in c.terms.items()}
        largest = max((abs(a) for a in terms.values()), default=0.0)
        k = _power_of_two_near(largest)
        rows.append(CbcRow({i: a / k for i, a in terms.items()}, c.sense.value, c.rhs / k, k))
    coefs = sorted(abs(a * cs[i]) for i, a in model.objective.items() if a != 0)
    reference = coefs[len(coefs) // 2] if coefs else 0.0
    from_hint = False
    if model.hint and all(i in model.hint for i in model.objective):
        hinted = abs(sum(a * model.hint[i] for i, a in model.objective.items()))
        if hinted > 0 and math.isfinite(hinted):
            reference, from_hint = hinted, True
    w = 1.0 / _power_of_two_near(reference)
    return CbcScaledModel(cs, bounds, rows, {i: a * cs[i] * w for i, a in model.objective.items()}, w, from_hint)


def optimal_bound_slack(model: Model, values: list[float], scaled: CbcScaledModel, tolerances: CbcTolerances) -> float:
    """How far below the objective of ``values`` (model units) a bound that CBC proved must be put.

    CBC stops when the gap is within ``allowable_gap`` (absolute), ``ratio_gap`` (relative)
    or ``increment``, all on the scaled objective; the values it prints carry 8 significant
    digits, so the objective recomputed from them may differ from CBC's by up to
    ``SOLUTION_PRECISION_REL * sum |c_i v_i|``.
    """
    magnitude = sum(abs(a * values[i]) for i, a in model.objective.items())
    objective = model.objective_value(values)
    relative = tolerances.ratio_gap * abs(objective)
    return stopping_slack(scaled, tolerances) + relative + SOLUTION_PRECISION_REL * magnitude


def stopping_slack(scaled: CbcScaledModel, tolerances: CbcTolerances) -> float:
    """CBC's absolute stopping gap plus its cutoff increment, in model units.

    CBC prunes a node whose bound is within ``allowable_gap`` or ``increment`` of the
    incumbent, so a best-possible value it prints after such pruning may exceed the true
    optimum by that much; every bound read from CBC is lowered by it.
    """
    return (tolerances.allowable_gap + tolerances.increment) / scaled.objective_scale


def doubtful_proof(log: str, objective: float, bound: float, scaled: CbcScaledModel) -> str | None:
    """Why CBC's answer is not a proof (a short reason), or ``None``.

    Parameters
    ----------
    log
        CBC's log.
    objective
        The objective of the values CBC returned, in model units (``inf`` when none).
    bound
        The bound read from CBC's log or implied by its "optimal", in model units.
    scaled
        The scaling the model was solved with.
    """
    for pattern in _TOLERANCE_WARNINGS:
        found = pattern.search(log)
        if found:
            return "CBC warned: " + found.group(0).strip()
    tol = OBJECTIVE_AGREEMENT_REL * max(abs(objective), 1e-300) if math.isfinite(objective) else 0.0
    printed = _FINAL_OBJECTIVE.findall(log)
    if printed and math.isfinite(objective):
        cbc_objective = scaled.to_model_units(float(printed[-1]))
        # CBC prints 8 significant digits here
        if abs(cbc_objective - objective) > tol + 1e-7 * abs(cbc_objective):
            return f"CBC's objective {cbc_objective!r} differs from its solution's {objective!r}"
    if math.isfinite(objective) and math.isfinite(bound) and bound > objective + tol:
        return f"CBC's bound {bound!r} lies above its solution's objective {objective!r}"
    return None
