r"""Min-marginals of the strategy problem and exact configuration fixing by Lagrangian reduced costs.

The problem (:mod:`milp_partition.strategy.problem`): each layer v picks a configuration
:math:`c_v`, minimizing :math:`F(c) = \sum_v a_v(c_v) + \sum_{(u,v)} B_{uv}(c_u, c_v)`
subject to :math:`\mathrm{mem}(c) = \sum_v m_v(c_v) \le M`.

Lagrangian min-marginals
------------------------
For a multiplier :math:`\lambda \ge 0` let
:math:`L_\lambda(c) = F(c) + \lambda\,(\mathrm{mem}(c) - M)`.  Every feasible c has
:math:`F(c) \ge L_\lambda(c)`, so the *min-marginal*

.. math::

    \mu_\lambda(v, j) = \min_{c:\, c_v = j} L_\lambda(c)

is a lower bound on the cost of every feasible solution that gives v the
configuration j, and :math:`\min_j \mu_\lambda(v, j) = L(\lambda)` is the Lagrangian
bound of :mod:`milp_partition.heuristics.strategy_lagrangian`.

All min-marginals come from two passes over the elimination tree of the PaSE DP
(:mod:`milp_partition.strategy.dp`), i.e. min-sum *bucket-tree elimination* (Kask,
Dechter, Larrosa and Dechter, "Unifying tree decompositions for reasoning in graphical
models", Artificial Intelligence 166, 2005; Dechter, "Bucket elimination", 1999):

* Upward (the DP itself): eliminating v in the greedy order sums the factors that
  mention v into the table :math:`T_v` over the clique :math:`C_v = \{v\} \cup N(v)`
  and sends :math:`\tau_v = \min_{x_v} T_v` to the *parent* :math:`p(v)`, the
  layer of :math:`N(v)` eliminated first (whose clique contains :math:`N(v)`).
* Downward (calibration), in reverse order: a root (:math:`N(v) = \emptyset`) has
  belief :math:`\beta_v = T_v`; a child gets

  .. math::

      \beta_v = T_v + \min_{C_{p} \setminus N(v)} \big(\beta_{p} - \tau_v\big),

  where :math:`\beta_p - \tau_v` is everything the parent knows except what v sent.
  Then :math:`\beta_v(x_{C_v}) = \min \{ L_\lambda(c) : c_{C_v} = x_{C_v} \}` and
  :math:`\mu_\lambda(v, j) = \min_{x_{N(v)}} \beta_v(j, x_{N(v)})`.  Disconnected
  parts each have a root; the other parts' optima are added.

The cost is about twice the DP's (same tables).

Fixing (reduced-cost fixing)
----------------------------
Let UB be the verified cost of a feasible incumbent.  If :math:`\mu_\lambda(v, j) > UB`
for some :math:`\lambda \ge 0`, no feasible solution with :math:`c_v = j` costs UB or
less, so removing j from v keeps every solution of cost at most UB — the incumbent
and every optimum (the optimum is at most UB).  Likewise j goes when even the least
memory of the other layers plus :math:`m_v(j)` exceeds M (the limit
:math:`\lambda \to \infty`).  Removal is tested as

.. math::

    \mu_\lambda(v, j) > UB + \varepsilon_{\mathrm{rel}} \big(|UB| + \lambda M + \textstyle\sum_v \max_j |a_v(j)|\big)
        + \varepsilon_{\mathrm{abs}},

the slack (default :math:`\varepsilon_{\mathrm{rel}} = 10^{-9}`) dominating the
floating-point error of the DP's sums and of the subtraction in the downward pass
(each about :math:`10^{-16}` relative per operation, a few hundred operations), so a
removal is never justified by rounding alone.  The incumbent's own configurations are
never removed (``protect``).  Fixing at several multipliers and repeating after the
problem shrinks (the Lagrangian bound of the smaller problem can only rise) is
:func:`fix_by_marginals`; the classical form for 0-1 programs is reduced-cost
variable fixing (e.g. Wolsey, *Integer Programming*, 1998, §7.4; Fisher 1981).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, replace

import numpy as np
from milp_partition.heuristics.strategy_lagrangian import LagrangianSettings, lagrangian_memory_bound

from milp_partition.strategy.dp import _aligned, _arrays, _elimination_order, _problem_error
from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, StrategySolution
from milp_partition.strategy.reductions import drop_dominated
from milp_partition.verifiers.strategy import verify_strategy


@dataclass(frozen=True)
class MarginalSettings:
    """Settings of :func:`min_marginals` and :func:`fix_by_marginals`.

    Attributes
    ----------
    max_table_entries
        Refuse when a clique table would have more entries (as the PaSE DP).
    relative_tolerance, absolute_tolerance
        The safety slack of a removal (see the module docstring), relative to
        :math:`|UB| + \\lambda M + \\sum_v \\max_j |a_v(j)|` and absolute, in cost units.
    multipliers_per_round
        How many of the Lagrangian's multipliers (those of the best bounds) to fix at per round.
    max_rounds
        Rounds of Lagrangian bound + fixing + dominance.
    time_limit_s
        Stop starting new rounds after this many seconds.
    """

    max_table_entries: int = 50_000_000
    relative_tolerance: float = 1e-9
    absolute_tolerance: float = 1e-6
    multipliers_per_round: int = 8
    max_rounds: int = 20
    time_limit_s: float = 20.0


@dataclass(frozen=True)
class MinMarginals:
    """Min-marginals of :math:`F + \\lambda\\,\\mathrm{mem}` (without the constant :math:`-\\lambda M`).

    Attributes
    ----------
    ids
        Layer ids in problem order.
    values
        ``values[v][j]``: least :math:`F(c) + \\lambda\\,\\mathrm{mem}(c)` over all c with
        :math:`c_v = j` (memory limit ignored).
    optimum
        :math:`\\min_c F(c) + \\lambda\\,\\mathrm{mem}(c)`.
    multiplier
        The :math:`\\lambda` used.
    """

    ids: tuple[str, ...]
    values: tuple[np.ndarray, ...]
    optimum: float
    multiplier: float


def min_marginals(
    problem: StrategyProblem, multiplier: float = 0.0, settings: MarginalSettings = MarginalSettings()
) -> MinMarginals:
    r"""All min-marginals :math:`\min_{c: c_v = j} F(c) + \lambda\,\mathrm{mem}(c)` by bucket-tree elimination.

    Parameters
    ----------
    problem
        The problem; its memory limit is ignored, its per-configuration memory used
        only when ``multiplier`` is not zero.
    multiplier
        :math:`\lambda \ge 0`.

    Raises
    ------
    ValueError
        When the problem is malformed, a layer carries no memory while
        ``multiplier`` is not zero, or a table exceeds ``settings.max_table_entries``.
    """
    error = _problem_error(problem)
    if error is not None:
        raise ValueError(error)
    arrays = _arrays(problem)
    if multiplier != 0.0:
        if any(n.memory_bytes is None for n in problem.nodes):
            raise ValueError("a multiplier needs the memory of every configuration")
        unary = tuple(u + multiplier * np.asarray(n.memory_bytes, dtype=np.float64) for u, n in zip(arrays.unary, problem.nodes))
        arrays = replace(arrays, unary=unary)
    steps = _elimination_order(arrays.sizes, arrays.pairs)
    for step in steps:
        if step.entries > settings.max_table_entries:
            raise ValueError(f"a clique table of {step.entries} entries exceeds max_table_entries={settings.max_table_entries}")
    tree = calibrate(arrays.sizes, arrays.unary, arrays.pairs, steps)
    return MinMarginals(arrays.ids, tree.marginals, tree.optimum, multiplier)


@dataclass(frozen=True, eq=False)
class Calibrated:
    r"""A calibrated elimination tree (min-sum), indexed by layer position.

    Attributes
    ----------
    steps
        The elimination steps (order and cliques :math:`C_v = (v, N(v))`).
    parent
        ``parent[v]``: the layer of :math:`N(v)` eliminated first, ``None`` for a root.
    tables
        :math:`T_v` over :math:`C_v`: the factors of v's bucket plus the children's messages.
    sent
        :math:`\tau_v = \min_{x_v} T_v` over :math:`N(v)` (absent for roots).
    outside
        :math:`\min` over the layers outside v's subtree of their factors, given
        :math:`x_{N(v)}`, shaped to broadcast over :math:`C_v` (axis 0 of size 1); for a
        root, the other components' optima (a scalar array).
    marginals
        :math:`\mu(v, \cdot)`.
    optimum
        The unconstrained minimum.
    """

    steps: tuple
    parent: dict[int, int | None]
    tables: dict[int, np.ndarray]
    sent: dict[int, np.ndarray]
    outside: dict[int, np.ndarray]
    marginals: tuple[np.ndarray, ...]
    optimum: float


def calibrate(sizes: tuple[int, ...], unary: tuple[np.ndarray, ...], pairs: tuple, steps: list) -> Calibrated:
    """Upward (elimination) and downward (calibration) min-sum passes; see the module docstring."""
    clique = {s.node: (s.node, *s.others) for s in steps}
    when = {s.node: i for i, s in enumerate(steps)}

    # upward: T_v and tau_v
    factors: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}
    mentions: list[set[int]] = [set() for _ in sizes]
    fresh = itertools.count()

    def add(scope: tuple[int, ...], table: np.ndarray) -> None:
        fid = next(fresh)
        factors[fid] = (scope, table)
        for x in scope:
            mentions[x].add(fid)

    for v, cost in enumerate(unary):
        add((v,), cost)
    for s, t, m in pairs:
        add((s, t), m)
    tables: dict[int, np.ndarray] = {}
    sent: dict[int, np.ndarray] = {}
    parent: dict[int, int | None] = {}
    for step in steps:
        v, axes = step.node, clique[step.node]
        position = {x: i for i, x in enumerate(axes)}
        total = np.zeros([sizes[x] for x in axes])
        for fid in sorted(mentions[v]):
            scope, table = factors.pop(fid)
            for x in scope:
                mentions[x].discard(fid)
            total = total + _aligned(table, scope, position, len(axes))
        tables[v] = total
        if step.others:
            tau = total.min(axis=0)
            sent[v] = tau
            add(step.others, tau)
            parent[v] = min(step.others, key=when.__getitem__)
        else:
            parent[v] = None

    # downward: beliefs in reverse order
    belief: dict[int, np.ndarray] = {}
    down: dict[int, np.ndarray] = {}
    root_of: dict[int, int] = {}
    values: list[np.ndarray] = [np.empty(0)] * len(sizes)
    for step in reversed(steps):
        v = step.node
        p = parent[v]
        if p is None:
            down[v] = np.zeros([1] * len(clique[v]))
            root_of[v] = v
        else:
            root_of[v] = root_of[p]
            axes_p = clique[p]
            pos_p = {x: i for i, x in enumerate(axes_p)}
            rest = belief[p] - _aligned(sent[v], step.others, pos_p, len(axes_p))
            keep = set(step.others)
            drop = tuple(i for i, x in enumerate(axes_p) if x not in keep)
            message = rest.min(axis=drop) if drop else rest
            scope = tuple(x for x in axes_p if x in keep)
            position = {x: i for i, x in enumerate(clique[v])}
            down[v] = _aligned(message, scope, position, len(clique[v]))
        belief[v] = tables[v] + down[v]
        values[v] = belief[v].reshape(sizes[v], -1).min(axis=1)
    part = {r: float(values[r].min()) for r in set(root_of.values())}
    optimum = math.fsum(part.values())
    marginals = tuple(values[v] + (optimum - part[root_of[v]]) for v in range(len(sizes)))
    outside = {v: down[v] + (optimum - part[root_of[v]]) for v in range(len(sizes))}
    return Calibrated(tuple(steps), parent, tables, sent, outside, marginals, optimum)


# --------------------------------------------------------------------------- restriction


def restrict(problem: StrategyProblem, keep: dict[str, np.ndarray]) -> StrategyProblem:
    """The problem with only the configurations ``keep[id]`` (a boolean mask) of each layer; names unchanged.

    Raises
    ------
    ValueError
        When a mask keeps no configuration of its layer.
    """
    index = problem.index
    masks = [np.asarray(keep.get(n.id, np.ones(len(n.configs), dtype=bool)), dtype=bool) for n in problem.nodes]
    for n, mask in zip(problem.nodes, masks):
        if not mask.any():
            raise ValueError(f"layer {n.id!r} would keep no configuration")
    nodes = tuple(
        StrategyNode(
            n.id,
            n.name,
            tuple(c for c, k in zip(n.configs, mask) if k),
            np.asarray(n.cost)[mask],
            None if n.memory_bytes is None else np.asarray(n.memory_bytes)[mask],
        )
        for n, mask in zip(problem.nodes, masks)
    )
    edges = tuple(
        StrategyEdge(e.source, e.target, np.asarray(e.cost)[np.ix_(masks[index[e.source]], masks[index[e.target]])])
        for e in problem.edges
    )
    return replace(problem, nodes=nodes, edges=edges)


# --------------------------------------------------------------------------- fixing


@dataclass(frozen=True)
class FixingStep:
    """Removals proven at one multiplier: ``removed`` configurations, bound :math:`L(\\lambda)`."""

    multiplier: float
    bound: float
    removed: int


def _slack(problem: StrategyProblem, upper_bound: float, lam: float, settings: MarginalSettings) -> float:
    limit = float(problem.memory_limit_bytes or 0)
    scale = abs(upper_bound) + lam * limit + math.fsum(float(np.max(np.abs(n.cost))) for n in problem.nodes)
    return settings.relative_tolerance * scale + settings.absolute_tolerance


def _protected(problem: StrategyProblem, protect: StrategySolution | None) -> dict[str, int]:
    if protect is None:
        return {}
    out = {}
    for n in problem.nodes:
        config = protect.choice.get(n.id)
        if config in n.configs:
            out[n.id] = n.configs.index(config)
    return out


def marginal_masks(
    problem: StrategyProblem,
    upper_bound: float,
    multipliers: list[float],
    protect: StrategySolution | None = None,
    settings: MarginalSettings = MarginalSettings(),
) -> tuple[dict[str, np.ndarray], list[FixingStep]]:
    """Which configurations survive fixing at each multiplier (and the memory test).

    Returns
    -------
    keep, steps
        ``keep[id]``: boolean mask of surviving configurations (the protected ones always
        survive); ``steps``: per multiplier, the Lagrangian bound and the new removals.
    """
    limit = problem.memory_limit_bytes
    keep = {n.id: np.ones(len(n.configs), dtype=bool) for n in problem.nodes}
    guard = _protected(problem, protect)
    steps: list[FixingStep] = []
    static = getattr(problem, "memory_model", "static") == "static"
    # the Lagrangian and memory tests need the static sum; lambda = 0 (plain min-marginals) is valid for any model
    has_memory = static and limit is not None and all(n.memory_bytes is not None for n in problem.nodes)
    if has_memory:
        least = [float(np.min(n.memory_bytes)) for n in problem.nodes]  # type: ignore[arg-type]
        total = math.fsum(least)
        removed = 0
        for n, lo in zip(problem.nodes, least):
            need = total - lo + np.asarray(n.memory_bytes, dtype=np.float64)
            drop = need > float(limit) * (1 + 1e-12) + 1.0  # type: ignore[arg-type]
            removed += int((drop & keep[n.id]).sum())
            keep[n.id] &= ~drop
        steps.append(FixingStep(math.inf, -math.inf, removed))
    for lam in multipliers:
        lam = float(lam) if has_memory else 0.0
        mm = min_marginals(problem, lam, settings)
        shift = lam * float(limit) if (has_memory and limit is not None) else 0.0
        threshold = upper_bound + _slack(problem, upper_bound, lam, settings)
        removed = 0
        for n, mu in zip(problem.nodes, mm.values):
            drop = (mu - shift) > threshold
            removed += int((drop & keep[n.id]).sum())
            keep[n.id] &= ~drop
        steps.append(FixingStep(lam, mm.optimum - shift, removed))
        if not has_memory:
            break
    for v, j in guard.items():
        keep[v][j] = True
    return keep, steps


@dataclass(frozen=True)
class FixingResult:
    """Outcome of :func:`fix_by_marginals`.

    Attributes
    ----------
    problem
        The problem with the surviving configurations (same ids and names).  Fixing keeps
        every solution costing at most ``upper_bound``; dominance then keeps one at least
        as good for each, so the optimum is unchanged.
    upper_bound, incumbent
        The best verified feasible cost and choice (improved by the Lagrangian's fitting choices).
    bound
        Best proven lower bound on the constrained optimum of the input (the Lagrangian
        bounds of the shrinking problems, each valid for the input since no removed
        configuration is in a solution costing less than ``upper_bound``; capped at it).
    removed, rounds, seconds, message
        Effort and outcome.
    """

    problem: StrategyProblem
    upper_bound: float
    incumbent: StrategySolution | None
    bound: float
    removed: int
    rounds: int
    seconds: float
    message: str


def fix_by_marginals(
    problem: StrategyProblem,
    upper_bound: float = math.inf,
    incumbent: StrategySolution | None = None,
    settings: MarginalSettings = MarginalSettings(),
) -> FixingResult:
    """Alternate the Lagrangian bound, min-marginal fixing and dominance until nothing more goes.

    Each round runs :func:`milp_partition.heuristics.strategy_lagrangian.lagrangian_memory_bound` on the
    current problem (a fitting choice cheaper than ``upper_bound`` becomes the incumbent),
    fixes at the multipliers of its best bounds (:func:`marginal_masks`), and drops
    dominated configurations (:func:`milp_partition.strategy_reductions.drop_dominated`,
    names unchanged).  Needs a memory limit with memory per configuration; without one the
    problem comes back unchanged.
    """

    start = time.monotonic()
    work = problem
    best_bound = -math.inf
    removed_total = 0
    rounds = 0
    notes: list[str] = []
    static = getattr(problem, "memory_model", "static") == "static"
    if problem.memory_limit_bytes is None or not static or any(n.memory_bytes is None for n in problem.nodes):
        return FixingResult(problem, upper_bound, incumbent, -math.inf, 0, 0, 0.0, "no static memory limit: nothing fixed")
    while rounds < settings.max_rounds and time.monotonic() - start < settings.time_limit_s:
        rounds += 1
        lag = lagrangian_memory_bound(work, LagrangianSettings(max_table_entries=settings.max_table_entries))
        if lag.bound == math.inf:  # nothing fits the limit in the current problem
            best_bound = max(best_bound, upper_bound)
            break
        if lag.solution is not None:
            report = verify_strategy(problem, lag.solution)
            if report.feasible and report.objective < upper_bound:
                upper_bound, incumbent = report.objective, lag.solution
        best_bound = max(best_bound, lag.bound)
        if not math.isfinite(upper_bound):
            break
        chosen = sorted(lag.evaluated, key=lambda t: -t[1])[: settings.multipliers_per_round]
        keep, steps = marginal_masks(work, upper_bound, [lam for lam, _ in chosen], incumbent, settings)
        best_bound = max([best_bound, *(s.bound for s in steps)])
        before = work.total_configs
        if any(not m.any() for m in keep.values()):
            # no solution costing at most UB uses the survivors: the incumbent is optimal
            best_bound = max(best_bound, upper_bound)
            break
        work = drop_dominated(restrict(work, keep)).problem
        removed = before - work.total_configs
        removed_total += removed
        notes.append(f"{before}->{work.total_configs}")
        if removed == 0 or work.total_configs == len(work.nodes):
            if work.total_configs == len(work.nodes):
                best_bound = max(best_bound, upper_bound)
            break
    best_bound = min(best_bound, upper_bound)
    message = (
        f"min-marginal fixing: {problem.total_configs} -> {work.total_configs} configurations in {rounds} rounds "
        f"({', '.join(notes)}), bound {best_bound:.12g}, incumbent {upper_bound:.12g}"
    )
    return FixingResult(work, upper_bound, incumbent, best_bound, removed_total, rounds, time.monotonic() - start, message)
