r"""Lagrangian relaxation of the memory limit of the strategy problem: a proven lower bound and feasible choices.

Relaxing :math:`\sum_v m_v(c_v) \le M` with a multiplier :math:`\lambda \ge 0` gives

.. math::

    L(\lambda) = \min_c \Big( \sum_v \big(a_v(c_v) + \lambda\, m_v(c_v)\big)
        + \sum_{(u,v)} B_{uv}(c_u, c_v) \Big) - \lambda M ,

an unconstrained problem that the exact PaSE DP solves.  Every :math:`L(\lambda)` is a lower bound
on the constrained optimum (weak duality), :math:`L` is concave and piecewise linear,
and :math:`m(c_\lambda) - M` is a supergradient, so bisection on its sign finds the
best multiplier; the choices :math:`c_\lambda` that fit are feasible solutions
(Fisher, "The Lagrangian relaxation method for solving integer programming problems",
Management Science 1981).  The bound is lowered by a relative ``float_safety`` for the
floating-point sums of the DP.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from milp_partition.strategy.dp import StrategyDPSettings, pase_dp
from milp_partition.strategy.problem import StrategyProblem, StrategySolution


@dataclass(frozen=True)
class LagrangianSettings:
    """Search settings.

    Attributes
    ----------
    bisection_steps
        Bisection steps on the multiplier after it is bracketed.
    bracket_steps
        Doublings (times 4) of the multiplier allowed to find one whose choice fits.
    float_safety
        Relative amount the bound is lowered by, for floating-point sums.
    max_table_entries
        Cap of the PaSE DP's tables.
    """

    bisection_steps: int = 40
    bracket_steps: int = 60
    float_safety: float = 1e-12
    max_table_entries: int = 50_000_000


@dataclass(frozen=True)
class LagrangianResult:
    """Outcome of :func:`lagrangian_memory_bound`.

    Attributes
    ----------
    bound
        Proven lower bound on the constrained optimum (``-inf`` when none was found).
    solution, value
        The cheapest choice found that fits the limit, and its cost (``None``, ``inf``).
    multiplier
        The multiplier of the best bound.
    seconds, evaluations, message
        Effort and a human-readable summary.
    evaluated
        Every multiplier tried with its :math:`L(\\lambda)` (unsafe, not lowered by
        ``float_safety``), in the order tried; :mod:`milp_partition.heuristics.strategy_marginals` fixes at them.
    """

    bound: float
    solution: StrategySolution | None
    value: float
    multiplier: float
    seconds: float
    evaluations: int
    message: str
    evaluated: tuple[tuple[float, float], ...] = ()


def _relaxed(problem: StrategyProblem, lam: float) -> StrategyProblem:
    nodes = tuple(replace(n, cost=np.asarray(n.cost) + lam * np.asarray(n.memory_bytes, dtype=float)) for n in problem.nodes)
    return replace(problem, nodes=nodes).with_memory_limit(None)


def _cost_and_memory(problem: StrategyProblem, solution: StrategySolution) -> tuple[float, float]:
    picked = {n.id: list(n.configs).index(solution.choice[n.id]) for n in problem.nodes}
    cost = math.fsum(float(n.cost[picked[n.id]]) for n in problem.nodes)
    cost += math.fsum(float(e.cost[picked[e.source], picked[e.target]]) for e in problem.edges)
    memory = math.fsum(float(n.memory_bytes[picked[n.id]]) for n in problem.nodes)  # type: ignore[index]
    return cost, memory


def lagrangian_memory_bound(problem: StrategyProblem, settings: LagrangianSettings = LagrangianSettings()) -> LagrangianResult:
    """Bound the memory-limited problem from below and find feasible choices (see the module docstring)."""
    start = time.monotonic()
    limit = problem.memory_limit_bytes
    if limit is None or any(n.memory_bytes is None for n in problem.nodes):
        return LagrangianResult(-math.inf, None, math.inf, 0.0, 0.0, 0, "no memory limit: nothing to relax")
    least = math.fsum(float(np.min(n.memory_bytes)) for n in problem.nodes)  # type: ignore[arg-type]
    if least > limit:
        message = f"no choice fits: the least memory any choice needs is {least:.0f} bytes, over the limit {limit}"
        return LagrangianResult(math.inf, None, math.inf, 0.0, time.monotonic() - start, 0, message)
    best_bound, best_lam = -math.inf, 0.0
    incumbent: tuple[float, StrategySolution] | None = None
    evaluations = 0
    evaluated: list[tuple[float, float]] = []

    def evaluate(lam: float) -> float | None:
        """Memory of the relaxed optimum at ``lam`` (None when the DP refuses); updates bound and incumbent."""
        nonlocal best_bound, best_lam, incumbent, evaluations
        dp = pase_dp(_relaxed(problem, lam), StrategyDPSettings(settings.max_table_entries))
        evaluations += 1
        if dp.solution is None or not dp.exact:
            return None
        solution = dp.solution
        cost, memory = _cost_and_memory(problem, solution)
        value = cost + lam * memory - lam * limit  # L(lam), from the optimal choice at lam
        evaluated.append((lam, value))
        if value > best_bound:
            best_bound, best_lam = value, lam
        if memory <= limit and (incumbent is None or cost < incumbent[0]):
            incumbent = (cost, solution)
        return memory

    memory = evaluate(0.0)
    if memory is None:
        return LagrangianResult(
            -math.inf,
            None,
            math.inf,
            0.0,
            time.monotonic() - start,
            evaluations,
            "the PaSE DP refused (table cap)",
            tuple(evaluated),
        )
    lo, hi = 0.0, None
    if memory > limit:
        scale = max(abs(float(np.max(n.cost))) for n in problem.nodes) or 1.0
        lam = scale / max(float(limit), 1.0) * 1e-6
        for _ in range(settings.bracket_steps):
            m = evaluate(lam)
            if m is None:
                break
            if m <= limit:
                hi = lam
                break
            lo, lam = lam, lam * 4.0
        if hi is not None:
            for _ in range(settings.bisection_steps):
                mid = 0.5 * (lo + hi)
                m = evaluate(mid)
                if m is None:
                    break
                if m > limit:
                    lo = mid
                else:
                    hi = mid
    bound = best_bound - settings.float_safety * abs(best_bound) if math.isfinite(best_bound) else best_bound
    value = incumbent[0] if incumbent else math.inf
    gap = (value - bound) / value if incumbent and value > 0 else math.inf
    message = (
        f"Lagrangian relaxation of the memory limit: bound {bound:.12g} at multiplier {best_lam:.6g}, "
        f"best fitting choice {value:.12g} (gap {100 * gap:.3g}%), {evaluations} DP runs"
    )
    return LagrangianResult(
        bound,
        incumbent[1] if incumbent else None,
        value,
        best_lam,
        time.monotonic() - start,
        evaluations,
        message,
        tuple(evaluated),
    )
