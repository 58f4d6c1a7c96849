r"""Exact DP for the joint problem on a cluster of kinds (:mod:`milp_partition.joint.mixed_problem`).

Stages are built from the last to the first, as in the homogeneous DP (:mod:`milp_partition.joint.dp`), so
that the data-parallel degrees of the later stages are known when a stage's memory is checked.  A state is an
ideal :math:`J` of the graph (the nodes placed in earlier stages: a downset; on a chain of layers, a prefix),
:math:`s`, the sum of the data-parallel degrees of the stages of :math:`V \setminus J`, and
:math:`u = (u_k)_k`, the devices of each kind those stages may use.  Its value is the least bottleneck:

.. math::

    R(V, u, 0) = 0, \qquad R(V, u, s > 0) = \infty,

    R(J, u, s) = \min_{I \supsetneq J,\ k,\ t,\ d} \max\big(F_k(I \setminus J, d, t, \lceil s / d \rceil),\
        R(I, u - d t\, e_k, s - d)\big)

over ideals :math:`I`, kinds :math:`k`, tensor-parallel degrees :math:`t` the kind offers (at most its devices
per node) and :math:`d \mid N` with :math:`d \le s` and :math:`d t \le u_k` (c: devices per kind).
:math:`F_k(S, d, t, y)` is stage :math:`S`'s least time per sample on kind :math:`k` with :math:`y` micro-batches
in flight: the exact multiple-choice knapsack over the nodes' configurations under the kind's memory (c: memory),
:func:`milp_partition.joint.knapsack.min_cost_exact`, the homogeneous DP's own, with per node and configuration
cost :math:`P / d + (d - 1) W / d` (:math:`P = p + \text{boundary bytes} / B_k`, :math:`W = 4 w / (N B_k)`) and
memory :math:`a y + b`.  Where every configuration of a node has the same :math:`w` (imported graphs: vanilla and
recomputation hold the same parameters) the best choice does not depend on :math:`d`, and one knapsack per
:math:`y` serves every :math:`d`; where, besides, every configuration of a node has the same :math:`b`, one Pareto
frontier of (activation bytes, cost) per stage serves every :math:`y` (:func:`_frontier`, the knapsack's own frontier
before a capacity is known).  The optimum is :math:`\min_{s \le \min(N, \sum_k K_k)} R(\emptyset, K, s)`
(c: data parallelism, :math:`\sum_i d_i \le N`).

Exactness.  Every plan is a chain of ideals with one (kind, d, t, configurations) per stage; the recursion
ranges over all of them, the knapsack is exact, and :math:`R` is monotone in :math:`u` (a stage leaves
:math:`u - d t e_k \ge 0`, unused devices stay unused), so the value is the optimum: the DP proves it.
With one kind it is the homogeneous problem's DP without its bisection.

Size.  :math:`O(P \cdot S \cdot \sum_k |T_k| |D| \cdot \prod_k (K_k + 1))` operations in numpy vector steps (one
per ideal :math:`J`, kind, degree and :math:`d`, over the candidates :math:`I`, every :math:`s` and every :math:`u`),
with :math:`P` the pairs of ideals (:math:`n (n + 1) / 2` on a chain of :math:`n` layers),
:math:`S = \min(N, \sum_k K_k)`, :math:`T_k` the degrees and :math:`D` the divisors of :math:`N`: polynomial in the
layers and the counts.  For 8 H100 + 16 A100 the device grid has :math:`9 \cdot 17 = 153` entries and a 32-block
Llama import (41 ideals) takes seconds; 32 H100 + 64 A100 (2145 entries) about a hundred seconds on a loaded 2-core
machine, 19 s when an incumbent's value lets the DP skip slower stages (``upper``).  The DP checks its
:class:`~milp_partition.budget.Budget` once per ideal; stopped, it returns its best single-stage plan (if any)
and the work bound :math:`\sum_v \min_{k, t} t\, p^{\min}_{vkt} / \sum_k K_k` (every stage on :math:`d t` devices
takes at least :math:`t \sum p / (d t)`), never a value it did not prove.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from milp_partition.budget import Budget
from milp_partition.joint.knapsack import min_cost_exact
from milp_partition.joint.mixed_problem import MixedJointProblem, MixedPlan, MixedStage

#: Most ideals the DP enumerates (imported graphs are near chains: tens of ideals).
MAX_IDEALS = 20_000
#: Elements of one vector step's (candidates, s, devices) array (the candidates are split to stay under it)
CHUNK_ELEMENTS = 4_000_000
#: Relative slack on an incumbent's value before stages slower than it are skipped (the DP's and the verifier's sums)
UPPER_SLACK = 1e-9


class TooManyIdeals(Exception):
    """The graph has more ideals than :data:`MAX_IDEALS`."""


@dataclass
class MixedDPResult:
    """What the DP found.

    Attributes
    ----------
    value
        The best plan's time per sample as the DP computes it (``inf``: no plan).
    plan
        That plan (``None``: none).
    complete
        The DP ran to its end: ``value`` is the optimum (``inf``: the instance is infeasible).
    bound
        A proven lower bound on the optimum (``value`` when complete).
    ideals, knapsacks
        Ideals enumerated; exact knapsacks solved (after the closed-form cases).
    """

    value: float
    plan: MixedPlan | None
    complete: bool
    bound: float
    ideals: int = 0
    knapsacks: int = 0
    notes: list[str] = field(default_factory=list)


def ideals_of(ids: list[str], edges: list[tuple[str, str]], max_ideals: int = MAX_IDEALS) -> list[int]:
    """Every downset of the DAG as a bit mask (bit ``i``: ``ids[i]``), by size ascending: the empty set first, all last."""
    index = {v: i for i, v in enumerate(ids)}
    pred = [0] * len(ids)
    for source, target in edges:
        pred[index[target]] |= 1 << index[source]
    found, level, seen = [0], {0}, {0}
    while level:
        nxt: set[int] = set()
        for mask in level:
            for v in range(len(ids)):
                bit = 1 << v
                if not mask & bit and pred[v] & ~mask == 0 and mask | bit not in seen:
                    seen.add(mask | bit)
                    nxt.add(mask | bit)
        if len(seen) > max_ideals:
            raise TooManyIdeals(f"the graph has more than {max_ideals} ideals (downsets); the mixed DP enumerates them all")
        found.extend(sorted(nxt))
        level = nxt
    if found[-1] != (1 << len(ids)) - 1:
        raise ValueError("the graph is not a DAG: its ideals do not reach every node")
    return found


class _Stages:
    """The stage values ``F_k(S, d, t, y)``, cached by the stage's rows (stages of equal rows share them)."""

    def __init__(self, problem: MixedJointProblem, smax: int, divisors: list[int]) -> None:
        self.problem = problem
        self.smax = smax
        self.divisors = divisors
        self.N = problem.microbatches
        self.ids = [n.id for n in problem.graph.nodes]
        self.index = {v: i for i, v in enumerate(self.ids)}
        self.src = np.array([self.index[e.source] for e in problem.graph.edges], dtype=np.int64)
        self.tgt = np.array([self.index[e.target] for e in problem.graph.edges], dtype=np.int64)
        #: (kind, t) -> p, w, a, b (nodes, options; inf where a node has fewer options) and the edges' bytes as the
        #: target's option (in) and the source's option (out) see them: 2 (c + sync), forward and back
        self.arrays: dict[tuple[str, int], tuple[np.ndarray, ...]] = {}
        self.cache: dict[tuple[object, ...], np.ndarray] = {}
        self.knapsacks = 0

    def _arrays(self, kind: str, t: int) -> tuple[np.ndarray, ...]:
        hit = self.arrays.get((kind, t))
        if hit is not None:
            return hit
        table = self.problem.tables[kind].nodes
        n = len(self.ids)
        width = max(len(node.configs[t]) for node in table)
        p, w, a, b = (np.full((n, width), np.inf) for _ in range(4))
        for v, node in enumerate(table):
            for o, c in enumerate(node.configs[t]):
                p[v, o], w[v, o], a[v, o], b[v, o] = c.time_per_sample_s, c.parameter_bytes, c.activation_bytes, c.fixed_bytes
        e_in, e_out = np.zeros((len(self.src), width)), np.zeros((len(self.src), width))
        for q, e in enumerate(self.problem.tables[kind].edges):  # this kind's bytes: its link's latency folded in
            for o, c in enumerate(table[self.tgt[q]].configs[t]):
                e_in[q, o] = 2.0 * (e.bytes + c.sync_fw_bytes.get(e.source, 0.0))
            for o, c in enumerate(table[self.src[q]].configs[t]):
                e_out[q, o] = 2.0 * (e.bytes + c.sync_bw_bytes.get(e.target, 0.0))
        hit = self.arrays[kind, t] = (p, w, a, b, e_in, e_out)
        return hit

    def rows(self, stage: int, kind: str, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int]]:
        """``P, W, A, Bf`` (nodes of the stage, options; ``inf`` where a node has fewer options) and the nodes.

        ``P = p + comm / B_k`` with comm the bytes of the edges crossing the stage's boundary at that node (the
        target's for an edge into the stage, the source's for one out of it), ``W = 4 w / (N B_k)``.
        """
        p, w, a, b, e_in, e_out = self._arrays(kind, t)
        B = self.problem.kind(kind).bandwidth_bytes_per_s
        member = np.array([stage >> i & 1 for i in range(len(self.ids))], dtype=bool)
        comm = np.zeros_like(p)
        into = member[self.tgt] & ~member[self.src]  # (c) an edge into the stage
        out = member[self.src] & ~member[self.tgt]  # an edge out of the stage
        np.add.at(comm, self.tgt[into], e_in[into])
        np.add.at(comm, self.src[out], e_out[out])
        nodes = np.flatnonzero(member)
        P = p[nodes] + comm[nodes] / B
        W = np.where(np.isfinite(p[nodes]), 4.0 * w[nodes] / (self.N * B), np.inf)
        A, Bf = a[nodes], b[nodes]
        keep = np.isfinite(P).any(axis=0)  # drop option columns no node of the stage has
        return P[:, keep], W[:, keep], A[:, keep], Bf[:, keep], nodes.tolist()

    def table(self, stage: int, kind: str, t: int) -> np.ndarray:
        """``F[di, y]`` for ``d = divisors[di]`` and ``y`` in ``0..smax`` (``y = 0`` unused: ``inf``)."""
        P, W, A, Bf, _ = self.rows(stage, kind, t)
        order = np.lexsort(np.concatenate([P, W, A, Bf], axis=1).T[::-1])
        key = (kind, t, np.concatenate([P, W, A, Bf], axis=1)[order].tobytes(), P.shape)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = self._table(P, W, A, Bf, self.problem.kind(kind).memory_bytes)
        return hit

    def _table(self, P: np.ndarray, W: np.ndarray, A: np.ndarray, Bf: np.ndarray, memory: float) -> np.ndarray:
        out = np.full((len(self.divisors), self.smax + 1), np.inf)
        finite = np.isfinite(P)
        W0 = np.where(finite, W, 0.0)
        wmax, wmin = np.where(finite, W, -np.inf).max(axis=1), np.where(finite, W, np.inf).min(axis=1)
        ys = np.arange(1, self.smax + 1)
        # (c) memory: a y + b per node and option; where even the least memory does not fit, no choice does
        fits = (A[None, :, :] * ys[:, None, None] + Bf[None, :, :]).min(axis=2).sum(axis=1) <= memory
        if bool(np.all(wmax == wmin)):  # every option of a node has the same w: one knapsack per y serves every d
            g = self._over_y(P, A, Bf, memory, ys, fits)
            for di, d in enumerate(self.divisors):
                out[di, 1:] = (g + (d - 1) * float(wmax.sum())) / d
        else:
            for di, d in enumerate(self.divisors):
                out[di, 1:] = self._over_y(P / d + (d - 1) * W0 / d, A, Bf, memory, ys, fits)
        return out

    def _over_y(
        self, cost: np.ndarray, A: np.ndarray, Bf: np.ndarray, memory: float, ys: np.ndarray, fits: np.ndarray
    ) -> np.ndarray:
        """The knapsack's least cost for each ``y`` of ``ys`` (``inf`` where ``fits`` is false)."""
        rows = np.arange(cost.shape[0])
        fast = np.argmin(cost, axis=1)
        fast_cost = float(np.sum(cost[rows, fast]))
        fast_mem = float(np.sum(A[rows, fast])) * ys + float(np.sum(Bf[rows, fast]))
        out = np.full(len(ys), np.inf)
        easy = fits & (fast_mem <= memory)  # the fastest choice fits (ties: any fastest, the same cost)
        out[easy] = fast_cost
        hard = np.flatnonzero(fits & ~easy)
        if len(hard) == 0:
            return out
        finite = np.isfinite(cost)
        b_max, b_min = np.where(finite, Bf, -np.inf).max(axis=1), np.where(finite, Bf, np.inf).min(axis=1)
        if bool(np.all(b_max == b_min)):  # b does not depend on the choice: one frontier of (sum a, cost) serves every y
            f_mem, f_cost = _frontier(cost, A)
            self.knapsacks += 1
            b_sum = float(b_max.sum())
            for q in hard:
                ok = np.flatnonzero(f_mem * float(ys[q]) + b_sum <= memory)  # (c) memory; f_cost falls as f_mem grows
                out[q] = float(f_cost[ok[-1]]) if len(ok) else np.inf
            return out
        for q in hard:
            self.knapsacks += 1
            out[q] = min_cost_exact(cost, A * float(ys[q]) + Bf, memory)[0]
        return out

    def choice(self, stage: int, kind: str, t: int, d: int, y: int) -> dict[str, str]:
        """Each node's configuration id in a least-time choice of the stage (the knapsack's, with its choices)."""
        P, W, A, Bf, nodes = self.rows(stage, kind, t)
        W0 = np.where(np.isfinite(P), W, 0.0)
        cost = P / d + (d - 1) * W0 / d
        _, pick = min_cost_exact(cost, A * y + Bf, self.problem.kind(kind).memory_bytes, choices=True)
        assert pick is not None
        table = self.problem.tables[kind].nodes
        return {self.ids[v]: table[v].configs[t][j].id for v, j in zip(nodes, pick, strict=True)}


def _frontier(cost: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Pareto frontier of (sum of ``A``, sum of ``cost``) over every choice of one option per node (rows), by
    memory ascending and cost descending: a point is kept only if no other has both less or equal ``A`` and less cost
    (the exact knapsack's frontier, :func:`milp_partition.joint.knapsack.min_cost_exact`, before a capacity is known)."""
    width = cost.shape[1]
    # identical nodes form one group: choosing for the group is choosing how many take each option
    groups, counts = np.unique(np.concatenate([cost, A], axis=1), axis=0, return_counts=True)
    f_mem, f_cost = np.zeros(1), np.zeros(1)
    for row, m in zip(groups, counts.tolist(), strict=True):
        c_row, a_row = row[:width], row[width:]
        opts = np.flatnonzero(np.isfinite(c_row) & np.isfinite(a_row))
        how_many = np.array(
            [np.bincount(pick, minlength=len(opts)) for pick in itertools.combinations_with_replacement(range(len(opts)), m)],
            dtype=float,
        )
        c_mem = (f_mem[:, None] + (how_many @ a_row[opts])[None, :]).reshape(-1)
        c_cost = (f_cost[:, None] + (how_many @ c_row[opts])[None, :]).reshape(-1)
        order = np.lexsort((c_cost, c_mem))
        c_mem, c_cost = c_mem[order], c_cost[order]
        keep = c_cost < np.concatenate([[np.inf], np.minimum.accumulate(c_cost)[:-1]])
        f_mem, f_cost = c_mem[keep], c_cost[keep]
    return f_mem, f_cost


def _work_bound(problem: MixedJointProblem) -> float:
    """``sum_v min_{k, t, o} t p_vkto / sum_k K_k``: every stage on ``d t`` devices takes at least ``t sum p / (d t)``."""
    total = 0.0
    for i in range(len(problem.graph.nodes)):
        best = math.inf
        for k in problem.kinds:
            for t in problem.degrees(k.name):
                node = problem.tables[k.name].nodes[i]
                best = min(best, t * min(c.time_per_sample_s for c in node.configs[t]))
        total += best
    return total / problem.total_devices if problem.total_devices else math.inf


def solve_mixed_dp(
    problem: MixedJointProblem, budget: Budget | None = None, max_ideals: int = MAX_IDEALS, upper: float = math.inf
) -> MixedDPResult:
    """The optimum of ``problem`` by the DP of the module docstring (or, stopped by ``budget``, a bound and a plan).

    ``upper``: the value of a known plan (an incumbent).  A stage slower than ``upper`` (with a relative slack of
    :data:`UPPER_SLACK` for the sums' rounding) cannot be in a plan better than it, so the DP skips it: the optimum is
    unchanged (every stage of an optimal plan takes at most the optimum, at most ``upper``).  Should no plan come out
    all the same (the slack not covering a rounding), the DP runs again without it.

    Raises
    ------
    TooManyIdeals
        When the graph has more than ``max_ideals`` ideals.
    """
    graph = problem.graph
    ids = [n.id for n in graph.nodes]
    ideals = ideals_of(ids, [(e.source, e.target) for e in graph.edges], max_ideals)
    N = problem.microbatches
    kinds = list(problem.kinds)
    dims = tuple(k.count + 1 for k in kinds)
    grid = int(np.prod(dims))
    smax = min(N, problem.total_devices)
    divisors = [d for d in range(1, smax + 1) if N % d == 0]
    stages = _Stages(problem, smax, divisors)
    n_ideals = len(ideals)
    full = n_ideals - 1
    R = np.full((n_ideals, smax + 1, grid), np.inf)
    R[full, 0, :] = 0.0
    choice_I = np.full((n_ideals, smax + 1, grid), -1, dtype=np.int32)
    choice_code = np.full((n_ideals, smax + 1, grid), -1, dtype=np.int32)
    codes: list[tuple[int, int, int]] = []  # (kind index, t, d)
    for ki, k in enumerate(kinds):
        for t in problem.degrees(k.name):
            for d in divisors:
                if d * t <= k.count:  # (c) devices per kind: a stage alone fits its kind
                    codes.append((ki, t, d))
    chunk = max(1, CHUNK_ELEMENTS // ((smax + 1) * grid))  # candidates per vector step
    cap = upper * (1 + UPPER_SLACK) if math.isfinite(upper) else math.inf
    stopped = False
    for j in range(n_ideals - 2, -1, -1):
        if budget is not None and budget.expired():
            stopped = True
            break
        J = ideals[j]
        cand = np.array([i for i in range(j + 1, n_ideals) if ideals[i] & J == J], dtype=np.int64)
        if len(cand) == 0:
            continue
        F: dict[tuple[int, int], np.ndarray] = {}
        for ki, k in enumerate(kinds):
            for t in problem.degrees(k.name):
                F[ki, t] = np.stack([stages.table(ideals[int(i)] & ~J, k.name, t) for i in cand])  # (C, D, smax + 1)
        for code, (ki, t, d) in enumerate(codes):  # every s at once: R(J, ., s) for s = d .. smax
            ss = np.arange(d, smax + 1)
            f_all = F[ki, t][:, divisors.index(d), -(-ss // d)]  # (C, S): the stage's time at y = ceil(s / d)
            f_all = np.where(f_all <= cap, f_all, np.inf)  # slower than a known plan: in no better one
            rows = np.flatnonzero(np.isfinite(f_all).any(axis=1))  # stages that fit at some s
            for lo in range(0, len(rows), chunk):  # a few candidates at a time: (C, S, G) stays small
                part = rows[lo : lo + chunk]
                _transition(R, j, cand[part], f_all[part], ss, ki, d * t, dims, choice_I, choice_code, code)
    result = MixedDPResult(math.inf, None, False, _work_bound(problem), ideals=n_ideals)
    if stopped:
        result.notes.append("the budget ran out before the DP's end: its best single-stage plan and the work bound")
        _single_stage(problem, stages, ideals, codes, divisors, result)
        result.knapsacks = stages.knapsacks
        return result
    last = grid - 1  # every device of every kind
    values = R[0, :, last]
    s_best = int(np.argmin(values))
    result.value, result.complete, result.bound = float(values[s_best]), True, float(values[s_best])
    result.knapsacks = stages.knapsacks
    if math.isinf(result.value) and math.isfinite(upper):  # the known plan was cut by a rounding: no pruning
        return solve_mixed_dp(problem, budget, max_ideals)
    if math.isfinite(result.value):
        result.plan = _rebuild(problem, stages, ideals, codes, choice_I, choice_code, s_best, dims)
    return result


def _transition(
    R: np.ndarray,
    j: int,
    cand: np.ndarray,
    f: np.ndarray,
    ss: np.ndarray,
    ki: int,
    dt: int,
    dims: tuple[int, ...],
    choice_I: np.ndarray,
    choice_code: np.ndarray,
    code: int,
) -> None:
    """``R(J, u, s) = min(R(J, u, s), max(f[I, s], R(I, u - d t e_k, s - d)))`` over the candidates ``I`` and every
    ``s`` of ``ss`` (``d = ss[0]``), recording the choice where it improves."""
    d = int(ss[0])
    # (c) devices per kind: only u with u_k >= d t can take the stage; there R(I, u - d t e_k, s - d)
    src = [slice(None)] * (len(dims) + 2)
    src[ki + 2] = slice(0, dims[ki] - dt)
    dst = [slice(None)] * (len(dims) + 1)
    dst[0] = slice(d, None)
    dst[ki + 1] = slice(dt, dims[ki])
    prev = R[cand][:, ss - d].reshape((len(cand), len(ss), *dims))[tuple(src)]  # (C, S, ..., u_k - d t, ...)
    val = np.maximum(f.reshape(f.shape + (1,) * len(dims)), prev)
    best = np.argmin(val, axis=0)
    bv = np.take_along_axis(val, best[None], axis=0)[0]
    target = R[j].reshape((R.shape[1], *dims))[tuple(dst)]  # a view of R(J, ., s) on those u
    better = bv < target
    if better.any():
        target[better] = bv[better]
        choice_I[j].reshape((R.shape[1], *dims))[tuple(dst)][better] = cand[best[better]]
        choice_code[j].reshape((R.shape[1], *dims))[tuple(dst)][better] = code


def _rebuild(
    problem: MixedJointProblem,
    stages: _Stages,
    ideals: list[int],
    codes: list[tuple[int, int, int]],
    choice_I: np.ndarray,
    choice_code: np.ndarray,
    s: int,
    dims: tuple[int, ...],
) -> MixedPlan:
    """The plan of ``R(empty, K, s)`` from the recorded choices."""
    kinds = list(problem.kinds)
    u = [k.count for k in kinds]
    j, out = 0, []
    while j != len(ideals) - 1:
        cell = int(np.ravel_multi_index(tuple(u), dims))
        i, code = int(choice_I[j, s, cell]), int(choice_code[j, s, cell])
        ki, t, d = codes[code]
        stage = ideals[i] & ~ideals[j]
        configs = stages.choice(stage, kinds[ki].name, t, d, -(-s // d))
        nodes = tuple(stages.ids[v] for v in range(len(stages.ids)) if stage >> v & 1)
        out.append(MixedStage(nodes, kinds[ki].name, d, t, configs))
        u[ki] -= d * t
        s -= d
        j = i
    return MixedPlan(tuple(out))


def _single_stage(
    problem: MixedJointProblem,
    stages: _Stages,
    ideals: list[int],
    codes: list[tuple[int, int, int]],
    divisors: list[int],
    result: MixedDPResult,
) -> None:
    """The best plan of one stage (every node on one kind), as ``result``'s plan (not a proof)."""
    result.value, result.plan = _best_one_stage(problem, stages, ideals[-1], codes, divisors)


def _best_one_stage(
    problem: MixedJointProblem, stages: _Stages, whole: int, codes: list[tuple[int, int, int]], divisors: list[int]
) -> tuple[float, MixedPlan | None]:
    best: tuple[float, tuple[int, int, int] | None] = (math.inf, None)
    for ki, t, d in codes:
        value = float(stages.table(whole, problem.kinds[ki].name, t)[divisors.index(d), 1])  # one stage: y = 1
        if value < best[0]:
            best = (value, (ki, t, d))
    if best[1] is None:
        return math.inf, None
    ki, t, d = best[1]
    name = problem.kinds[ki].name
    return best[0], MixedPlan((MixedStage(tuple(stages.ids), name, d, t, stages.choice(whole, name, t, d, 1)),))


def best_one_stage(problem: MixedJointProblem) -> tuple[float, MixedPlan | None]:
    """The best plan with every node in one stage (one kind, its best d and t, the exact knapsack): a cheap first
    incumbent, not a proof; ``(inf, None)`` when no single stage fits."""
    N = problem.microbatches
    divisors = [d for d in range(1, min(N, problem.total_devices) + 1) if N % d == 0]
    stages = _Stages(problem, 1, divisors)
    codes = [
        (ki, t, d) for ki, k in enumerate(problem.kinds) for t in problem.degrees(k.name) for d in divisors if d * t <= k.count
    ]
    return _best_one_stage(problem, stages, (1 << len(stages.ids)) - 1, codes, divisors)
