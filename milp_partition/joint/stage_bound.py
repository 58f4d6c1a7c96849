r"""A proven lower bound for the joint problem that keeps each stage's identity: chains priced per stage sequence.

For graphs with too many ideals for the exact DP (wide graphs: parallel chains between a source and a sink),
beside :mod:`milp_partition.joint.segment_bound` (which pools the stages of a class).  A plan's *stage sequence*
is :math:`\sigma = ((d_1, t_1), \ldots, (d_m, t_m))` with :math:`d_i \mid N`, :math:`t_i` an offered degree,
:math:`\sum_i d_i t_i \le k` and :math:`s_1 = \sum_i d_i \le \min(k, N)`; it fixes every
:math:`y_i = \lceil s_i / d_i \rceil` (:math:`s_i = d_i + \ldots + d_m`).  The nodes are split into chains
:math:`h` (:func:`milp_partition.joint.segment_bound.chains`: maximal paths of single-out, single-in edges).
With :math:`\tau_{vc}(d) = p_c + 4 (d - 1) w_c / (N B)`, :math:`\mu_{vc}(y) = a_c y + b_c` and
:math:`\epsilon_e = 2 c_e / B`, the relaxation of "some plan with stage sequence :math:`\sigma` has value
:math:`\le T`" is:

.. math::

    \exists\ \text{for every chain } h:\ \text{an assignment } \pi_h = (\text{stage } g_v \in 1..m,
    \text{ configuration } c_v \in C_{v t_{g_v}})_{v \in h} \quad \text{s.t.}

    \text{(a) monotone:}\quad & g_{v_1} \le g_{v_2} \le \ldots \le g_{v_L} \text{ along the chain} \\
    \text{(b) fixed:}\quad & g_v = 1 \text{ if } v \text{ reaches every node},\ g_v = m
        \text{ if every node reaches } v \\
    \text{(c) time:}\quad & \textstyle\sum_h \mathrm{time}_{hi}(\pi_h) \le d_i T \quad \forall i, \quad
        \mathrm{time}_{hi} = \sum_{v \in h: g_v = i} \tau_{v c_v}(d_i)
        + \sum_{e = (u, v) \text{ cut}:\ i \in \{g_u, g_v\}} \epsilon_e \\
    \text{(d) memory:}\quad & \textstyle\sum_h \mathrm{mem}_{hi}(\pi_h) \le M \quad \forall i, \quad
        \mathrm{mem}_{hi} = \sum_{v \in h: g_v = i} \mu_{v c_v}(y_i) \\
    \text{(f) runs fit:}\quad & \text{every run } R \text{ (maximal nodes of } h \text{ in one stage } i)
        \text{ has } \textstyle\sum_{v \in R} \min_c \tau_{vc}(d_i) + \epsilon_{\text{its ends}}
        \le d_i T - r^T_i \text{ and } \sum_{v \in R} \min_c \mu_{vc}(y_i) \le M - r^M_i

where an edge is *cut* when its ends' stages differ, counted for the chain's inner edges and for the edges
between a chain's node and a node of (b) (its stage is known), and dropped for every other edge.  Every plan of
value :math:`\le T` with sequence :math:`\sigma` satisfies it (its stages' nodes, configurations): (a) every edge
goes forward; (b) a node that reaches every node is in the first stage (the first stage's nodes are reached by it,
so they are not before it), one that every node reaches in the last; (c) is :math:`d_i \, TPS_i \le d_i T` with
fewer bytes (no sync bytes, fewer edges); (d) is the memory of one device; (f) is (c) and (d) for one run alone,
less :math:`r^T_i, r^M_i`, the least time and memory of the chains of one node fixed by (b) to stage i (other
chains' runs share the stage with them; the run's two boundary edges are cut as runs are maximal).  Empty stages
are allowed (a relaxation).

Lagrangian dual.  For multipliers :math:`\lambda, \mu \in \mathbb{R}^m_{\ge 0}` with
:math:`\Lambda = \sum_i \lambda_i d_i > 0`, summing :math:`\lambda_i` (c) and :math:`\mu_i` (d):

.. math::

    \text{(e) bound:}\quad T \ \ge\ \frac{1}{\Lambda} \Big( \sum_h \min_{\pi_h \text{ with (a), (b)}}
        \sum_i \big(\lambda_i \mathrm{time}_{hi}(\pi_h) + \mu_i \mathrm{mem}_{hi}(\pi_h)\big)
        - M \sum_i \mu_i \Big) =: L_\sigma(\lambda, \mu)

for every plan with sequence :math:`\sigma` and value at most :math:`T` (the minimum over the assignments with (a),
(b), (f) at :math:`T`), so every plan with sequence :math:`\sigma` has a value of at least
:math:`\min(T, L_\sigma)` (no such plan of value :math:`\le T` when the bracket is positive and
:math:`\Lambda = 0`, or when a chain has no such assignment).  Each chain's minimum is an exact DP over runs and
stages (:func:`_price`): node costs :math:`\min_c \lambda_i \tau_{vc}(d_i) + \mu_i \mu_{vc}(y_i)`, a run's two
boundary edges :math:`\epsilon_e \lambda_i`, runs that break (f) excluded.  The optimum over all plans is at least
:math:`\min_\sigma` of these (the plan's own sequence is one of them).

Good multipliers come from column generation: the master linear program (GLOP) over the chains' assignments found
so far, :math:`\min T + P \sum_i z_i` s.t. (c) and (d) with slack :math:`z_i` on (d) and one convex combination per
chain, whose duals are :math:`(\lambda, \mu)`; the DP prices new assignments.  A proof never rests on the solver:
every bound is :math:`L_\sigma` re-evaluated by the DP from the multipliers, lowered by
``CERT_REL`` times the size of its terms (floating point).  :func:`stage_bound` works best-first: it keeps a
proven bound per sequence (first the pooled work bound :math:`\sum_v \min_{i, c} \tau_{vc}(d_i) / \sum_i d_i`, then
column generation at targets :math:`T`: the best plan's value, then bisection between the proven bound and the least
target the converged relaxation did not prove) and always raises the weakest.  Where the weakest's relaxation has
converged it branches (:func:`_branch_and_bound`): on one node's stage, :math:`g_v \le b` or :math:`g_v \ge b + 1`
(both sides cover every plan of the sequence; each side is the same relaxation with stages banned for :math:`v`, its
bound at least its parent's), leaves proven at the target closed, the least open leaf's bound the sequence's.  It
ends when the weakest reaches the best plan's value, branching cannot raise it, or the budget ends, and returns the
least proven bound over the sequences.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from milp_partition.backends.base import SolveStatus
from milp_partition.backends.ortools_direct import glop_solver, lp_status
from milp_partition.budget import Budget
from milp_partition.joint.problem import JointProblem
from milp_partition.joint.segment_bound import chains, stage_options

#: A certificate's value is lowered by this times the size of its terms (floating-point sums of the DP).
CERT_REL = 1e-9
#: The master's penalty on a unit of memory slack (memory in units of M, time in units of the reference T).
MEMORY_PENALTY = 1e6
#: Column generation ends when the master's value and the certified bound are this close (relative).
CG_REL_TOL = 1e-5
#: At most this many pricing rounds per refinement of one sequence.
CG_MAX_ROUNDS = 60
#: Branching on the weakest sequence aims this far (relative) above the next sequence's bound ...
BRANCH_STEP = 0.005
#: ... with at most this many column generations at the first attempt, four times as many at each next one, up to
#: ``BRANCH_MAX_NODES``.
BRANCH_NODES = 200
BRANCH_MAX_NODES = 20_000
#: How many of the weakest sequences a report lists.
RANKING = 30
#: A sequence whose refinement made no progress this many times is left at its bound.
MAX_STALLS = 3
#: Past this many stage sequences :func:`stage_bound` leaves the bound where it was: each sequence needs its own
#: column generation, and 16 devices with t in {1, 2} and 64 micro-batches already give 214,742 sequences (30 s
#: refine about 500-1,000 of them), so the bound would stay below the segment bound's.
MAX_SEQUENCES = 20_000


@dataclass
class ChainData:
    """The chains as padded arrays (chains x positions), and the nodes' rows per tensor-parallel degree."""

    node: np.ndarray  # (H, L) node index, -1 padding
    edge: np.ndarray  # (H, L - 1) 2 c / B of the inner edge after each position (0 padding)
    fixed: np.ndarray  # (n,) 0 free, 1 first stage, 2 last stage, 3 both
    to_first: np.ndarray  # (n,) 2 c / B of the edges between the node and first-stage nodes
    to_last: np.ndarray  # (n,) 2 c / B of the edges between the node and last-stage nodes
    p: dict[int, np.ndarray]  # t -> (n, options) seconds per sample, inf padding
    w: dict[int, np.ndarray]
    a: dict[int, np.ndarray]
    b: dict[int, np.ndarray]


def _reach_masks(n: int, succ: list[list[int]]) -> list[int]:
    """Per node, the bitmask of the nodes it reaches (itself included)."""
    order: list[int] = []
    indeg = [0] * n
    for u in range(n):
        for v in succ[u]:
            indeg[v] += 1
    ready = [v for v in range(n) if indeg[v] == 0]
    while ready:
        u = ready.pop()
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    if len(order) != n:
        raise ValueError("the graph is not a DAG")
    mask = [0] * n
    for u in reversed(order):
        m = 1 << u
        for v in succ[u]:
            m |= mask[v]
        mask[u] = m
    return mask


def chain_data(problem: JointProblem) -> ChainData:
    """Index the problem for :func:`stage_bound` (chains, fixed nodes, rows)."""
    cl = problem.cluster
    n = len(problem.nodes)
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for e in problem.edges:
        succ[index[e.source]].append(index[e.target])
        pred[index[e.target]].append(index[e.source])
    everyone = (1 << n) - 1
    down = _reach_masks(n, succ)
    up = _reach_masks(n, pred)
    fixed = np.zeros(n, dtype=np.int64)
    for v in range(n):
        if down[v] == everyone:
            fixed[v] |= 1  # (b) reaches every node: first stage
        if up[v] == everyone:
            fixed[v] |= 2  # (b) every node reaches it: last stage
    found = chains(problem)
    length = max(len(nodes) for nodes, _ in found)
    node = np.full((len(found), length), -1, dtype=np.int64)
    edge = np.zeros((len(found), max(0, length - 1)))
    inner: set[tuple[int, int]] = set()
    for h, (nodes, bytes_) in enumerate(found):
        node[h, : len(nodes)] = nodes
        edge[h, : len(bytes_)] = 2.0 * np.asarray(bytes_, dtype=float) / cl.bandwidth_bytes_per_s
        inner.update(itertools.pairwise(nodes))
    to_first = np.zeros(n)
    to_last = np.zeros(n)
    for e in problem.edges:
        u, v = index[e.source], index[e.target]
        if (u, v) in inner or u == v:
            continue
        eps = 2.0 * e.bytes / cl.bandwidth_bytes_per_s
        # an edge between a free node and a node of (b) is cut where the free node is not in that node's stage
        if fixed[u] == 1 and fixed[v] == 0:
            to_first[v] += eps
        elif fixed[v] == 2 and fixed[u] == 0:
            to_last[u] += eps
        # any other edge outside the chains is dropped (a relaxation)
    degrees = problem.degrees
    p, w, a, b = {}, {}, {}, {}
    for t in degrees:
        width = max(len(nd.configs[t]) for nd in problem.nodes)
        # a missing option: p = inf, the rest 0 (no inf * 0 below); never chosen (_Sequence.valid)
        arrs = [np.full((n, width), np.inf), *(np.zeros((n, width)) for _ in range(3))]
        for v, nd in enumerate(problem.nodes):
            for o, c in enumerate(nd.configs[t]):
                arrs[0][v, o] = c.time_per_sample_s
                arrs[1][v, o] = c.parameter_bytes
                arrs[2][v, o] = c.activation_bytes
                arrs[3][v, o] = c.fixed_bytes
        p[t], w[t], a[t], b[t] = arrs
    return ChainData(node, edge, fixed, to_first, to_last, p, w, a, b)


def sequences(problem: JointProblem, limit: int = MAX_SEQUENCES) -> list[tuple[tuple[int, int], ...]] | None:
    """Every stage sequence ``((d_1, t_1), ..., (d_m, t_m))`` a plan can have (a forced shape's only), first stage first.

    ``None`` past ``limit`` sequences.
    """
    cl = problem.cluster
    smax = min(cl.device_count, problem.microbatches)
    shape = problem.shape
    options = stage_options(problem)
    want = None if shape is None else shape.stages
    out: list[tuple[tuple[int, int], ...]] = []

    def grow(prefix: list[tuple[int, int]], s: int, devices: int) -> bool:
        if prefix and (want is None or len(prefix) == want):
            out.append(tuple(prefix))
            if len(out) > limit:
                return False
        if want is not None and len(prefix) >= want:
            return True
        for d, t in options:
            if s + d <= smax and devices + d * t <= cl.device_count:
                prefix.append((d, t))
                if not grow(prefix, s + d, devices + d * t):
                    return False
                prefix.pop()
        return True

    if not grow([], 0, 0):
        return None
    return out


class _Sequence:
    """One stage sequence's arrays (time in units of ``ref``, memory in units of M) and its column generation's state."""

    def __init__(
        self,
        problem: JointProblem,
        cd: ChainData,
        seq: tuple[tuple[int, int], ...],
        ref: float,
        extra_banned: np.ndarray | None = None,
    ) -> None:
        cl = problem.cluster
        self.seq = seq
        m = self.m = len(seq)
        self.d = np.array([d for d, _ in seq], dtype=float)
        s = np.cumsum([d for d, _ in seq][::-1])[::-1]
        self.y = np.array([-(-int(si) // d) for si, (d, _) in zip(s, seq)], dtype=float)
        r = 4.0 / (problem.microbatches * cl.bandwidth_bytes_per_s)
        width = max(cd.p[t].shape[1] for _, t in seq)
        n = cd.fixed.shape[0]
        self.tau = np.full((n, m, width), np.inf)
        self.mem = np.full((n, m, width), np.inf)
        for i, (d, t) in enumerate(seq):
            wt = cd.p[t].shape[1]
            self.tau[:, i, :wt] = (cd.p[t] + r * (d - 1) * cd.w[t]) / ref
            self.mem[:, i, :wt] = (cd.a[t] * self.y[i] + cd.b[t]) / problem.memory_bytes
        self.valid = np.isfinite(self.tau) & np.isfinite(self.mem)
        self.tau_0 = np.where(self.valid, self.tau, 0.0)
        self.mem_0 = np.where(self.valid, self.mem, 0.0)
        self.tau = np.where(self.valid, self.tau, np.inf)
        self.mem = np.where(self.valid, self.mem, np.inf)
        stage = np.arange(m)
        # (b): stages a node may not take
        self.banned = np.zeros((n, m), dtype=bool)
        self.banned[cd.fixed & 1 == 1, 1:] = True
        self.banned[cd.fixed & 2 == 2, : m - 1] = True
        if extra_banned is not None:  # a branch of :func:`_branch_and_bound`
            self.banned |= extra_banned
        # edges to nodes of (b): cut (charged to both stages) unless the node is in that node's stage
        self.out_first = (cd.to_first / ref)[:, None] * (stage > 0)[None, :]  # (n, m) charged to stage g and stage 1
        self.out_last = (cd.to_last / ref)[:, None] * (stage < m - 1)[None, :]  # (n, m) charged to stage g and stage m
        least_tau = np.min(self.tau, axis=2) + self.out_first + self.out_last
        least_mem = np.min(self.mem, axis=2)
        # a chain of one fixed node takes its stage's capacity first (its least time and memory there)
        self.reserved_time = np.zeros(m)
        self.reserved_mem = np.zeros(m)
        self.groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (chain ids, nodes (Hg, L), edges (Hg, L-1))
        H = cd.node.shape[0]
        lengths = (cd.node >= 0).sum(axis=1)
        singles = [h for h in range(H) if lengths[h] == 1 and cd.fixed[cd.node[h, 0]] in (1, 2)]
        for h in singles:
            v = cd.node[h, 0]
            g = 0 if cd.fixed[v] == 1 else m - 1
            self.reserved_time[g] += least_tau[v, g]
            self.reserved_mem[g] += least_mem[v, g]
        self.singles = set(singles)
        for length in sorted(set(int(x) for x in lengths)):
            ids = np.array([h for h in range(H) if lengths[h] == length])
            self.groups.append((ids, cd.node[ids, :length], cd.edge[ids, : length - 1] / ref))
        self.least_tau, self.least_mem = least_tau, least_mem
        self.H = H
        self.node = cd.node
        self.ref = ref
        self.target = math.nan
        self.fits: list[np.ndarray] = []
        self.need: list[np.ndarray] = []
        # column generation's state (:func:`_column_generation`)
        self.columns: list[list[tuple[np.ndarray, np.ndarray, float, np.ndarray]]] = [[] for _ in range(H)]
        self.vars: list[list[Any]] = [[] for _ in range(H)]
        self.last_assign = np.zeros((H, cd.node.shape[1]), dtype=np.int64)  # the last pricing's stages per position
        self.seen: list[set[bytes]] = [set() for _ in range(H)]
        self.solver: Any = None
        self.solver_target = math.nan
        self.time_rows: list[Any] = []
        self.mem_rows: list[Any] = []
        self.conv: list[Any] = []
        self.lam = np.full(m, 1.0 / float(np.sum(self.d)))
        self.mu = np.zeros(m)
        #: proven bound (units of ref) and the least target at which the relaxation's LP was seen not to prove it
        self.lo = -math.inf
        self.hi = math.inf
        self.stalls = 0

    def set_target(self, target: float) -> None:
        """(f) at ``target`` (units of ref): which runs fit a stage alone (least time and least memory)."""
        if target == self.target:
            return
        self.target = target
        self.fits, self.need = [], []
        for ids, node, edge in self.groups:
            Hg, L = node.shape
            lt = np.concatenate([np.zeros((Hg, 1, self.m)), np.cumsum(self.least_tau[node], axis=1)], axis=1)
            lm = np.concatenate([np.zeros((Hg, 1, self.m)), np.cumsum(self.least_mem[node], axis=1)], axis=1)
            nb = np.concatenate([np.zeros((Hg, 1, self.m)), np.cumsum(self.banned[node], axis=1)], axis=1)
            el, er = _boundary_edges(edge)
            # run [i, j) in stage g: (Hg, L + 1, L + 1, m), its least time with its two boundary edges
            t_run = lt[:, None, :, :] - lt[:, :, None, :] + el[:, :, None, None] + er[:, None, :, None]
            m_run = lm[:, None, :, :] - lm[:, :, None, :]
            banned = (nb[:, None, :, :] - nb[:, :, None, :]) > 0
            own = np.array([h in self.singles for h in ids])
            cap_t = self.d[None, :] * target - np.where(own[:, None], 0.0, self.reserved_time[None, :])  # (Hg, m)
            cap_m = 1.0 - np.where(own[:, None], 0.0, self.reserved_mem[None, :])
            i_idx = np.arange(L + 1)
            order = i_idx[:, None] < i_idx[None, :]  # i < j
            # (f) a run fits a stage alone; a hair of slack so that no run of a plan is cut by rounding
            fit = (
                order[None, :, :, None]
                & ~banned
                & (t_run <= cap_t[:, None, None, :] * (1 + 1e-9) + 1e-12)
                & (m_run <= cap_m[:, None, None, :] * (1 + 1e-9) + 1e-12)
            )
            self.fits.append(fit)
            # the least target at which the run fits (for keeping columns when the target moves)
            need = (t_run + np.where(own[:, None], 0.0, self.reserved_time[None, :])[:, None, None, :]) / self.d
            self.need.append(need)


def _boundary_edges(edge: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per chain (rows of ``edge``, 2 c / B of the inner edges): ``el[i]``, the edge before a run that starts at ``i``,
    and ``er[j]``, the edge after a run that ends before ``j`` (0 at the chain's ends), ``i, j = 0..L``."""
    Hg = edge.shape[0]
    zero = np.zeros((Hg, 1))
    return np.concatenate([zero, edge, zero], axis=1), np.concatenate([zero, edge, zero], axis=1)


def _price(sq: _Sequence, lam: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Each chain's least ``sum_i lambda_i time_hi + mu_i mem_hi`` over (a), (b), (f) at ``sq.target``: the values
    (H,), the argmin assignments' time and memory vectors (H, m), the least target each needs (H,), and the size of
    the summed terms (for the certificate's margin).  ``inf`` where a chain has no assignment."""
    m = sq.m
    # (n, m, options); a missing option (padding) is never chosen, also where a multiplier is 0
    cost_all = np.where(sq.valid, lam[None, :, None] * sq.tau_0 + mu[None, :, None] * sq.mem_0, np.inf)
    choice = np.argmin(cost_all, axis=2)
    cost = np.take_along_axis(cost_all, choice[:, :, None], axis=2)[:, :, 0]
    # edges to nodes of (b): charged to the node's stage and to the fixed node's
    cost = cost + sq.out_first * (lam[0] + lam)[None, :] + sq.out_last * (lam[m - 1] + lam)[None, :]
    cost = np.where(sq.banned, 0.0, cost)  # banned runs do not fit (set_target)
    ch_tau = np.take_along_axis(sq.tau, choice[:, :, None], axis=2)[:, :, 0] + sq.out_first + sq.out_last
    ch_mem = np.take_along_axis(sq.mem, choice[:, :, None], axis=2)[:, :, 0]
    ch_tau = np.where(sq.banned, 0.0, ch_tau)
    ch_mem = np.where(sq.banned, 0.0, ch_mem)
    value = np.zeros(sq.H)
    time = np.zeros((sq.H, m))
    mem = np.zeros((sq.H, m))
    need = np.zeros(sq.H)
    assign = np.full((sq.H, sq.node.shape[1]), -1, dtype=np.int64)
    stages = np.arange(m)
    for (ids, node, edge), fit, need_run in zip(sq.groups, sq.fits, sq.need):
        Hg, L = node.shape
        S = np.concatenate([np.zeros((Hg, 1, m)), np.cumsum(cost[node], axis=1)], axis=1)  # (Hg, L + 1, m)
        el, er = _boundary_edges(edge)
        # a run [i, j) in stage g: its nodes' costs and its two boundary edges (cut: the runs are maximal) at lambda_g
        run = S[:, None, :, :] - S[:, :, None, :] + (el[:, :, None] + er[:, None, :])[:, :, :, None] * lam[None, None, None, :]
        run = np.where(fit, run, np.inf)
        F = np.full((Hg, L + 1, m), np.inf)
        # (a) monotone: G[:, i, g], the least cost of [0, i) with its last run in a stage before g
        G = np.full((Hg, L + 1, m), np.inf)
        Garg = np.full((Hg, L + 1, m), -1, dtype=np.int64)
        Fi = np.zeros((Hg, L + 1, m), dtype=np.int64)
        G[:, 0, :] = 0.0
        for j in range(1, L + 1):
            vals = G[:, :j, :] + run[:, :j, j, :]  # (Hg, j, m)
            Fi[:, j, :] = np.argmin(vals, axis=1)
            F[:, j, :] = np.min(vals, axis=1)
            acc = np.minimum.accumulate(F[:, j, :], axis=1)
            arg = np.maximum.accumulate(np.where(F[:, j, :] == acc, stages[None, :], 0), axis=1)
            G[:, j, 1:] = acc[:, :-1]
            Garg[:, j, 1:] = arg[:, :-1]
        last = np.argmin(F[:, L, :], axis=1)
        best = F[np.arange(Hg), L, last]
        for q, h in enumerate(ids):
            value[h] = best[q]
            if not math.isfinite(best[q]):
                continue
            j, g = L, int(last[q])
            while j > 0:
                i = int(Fi[q, j, g])
                nodes = node[q, i:j]
                time[h, g] += ch_tau[nodes, g].sum() + el[q, i] + er[q, j]
                mem[h, g] += ch_mem[nodes, g].sum()
                first = sq.out_first[nodes, g].sum()
                lastb = sq.out_last[nodes, g].sum()
                time[h, 0] += first
                time[h, m - 1] += lastb
                need[h] = max(need[h], need_run[q, i, j, g])
                assign[h, i:j] = g
                j, g = i, int(Garg[q, i, g])
    size = float(np.sum(lam[None, :] * time + mu[None, :] * mem))
    sq.last_assign = assign
    return value, time, mem, need, size


def certify(sq: _Sequence, lam: np.ndarray, mu: np.ndarray) -> float:
    """(e) at ``sq.target``: the bound ``min(target, L_sigma(lambda, mu))`` in units of ref, re-evaluated by the DP and
    lowered by ``CERT_REL`` times its terms' size (every plan with this sequence has a value at least this)."""
    lam = np.maximum(np.asarray(lam, dtype=float), 0.0)
    mu = np.maximum(np.asarray(mu, dtype=float), 0.0)
    value, _, _, _, size = _price(sq, lam, mu)
    target = sq.target
    total = float(np.sum(value))
    if not math.isfinite(total):
        return target  # a chain has no assignment with (a), (b), (f): no plan of value <= target
    bracket = total - float(np.sum(mu))  # (e) numerator, memory at M = 1
    big = float(np.sum(lam * sq.d))
    margin = CERT_REL * (size + float(np.sum(mu)) + abs(total) + big * target)
    if big <= 0:
        return target if bracket > margin else -math.inf
    return min(target, (bracket - margin) / big)  # (e)


def _no_plan(sq: _Sequence, mu: np.ndarray) -> bool:
    """Whether memory alone rules this sequence out at every target: (e) with lambda = 0 and the runs that fit
    memory (f at an infinite target) is positive, or some chain has no such assignment."""
    target = sq.target
    sq.set_target(math.inf)
    try:
        lam = np.zeros(sq.m)
        mu = np.maximum(mu, 0.0)
        value, _, _, _, size = _price(sq, lam, mu)
        total = float(np.sum(value))
        if not math.isfinite(total):
            return total > 0
        return total - float(np.sum(mu)) > CERT_REL * (size + float(np.sum(mu)) + abs(total)) and float(np.sum(mu)) > 0
    finally:
        sq.set_target(target)


def _master(sq: _Sequence) -> None:
    """The sequence's master linear program (GLOP) with the columns that fit at ``sq.target``:
    ``min T + P sum z`` s.t. (c) and (d) with slack ``z``, one convex combination per chain."""
    m, H = sq.m, sq.H
    solver = glop_solver()
    T = solver.NumVar(0.0, solver.infinity(), "T")
    z = [solver.NumVar(0.0, solver.infinity(), f"z{i}") for i in range(m)]
    sq.time_rows = [solver.Constraint(-solver.infinity(), 0.0) for _ in range(m)]
    sq.mem_rows = [solver.Constraint(-solver.infinity(), 1.0) for _ in range(m)]
    sq.conv = [solver.Constraint(1.0, 1.0) for _ in range(H)]
    for i in range(m):
        sq.time_rows[i].SetCoefficient(T, -float(sq.d[i]))  # (c) time: sum_h time_hi <= d_i T
        sq.mem_rows[i].SetCoefficient(z[i], -1.0)  # (d) memory: sum_h mem_hi <= M (+ slack z_i, paid)
    objective = solver.Objective()
    objective.SetCoefficient(T, 1.0)
    for zi in z:
        objective.SetCoefficient(zi, MEMORY_PENALTY)
    objective.SetMinimization()
    sq.solver = solver
    sq.solver_target = sq.target
    for h in range(H):
        kept = [col for col in sq.columns[h] if col[2] <= sq.target * (1 + 1e-9) and _allowed(sq, h, col[3])]
        sq.columns[h], sq.vars[h] = [], []
        sq.seen[h] = set()
        for tv, mv, need, assign in kept:
            _add_column(sq, h, tv, mv, need, assign)


def _allowed(sq: _Sequence, h: int, assign: np.ndarray) -> bool:
    """Whether chain ``h``'s assignment (stages per position, -1 padding) takes no banned stage."""
    real = sq.node[h] >= 0
    return not bool(np.any(sq.banned[sq.node[h][real], assign[real]]))


def _add_column(sq: _Sequence, h: int, tv: np.ndarray, mv: np.ndarray, need: float, assign: np.ndarray) -> bool:
    """Add chain ``h``'s assignment (its time and memory vectors) to the master unless it is there already."""
    key = np.round(np.concatenate([tv, mv]), 12).tobytes()
    if key in sq.seen[h]:
        return False
    sq.seen[h].add(key)
    sq.columns[h].append((tv.copy(), mv.copy(), need, assign.copy()))
    x = sq.solver.NumVar(0.0, 1.0, "")
    sq.vars[h].append(x)
    sq.conv[h].SetCoefficient(x, 1.0)
    for i in range(sq.m):
        if tv[i]:
            sq.time_rows[i].SetCoefficient(x, float(tv[i]))
        if mv[i]:
            sq.mem_rows[i].SetCoefficient(x, float(mv[i]))
    return True


def _column_generation(sq: _Sequence, target: float, budget: Budget) -> tuple[float, bool]:
    """The sequence's certified bound at ``target`` (units of ref): ``(bound, settled)``.

    ``settled``: the bound is the relaxation's at this target (the target proven, or the LP's optimum reached, or no
    assignment at all); else the budget or the round limit ended it.  The columns stay with ``sq``.
    """
    sq.set_target(target)
    if sq.solver is None or target < sq.solver_target:
        _master(sq)  # a lower target: keep only the columns that fit
    lam, mu = sq.lam, sq.mu
    best = -math.inf
    solved = False
    for _ in range(CG_MAX_ROUNDS):
        value, time, mem, need, _ = _price(sq, lam, mu)
        if not np.all(np.isfinite(value)):
            # a chain has no assignment with (a), (b), (f): no plan of value <= target (at any target where memory
            # alone rules every assignment out)
            return (math.inf if _no_plan(sq, np.zeros(sq.m)) else target), True
        best = max(best, certify(sq, lam, mu))
        if best >= target:
            sq.lam, sq.mu = lam, mu
            if _no_plan(sq, mu):
                return math.inf, True
            return best, True
        if budget.expired():
            break
        assign = sq.last_assign
        added = sum(_add_column(sq, h, time[h], mem[h], float(need[h]), assign[h]) for h in range(sq.H))
        if added == 0 and solved:
            sq.lam, sq.mu = lam, mu
            return best, True  # no assignment prices out: the master's value is the relaxation's
        status = lp_status(sq.solver.Solve())
        if status is not SolveStatus.OPTIMAL:  # GLOP's incremental solve can end ABNORMAL: once more from scratch
            _master(sq)
            status = lp_status(sq.solver.Solve())
        solved = True
        if status is not SolveStatus.OPTIMAL:
            break
        master = sq.solver.Objective().Value()
        lam = np.array([max(0.0, -row.dual_value()) for row in sq.time_rows])
        mu = np.array([max(0.0, -row.dual_value()) for row in sq.mem_rows])
        if master - best <= CG_REL_TOL * max(1.0, abs(master)):
            # the master's duals may still certify a little more than ``best``: one more evaluation
            best = max(best, certify(sq, lam, mu))
            sq.lam, sq.mu = lam, mu
            return best, True
    sq.lam, sq.mu = lam, mu
    return best, False


@dataclass(order=True)
class _Entry:
    bound: float
    order: int
    seq: tuple[tuple[int, int], ...] = field(compare=False)
    stage: int = field(default=0, compare=False)  # 0: work bound only, 1: column generation ran, 2: branching stuck
    done: bool = field(default=False, compare=False)


@dataclass
class StageBoundReport:
    """What :func:`stage_bound_report` found: the bound, the sequences, how many refinements, the weakest sequence."""

    bound: float
    sequences: int
    refined: int
    weakest: tuple[tuple[int, int], ...] | None
    converged: bool
    #: the weakest sequences at the end with their proven bounds (seconds), weakest first
    ranking: list[tuple[float, tuple[tuple[int, int], ...]]] = field(default_factory=list)


def stage_bound_report(
    problem: JointProblem,
    lower_s: float,
    upper_s: float,
    budget: Budget,
    rel_tol: float = 2e-4,
    branching: bool = True,
) -> StageBoundReport:
    """:func:`stage_bound` with its working figures (tests and benchmarks)."""
    if not problem.nodes:
        return StageBoundReport(lower_s, 0, 0, None, True)
    seqs = sequences(problem)
    if seqs is None:
        return StageBoundReport(lower_s, -1, 0, None, False)
    if not seqs:
        return StageBoundReport(math.inf, 0, 0, None, True)  # no stage sequence at all: no plan
    cd = chain_data(problem)
    cap = upper_s if math.isfinite(upper_s) else math.inf
    # the pooled work bound of a sequence: every node's least tau over the sequence's (d, t), over sum d
    cl = problem.cluster
    r = 4.0 / (problem.microbatches * cl.bandwidth_bytes_per_s)
    least = {(d, t): np.min(cd.p[t] + r * (d - 1) * cd.w[t], axis=1) for d, t in {o for sq in seqs for o in sq}}
    heap: list[_Entry] = []
    order = itertools.count()
    memo: dict[frozenset[tuple[int, int]], float] = {}
    for seq in seqs:
        key = frozenset(seq)
        if key not in memo:
            memo[key] = math.fsum(np.min(np.stack([least[o] for o in key]), axis=0))
        work = memo[key] / sum(d for d, _ in seq) * (1 - CERT_REL)
        heap.append(_Entry(work, next(order), seq))
    # times in units of ref inside: the best plan's value, else the largest work bound
    ref = upper_s if math.isfinite(upper_s) and upper_s > 0 else max([lower_s, 1e-300, *(e.bound for e in heap)])
    cap = cap / ref
    for e in heap:
        e.bound /= ref
    heapq.heapify(heap)
    refined = 0
    allowances: dict[tuple[tuple[int, int], ...], int] = {}
    states: dict[tuple[tuple[int, int], ...], _Sequence] = {}
    while heap and not budget.expired():
        top = heap[0]
        if top.bound >= cap or (top.done and (top.stage == 2 or not branching)):
            break
        heapq.heappop(heap)
        nxt = heap[0].bound if heap else cap
        if top.done:
            # the relaxation's value is reached: branch, aiming a little above the next sequence's bound
            target = min(cap, max(nxt, top.bound) * (1 + BRANCH_STEP))
            allowance = allowances.get(top.seq, BRANCH_NODES)
            got, nodes = _branch_and_bound(problem, cd, top.seq, ref, target, budget, allowance)
            refined += nodes
            new = max(top.bound, got)
            stuck = got < target and nodes < allowance  # a leaf's master is integral: more nodes would not help
            allowances[top.seq] = allowance * 4 if got < target else allowance  # short of the target: a larger tree
            stuck = stuck or allowances[top.seq] > BRANCH_MAX_NODES
            heapq.heappush(heap, _Entry(new, next(order), top.seq, 2 if stuck else 1, True))
            continue
        sq = states.get(top.seq)
        if sq is None:
            sq = states[top.seq] = _Sequence(problem, cd, top.seq, ref)
            sq.lo = top.bound
        refined += 1
        # first the best plan's value (proving it ends the sequence), then bisection between what is proven and the
        # least target the relaxation did not prove (its bound at a target is min(target, L), L falling with it)
        if math.isfinite(sq.hi):
            target = 0.5 * (sq.lo + sq.hi)
        elif math.isfinite(cap):
            target = cap
        else:
            # no plan known: doubling from the largest work bound (or up to the next sequence's bound)
            target = max(2.0 * sq.lo, nxt if math.isfinite(nxt) else 0.0, 1.0)
        got, settled = _column_generation(sq, target, budget)
        if settled and got < target:
            sq.hi = min(sq.hi, target)  # the relaxation does not prove this target (nor any above)
        if not settled and got <= sq.lo:
            sq.stalls += 1  # the rounds ran out (or the LP failed) without progress
        sq.lo = max(sq.lo, got)
        done = (math.isfinite(sq.hi) and sq.hi - sq.lo <= rel_tol * sq.hi) or sq.stalls >= MAX_STALLS
        heapq.heappush(heap, _Entry(sq.lo, next(order), top.seq, 1, done))
        if done or sq.lo >= cap:
            states.pop(top.seq, None)
    bound = heap[0].bound if heap else math.inf
    weakest = heap[0].seq if heap else None
    done = bool(heap) and (heap[0].done or heap[0].bound >= cap)
    value = min(bound, cap) * ref if math.isfinite(cap) else bound * ref
    ranking = [(e.bound * ref, e.seq) for e in heapq.nsmallest(RANKING, heap)]
    return StageBoundReport(max(lower_s, value), len(seqs), refined, weakest, done, ranking)


def stage_bound(problem: JointProblem, lower_s: float, upper_s: float, budget: Budget) -> float:
    """A proven lower bound on the optimum: ``max(lower_s, min over stage sequences of the certified (e))``.

    ``upper_s``: the best plan's value (``inf``: none), the reference time and the cap (a sequence proven at it needs
    no more work).  Within ``budget``: past it, the least bound proven so far.  ``lower_s``: a bound already proven
    (returned where nothing better is proven).  ``inf`` when no stage sequence admits a plan.
    """
    return stage_bound_report(problem, lower_s, upper_s, budget).bound


def _branch_and_bound(
    problem: JointProblem,
    cd: ChainData,
    seq: tuple[tuple[int, int], ...],
    ref: float,
    target: float,
    budget: Budget,
    max_nodes: int = 64,
    root: _Sequence | None = None,
) -> tuple[float, int]:
    """The sequence's certified bound at ``target`` (units of ref) with branching: ``(bound, nodes)``.

    A branch splits on one node's stage, ``g_v <= b`` or ``g_v >= b + 1`` (the node the master spreads most evenly over
    the two sides): together the two children cover every plan of the parent, each child's plans are the parent's, so
    the least bound over the open leaves (each at least its parent's) is a bound of the sequence.  A leaf proven at
    ``target`` is closed.  Stops at ``max_nodes`` column generations, at the budget, or where the weakest leaf's master
    has no fractional node (its bound then stands).
    """
    if root is None:
        root = _Sequence(problem, cd, seq, ref)
    got, settled = _column_generation(root, target, budget)
    if got >= target or not settled:
        return min(got, target), 1
    order = itertools.count()
    heap: list[tuple[float, int, np.ndarray, _Sequence]] = [(got, next(order), root.banned.copy(), root)]
    nodes = 1
    while heap and nodes < max_nodes and not budget.expired():
        bound, _, banned, sq = heap[0]
        branch = _fractional(sq)
        if branch is None:
            break  # the weakest leaf's master is integral: branching cannot raise it
        heapq.heappop(heap)
        v, b = branch
        for side in (0, 1):
            extra = banned.copy()
            if side == 0:
                extra[v, b + 1 :] = True  # g_v <= b
            else:
                extra[v, : b + 1] = True  # g_v >= b + 1
            child = _Sequence(problem, cd, seq, ref, extra)
            child.columns = [list(cols) for cols in sq.columns]  # _master keeps those the branch allows
            child.lam, child.mu = sq.lam.copy(), sq.mu.copy()
            got, settled = _column_generation(child, target, budget)
            nodes += 1
            got = max(got, bound)  # the child's plans are the parent's
            if got < target:
                heapq.heappush(heap, (got, next(order), extra, child))
    if not heap:
        return target, nodes
    return min(target, heap[0][0]), nodes


def _fractional(sq: _Sequence) -> tuple[int, int] | None:
    """The node and stage split ``(v, b)`` whose master share ``P(g_v <= b)`` is closest to one half (``None``: none
    between 1e-6 and 1 - 1e-6)."""
    if sq.solver is None:
        return None
    if lp_status(sq.solver.Solve()) is not SolveStatus.OPTIMAL:  # GLOP's incremental solve can end ABNORMAL: again
        _master(sq)
        if lp_status(sq.solver.Solve()) is not SolveStatus.OPTIMAL:
            return None
    best, pick = 1e-6, None
    for h in range(sq.H):
        if not sq.vars[h]:
            continue
        x = np.array([var.solution_value() for var in sq.vars[h]])
        assign = np.stack([col[3] for col in sq.columns[h]])  # (columns, positions)
        for pos in range(assign.shape[1]):
            v = int(sq.node[h, pos])
            if v < 0:
                continue
            share = np.array([x[assign[:, pos] <= b].sum() for b in range(sq.m - 1)])
            frac = np.minimum(share, 1.0 - share)
            b = int(np.argmax(frac)) if frac.size else 0
            if frac.size and frac[b] > best:
                best, pick = float(frac[b]), (v, b)
    return pick
