r"""Dynamic programs for the layer-wise strategy problem (PaSE's DP and a chain Viterbi).

The problem (:mod:`milp_partition.strategy.problem`): each layer v picks a configuration
:math:`c_v` among :math:`k_v`, minimizing

.. math::

    F(c) = \sum_v a_v(c_v) + \sum_{(u,v) \in E} B_{uv}(c_u, c_v),

optionally with :math:`\sum_v m_v(c_v) \le M`.  Both DPs minimize F exactly and
ignore the memory limit; under a limit their answer is a heuristic (``exact`` is
false and the message says whether it fits).

PaSE's DP as variable elimination
---------------------------------
PaSE (Elango, "Efficient Parallelization Strategy Search for DNN Training",
IPDPS 2021, its ``scheduler.py``) orders the layers and, for each one, tabulates
the best cost of the processed part for every configuration of its *dependent
set* (processed layers still joined by an edge to an unprocessed one).  This is
min-sum variable elimination (Bertelè and Brioschi, *Nonserial Dynamic
Programming*, 1972; Dechter's bucket elimination, 1999): factors are the node
costs :math:`a_v` and edge matrices :math:`B_{uv}`; eliminating v combines the
factors :math:`\phi_1, \dots, \phi_r` that mention v, over the layers
:math:`N(v)` that share a factor with v, into

.. math::

    \tau_v(x_{N(v)}) = \min_{j} \sum_{s=1}^{r} \phi_s(j, x_{N(v)}),
    \qquad \beta_v(x_{N(v)}) = \operatorname{arg\,min}_j \sum_s \phi_s(j, x_{N(v)}),

which replaces them as a new factor on :math:`N(v)`, and joins :math:`N(v)` into
a clique.  After the last elimination the factors left are constants summing to
:math:`\min_c F(c)`; back-tracking in reverse order sets
:math:`c_v = \beta_v(c_{N(v)})` (every layer of :math:`N(v)` is eliminated later,
so it is known by then).  Work and memory are
:math:`\sum_v k_v \prod_{u \in N(v)} k_u`, so the order matters: the greedy order
used here eliminates next the layer whose table
:math:`k_v \prod_{u \in N(v)} k_u` is smallest (ties: fewer neighbours, then
input position), the classical "min-weight" heuristic, which on PaSE's graphs
keeps the dependent sets as small as PaSE's own ordering does.  All table sizes
are known before any arithmetic; when one exceeds ``max_table_entries`` the DP
refuses at once.

Chain DP
--------
On a chain :math:`v_1 \to v_2 \to \dots \to v_n` (Viterbi):

.. math::

    f_1(i) = a_{v_1}(i), \qquad
    f_{t+1}(j) = a_{v_{t+1}}(j) + \min_i \big(f_t(i) + B_{v_t v_{t+1}}(i, j)\big),

optimum :math:`\min_j f_n(j)`, recovered by back-tracking the argmins.

Every value returned is recomputed from the chosen configurations by summing
node and edge costs, never read from a table.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from milp_partition.strategy.problem import StrategyProblem, StrategySolution


@dataclass(frozen=True)
class StrategyDPResult:
    r"""What a strategy DP returns.

    Attributes
    ----------
    solution
        Configuration of every layer, ``None`` when the DP refused or does not apply.
    value
        :math:`F` of ``solution`` summed from its node and edge costs (``inf`` when none).
    seconds
        Wall-clock time of the call.
    exact
        True when ``solution`` minimizes F and no memory limit is in force.
    states
        Table entries computed (:math:`\sum_v k_v \prod_{u \in N(v)} k_u`; for the
        chain DP :math:`\sum_t k_t k_{t+1}`).
    message
        What was done, or why not.
    """

    solution: StrategySolution | None
    value: float
    seconds: float
    exact: bool
    states: int
    message: str


@dataclass(frozen=True)
class StrategyDPSettings:
    """Settings of :func:`pase_dp`.

    Attributes
    ----------
    max_table_entries
        Refuse when eliminating a layer would build a table of more entries than
        this (8 bytes each, plus the argmin table).
    """

    max_table_entries: int = 50_000_000


# --------------------------------------------------------------------------- problem arrays


@dataclass(frozen=True)
class _Arrays:
    """Index form of a problem: node costs (self-loops folded in) and one matrix per edge."""

    ids: tuple[str, ...]
    sizes: tuple[int, ...]
    unary: tuple[np.ndarray, ...]
    pairs: tuple[tuple[int, int, np.ndarray], ...]


def _problem_error(problem: StrategyProblem) -> str | None:
    """Why the DPs cannot read ``problem`` (unknown layer, wrong shape, no configuration), or None."""
    index = problem.index
    for n in problem.nodes:
        if not n.configs:
            return f"layer {n.id!r} has no configuration"
        if np.shape(n.cost) != (len(n.configs),):
            return f"layer {n.id!r}: cost has shape {np.shape(n.cost)}, expected ({len(n.configs)},)"
    for e in problem.edges:
        if e.source not in index or e.target not in index:
            return f"edge {e.source!r} -> {e.target!r} names an unknown layer"
        want = (len(problem.nodes[index[e.source]].configs), len(problem.nodes[index[e.target]].configs))
        if np.shape(e.cost) != want:
            return f"edge {e.source!r} -> {e.target!r}: matrix has shape {np.shape(e.cost)}, expected {want}"
    return None


def _arrays(problem: StrategyProblem) -> _Arrays:
    index = problem.index
    unary = [np.asarray(n.cost, dtype=np.float64).copy() for n in problem.nodes]
    pairs = []
    for e in problem.edges:
        s, t, m = index[e.source], index[e.target], np.asarray(e.cost, dtype=np.float64)
        if s == t:
            unary[s] = unary[s] + np.diagonal(m)
        else:
            pairs.append((s, t, m))
    sizes = tuple(len(n.configs) for n in problem.nodes)
    return _Arrays(tuple(n.id for n in problem.nodes), sizes, tuple(unary), tuple(pairs))


def _objective(problem: StrategyProblem, picks: list[int]) -> float:
    """:math:`F(c)` by its definition, summed with :func:`math.fsum`."""
    index = problem.index
    node_part = math.fsum(float(n.cost[picks[i]]) for i, n in enumerate(problem.nodes))
    edge_part = math.fsum(float(e.cost[picks[index[e.source]], picks[index[e.target]]]) for e in problem.edges)
    return node_part + edge_part


def _solution(problem: StrategyProblem, picks: list[int]) -> StrategySolution:
    return StrategySolution({n.id: n.configs[picks[i]] for i, n in enumerate(problem.nodes)})


def _memory_verdict(problem: StrategyProblem, picks: list[int]) -> str | None:
    """A sentence on the memory limit (None when there is none)."""
    limit = problem.memory_limit_bytes
    if limit is None:
        return None
    if any(n.memory_bytes is None for n in problem.nodes):
        return f"memory limit {limit} bytes ignored by the DP; some layers carry no memory, so the solution cannot be checked"
    used = math.fsum(float(n.memory_bytes[picks[i]]) for i, n in enumerate(problem.nodes))  # type: ignore[index]
    verdict = "within" if used <= limit else "OVER"
    return f"memory limit {limit} bytes ignored by the DP (not exact): its solution needs {used:.0f} bytes, {verdict} the limit"


def _result(
    name: str,
    problem: StrategyProblem,
    picks: list[int],
    start: float,
    states: int,
    head: str,
) -> StrategyDPResult:
    value = _objective(problem, picks)
    memory = _memory_verdict(problem, picks)
    seconds = time.perf_counter() - start
    parts = [f"{name}: {head}", f"objective {value:.12g} in {seconds:.3f} s"]
    if memory is not None:
        parts.append(memory)
    return StrategyDPResult(_solution(problem, picks), value, seconds, memory is None, states, "; ".join(parts))


def _refuse(name: str, start: float, message: str, states: int = 0) -> StrategyDPResult:
    return StrategyDPResult(None, math.inf, time.perf_counter() - start, False, states, f"{name}: {message}")


# --------------------------------------------------------------------------- elimination order


@dataclass(frozen=True)
class _Step:
    """Eliminate ``node``; its table is over ``(node, *others)`` and has ``entries`` entries."""

    node: int
    others: tuple[int, ...]
    entries: int


def _table_entries(v: int, neighbours: set[int], sizes: tuple[int, ...]) -> int:
    return sizes[v] * math.prod(sizes[u] for u in neighbours)


def _elimination_order(sizes: tuple[int, ...], pairs: tuple[tuple[int, int, np.ndarray], ...]) -> list[_Step]:
    """Greedy min-weight order: next, the layer whose table :math:`k_v \\prod_{N(v)} k_u` is smallest.

    Symbolic only (sets of neighbours with fill-in); a lazy heap keyed on
    ``(entries, degree, v)`` is refreshed for the neighbours of each eliminated layer,
    the only layers whose neighbourhood changes.
    """
    adjacent: list[set[int]] = [set() for _ in sizes]
    for s, t, _ in pairs:
        adjacent[s].add(t)
        adjacent[t].add(s)
    key = [(_table_entries(v, adjacent[v], sizes), len(adjacent[v]), v) for v in range(len(sizes))]
    heap = list(key)
    heapq.heapify(heap)
    done = [False] * len(sizes)
    steps: list[_Step] = []
    while heap:
        item = heapq.heappop(heap)
        v = item[2]
        if done[v] or item != key[v]:
            continue
        done[v] = True
        others = tuple(sorted(adjacent[v]))
        steps.append(_Step(v, others, item[0]))
        for u in others:
            adjacent[u].discard(v)
            adjacent[u].update(x for x in others if x != u)
        for u in others:
            key[u] = (_table_entries(u, adjacent[u], sizes), len(adjacent[u]), u)
            heapq.heappush(heap, key[u])
    return steps


# --------------------------------------------------------------------------- elimination


def _aligned(table: np.ndarray, scope: tuple[int, ...], position: dict[int, int], ndim: int) -> np.ndarray:
    """View of ``table`` (axes ``scope``) broadcastable against the joint table (axis i = layer with position i)."""
    where = [position[x] for x in scope]
    order = sorted(range(len(scope)), key=where.__getitem__)
    moved = np.transpose(table, order)
    shape = [1] * ndim
    for x, size in zip(scope, table.shape, strict=True):
        shape[position[x]] = size
    return moved.reshape(shape)


def _eliminate(arrays: _Arrays, steps: list[_Step]) -> list[tuple[int, tuple[int, ...], np.ndarray]]:
    """Run the elimination; return ``(v, N(v), beta_v)`` per step, in elimination order."""
    factors: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}
    mentions: list[set[int]] = [set() for _ in arrays.sizes]
    fresh = itertools.count()

    def add(scope: tuple[int, ...], table: np.ndarray) -> None:
        fid = next(fresh)
        factors[fid] = (scope, table)
        for x in scope:
            mentions[x].add(fid)

    records: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    for v, cost in enumerate(arrays.unary):
        add((v,), cost)
    for s, t, m in arrays.pairs:
        add((s, t), m)
    for step in steps:
        v, axes = step.node, (step.node, *step.others)
        position = {x: i for i, x in enumerate(axes)}
        total: np.ndarray | None = None
        for fid in sorted(mentions[v]):
            scope, table = factors.pop(fid)
            for x in scope:
                mentions[x].discard(fid)
            view = _aligned(table, scope, position, len(axes))
            total = view if total is None else total + view
        assert total is not None  # v's own node cost always mentions v
        best = np.argmin(total, axis=0)
        records.append((v, step.others, best.astype(np.int32)))
        if step.others:
            add(step.others, np.take_along_axis(total, best[None, ...], axis=0)[0])
    return records


def _back_track(records: list[tuple[int, tuple[int, ...], np.ndarray]], count: int) -> list[int]:
    """:math:`c_v = \\beta_v(c_{N(v)})` in reverse elimination order."""
    picks = [-1] * count
    for v, others, best in reversed(records):
        picks[v] = int(best[tuple(picks[u] for u in others)])
    return picks


# --------------------------------------------------------------------------- public


def pase_dp(problem: StrategyProblem, settings: StrategyDPSettings = StrategyDPSettings()) -> StrategyDPResult:
    r"""PaSE's DP, as min-sum variable elimination in a greedy min-weight order.

    .. math::

        \tau_v(x_{N(v)}) = \min_j \Big(\sum_{\phi \ni v} \phi(j, x_{N(v)})\Big),
        \qquad c_v = \beta_v(c_{N(v)}) \text{ in reverse order}

    (see the module docstring).  The min over v is one NumPy reduction over the
    broadcast sum of the factors that mention v.

    Parameters
    ----------
    problem
        The problem; a memory limit is ignored by the DP (the result says whether
        its solution fits).
    settings
        ``max_table_entries``: refuse (solution ``None``) before any arithmetic
        when the order needs a larger table.

    Returns
    -------
    StrategyDPResult
        ``exact`` is true when the DP finished and no memory limit is in force.
    """
    name = "PaSE DP"
    start = time.perf_counter()
    error = _problem_error(problem)
    if error is not None:
        return _refuse(name, start, error)
    arrays = _arrays(problem)
    steps = _elimination_order(arrays.sizes, arrays.pairs)
    states = sum(s.entries for s in steps)
    for step in steps:
        if step.entries > settings.max_table_entries:
            layers = [arrays.ids[x] for x in (step.node, *step.others)]
            return _refuse(
                name,
                start,
                f"a table of {step.entries} entries over layers {layers} exceeds "
                f"max_table_entries={settings.max_table_entries}; use the exact model or raise the cap",
                states,
            )
    records = _eliminate(arrays, steps)
    picks = _back_track(records, len(arrays.ids))
    largest = max(steps, key=lambda s: s.entries, default=None)
    head = f"{len(arrays.ids)} layers, {problem.total_configs} configurations, {len(problem.edges)} edges"
    if largest is not None:
        head += (
            f"; largest table {largest.entries} entries over {1 + len(largest.others)} layers "
            f"(eliminating {arrays.ids[largest.node]!r}), {states} entries in all"
        )
    return _result(name, problem, picks, start, states, head)


def _chain_order(problem: StrategyProblem) -> list[int] | None:
    """Layer indices along the chain, or None when the graph is not one directed path."""
    index = problem.index
    count = len(problem.nodes)
    succ: dict[int, int] = {}
    pred: dict[int, int] = {}
    for e in problem.edges:
        s, t = index[e.source], index[e.target]
        if s == t or s in succ or t in pred:
            return None
        succ[s], pred[t] = t, s
    if count == 0 or len(problem.edges) != count - 1:
        return None
    heads = [v for v in range(count) if v not in pred]
    if len(heads) != 1:
        return None
    order = [heads[0]]
    while order[-1] in succ and len(order) <= count:
        order.append(succ[order[-1]])
    return order if len(order) == count else None


def chain_dp(problem: StrategyProblem) -> StrategyDPResult:
    r"""Viterbi DP on a chain :math:`v_1 \to \dots \to v_n`.

    .. math::

        f_1 = a_{v_1}, \qquad
        f_{t+1}(j) = a_{v_{t+1}}(j) + \min_i \big(f_t(i) + B_{v_t v_{t+1}}(i, j)\big).

    Returns
    -------
    StrategyDPResult
        Solution ``None`` when the graph is not a chain (every layer at most one
        in-edge and one out-edge, all on one directed path).
    """
    name = "chain DP"
    start = time.perf_counter()
    error = _problem_error(problem)
    if error is not None:
        return _refuse(name, start, error)
    order = _chain_order(problem)
    if order is None:
        return _refuse(name, start, "the graph is not a chain (each layer at most one in- and one out-edge, all on one path)")
    index = problem.index
    matrix = {(index[e.source], index[e.target]): np.asarray(e.cost, dtype=np.float64) for e in problem.edges}
    f = np.asarray(problem.nodes[order[0]].cost, dtype=np.float64)
    back: list[np.ndarray] = []
    states = f.size
    for prev, nxt in itertools.pairwise(order):
        total = f[:, None] + matrix[(prev, nxt)]
        states += total.size
        best = np.argmin(total, axis=0)
        back.append(best)
        f = total[best, np.arange(total.shape[1])] + np.asarray(problem.nodes[nxt].cost, dtype=np.float64)
    picks = [-1] * len(order)
    picks[order[-1]] = int(np.argmin(f))
    for t in range(len(order) - 1, 0, -1):
        picks[order[t - 1]] = int(back[t - 1][picks[order[t]]])
    return _result(name, problem, picks, start, states, f"{len(order)} layers on a chain")
