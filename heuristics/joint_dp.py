r"""Exact DP for the joint problem (Piper's): stages over ideals, data/tensor degrees, exact per-stage knapsack.

Feasibility for a target time per sample :math:`T`
--------------------------------------------------
Stages are built from the last to the first, so that the data-parallel degrees of
the later stages are known.  A state is an ideal :math:`I` (the nodes still to place:
a downset of the DAG) and :math:`s`, the sum of the data-parallel degrees of the
stages already built; its value :math:`D(I, s)` is the fewest devices those stages
use with every stage's time per sample at most :math:`T`:

.. math::

    D(V, 0) = 0, \qquad
    D(J, s + d) = \min_{I \supsetneq J,\ t,\ d \mid N} D(I, s) + d t
    \quad \text{s.t.} \quad F(I \setminus J, d, t, \lceil (s + d) / d \rceil) \le T,\
    D(I, s) + d t \le k,\ s + d \le \min(k, N),

where :math:`F(S, d, t, y)` is the least time per sample of stage :math:`S` (the exact
multiple-choice knapsack of :mod:`milp_partition.heuristics.joint_knapsack`).  A
plan with :math:`\max_i TPS_i \le T` exists iff some :math:`D(\emptyset, s)` is
finite: a smaller :math:`D` at equal :math:`s` never hurts (later-built stages see
only :math:`s` and the devices left), so the DP is exhaustive.  :math:`F` is
non-decreasing in :math:`y` (memory only tightens), so each transition admits all
:math:`s \le d (y_{\max} - 1)` at once.  Pruning: a stage on :math:`d t` devices
takes at least :math:`\sum_v \min_t t\, p^{\min}_{v t} / (d t)`, so the nodes of
:math:`I` need at least :math:`W(I) / T` devices.

Search
------
:func:`search` bisects :math:`T` between a proven lower bound (the largest :math:`T`
found infeasible, first :math:`W(V)/k`) and the best plan's value; a feasible pass
returns a plan whose value becomes the new upper end.  When the two ends are within
the relative tolerance, a pass with the strict test :math:`F < T_{\text{best}}`
proves the best plan optimal (no plan is strictly better) or finds a better one.
With ``greedy=True`` the stage choice is Piper's greedy instead (a baseline, not exact).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from milp_partition.heuristics.joint_knapsack import min_cost_exact, min_cost_greedy
from milp_partition.joint.problem import JointPlan, JointProblem, JointStage


class TooManyIdeals(Exception):
    """The graph has more ideals than the cap; the exact DP cannot run."""


@dataclass
class JointData:
    """Array views of a :class:`JointProblem` for the DP."""

    problem: JointProblem
    ids: list[str]
    preds: list[list[tuple[int, float]]]
    succs: list[list[tuple[int, float]]]
    degrees: tuple[int, ...]
    divisors: list[int]
    #: t -> arrays (nodes, options): p, w, a, b; inf where a node has fewer options
    p: dict[int, np.ndarray]
    w: dict[int, np.ndarray]
    a: dict[int, np.ndarray]
    b: dict[int, np.ndarray]
    #: t -> node -> option -> {neighbour index: bytes}
    fw: dict[int, list[list[dict[int, float]]]]
    bw: dict[int, list[list[dict[int, float]]]]
    work: np.ndarray  # per node: min over t of t * min option time
    ideals: list[int] = field(default_factory=list)
    ideal_index: dict[int, int] = field(default_factory=dict)
    ideal_work: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ideal_words: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=np.uint64))


def joint_data(problem: JointProblem, max_ideals: int = 200_000) -> JointData:
    """Index the problem and enumerate its ideals (raises :class:`TooManyIdeals` past ``max_ideals``)."""
    ids = [n.id for n in problem.nodes]
    index = {v: i for i, v in enumerate(ids)}
    n = len(ids)
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for e in problem.edges:
        preds[index[e.target]].append((index[e.source], e.bytes))
        succs[index[e.source]].append((index[e.target], e.bytes))
    degrees = problem.degrees
    cl = problem.cluster
    divisors = [d for d in range(1, min(cl.devices, cl.microbatches) + 1) if cl.microbatches % d == 0]
    p, w, a, b, fw, bw = {}, {}, {}, {}, {}, {}
    work = np.full(n, np.inf)
    for t in degrees:
        width = max(len(nd.configs[t]) for nd in problem.nodes)
        arrs = [np.full((n, width), np.inf) for _ in range(4)]
        fw[t], bw[t] = [], []
        for i, nd in enumerate(problem.nodes):
            fw_row, bw_row = [], []
            for j, c in enumerate(nd.configs[t]):
                arrs[0][i, j] = c.time_per_sample_s
                arrs[1][i, j] = c.parameter_bytes
                arrs[2][i, j] = c.activation_bytes
                arrs[3][i, j] = c.fixed_bytes
                fw_row.append({index[u]: x for u, x in c.sync_fw_bytes.items()})
                bw_row.append({index[u]: x for u, x in c.sync_bw_bytes.items()})
            fw[t].append(fw_row)
            bw[t].append(bw_row)
        p[t], w[t], a[t], b[t] = arrs
        work = np.minimum(work, t * arrs[0].min(axis=1))
    data = JointData(problem, ids, preds, succs, degrees, divisors, p, w, a, b, fw, bw, work)
    _enumerate_ideals(data, max_ideals)
    return data


def _enumerate_ideals(data: JointData, max_ideals: int) -> None:
    n = len(data.ids)
    pred_mask = [sum(1 << u for u, _ in data.preds[v]) for v in range(n)]
    level = {0}
    found = [0]
    seen = {0}
    while level:
        nxt: set[int] = set()
        for ideal in level:
            for v in range(n):
                bit = 1 << v
                if not ideal & bit and pred_mask[v] & ~ideal == 0:
                    new = ideal | bit
                    if new not in seen:
                        seen.add(new)
                        nxt.add(new)
        if len(seen) > max_ideals:
            raise TooManyIdeals(f"the graph has more than {max_ideals} ideals")
        found.extend(sorted(nxt))
        level = nxt
    data.ideals = found  # by size, ascending; found[0] is the empty set, found[-1] all nodes
    data.ideal_index = {m: i for i, m in enumerate(found)}
    words = (n + 63) // 64
    arr = np.zeros((len(found), words), dtype=np.uint64)
    for i, m in enumerate(found):
        for k in range(words):
            arr[i, k] = (m >> (64 * k)) & ((1 << 64) - 1)
    data.ideal_words = arr
    data.ideal_work = np.array([sum(data.work[v] for v in _bits(m)) for m in found])


def _bits(mask: int) -> list[int]:
    out = []
    v = 0
    while mask:
        if mask & 1:
            out.append(v)
        mask >>= 1
        v += 1
    return out


@dataclass
class _StageTable:
    """One stage ``I \\ J`` on degree t: per node and option ``P = p + comm / B``, ``W = 4 w / (N B)``, ``a``, ``b``."""

    nodes: list[int]
    P: np.ndarray
    W: np.ndarray
    A: np.ndarray
    Bf: np.ndarray
    fast: dict[int, tuple[float, int]] = field(default_factory=dict)  # d -> (fastest cost, largest y it fits)
    values: dict[tuple[int, int], float] = field(default_factory=dict)  # (d, y) -> F
    y_small: int = -1  # largest y the least-memory choice fits (computed lazily)


class JointDP:
    """The feasibility DP and its caches (see the module docstring)."""

    def __init__(self, data: JointData, greedy: bool = False) -> None:
        self.data = data
        self.greedy = greedy
        self.knapsack: Callable = min_cost_greedy if greedy else min_cost_exact
        self.tables: dict[tuple[int, int, int], _StageTable] = {}
        cl = data.problem.cluster
        self.k = cl.devices
        self.M = cl.memory_bytes
        self.B = cl.bandwidth_bytes_per_s
        self.N = cl.microbatches
        self.smax = min(cl.devices, cl.microbatches)
        self.passes = 0

    # -- stage tables ---------------------------------------------------------------------------
    def table(self, i: int, j: int, t: int) -> _StageTable:
        key = (i, j, t)
        tab = self.tables.get(key)
        if tab is not None:
            return tab
        d = self.data
        big, small = d.ideals[i], d.ideals[j]
        nodes = _bits(big & ~small)
        width = d.p[t].shape[1]
        P = d.p[t][nodes].copy()
        for r, v in enumerate(nodes):
            for o in range(width):
                if not math.isfinite(P[r, o]):
                    continue
                comm = 0.0
                for u, c in d.preds[v]:
                    if small >> u & 1:
                        comm += 2.0 * (c + d.fw[t][v][o].get(u, 0.0))
                for u, c in d.succs[v]:
                    if not big >> u & 1:
                        comm += 2.0 * (c + d.bw[t][v][o].get(u, 0.0))
                P[r, o] += comm / self.B
        W = 4.0 * d.w[t][nodes] / (self.N * self.B)
        tab = _StageTable(nodes, P, W, d.a[t][nodes], d.b[t][nodes])
        self.tables[key] = tab
        return tab

    def cost(self, tab: _StageTable, dp: int) -> np.ndarray:
        return (tab.P + (dp - 1) * tab.W) / dp

    def value(self, tab: _StageTable, dp: int, y: int) -> float:
        """F(stage, d, y): the least (or greedy) time per sample of the stage."""
        key = (dp, y)
        v = tab.values.get(key)
        if v is None:
            v = self.knapsack(self.cost(tab, dp), tab.A * y + tab.Bf, self.M)[0]
            tab.values[key] = v
        return v

    def choice(self, tab: _StageTable, dp: int, y: int) -> list[int]:
        value, pick = self.knapsack(self.cost(tab, dp), tab.A * y + tab.Bf, self.M, choices=True)
        if pick is None:
            raise AssertionError("stage chosen by the DP does not fit")
        return pick

    def _fast(self, tab: _StageTable, dp: int) -> tuple[float, int]:
        f = tab.fast.get(dp)
        if f is not None:
            return f
        cost = self.cost(tab, dp)
        rows = np.arange(len(tab.nodes))
        best = cost.min(axis=1, keepdims=True)
        j = np.argmin(np.where(cost == best, tab.A, np.inf), axis=1)
        fast_cost = float(cost[rows, j].sum())
        sa, sb = float(tab.A[rows, j].sum()), float(tab.Bf[rows, j].sum())
        if self.greedy:
            y_fit = 0  # the greedy's value is recomputed at every y
        elif sb > self.M:
            y_fit = 0
        elif sa <= 0:
            y_fit = self.smax + 1
        else:
            y_fit = int(min(self.smax + 1, math.floor((self.M - sb) / sa)))
            while y_fit > 0 and sa * y_fit + sb > self.M:
                y_fit -= 1
        f = (fast_cost, y_fit)
        tab.fast[dp] = f
        return f

    def _y_small(self, tab: _StageTable) -> int:
        if tab.y_small >= 0:
            return tab.y_small
        lo, hi = 0, self.smax + 1  # largest y in [0, hi] with the least-memory choice fitting (0: none)

        def fits(y: int) -> bool:
            return float((tab.A * y + tab.Bf).min(axis=1).sum()) <= self.M

        if fits(hi):
            lo = hi
        else:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fits(mid):
                    lo = mid
                else:
                    hi = mid
        tab.y_small = lo
        return lo

    def y_max(self, tab: _StageTable, dp: int, target: float, strict: bool, y_cap: int) -> int:
        """The largest y <= y_cap with F(stage, d, y) <= target (< target when strict); 0 when none."""
        fast_cost, y_fit = self._fast(tab, dp)
        if fast_cost > target or (strict and fast_cost >= target):
            return 0
        if y_fit >= y_cap:
            return y_cap
        hi = min(y_cap, self._y_small(tab))
        lo = y_fit  # F(y) = fast_cost <= target for y <= y_fit

        def ok(y: int) -> bool:
            v = self.value(tab, dp, y)
            return v < target if strict else v <= target

        if hi <= lo:
            return lo
        if ok(hi):
            return hi
        while hi - lo > 1:  # ok(lo) (or lo == 0), not ok(hi)
            mid = (lo + hi) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid
        return lo

    # -- one feasibility pass --------------------------------------------------------------------
    def feasible(self, target: float, strict: bool = False, deadline: float = math.inf) -> tuple[JointPlan, float] | None:
        """A plan with every stage's time per sample <= target (< when strict) and its value, or None when none exists.

        Raises TimeoutError past ``deadline`` (a ``time.monotonic()`` value).
        """
        self.passes += 1
        d = self.data
        k, smax = self.k, self.smax
        n_ideals = len(d.ideals)
        full = n_ideals - 1
        INF = math.inf
        best: dict[int, np.ndarray] = {full: np.full(smax + 1, INF)}
        best[full][0] = 0.0
        parent: dict[int, np.ndarray] = {}
        words = d.ideal_words
        per_device = target if target > 0 else 0.0
        for i in range(full, 0, -1):
            arr = best.get(i)
            if arr is None:
                continue
            if time.monotonic() > deadline:
                raise TimeoutError
            used = float(arr.min())
            budget = k - used
            if budget < 1:
                continue
            if per_device > 0 and math.isfinite(target) and d.ideal_work[i] > per_device * budget * (1 + 1e-12):
                continue
            sub = np.all((words & ~words[i]) == 0, axis=1)
            sub[i] = False
            cand = np.nonzero(sub)[0]
            if math.isfinite(target) and per_device > 0:
                # nodes of I \ J need W(I \ J) / T devices, those of J need W(J) / T more: W(I) / T <= budget (checked);
                # the stage itself needs at least one device, J's nodes W(J) / T
                cand = cand[(d.ideal_work[cand] <= per_device * (budget - 1) * (1 + 1e-12)) | (cand == 0)]
            finite_s = np.nonzero(np.isfinite(arr))[0]
            s_lo = int(finite_s[0])
            for j in cand.tolist():
                for t in d.degrees:
                    tab = None
                    for dp in d.divisors:
                        if dp * t > budget:
                            break
                        if s_lo + dp > smax:
                            break
                        if tab is None:
                            tab = self.table(i, j, t)
                        y_cap = (smax + dp - 1) // dp + 1
                        ym = self.y_max(tab, dp, target, strict, y_cap)
                        if ym < 1:
                            continue
                        s_top = min(dp * (ym - 1), smax - dp)
                        if s_top < s_lo:
                            continue
                        src = arr[: s_top + 1] + dp * t
                        tgt = best.get(j)
                        if tgt is None:
                            tgt = np.full(smax + 1, INF)
                            best[j] = tgt
                            parent[j] = np.zeros((smax + 1, 4), dtype=np.int64)
                        seg = tgt[dp : s_top + 1 + dp]
                        better = (src < seg) & (src <= k)
                        if better.any():
                            idx = np.nonzero(better)[0]
                            seg[idx] = src[idx]
                            par = parent[j]
                            par[idx + dp, 0] = i
                            par[idx + dp, 1] = idx
                            par[idx + dp, 2] = dp
                            par[idx + dp, 3] = t
        end = best.get(0)
        if end is None or not np.isfinite(end).any():
            return None
        s = int(np.nonzero(np.isfinite(end))[0][0])
        return self._backtrack(parent, s)

    def _backtrack(self, parent: dict[int, np.ndarray], s: int) -> tuple[JointPlan, float]:
        d = self.data
        j = 0
        stages: list[JointStage] = []
        value = 0.0
        while j != len(d.ideals) - 1:
            i, s_prev, dp, t = (int(x) for x in parent[j][s])
            tab = self.table(i, j, t)
            y = -(-s // dp)
            pick = self.choice(tab, dp, y)
            value = max(value, self.value(tab, dp, y))
            ids = [d.ids[v] for v in tab.nodes]
            cfg_names = {d.ids[v]: d.problem.nodes[v].configs[t][o].id for v, o in zip(tab.nodes, pick)}
            stages.append(JointStage(tuple(ids), dp, t, cfg_names))
            j, s = i, s_prev
        return JointPlan(tuple(stages)), value


@dataclass
class SearchResult:
    """What :func:`search` found: the best plan (DP value), the proven lower bound, and whether it is proven optimal or infeasible."""

    plan: JointPlan | None
    value: float
    bound: float
    optimal: bool
    infeasible: bool
    passes: int
    seconds: float
    timed_out: bool = False


def work_bound(data: JointData) -> float:
    """:math:`\\sum_v \\min_t t\\, p^{\\min}_{vt} / k`: no plan is faster."""
    return float(data.work.sum()) / data.problem.cluster.devices


def search(
    data: JointData,
    *,
    greedy: bool = False,
    time_limit_s: float = math.inf,
    rel_tolerance: float = 1e-9,
    upper: float = math.inf,
    progress: Callable[[str], None] | None = None,
) -> SearchResult:
    """Bisect on the target time per sample (see the module docstring); stop proven or at the time limit."""
    start = time.monotonic()
    deadline = start + time_limit_s
    dp = JointDP(data, greedy=greedy)
    lo = work_bound(data)
    best: tuple[JointPlan, float] | None = None
    try:
        first = dp.feasible(math.inf if not math.isfinite(upper) else upper, deadline=deadline)
        if first is None and math.isfinite(upper):
            first = dp.feasible(math.inf, deadline=deadline)
        if first is None:
            return SearchResult(None, math.inf, math.inf, False, not greedy, dp.passes, time.monotonic() - start)
        best = first
        hi = best[1]
        while True:
            if progress is not None:
                progress(f"[joint-dp] pass {dp.passes}: best {hi!r}, bound {lo!r}")
            if hi - lo <= rel_tolerance * hi:
                better = dp.feasible(hi, strict=True, deadline=deadline)
                if better is None or better[1] >= hi:
                    return SearchResult(best[0], hi, hi, not greedy, False, dp.passes, time.monotonic() - start)
                best, hi = better, better[1]
                continue
            mid = 0.5 * (lo + hi)
            got = dp.feasible(mid, deadline=deadline)
            if got is None:
                lo = mid
            else:
                if got[1] < hi:
                    best, hi = got, got[1]
                else:  # cannot happen for the exact DP; guards the greedy one
                    lo = mid
    except TimeoutError:
        if best is None:
            return SearchResult(None, math.inf, lo if not greedy else 0.0, False, False, dp.passes, time.monotonic() - start, True)
        return SearchResult(best[0], best[1], lo if not greedy else 0.0, False, False, dp.passes, time.monotonic() - start, True)
