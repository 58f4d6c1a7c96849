r"""An exact memory-limited strategy DP: bucket elimination on Pareto sets of (cost, memory), pruned by Lagrangian bounds.

The problem: minimize :math:`F(c) = \sum_v a_v(c_v) + \sum_{(u,v)} B_{uv}(c_u, c_v)` subject to
:math:`\mathrm{mem}(c) = \sum_v m_v(c_v) \le M`.  The PaSE DP (:mod:`milp_partition.strategy.dp`)
keeps one number per assignment of a dependent set and cannot see the limit.  Here each
entry of an elimination message is a *set of labels* :math:`(f, m)`, the cost and memory
of the best completions of the eliminated part (v's subtree of the elimination tree),
reduced to its Pareto frontier: a label is dropped when another one of the same
separator assignment has no more cost and no more memory, since any completion of the
first is matched by the second at no more cost and memory.  This is the multi-criteria
generalization of variable elimination; on a chain it is the label-setting algorithm of
the resource-constrained shortest path problem, where the Lagrangian preprocessing and
pruning used below are standard (Handler and Zang, *Networks* 10, 1980; Dumitrescu and
Boland, *Networks* 42, 2003).

Pruning (all exact for solutions of cost at most a target G):

* memory: a label whose memory plus the least memory of the layers it does not cover
  exceeds M is dropped;
* Lagrangian: for a multiplier :math:`\lambda \ge 0` and the calibrated tree of
  :math:`F + \lambda\,\mathrm{mem}` (:func:`milp_partition.heuristics.strategy_marginals.calibrate`), a
  label over a clique assignment a has every completion costing at least
  :math:`f + \lambda m + R_\lambda(a) - \lambda M`, with :math:`R_\lambda(a)` the messages
  of the children not yet joined plus the outside message of the clique; the label goes
  when this exceeds :math:`G + \varepsilon` (the slack of
  :mod:`milp_partition.heuristics.strategy_marginals`, above floating-point error).

Hence every solution costing at most G, or one at least as good, survives to the root:
when the cheapest surviving fitting choice costs at most G it is optimal; when none
costs at most G, no solution does (:attr:`ParetoDPResult.proven_above`).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from milp_partition.heuristics.strategy_marginals import Calibrated, MarginalSettings, calibrate, marginal_masks, restrict
from milp_partition.strategy.dp import _arrays, _elimination_order, _objective, _problem_error, _solution
from milp_partition.strategy.problem import StrategyProblem, StrategySolution
from milp_partition.verifiers.strategy import verify_strategy


@dataclass(frozen=True)
class ParetoDPSettings:
    """Settings of :func:`pareto_dp`.

    Attributes
    ----------
    max_labels
        Give up when a bucket would keep more labels than this (memory: about 40 bytes each
        plus a pointer per child).
    chunk_labels
        Joins are expanded, pruned and filtered this many candidate labels at a time.
    max_table_entries
        Refuse when a clique table would exceed this many entries.
    relative_tolerance, absolute_tolerance
        Slack of the Lagrangian pruning, as in :class:`milp_partition.heuristics.strategy_marginals.MarginalSettings`.
    time_limit_s
        Give up after this many seconds.
    """

    max_labels: int = 4_000_000
    chunk_labels: int = 2_000_000
    max_table_entries: int = 2_000_000
    relative_tolerance: float = 1e-9
    absolute_tolerance: float = 1e-6
    time_limit_s: float = 60.0


@dataclass(frozen=True)
class ParetoDPResult:
    """Outcome of :func:`pareto_dp`.

    Attributes
    ----------
    solution, value
        The cheapest fitting choice that survived the pruning and its cost (``None``, ``inf``).
    optimal
        True when ``value <= target``: then ``solution`` is optimal.
    proven_above
        True when the DP finished and nothing costing at most ``target`` fits: the
        optimum exceeds ``target`` (or nothing fits at all).
    finished
        False when the DP gave up (label or time cap).
    labels, seconds, message
        Largest label count of a bucket, time and a summary.
    """

    solution: StrategySolution | None
    value: float
    optimal: bool
    proven_above: bool
    finished: bool
    labels: int
    seconds: float
    message: str


class _GiveUp(Exception):
    pass


def _pareto(group: np.ndarray, cost: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Indices of the labels on the Pareto frontier (least cost, least memory) of their group.

    Sorted by (group, memory, cost); a label stays when its cost is below every earlier
    cost of its group.  The running minimum restarts per group by shifting integer cost
    ranks group by group (exact: no float arithmetic on the costs).
    """
    if cost.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((cost, mem, group))
    g = group[order]
    _, dense = np.unique(g, return_inverse=True)
    _, rank = np.unique(cost[order], return_inverse=True)
    span = int(rank.max()) + 1
    val = rank.astype(np.int64) - dense.astype(np.int64) * span
    running = np.minimum.accumulate(val)
    previous = np.empty_like(running)
    previous[0] = np.iinfo(np.int64).max
    previous[1:] = running[:-1]
    return order[val < previous]


def _projection(shape: tuple[int, ...], axes: list[int]) -> np.ndarray:
    """For each flat index over ``shape``, the flat index of its coordinates on ``axes`` (in that order)."""
    total = np.zeros(shape, dtype=np.int64)
    stride = 1
    for axis in reversed(axes):
        view = [1] * len(shape)
        view[axis] = shape[axis]
        total = total + (np.arange(shape[axis], dtype=np.int64) * stride).reshape(view)
        stride *= shape[axis]
    return total.ravel()


@dataclass
class _Bucket:
    """Labels of one bucket: clique assignment, child pointers; and its message (sorted by key)."""

    assignment: np.ndarray
    back: np.ndarray
    key: np.ndarray
    cost: np.ndarray
    mem: np.ndarray
    origin: np.ndarray


def pareto_dp(
    problem: StrategyProblem,
    target: float,
    multipliers: list[float],
    settings: ParetoDPSettings = ParetoDPSettings(),
) -> ParetoDPResult:
    """Find the cheapest choice within the memory limit among those costing at most ``target``.

    Parameters
    ----------
    problem
        With a memory limit and memory per configuration.
    target
        G: solutions costing more may be pruned.  A verified incumbent's cost, or a guess
        (when the answer exceeds the guess, retry with a larger one).
    multipliers
        Multipliers :math:`\\lambda \\ge 0` whose Lagrangian bounds prune (near the best one).
    """
    start = time.monotonic()
    name = "Pareto DP"

    def result(solution, value, optimal, above, finished, labels, text) -> ParetoDPResult:
        return ParetoDPResult(solution, value, optimal, above, finished, labels, time.monotonic() - start, f"{name}: {text}")

    error = _pareto_dp_error(problem)
    if error is not None:
        return result(None, math.inf, False, False, False, 0, error)
    arrays = _arrays(problem)
    sizes = arrays.sizes
    steps = _elimination_order(sizes, arrays.pairs)
    if any(s.entries > settings.max_table_entries for s in steps):
        return result(None, math.inf, False, False, False, 0, "a clique table exceeds max_table_entries")
    mem = [np.asarray(n.memory_bytes, dtype=np.float64) for n in problem.nodes]
    limit_f = float(problem.memory_limit_bytes)  # type: ignore[arg-type]
    trees: list[tuple[float, Calibrated]] = []
    for lam in multipliers:
        unary = tuple(u + lam * m for u, m in zip(arrays.unary, mem))
        trees.append((float(lam), calibrate(sizes, unary, arrays.pairs, steps)))
    scale = abs(target) + math.fsum(float(np.max(np.abs(u))) for u in arrays.unary)
    threshold = {
        lam: target + settings.relative_tolerance * (scale + lam * limit_f) + settings.absolute_tolerance for lam, _ in trees
    }
    parent = trees[0][1].parent if trees else None
    if parent is None:
        return result(None, math.inf, False, False, False, 0, "needs at least one multiplier")
    run = _elimination(arrays, steps, parent, mem, trees, threshold, limit_f, settings, start)

    buckets: dict[int, _Bucket] = {}
    largest = 0
    try:
        for step in steps:
            if time.monotonic() - start > settings.time_limit_s:
                raise _GiveUp("time limit")
            buckets[step.node], labels = _eliminate(run, step, buckets)
            largest = max(largest, labels)
    except _GiveUp as why:
        return result(None, math.inf, False, False, False, largest, f"gave up: {why}")

    # roots: one frontier per component; combine them (cross products, Pareto), then backtrack the choice
    picks, reason = _combine_and_backtrack(
        steps, parent, run.children, run.clique, buckets, sizes, limit_f + run.mem_slack, settings
    )
    if picks is None:
        nothing = reason == "nothing fits"
        text = f"nothing costing at most {target:.12g} fits" if nothing else reason
        return result(None, math.inf, False, nothing, nothing, largest, text)
    value = _objective(problem, picks)
    solution = _solution(problem, picks)
    used = math.fsum(float(mem[i][picks[i]]) for i in range(len(picks)))
    if used > limit_f:
        return result(None, math.inf, False, False, False, largest, f"internal error: the DP's choice needs {used:.0f} bytes")
    # pruning dropped only labels bounded above target + slack, with rounding far below slack / 2
    optimal = value <= target + 0.5 * (settings.relative_tolerance * scale + settings.absolute_tolerance)
    text = (
        f"{'optimal' if optimal else 'best surviving'} {value:.12g} (target {target:.12g}), "
        f"largest bucket {largest} labels, {len(multipliers)} multipliers"
    )
    return result(solution, value, optimal, not optimal, True, largest, text)


def _pareto_dp_error(problem: StrategyProblem) -> str | None:
    """Why :func:`pareto_dp` cannot take ``problem`` (see :func:`_problem_error`; also no limit or no memory), or None."""
    error = _problem_error(problem)
    limit = problem.memory_limit_bytes
    if error is None and (limit is None or any(n.memory_bytes is None for n in problem.nodes)):
        error = "needs a memory limit and memory per configuration"
    if error is None and getattr(problem, "memory_model", "static") != "static":
        error = "only for the static memory model (the sum of the chosen configurations' memory)"
    return error


@dataclass(frozen=True)
class _Elimination:
    """What every bucket of one :func:`pareto_dp` run reads: the elimination tree, the bounds, the limits."""

    arrays: Any
    steps: list[Any]
    mem: list[np.ndarray]
    trees: list[tuple[float, Calibrated]]
    threshold: dict[float, float]
    limit_f: float
    settings: ParetoDPSettings
    start: float
    clique: dict[int, tuple[int, ...]]
    when: dict[int, int]
    children: dict[int, list[int]]
    edges_of: dict[int, list[tuple[int, int, np.ndarray]]]
    subtree_least: dict[int, float]
    total_least: float
    mem_slack: float


def _elimination(
    arrays: Any,
    steps: list[Any],
    parent: dict[int, int | None],
    mem: list[np.ndarray],
    trees: list[tuple[float, Calibrated]],
    threshold: dict[float, float],
    limit_f: float,
    settings: ParetoDPSettings,
    start: float,
) -> _Elimination:
    """The tree of buckets (cliques, children, the factors of each bucket) and each subtree's least memory."""
    clique = {s.node: (s.node, *s.others) for s in steps}
    when = {s.node: i for i, s in enumerate(steps)}
    children: dict[int, list[int]] = {s.node: [] for s in steps}
    for s in steps:
        p = parent[s.node]
        if p is not None:
            children[p].append(s.node)
    # original factors go to the bucket of their first-eliminated layer
    edges_of: dict[int, list[tuple[int, int, np.ndarray]]] = {s.node: [] for s in steps}
    for first, second, matrix in arrays.pairs:
        edges_of[min(first, second, key=when.__getitem__)].append((first, second, matrix))
    least = [float(np.min(m)) for m in mem]
    subtree_least: dict[int, float] = {}
    for s in steps:
        subtree_least[s.node] = least[s.node] + sum(subtree_least[c] for c in children[s.node])
    total_least = math.fsum(least)
    mem_slack = limit_f * 1e-12 + 0.5
    return _Elimination(
        arrays, steps, mem, trees, threshold, limit_f, settings, start,
        clique, when, children, edges_of, subtree_least, total_least, mem_slack,
    )  # fmt: skip


def _eliminate(run: _Elimination, step: Any, buckets: dict[int, _Bucket]) -> tuple[_Bucket, int]:
    """The bucket of ``step``'s layer: its own labels joined with each child's message, Pareto-reduced.

    Returns the bucket (its message sorted by key) and its label count before the reduction to the message.
    """
    arrays, steps, mem, trees, when, sizes = run.arrays, run.steps, run.mem, run.trees, run.when, run.arrays.sizes
    v, axes = step.node, run.clique[step.node]
    shape = tuple(sizes[x] for x in axes)
    position = {x: i for i, x in enumerate(axes)}
    base = np.zeros(shape)
    base = base + arrays.unary[v].reshape([-1] + [1] * (len(axes) - 1))
    for s_, t_, m_ in run.edges_of[v]:
        base = base + _place(m_, position[s_], position[t_], len(axes))
    count = base.size
    a = np.arange(count, dtype=np.int64)
    cost = base.ravel().copy()
    lab_mem = np.broadcast_to(mem[v].reshape([-1] + [1] * (len(axes) - 1)), shape).ravel().copy()
    back = np.zeros((count, 0), dtype=np.int64)
    # R_lambda(a): outside message plus every child's message, over the clique
    rest = []
    for _, tree in trees:
        r = np.broadcast_to(tree.outside[v], shape).astype(np.float64).copy()
        for c in run.children[v]:
            r = r + _broadcast(tree.sent[c], steps[when[c]].others, position, shape)
        rest.append(r.ravel())
    unjoined_least = sum(run.subtree_least[c] for c in run.children[v])
    outside_least = run.total_least - run.subtree_least[v]
    room = run.limit_f + run.mem_slack - outside_least
    a, cost, lab_mem, back = _prune(a, cost, lab_mem, back, room - unjoined_least, trees, rest, run.limit_f, run.threshold)
    for c in run.children[v]:
        c_others = steps[when[c]].others
        for i, (_, tree) in enumerate(trees):
            rest[i] = rest[i] - _broadcast(tree.sent[c], c_others, position, shape).ravel()
        unjoined_least -= run.subtree_least[c]
        proj = _projection(shape, [position[x] for x in c_others])[a]
        a, cost, lab_mem, back = _join_child(run, buckets[c], proj, a, cost, lab_mem, back, rest, room - unjoined_least)
    key = _projection(shape, list(range(1, len(axes))))[a] if len(axes) > 1 else np.zeros(a.size, dtype=np.int64)
    kept = _pareto(key, cost, lab_mem)
    kept = kept[np.argsort(key[kept], kind="stable")]
    return _Bucket(a, back, key[kept], cost[kept], lab_mem[kept], kept), a.size


def _join_child(
    run: _Elimination,
    child: _Bucket,
    proj: np.ndarray,
    a: np.ndarray,
    cost: np.ndarray,
    lab_mem: np.ndarray,
    back: np.ndarray,
    rest: list[np.ndarray],
    room: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Join the labels with a child's message (``proj``: each label's key in it) within ``room`` bytes.

    Expanded, pruned and filtered ``chunk_labels`` candidates at a time; returns the joined labels,
    Pareto-reduced per clique assignment.  Raises :class:`_GiveUp` past the label or time cap.
    """
    settings = run.settings
    lo, hi = _window(child, proj, room - lab_mem)
    parts = []
    for rows in _chunks(hi - lo, settings.chunk_labels):
        counts = (hi - lo)[rows]
        total = int(counts.sum())
        rep = np.repeat(rows, counts)
        offsets = np.cumsum(counts) - counts
        pick = np.repeat(lo[rows], counts) + (np.arange(total) - np.repeat(offsets, counts))
        part = _prune(
            a[rep],
            cost[rep] + child.cost[pick],
            lab_mem[rep] + child.mem[pick],
            np.concatenate([back[rep], pick[:, None]], axis=1),
            room,
            run.trees,
            rest,
            run.limit_f,
            run.threshold,
        )
        kept = _pareto(part[0], part[1], part[2])
        parts.append(tuple(x[kept] for x in part))
        if sum(p_[0].size for p_ in parts) > settings.max_labels:
            raise _GiveUp(f"over {settings.max_labels} labels in a bucket")
        if time.monotonic() - run.start > settings.time_limit_s:
            raise _GiveUp("time limit")
    if parts:
        a, cost, lab_mem, back = (np.concatenate([p_[k] for p_ in parts]) for k in range(4))
    else:
        a, cost, lab_mem = a[:0], cost[:0], lab_mem[:0]
        back = np.zeros((0, back.shape[1] + 1), dtype=np.int64)
    kept = _pareto(a, cost, lab_mem)
    return a[kept], cost[kept], lab_mem[kept], back[kept]


def _combine_and_backtrack(
    steps: list[Any],
    parent: Any,
    children: dict[int, list[int]],
    clique: dict[int, tuple[int, ...]],
    buckets: dict[int, _Bucket],
    sizes: Any,
    memory_room: float,
    settings: ParetoDPSettings,
) -> tuple[list[int] | None, str]:
    """Combine the roots' Pareto frontiers (one per component) within ``memory_room``; backtrack the cheapest choice.

    Returns ``(picks, "")`` with a configuration index per layer, or ``(None, reason)``:
    ``"nothing fits"`` (a proof at this target) or why the DP gave up.
    """
    roots = [s.node for s in steps if parent[s.node] is None]
    combo_cost, combo_mem = np.zeros(1), np.zeros(1)
    combo_back = np.zeros((1, 0), dtype=np.int64)
    for root in roots:
        b = buckets[root]
        n_combo, n_root = combo_cost.size, b.cost.size
        if n_combo * n_root > settings.max_labels:
            return None, "gave up: too many labels combining components"
        left = np.repeat(np.arange(n_combo), n_root)
        right = np.tile(np.arange(n_root), n_combo)
        combo_cost, combo_mem = combo_cost[left] + b.cost[right], combo_mem[left] + b.mem[right]
        combo_back = np.concatenate([combo_back[left], right[:, None]], axis=1)
        fits = combo_mem <= memory_room
        kept = _pareto(np.zeros(int(fits.sum()), dtype=np.int64), combo_cost[fits], combo_mem[fits])
        combo_cost, combo_mem, combo_back = combo_cost[fits][kept], combo_mem[fits][kept], combo_back[fits][kept]
    if combo_cost.size == 0:
        return None, "nothing fits"
    best = int(np.argmin(combo_cost))
    picks = [-1] * len(sizes)
    stack = [(r, int(combo_back[best, i])) for i, r in enumerate(roots)]
    while stack:
        v, k = stack.pop()
        bucket = buckets[v]
        label = int(bucket.origin[k])
        coords = np.unravel_index(int(bucket.assignment[label]), tuple(sizes[x] for x in clique[v]))
        picks[v] = int(coords[0])
        for i, c in enumerate(children[v]):
            stack.append((c, int(bucket.back[label, i])))
    return picks, ""


def _window(child: _Bucket, key: np.ndarray, room: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each query, the range of ``child``'s message labels with this key and memory at most ``room``.

    The message is sorted by (key, memory); memories are replaced by their exact integer
    ranks so that (key, rank) sorts as one int64.
    """
    uniq = np.unique(child.mem)
    span = np.int64(uniq.size + 1)
    combined = child.key * span + np.searchsorted(uniq, child.mem).astype(np.int64)
    allowed = np.searchsorted(uniq, room, "right").astype(np.int64)  # ranks below this fit
    lo = np.searchsorted(combined, key * span, "left")
    hi = np.searchsorted(combined, key * span + allowed, "left")
    return lo, np.maximum(hi, lo)


def _chunks(counts: np.ndarray, size: int) -> list[np.ndarray]:
    """Split the rows into consecutive groups whose counts sum to about ``size`` (at least one row each)."""
    if counts.size == 0:
        return []
    ends = np.cumsum(counts)
    cut = np.searchsorted(ends, np.arange(size, int(ends[-1]), size), "right")
    bounds = np.unique(np.concatenate([[0], cut, [counts.size]]))
    return [np.arange(b0, b1) for b0, b1 in itertools.pairwise(bounds) if b1 > b0]


def _prune(
    a: np.ndarray,
    cost: np.ndarray,
    mem: np.ndarray,
    back: np.ndarray,
    room: float,
    trees: list[tuple[float, Calibrated]],
    rest: list[np.ndarray],
    limit: float,
    threshold: dict[float, float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Labels whose memory fits in ``room`` and whose Lagrangian bounds stay within the thresholds."""
    keep = mem <= room
    for (lam, _), r in zip(trees, rest, strict=True):
        keep &= cost + lam * mem + r[a] - lam * limit <= threshold[lam]
    return a[keep], cost[keep], mem[keep], back[keep]


def _place(matrix: np.ndarray, axis_s: int, axis_t: int, ndim: int) -> np.ndarray:
    """``matrix`` (rows on axis_s, columns on axis_t) shaped to broadcast over ndim axes."""
    m = matrix if axis_s < axis_t else matrix.T
    lo, hi = sorted((axis_s, axis_t))
    shape = [1] * ndim
    shape[lo], shape[hi] = m.shape
    return m.reshape(shape)


def _broadcast(table: np.ndarray, scope: tuple[int, ...], position: dict[int, int], shape: tuple[int, ...]) -> np.ndarray:
    """``table`` over ``scope`` (sorted by position already) broadcast to the clique ``shape``."""
    view = [1] * len(shape)
    order = sorted(range(len(scope)), key=lambda i: position[scope[i]])
    moved = np.transpose(table, order) if len(scope) > 1 else table
    for i in order:
        view[position[scope[i]]] = table.shape[i]
    return np.broadcast_to(moved.reshape(view), shape)


# --------------------------------------------------------------------------- target schedule


@dataclass(frozen=True)
class MemorySearchSettings:
    """Settings of :func:`memory_search`.

    Attributes
    ----------
    first_gap
        The first target is the Lagrangian bound times ``1 + first_gap``.
    growth
        Each new target's gap above the bound is ``growth`` times the previous one.
    max_targets
        Targets tried at most.
    spread
        The multipliers that prune: the best one (the first given) times each factor; a
        spread prunes labels of high and of low memory better than the best multiplier alone.
    fixing
        Remove configurations by min-marginals (:func:`milp_partition.heuristics.strategy_marginals.marginal_masks`)
        at each target before the DP.
    time_limit_s
        Overall time limit.
    dp
        Settings of each :func:`pareto_dp` (its time limit is cut to what is left).
    """

    first_gap: float = 1e-3
    growth: float = 4.0
    max_targets: int = 12
    spread: tuple[float, ...] = (1.0, 0.5, 2.0)
    fixing: bool = True
    time_limit_s: float = 60.0
    dp: ParetoDPSettings = ParetoDPSettings()


@dataclass(frozen=True)
class MemorySearchResult:
    """Outcome of :func:`memory_search`.

    Attributes
    ----------
    solution, value
        Best verified fitting choice (``None``, ``inf``) of the problem given.
    optimal
        True when ``solution`` is proven optimal.
    bound
        Proven lower bound on the optimum (the Lagrangian bound, raised to every target
        the DP proved nothing fits under; ``value`` when optimal).
    configs
        Configurations left by fixing at the last target (the problem's own when off).
    targets, seconds, message
        Targets tried, time and a summary.
    """

    solution: StrategySolution | None
    value: float
    optimal: bool
    bound: float
    configs: int
    targets: int
    seconds: float
    message: str


def memory_search(
    problem: StrategyProblem,
    lower: float,
    multipliers: list[float],
    incumbent: tuple[float, StrategySolution] | None = None,
    settings: MemorySearchSettings = MemorySearchSettings(),
) -> MemorySearchResult:
    r"""Prove the memory-limited optimum by :func:`pareto_dp` at growing targets.

    Targets :math:`G_k = \min(L (1 + g\,r^k), UB)` with L the Lagrangian bound, g
    ``first_gap``, r ``growth`` and UB the best verified cost so far (the incumbent, then
    any cheaper fitting choice a DP run returns).  At each target the configurations whose
    min-marginal exceeds :math:`G_k` go (exact for solutions costing at most
    :math:`G_k`), then the DP runs: if its best choice costs at most :math:`G_k` it is
    optimal; otherwise nothing costing at most :math:`G_k` fits, :math:`G_k` becomes a
    proven lower bound, and the next target is tried.  A target equal to UB always ends
    the search (the incumbent survives every pruning).
    """

    start = time.monotonic()
    best_value, best = (incumbent[0], incumbent[1]) if incumbent is not None else (math.inf, None)
    bound = lower
    lams = [float(multipliers[0]) * f for f in settings.spread] if multipliers else []
    configs = problem.total_configs
    gap = settings.first_gap
    notes: list[str] = []

    def done(optimal: bool, text: str, tried: int) -> MemorySearchResult:
        final = best_value if optimal else min(bound, best_value)
        head = f"memory search: {'optimal' if optimal else 'not proven'} {best_value:.12g}, bound {final:.12g}"
        return MemorySearchResult(
            best, best_value, optimal, final, configs, tried, time.monotonic() - start, "; ".join([head, text, *notes])
        )

    if getattr(problem, "memory_model", "static") != "static" or problem.memory_limit_bytes is None:
        return done(False, "only for the static memory model with a limit", 0)
    if not math.isfinite(lower) or not lams:
        return done(False, "needs a finite Lagrangian bound and a multiplier", 0)
    for tried in range(1, settings.max_targets + 1):
        left = settings.time_limit_s - (time.monotonic() - start)
        if left <= 0:
            return done(False, "time limit", tried - 1)
        target = min(lower * (1 + gap) if lower > 0 else lower + gap * abs(lower) + gap, best_value)
        work = problem
        if settings.fixing:
            keep, _ = marginal_masks(
                problem, target, lams, None, MarginalSettings(max_table_entries=settings.dp.max_table_entries)
            )
            if not all(k.any() for k in keep.values()):
                notes.append(f"target {target:.12g}: fixing empties a layer")
                bound = max(bound, target)
                if target >= best_value:
                    return done(True, "fixing at the incumbent's cost leaves nothing cheaper", tried)
                gap *= settings.growth
                continue
            work = restrict(problem, keep)
            configs = work.total_configs
        dp = pareto_dp(work, target, lams, replace_time(settings.dp, left))
        notes.append(f"target {target:.12g}: {work.total_configs} configurations, {dp.labels} labels, {dp.seconds:.2f} s")
        if dp.solution is not None:
            report = verify_strategy(problem, dp.solution)
            if report.feasible and report.objective < best_value:
                best_value, best = report.objective, dp.solution
        if not dp.finished:
            return done(False, dp.message, tried)
        if dp.optimal:
            return done(True, f"proven at target {target:.12g}", tried)
        bound = max(bound, target)
        if target >= best_value:  # cannot happen: the incumbent survives every pruning at its own cost
            return done(True, "nothing cheaper than the incumbent", tried)
        gap *= settings.growth
    return done(False, "out of targets", settings.max_targets)


def replace_time(settings: ParetoDPSettings, seconds: float) -> ParetoDPSettings:
    """``settings`` with a time limit of at most ``seconds``."""
    from dataclasses import replace

    return replace(settings, time_limit_s=min(settings.time_limit_s, seconds))
