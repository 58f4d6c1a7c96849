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
multiple-choice knapsack of :mod:`milp_partition.joint.knapsack`).  A
plan with :math:`\max_i TPS_i \le T` exists iff some :math:`D(\emptyset, s)` is
finite: a smaller :math:`D` at equal :math:`s` never hurts (later-built stages see
only :math:`s` and the devices left), so the DP is exhaustive.  :math:`F` is
non-decreasing in :math:`y` (memory only tightens), so each transition admits all
:math:`s \le d (y_{\max} - 1)` at once (:math:`y_{\max}` by bisection on :math:`y`, with
the knapsack's LP bound and greedy value deciding most tests before the exact frontier runs).

Pruning (each is a valid bound, so the DP stays exhaustive): a stage on :math:`d t` devices
takes at least :math:`W(S) / (d t)` with :math:`W(S) = \sum_{v \in S} \min_t t\, p^{\min}_{vt}`,
so (a) the nodes of :math:`I` need :math:`W(I) / T` devices, (b) a pair :math:`(I, J)` needs
:math:`\lceil W(I \setminus J) / T \rceil + \lceil W(J) / T \rceil` devices, (b') the stage's
least compute and all-reduce at its largest allowed :math:`d` must be at most :math:`T`,
(c) its least time ignoring memory must be at most :math:`T`, and (d) memory caps :math:`y`.
Whenever a pass cuts something it records the least target at which the cut would not
happen; with no plan, the least such value is a proven lower bound above :math:`T`.

Stage tables
------------
:math:`F` depends on the stage only through its rows (per node and configuration: compute plus
boundary communication, all-reduce term, activation and fixed bytes).  Stages with the same
multiset of rows (repeated layers with equal boundary edges: GNMT's and BERT's stacks) share one
table and every cache of knapsack values and bounds; the key is the rows' bytes in a canonical
order, so sharing is exact.  The tables of all stages :math:`I \setminus J` of one :math:`I` are
computed together (:meth:`JointDP.stage_tables`).

Search
------
:func:`search` bisects :math:`T` between a proven lower bound (first :math:`W(V)/k`, then the
values recorded by infeasible passes) and the best plan's value (first a baseline's); a
feasible pass returns a plan whose value becomes the new upper end.  When the two ends are
within ``bisect_until_rel``, a pass with the strict test :math:`F < T_{\text{best}}` finds a
better plan or proves the best one optimal.  An infeasible first pass at :math:`T = \infty`
proves the instance infeasible.  With ``greedy=True`` the stage choice is Piper's greedy
instead (a baseline, never a proof).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from milp_partition.budget import Budget
from milp_partition.joint.knapsack import cost_bounds, min_cost_exact, min_cost_greedy
from milp_partition.joint.problem import JointPlan, JointProblem, JointStage

#: :meth:`JointDP._tick` reads the clock once in this many steps of the per-candidate work
TICK_EVERY = 16


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
    #: only the prefixes of one topological order, not every ideal (for the cheap baselines when the graph has too
    #: many ideals): no search may run on it, its "exhaustive" would cover a part of the plans only
    prefixes_only: bool = False
    ideal_index: dict[int, int] = field(default_factory=dict)
    ideal_work: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ideal_words: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=np.uint64))
    #: (ideals, nodes) membership
    member: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    edge_src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edge_tgt: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: t -> (edges, options): 2 (c + sync) bytes of the edge as the target's (in) or the source's (out) option sees it
    edge_in_bytes: dict[int, np.ndarray] = field(default_factory=dict)
    edge_out_bytes: dict[int, np.ndarray] = field(default_factory=dict)
    #: t -> per ideal: sum of the nodes' least p (seconds) and least all-reduce term 4 w / (N B) (seconds)
    ideal_p: dict[int, np.ndarray] = field(default_factory=dict)
    ideal_w: dict[int, np.ndarray] = field(default_factory=dict)
    #: pairs (ideal, proper sub-ideal), counted on demand by :func:`milp_partition.joint.native.pair_count`
    pairs: int | None = None


def joint_data(problem: JointProblem, max_ideals: int = 200_000, *, prefixes_only: bool = False) -> JointData:
    """Index the problem and enumerate its ideals (raises :class:`TooManyIdeals` past ``max_ideals``).

    ``prefixes_only``: only the prefixes of one topological order (``n + 1`` ideals, whatever the graph): enough
    for the baselines that cut a topological order, never for :func:`search`.
    """
    ids = [n.id for n in problem.nodes]
    index = {v: i for i, v in enumerate(ids)}
    n = len(ids)
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for e in problem.edges:
        preds[index[e.target]].append((index[e.source], e.bytes))
        succs[index[e.source]].append((index[e.target], e.bytes))
    degrees = problem.degrees
    if problem.shape is not None and problem.shape.tensor_parallel is not None:  # a forced t: the only one offered
        degrees = tuple(t for t in degrees if t == problem.shape.tensor_parallel)
    cl = problem.cluster
    divisors = [d for d in range(1, min(cl.device_count, problem.microbatches) + 1) if problem.microbatches % d == 0]
    if problem.shape is not None and problem.shape.data_parallel is not None:  # a forced d: the only one offered
        divisors = [d for d in divisors if d == problem.shape.data_parallel]
    p: dict[int, np.ndarray] = {}
    w: dict[int, np.ndarray] = {}
    a: dict[int, np.ndarray] = {}
    b: dict[int, np.ndarray] = {}
    fw: dict[int, list[list[dict[int, float]]]] = {}
    bw: dict[int, list[list[dict[int, float]]]] = {}
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
    if not degrees:  # a forced t the nodes do not offer: no plan (and no work bound to speak of)
        work = np.zeros(n)
    data = JointData(problem, ids, preds, succs, degrees, divisors, p, w, a, b, fw, bw, work)
    data.edge_src = np.array([index[e.source] for e in problem.edges], dtype=np.int64)
    data.edge_tgt = np.array([index[e.target] for e in problem.edges], dtype=np.int64)
    for t in degrees:
        width = p[t].shape[1]
        e_in = np.zeros((len(problem.edges), width))
        e_out = np.zeros((len(problem.edges), width))
        for q, e in enumerate(problem.edges):
            u, v = index[e.source], index[e.target]
            for o in range(width):
                e_in[q, o] = 2.0 * (e.bytes + (fw[t][v][o].get(u, 0.0) if o < len(fw[t][v]) else 0.0))
                e_out[q, o] = 2.0 * (e.bytes + (bw[t][u][o].get(v, 0.0) if o < len(bw[t][u]) else 0.0))
        data.edge_in_bytes[t], data.edge_out_bytes[t] = e_in, e_out
    if prefixes_only:
        data.prefixes_only = True
        _set_ideals(data, _topological_prefixes(data))
    else:
        _enumerate_ideals(data, max_ideals)
    scale = 4.0 / (problem.microbatches * cl.bandwidth_bytes_per_s)
    for t in degrees:
        data.ideal_p[t] = data.member @ p[t].min(axis=1)
        data.ideal_w[t] = data.member @ (w[t].min(axis=1) * scale)
    return data


def _enumerate_ideals(data: JointData, max_ideals: int) -> None:
    n = len(data.ids)
    # OR, not a sum: a predecessor listed twice must not set another node's bit (a sum of 1 << u over a
    # repeated u is 1 << (u + 1): the node then waited for a node that is not its predecessor, or for itself)
    pred_mask = [0] * n
    for v in range(n):
        for u, _ in data.preds[v]:
            pred_mask[v] |= 1 << u
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
    if found[-1] != (1 << n) - 1:  # the DP's last ideal is the whole graph: a proof on a part of it proves nothing
        raise RuntimeError(f"joint DP: the ideals do not reach the whole graph ({n} nodes): the graph is not a DAG")
    _set_ideals(data, found)


def _topological_prefixes(data: JointData) -> list[int]:
    """The empty set and every prefix of one topological order (Kahn's, first come first; the order the baselines of
    :mod:`milp_partition.heuristics.joint_baselines` cut)."""
    n = len(data.ids)
    indeg = [len(data.preds[v]) for v in range(n)]
    ready = [v for v in range(n) if indeg[v] == 0]
    masks, mask = [0], 0
    while ready:
        v = ready.pop(0)
        mask |= 1 << v
        masks.append(mask)
        for u, _ in data.succs[v]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    if mask != (1 << n) - 1:
        raise RuntimeError(f"joint DP: no topological order covers the graph ({n} nodes): the graph is not a DAG")
    return masks


def _set_ideals(data: JointData, found: list[int]) -> None:
    """Store ``found`` (by size, ascending; the empty set first, all nodes last) and its index arrays."""
    n = len(data.ids)
    data.ideals = found  # by size, ascending; found[0] is the empty set, found[-1] all nodes
    data.ideal_index = {m: i for i, m in enumerate(found)}
    words = (n + 63) // 64
    arr = np.zeros((len(found), words), dtype=np.uint64)
    for i, m in enumerate(found):
        for k in range(words):
            arr[i, k] = (m >> (64 * k)) & ((1 << 64) - 1)
    data.ideal_words = arr
    member = np.zeros((len(found), n), dtype=bool)
    for i, m in enumerate(found):
        member[i, _bits(m)] = True
    data.member = member
    data.ideal_work = member @ data.work if n else np.zeros(len(found))


def _pair_bound(w_s: np.ndarray, w_j: np.ndarray, budget: int) -> float:
    """The least T' at which some pair (stage work w_s, rest w_j) fits ``budget`` devices by the work bound.

    With ``a`` devices for the stage and ``budget - a`` for the rest, ``T' >= max(w_s / a, w_j / (budget - a))``.
    """
    if budget > 64:  # a weaker bound keeps this cheap: the total work over all devices
        return float(((w_s + w_j) / budget).min())
    a = np.arange(1, budget + 1, dtype=float)[None, :]
    rest = budget - a
    with np.errstate(divide="ignore", invalid="ignore"):
        need_rest = np.where(rest > 0, w_j[:, None] / np.where(rest > 0, rest, 1.0), np.where(w_j[:, None] > 0, np.inf, 0.0))
    return float(np.maximum(w_s[:, None] / a, need_rest).min())


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
    """One stage ``I \\ J`` on degree t: per node and option ``P = p + comm / B``, ``W = 4 w / (N B)``, ``a``, ``b``.

    ``divs``, ``fast`` and ``y_fit``: per data-parallel degree (divisors of N with ``d t <= k``) the least
    cost ignoring memory and the largest ``y`` at which that choice fits (so ``F(d, y) = fast`` for ``y <= y_fit``).
    """

    nodes: list[int]
    P: np.ndarray
    W: np.ndarray
    A: np.ndarray
    Bf: np.ndarray
    divs: np.ndarray
    fast: np.ndarray
    y_fit: np.ndarray
    values: dict[tuple[int, int], float] = field(default_factory=dict)  # (d, y) -> F
    #: when every option of a node has the same w, the best choice does not depend on d:
    #: F(d, y) = (G(y) + (d - 1) sum_v W_v) / d with G(y) the knapsack on P alone
    w_sum: float | None = None
    g_values: dict[int, float] = field(default_factory=dict)
    bound_values: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    #: [y]: the largest y the least-memory choice fits (-1 until computed); a list so that
    #: tables with the same content share it like the dictionaries above
    y_small_box: list[int] = field(default_factory=lambda: [-1])


class JointDP:
    """The feasibility DP and its caches (see the module docstring)."""

    def __init__(self, data: JointData, greedy: bool = False, share_tables: bool = True) -> None:
        self.data = data
        self.greedy = greedy
        #: False: every stage gets its own table (the tests compare both ways)
        self.share_tables = share_tables
        self.knapsack: Callable = min_cost_greedy if greedy else min_cost_exact
        self.tables: dict[tuple[int, int, int], _StageTable] = {}
        #: (t, the stage's rows in canonical order as bytes) -> the one table of that content
        self.contents: dict[tuple[int, object], _StageTable] = {}
        #: (i, j, t) -> the table of the content of stage I_i \ I_j (see :meth:`stage_tables`)
        self.pair_tables: dict[tuple[int, int, int], _StageTable] = {}
        cl = data.problem.cluster
        self.k = cl.device_count
        self.M = data.problem.memory_bytes
        self.B = cl.bandwidth_bytes_per_s
        self.N = data.problem.microbatches
        self.smax = min(cl.device_count, data.problem.microbatches)
        self.passes = 0
        self.divisors = np.array(data.divisors, dtype=np.int64)
        #: the running pass's budget (see :meth:`feasible`); :meth:`_tick` reads it every ``TICK_EVERY`` steps
        self.budget: Budget | None = None
        self._ticks = 0
        self._edge_groups()

    #: relative gap below which the search calls its best plan proven (rounding only)
    proof_tolerance = 1e-12

    def proven_above(self, target: float, nxt: float) -> float:
        """The lower bound an infeasible pass at ``target`` proves, given its ``nxt`` (above the target)."""
        return max(nxt, math.nextafter(target, math.inf))

    def proven_strict(self, best: float, nxt: float) -> float:
        """The lower bound a strict pass at ``best`` that found nothing proves: ``best`` itself."""
        return best

    def _tick(self) -> None:
        """Raise TimeoutError once the running pass's budget is spent (the clock is read every ``TICK_EVERY`` calls)."""
        self._ticks += 1
        if self.budget is not None and self._ticks % TICK_EVERY == 0 and self.budget.expired():
            raise TimeoutError

    # -- stage tables ---------------------------------------------------------------------------
    def _edge_groups(self) -> None:
        """Edges sorted by target (in) and by source (out), with the segment starts for ``np.add.reduceat``."""
        d = self.data
        self._in_order = np.argsort(d.edge_tgt, kind="stable")
        self._out_order = np.argsort(d.edge_src, kind="stable")
        tgt_sorted, src_sorted = d.edge_tgt[self._in_order], d.edge_src[self._out_order]
        self._in_starts = np.flatnonzero(np.r_[True, tgt_sorted[1:] != tgt_sorted[:-1]]) if len(tgt_sorted) else tgt_sorted
        self._out_starts = np.flatnonzero(np.r_[True, src_sorted[1:] != src_sorted[:-1]]) if len(src_sorted) else src_sorted
        self._in_nodes = tgt_sorted[self._in_starts] if len(tgt_sorted) else tgt_sorted
        self._out_nodes = src_sorted[self._out_starts] if len(src_sorted) else src_sorted

    def _rows(self, i: int, cand: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the stages ``I_i \\ J`` (``J`` in ``cand``) on degree ``t``: membership ``(C, n)``, ``P`` and ``W`` ``(C, n, options)``.

        ``P = p + comm / B`` with comm the bytes (2 (c + sync)) of the edges that cross the stage's
        boundary as the stage's node sees them; ``W = 4 w / (N B)`` (0 where an option is missing).
        Sums run edge by edge in one fixed order, so a stage's rows do not depend on the batch.
        """
        d = self.data
        in_big = d.member[i]
        in_small = d.member[cand]  # (C, n)
        in_stage = in_big[None, :] & ~in_small
        n, width = d.p[t].shape
        comm = np.zeros((len(cand), n, width))
        if len(d.edge_src):
            src, tgt = d.edge_src, d.edge_tgt
            e_in = (in_stage[:, tgt] & in_small[:, src])[:, self._in_order]  # (u, v): v in the stage, u before it
            e_out = (in_stage[:, src] & ~in_big[tgt][None, :])[:, self._out_order]  # (v, w): v in the stage, w after it
            w_in = e_in[:, :, None] * d.edge_in_bytes[t][self._in_order][None, :, :]
            w_out = e_out[:, :, None] * d.edge_out_bytes[t][self._out_order][None, :, :]
            comm[:, self._in_nodes, :] += np.add.reduceat(w_in, self._in_starts, axis=1)
            comm[:, self._out_nodes, :] += np.add.reduceat(w_out, self._out_starts, axis=1)
        P = d.p[t][None, :, :] + comm / self.B
        W = np.where(np.isfinite(P), (4.0 / (self.N * self.B)) * d.w[t][None, :, :], 0.0)
        return in_stage, P, W

    def stage_tables(self, i: int, cand: np.ndarray, t: int) -> list[_StageTable]:
        """The tables of the stages ``I_i \\ J`` for every ``J`` in ``cand`` on degree ``t``, computed together.

        Stages with the same rows (a multiset: repeated layers with equal boundaries) have the
        same ``F`` and get one table (exact: the key is the bytes of the rows in a canonical order);
        the table's ``nodes`` are those of the first such stage (use :meth:`table` for a stage's own).
        """
        out: list[_StageTable | None] = [self.pair_tables.get((i, j, t)) for j in cand.tolist()]
        missing = np.array([r for r, tab in enumerate(out) if tab is None], dtype=np.int64)
        if len(missing) == 0:
            return out  # type: ignore[return-value]
        d = self.data
        J = cand[missing]
        in_stage, P, W = self._rows(i, J, t)
        A = np.broadcast_to(d.a[t][None], P.shape)
        Bf = np.broadcast_to(d.b[t][None], P.shape)
        rows = np.concatenate([P, W, A, Bf], axis=2)  # (C, n, 4 options)
        # canonical order: stage nodes first, then by the row's values (column 0 first)
        keys = np.concatenate([np.moveaxis(rows, 2, 0)[::-1], (~in_stage)[None].astype(float)], axis=0)
        order = np.lexsort(keys, axis=-1)
        canon = np.take_along_axis(rows, order[:, :, None], axis=1)
        counts = in_stage.sum(axis=1)
        for r, c in enumerate(missing.tolist()):
            self._tick()
            content = (t, canon[r, : counts[r]].tobytes()) if self.share_tables else (t, (i, int(cand[c])))
            tab = self.contents.get(content)
            if tab is None:
                nodes = np.flatnonzero(in_stage[r])
                tab = self._new_table(nodes.tolist(), P[r, nodes], W[r, nodes], d.a[t][nodes], d.b[t][nodes], t)
                self.contents[content] = tab
            self.pair_tables[(i, int(cand[c]), t)] = tab
            out[c] = tab
        return out  # type: ignore[return-value]

    def table(self, i: int, j: int, t: int) -> _StageTable:
        """The stage ``I_i \\ I_j`` on degree ``t`` with its own nodes (the caches shared with equal stages)."""
        key = (i, j, t)
        tab = self.tables.get(key)
        if tab is not None:
            return tab
        d = self.data
        shared = self.stage_tables(i, np.array([j], dtype=np.int64), t)[0]
        nodes = np.flatnonzero(d.member[i] & ~d.member[j])
        if list(shared.nodes) == nodes.tolist():
            tab = shared
        else:
            _, P, W = self._rows(i, np.array([j], dtype=np.int64), t)
            # its own rows; every other field (the caches included) is the shared table's, the same objects
            tab = replace(shared, nodes=nodes.tolist(), P=P[0, nodes], W=W[0, nodes], A=d.a[t][nodes], Bf=d.b[t][nodes])
        self.tables[key] = tab
        return tab

    def _new_table(self, nodes: list[int], P: np.ndarray, W: np.ndarray, A: np.ndarray, Bf: np.ndarray, t: int) -> _StageTable:
        """A table with fresh caches: per divisor the least cost ignoring memory and the largest y it fits."""
        divs = self.divisors[self.divisors * t <= self.k]
        # cost[d, v, o] for every divisor at once
        cost = (P[None, :, :] + (divs[:, None, None] - 1) * W[None, :, :]) / divs[:, None, None]
        best = cost.min(axis=2, keepdims=True)
        pick = np.argmin(np.where(cost == best, A[None, :, :], np.inf), axis=2)  # (divs, nodes)
        rows = np.arange(len(nodes))
        fast = cost[np.arange(len(divs))[:, None], rows[None, :], pick].sum(axis=1)
        sa = A[rows[None, :], pick].sum(axis=1)
        sb = Bf[rows[None, :], pick].sum(axis=1)
        y_fit = np.zeros(len(divs), dtype=np.int64)
        if not self.greedy:
            for q in range(len(divs)):
                if sb[q] > self.M:
                    y = 0
                elif sa[q] <= 0:
                    y = self.smax + 1
                else:
                    y = int(min(self.smax + 1, math.floor((self.M - sb[q]) / sa[q])))
                    while y > 0 and sa[q] * y + sb[q] > self.M:
                        y -= 1
                y_fit[q] = y
        tab = _StageTable(nodes, P, W, A, Bf, divs, fast, y_fit)
        finite = np.isfinite(P)
        w_first = W[:, :1]
        if bool(np.all((W == w_first) | ~finite)):
            tab.w_sum = float(w_first.sum())
        return tab

    def cost(self, tab: _StageTable, dp: int) -> np.ndarray:
        return (tab.P + (dp - 1) * tab.W) / dp

    def value(self, tab: _StageTable, dp: int, y: int) -> float:
        """F(stage, d, y): the least (or greedy) time per sample of the stage."""
        if tab.w_sum is not None:
            g = tab.g_values.get(y)
            if g is None:
                g = self.knapsack(tab.P, tab.A * y + tab.Bf, self.M)[0]
                tab.g_values[y] = g
            return (g + (dp - 1) * tab.w_sum) / dp
        key = (dp, y)
        v = tab.values.get(key)
        if v is None:
            v = self.knapsack(self.cost(tab, dp), tab.A * y + tab.Bf, self.M)[0]
            tab.values[key] = v
        return v

    def bounds(self, tab: _StageTable, dp: int, y: int) -> tuple[float, float]:
        """Fast (lower, upper) bounds on F(stage, d, y) (see :func:`cost_bounds`); exact when cached."""
        if tab.w_sum is not None:
            g = tab.g_values.get(y)
            if g is not None:
                exact = (g + (dp - 1) * tab.w_sum) / dp
                return exact, exact
            key = (-1, y)
            b = tab.bound_values.get(key)
            if b is None:
                b = cost_bounds(tab.P, tab.A * y + tab.Bf, self.M)
                tab.bound_values[key] = b
            return ((b[0] + (dp - 1) * tab.w_sum) / dp, (b[1] + (dp - 1) * tab.w_sum) / dp)
        v = tab.values.get((dp, y))
        if v is not None:
            return v, v
        b = tab.bound_values.get((dp, y))
        if b is None:
            b = cost_bounds(self.cost(tab, dp), tab.A * y + tab.Bf, self.M)
            tab.bound_values[(dp, y)] = b
        return b

    def choice(self, tab: _StageTable, dp: int, y: int) -> list[int]:
        cost = tab.P if tab.w_sum is not None else self.cost(tab, dp)
        _, pick = self.knapsack(cost, tab.A * y + tab.Bf, self.M, choices=True)
        if pick is None:
            raise AssertionError("stage chosen by the DP does not fit")
        return pick

    def _y_small(self, tab: _StageTable) -> int:
        if tab.y_small_box[0] >= 0:
            return tab.y_small_box[0]
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
        tab.y_small_box[0] = lo
        return lo

    def y_max(self, tab: _StageTable, q: int, target: float, strict: bool, y_cap: int) -> int:
        """The largest y <= y_cap with F(stage, d, y) <= target (< target when strict); 0 when none.

        The caller has checked ``fast <= target`` (``<`` when strict).
        """
        dp = int(tab.divs[q])
        lo = int(tab.y_fit[q])  # F(y) = fast <= target for y <= y_fit
        if lo >= y_cap:
            return y_cap
        hi = min(y_cap, self._y_small(tab))
        if math.isinf(target) and not strict:
            return max(hi, lo)  # any choice that fits will do

        def ok(y: int) -> bool:
            if not self.greedy:
                low, up = self.bounds(tab, dp, y)
                if (up < target) if strict else (up <= target):
                    return True
                if (low >= target) if strict else (low > target):
                    return False
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
    def feasible(
        self, target: float, strict: bool = False, budget: Budget | None = None
    ) -> tuple[tuple[JointPlan, float] | None, float]:
        """A plan with every stage's time per sample <= target (< when strict) and its value, or None.

        Returns ``(plan and value or None, next)``: when there is no plan, ``next`` is a proven lower
        bound on the optimum (> target; >= when strict): the least value recorded where the pass cut
        something because of the target (a state's work bound, a stage's least time).  Raises
        TimeoutError once ``budget`` is spent, checked per ideal and inside the per-candidate work
        (a pass cut short proves nothing: the caller keeps what earlier passes proved).
        """
        self.passes += 1
        self.budget = budget
        if budget is not None and budget.expired():
            raise TimeoutError
        d = self.data
        k, smax = self.k, self.smax
        full = len(d.ideals) - 1
        INF = math.inf
        # a state is (ideal, stages built); with no forced number of stages the count stays 0
        forced = d.problem.shape.stages if d.problem.shape is not None else None
        counts = range(forced) if forced is not None else range(1)
        best: dict[tuple[int, int], np.ndarray] = {(full, 0): np.full(smax + 1, INF)}
        best[(full, 0)][0] = 0.0
        parent: dict[tuple[int, int], np.ndarray] = {}
        sizes = d.member.sum(axis=1)
        bounded = math.isfinite(target) and target > 0
        nxt = INF  # least value cut
        for i, c in ((i, c) for i in range(full, 0, -1) for c in counts):
            arr = best.get((i, c))
            if arr is None:
                continue
            c_next = c + 1 if forced is not None else 0
            self._ticks = TICK_EVERY - 1  # read the clock once per ideal
            self._tick()
            finite_s = np.nonzero(np.isfinite(arr))[0]
            if len(finite_s) == 0:
                continue
            used = float(arr.min())
            free = k - used
            if free < 1:
                continue
            if bounded and d.ideal_work[i] > target * free:
                nxt = min(nxt, d.ideal_work[i] / free)  # (a) the nodes of I need W(I) / T' devices
                continue
            cand, need_j, cut_at = self._candidates(i, free, target, strict, bounded, forced, c_next, sizes)
            nxt = min(nxt, cut_at)
            cut_at = self._extend(i, c_next, arr, finite_s, cand, need_j, free, target, strict, best, parent)
            nxt = min(nxt, cut_at)
        end = best.get((0, forced or 0))
        if end is None or not np.isfinite(end).any():
            return None, nxt
        s = int(np.nonzero(np.isfinite(end))[0][0])
        return self._backtrack(parent, s, forced or 0), nxt

    def _candidates(
        self,
        i: int,
        budget: float,
        target: float,
        strict: bool,
        bounded: bool,
        forced: int | None,
        c_next: int,
        sizes: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """The ideals J below ideal ``i`` that may end the next stage (stage ``c_next`` of ``forced``), pruned by (b), (b').

        Returns ``(cand, need_j, cut)``: the candidates, the devices each one's nodes need at the target
        (0 when not bounded), and the least value at which something pruned here would survive (inf when none).
        """
        d = self.data
        INF = math.inf
        words = d.ideal_words
        nxt = INF
        sub = np.all((words & ~words[i]) == 0, axis=1)
        sub[i] = False
        cand = np.nonzero(sub)[0]
        if forced is not None:  # the last stage ends at the empty ideal; before it, one node per stage left at least
            cand = cand[(cand == 0) if c_next == forced else (sizes[cand] >= forced - c_next) & (cand != 0)]
        need_j = np.zeros(len(cand))
        if bounded and budget > 1:
            # each stage on d t devices takes at least W(S) / (d t): the stage needs ceil(W(S) / T) devices and
            # the nodes of J ceil(W(J) / T) more (rounded down a hair so float error never cuts a plan)
            w_j = d.ideal_work[cand]
            w_s = np.maximum(d.ideal_work[i] - w_j, 0.0)
            need_j = np.where(cand == 0, 0.0, np.ceil(w_j / target * (1 - 1e-9)))
            need_s = np.maximum(1.0, np.ceil(w_s / target * (1 - 1e-9)))
            cut = need_s + need_j > budget
            if cut.any():
                nxt = min(nxt, _pair_bound(w_s[cut], w_j[cut], int(budget)))  # (b)
                cand, need_j = cand[~cut], need_j[~cut]
        elif budget <= 1:
            keep = cand == 0
            cand, need_j = cand[keep], need_j[keep]
        if bounded and len(cand):
            # the stage's least time over t and d: (P - Wr) / d + Wr at the largest d (P: least compute, Wr: least all-reduce)
            stage_lb = np.full(len(cand), INF)
            for t in d.degrees:
                ds = [x for x in d.divisors if x * t <= budget]
                if not ds:
                    continue
                dmax = ds[-1]
                p_s = np.maximum(d.ideal_p[t][i] - d.ideal_p[t][cand], 0.0)
                w_s = np.maximum(d.ideal_w[t][i] - d.ideal_w[t][cand], 0.0)
                lb = np.where(p_s >= w_s, (p_s - w_s) / dmax + w_s, p_s)
                stage_lb = np.minimum(stage_lb, lb * (1 - 1e-12))
            cut = stage_lb >= target if strict else stage_lb > target
            if cut.any():
                nxt = min(nxt, float(stage_lb[cut].min()))  # (b') the stage's least time bound
                cand, need_j = cand[~cut], need_j[~cut]
        return cand, need_j, nxt

    def _extend(
        self,
        i: int,
        c_next: int,
        arr: np.ndarray,
        finite_s: np.ndarray,
        cand: np.ndarray,
        need_j: np.ndarray,
        budget: float,
        target: float,
        strict: bool,
        best: dict[tuple[int, int], np.ndarray],
        parent: dict[tuple[int, int], np.ndarray],
    ) -> float:
        """Relax every transition from the states of ideal ``i`` (values ``arr``) to the candidates J, at stage count ``c_next``.

        Updates ``best`` and ``parent`` in place; returns the least value at which a transition cut
        here by (c) or (d) would survive (inf when none).
        """
        d = self.data
        k, smax = self.k, self.smax
        INF = math.inf
        nxt = INF
        s_index = np.arange(smax + 1)
        s_lo = int(finite_s[0])
        count = np.cumsum(np.isfinite(arr))  # count[s]: finite states at or below s
        tables = {t: self.stage_tables(i, cand, t) for t in d.degrees if t <= budget and len(cand)}
        for r_j, (j, need) in enumerate(zip(cand.tolist(), need_j.tolist())):
            self._tick()
            for t in d.degrees:
                if t > budget:
                    break
                tab = tables[t][r_j]
                usable = (tab.divs * t <= budget) & (tab.divs + s_lo <= smax)
                ok = tab.fast < target if strict else tab.fast <= target
                cut = usable & ~ok
                if cut.any():
                    nxt = min(nxt, float(tab.fast[cut].min()))  # (c) the stage's least time
                qs = np.nonzero(usable & ok)[0]
                if len(qs) == 0:
                    continue
                divs = tab.divs[qs]
                y_cap = (smax - 1) // divs + 2
                ym = np.where(tab.y_fit[qs] >= y_cap, y_cap, 0)
                for r in np.nonzero(tab.y_fit[qs] < y_cap)[0].tolist():
                    ym[r] = self.y_max(tab, int(qs[r]), target, strict, int(y_cap[r]))
                s_top = np.where(ym >= 1, np.minimum(divs * (ym - 1), smax - divs), -1)
                # (d) states cut by memory at the target: F at the least y among them
                upper = smax - divs
                below = np.where(s_top >= 0, count[np.maximum(s_top, 0)], 0)
                has_cut = (upper > s_top) & (count[np.maximum(upper, 0)] > below)
                for r in np.nonzero(has_cut)[0].tolist():
                    dp = int(divs[r])
                    over = finite_s[(finite_s > s_top[r]) & (finite_s + dp <= smax)]
                    if len(over):
                        y_over = -(-(int(over[0]) + dp) // dp)
                        low = self.bounds(tab, dp, y_over)[0]
                        nxt = min(nxt, low if low > target else self.value(tab, dp, y_over))
                live = s_top >= s_lo
                if not live.any():
                    continue
                divs, s_top = divs[live], s_top[live]
                vals = arr[None, :] + (divs * t)[:, None]
                mask = (s_index[None, :] <= s_top[:, None]) & (vals <= k - need)
                rr, ss = np.nonzero(mask)
                if len(rr) == 0:
                    continue
                tidx = ss + divs[rr]
                v = vals[rr, ss]
                order = np.lexsort((v, tidx))
                tidx, v, rr, ss = tidx[order], v[order], rr[order], ss[order]
                first = np.ones(len(tidx), dtype=bool)
                first[1:] = tidx[1:] != tidx[:-1]
                tidx, v, rr, ss = tidx[first], v[first], rr[first], ss[first]
                tgt = best.get((j, c_next))
                if tgt is None:
                    tgt = np.full(smax + 1, INF)
                    best[(j, c_next)] = tgt
                    parent[(j, c_next)] = np.zeros((smax + 1, 4), dtype=np.int64)
                better = v < tgt[tidx]
                if better.any():
                    tidx, v, rr, ss = tidx[better], v[better], rr[better], ss[better]
                    tgt[tidx] = v
                    par = parent[(j, c_next)]
                    par[tidx, 0] = i
                    par[tidx, 1] = ss
                    par[tidx, 2] = divs[rr]
                    par[tidx, 3] = t
        return nxt

    def _backtrack(self, parent: dict[tuple[int, int], np.ndarray], s: int, count: int) -> tuple[JointPlan, float]:
        d = self.data
        j = 0
        stages: list[JointStage] = []
        value = 0.0
        while j != len(d.ideals) - 1:
            i, s_prev, dp, t = (int(x) for x in parent[(j, count)][s])
            count = max(count - 1, 0)
            stage, stage_value = self.stage(i, j, s, dp, t)
            stages.append(stage)
            value = max(value, stage_value)
            j, s = i, s_prev
        return JointPlan(tuple(stages)), value

    def stage(self, i: int, j: int, s: int, dp: int, t: int) -> tuple[JointStage, float]:
        """The stage ``I_i \\ I_j`` on ``dp`` x ``t`` devices with ``s`` (its and the later stages' d): its configurations and F."""
        d = self.data
        tab = self.table(i, j, t)
        y = -(-s // dp)
        pick = self.choice(tab, dp, y)
        ids = [d.ids[v] for v in tab.nodes]
        cfg_names = {d.ids[v]: d.problem.nodes[v].configs[t][o].id for v, o in zip(tab.nodes, pick)}
        return JointStage(tuple(ids), dp, t, cfg_names), self.value(tab, dp, y)


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
    #: stopped by Ctrl-C (or SIGTERM as the CLI maps it): the plan and bound are what it had; the caller re-raises
    interrupted: bool = False


def work_bound(data: JointData) -> float:
    """:math:`\\sum_v \\min_t t\\, p^{\\min}_{vt} / k`: no plan is faster."""
    return float(data.work.sum()) / data.problem.cluster.device_count


def search(
    data: JointData,
    *,
    greedy: bool = False,
    time_limit_s: float = math.inf,
    bisect_until_rel: float = 1e-3,
    upper_s: float = math.inf,
    progress: Callable[[str], None] | None = None,
    share_tables: bool = True,
    budget: Budget | None = None,
    native: bool = True,
) -> SearchResult:
    """Search the target time per sample (see the module docstring); stop proven or at the time limit.

    While the best plan's value ``hi`` and the proven bound ``lo`` differ by more than
    ``bisect_until_rel`` (relative), the target is their midpoint (an infeasible pass
    raises ``lo`` to the least value it cut, above the target); then a strict pass at
    ``hi`` either finds a better plan or proves ``hi`` optimal.  ``upper_s``: the value of a
    plan known to exist (a baseline's), the first pass's target.  With ``greedy=True`` (Piper's configuration choice) the result is a
    baseline, never a proof.  ``budget``: the caller's (the chain's) budget, capped here at ``time_limit_s``;
    a pass it cuts short adds nothing to the bound.
    """
    if data.prefixes_only:
        raise ValueError("search needs every ideal of the graph; this data holds the prefixes of one order only")
    start = time.monotonic()
    if budget is None:
        budget = Budget.starting_now(time_limit_s)
    elif math.isfinite(time_limit_s):
        budget = budget.capped(time_limit_s)
    if native:  # the pass in C where it is built and can run this search (milp_partition.joint.native)
        from milp_partition.joint.native import native_dp

        dp = native_dp(data, greedy=greedy, share_tables=share_tables)
    else:
        dp = JointDP(data, greedy=greedy, share_tables=share_tables)
    lo = work_bound(data)
    best: tuple[JointPlan, float] | None = None

    def done(optimal: bool, timed_out: bool = False) -> SearchResult:
        elapsed = time.monotonic() - start
        if best is None:
            return SearchResult(None, math.inf, 0.0 if greedy else lo, False, False, dp.passes, elapsed, timed_out)
        bound = 0.0 if greedy else min(lo, best[1])
        return SearchResult(best[0], best[1], bound, optimal and not greedy, False, dp.passes, elapsed, timed_out)

    try:
        # a known plan's value (a baseline's) is the first upper end: the passes start near the lower end
        # and prune hard; without one, a pass at T = infinity finds a plan or proves there is none
        hi = upper_s if math.isfinite(upper_s) and not greedy else math.inf
        if not math.isfinite(hi) and not greedy:
            # no plan known: climb from the lower bound first (passes near it prune hard), 10% at a time
            for _ in range(8):
                target = lo * 1.1
                got, nxt = dp.feasible(target, budget=budget)
                if got is not None:
                    best = got
                    break
                lo = max(lo, dp.proven_above(target, nxt))
                if not math.isfinite(lo):  # nothing was cut by the target: no plan at any target
                    return SearchResult(None, math.inf, math.inf, False, True, dp.passes, time.monotonic() - start)
        if best is None and not math.isfinite(hi):
            first, _ = dp.feasible(math.inf, budget=budget)
            if first is None:  # exhaustive: no plan at all
                return SearchResult(None, math.inf, math.inf, False, not greedy, dp.passes, time.monotonic() - start)
            best = first
        while True:
            if best is not None:
                hi = min(hi, best[1])
            if not greedy and hi - lo <= dp.proof_tolerance * hi:
                return done(True)  # proven within rounding (the proof policy's tolerance is 1e-9)
            if greedy and (hi - lo <= 1e-7 * hi or dp.passes >= 60):
                return done(False)  # the greedy's values are not monotone: a plain bisection, no proof
            if progress is not None:
                progress(f"[joint-dp] pass {dp.passes}: best {hi!r}, bound {lo!r}")
            if not greedy and hi - lo <= bisect_until_rel * hi:
                # close: is any plan strictly better than the best?  None proves the best optimal
                got, nxt = dp.feasible(hi, strict=True, budget=budget)
                if got is None:
                    lo = max(lo, dp.proven_strict(hi, nxt))
                elif got[1] >= hi:
                    lo = hi
                else:
                    best = got
                continue
            # passes near the lower end prune hardest (cheap); a quarter of the way up, not half
            target = lo + (0.5 if greedy else 0.25) * (hi - lo)
            got, nxt = dp.feasible(target, budget=budget)
            if got is None:
                # no plan at the target proves the optimum above it; nxt may round down to the target
                lo = target if greedy else max(lo, nxt, math.nextafter(target, math.inf))
            elif got[1] < hi:
                best = got
            else:  # the plan is no better than the best: the target was not below it
                lo = target
    except TimeoutError:
        return done(False, True)
    except KeyboardInterrupt:
        if greedy:  # a baseline: nothing proven to keep
            raise
        found = done(False, True)
        found.interrupted = True
        return found
