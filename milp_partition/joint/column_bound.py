r"""A proven lower bound for the joint problem from whole stages: the configuration LP over stage columns.

For graphs with too many ideals for the exact DP (wide graphs: parallel chains between a source and a sink), beside
:mod:`milp_partition.joint.segment_bound` and :mod:`milp_partition.joint.stage_bound`, which relax how a stage's
contents fit together; here every column is a whole stage that fits, so the linear program is close to the integer
one (the configuration LP of bin packing, Gilmore and Gomory 1961, is the model).

The nodes are split into chains :math:`h = 1..H` of lengths :math:`L_h`
(:func:`milp_partition.joint.segment_bound.chains`).  Along a chain the stages of a plan never go back, so a stage
holds one interval :math:`[a_h, e_h)` of every chain.  A *stage column* :math:`q` is a stage type
:math:`(d, t, s, \text{first}, \text{last})` (``s``: the sum of the data-parallel degrees of this stage and the later
ones, so :math:`y = \lceil s / d \rceil`; first: it holds the first stage's fixed nodes; last: :math:`s = d`) and an
interval per chain, and it *fits* at a target :math:`T` when some choice of configurations gives

.. math::

    \text{(c) time:}\quad & \textstyle\sum_{v \in q} \big(p_{c_v} + 4 (d - 1) w_{c_v} / (N B)\big)
        + \sum_{e \text{ cut}} 2 c_e / B \ \le\ d\, T \\
    \text{(d) memory:}\quad & \textstyle\sum_{v \in q} (a_{c_v} y + b_{c_v}) \ \le\ M

counting the cut edges inside chains (an interval's two ends) and those between a chain's node and a node fixed to
the first or last stage (as :mod:`~milp_partition.joint.stage_bound` does; other edges and sync bytes are dropped, a
relaxation).  Nodes that reach every node are in the first stage, nodes every node reaches in the last:
(b) :math:`e_h \ge f_h` for the first column and :math:`a_h \ge f_h` otherwise, :math:`a_h \le l_h` for the last
column and :math:`e_h \le l_h` otherwise.

A plan of value :math:`\le T` is a path of fitting columns :math:`q_1, \ldots, q_m` (one per stage, first to last)
with

.. math::

    \text{(f) flow:}\quad & a_h(q_{i+1}) = e_h(q_i),\quad s(q_{i+1}) = s(q_i) - d(q_i) \\
    \text{(k) devices:}\quad & \textstyle\sum_i d_i t_i \le k, \quad s(q_1) \le \min(k, N).

The master linear program relaxes the path to a flow :math:`\lambda \ge 0` over columns: (first) one unit leaves
the first columns, (link) for every chain :math:`h`, position :math:`j` and state :math:`s \ge 1`, the columns that end
chain :math:`h` at :math:`j` with :math:`s - d` left equal those that start it there with :math:`s`, and
(k) :math:`\sum_q d_q t_q \lambda_q \le k`.  Phase one (artificial variables on every row) gives duals :math:`\pi`;
new columns come from pricing, a two-resource multiple-choice knapsack over the chains (:func:`_price`).

Certificate.  For *any* :math:`\pi` on the link rows and any plan, the link terms telescope:
:math:`\sum_i \mathrm{link}_\pi(q_i) = 0` with
:math:`\mathrm{link}_\pi(q) = \sum_h \big(\pi_{h, e_h, s - d} [\text{not last}] - \pi_{h, a_h, s} [\text{not first}]\big)`.
So if for every sequence of stage types allowed by (f) and (k) the sum of
:math:`U(\text{type}) \ge \max_{q \text{ of that type, fitting}} \mathrm{link}_\pi(q)` is negative, no plan has value
:math:`\le T`.  :math:`U` is the exact maximum from a branch and bound over the chains (or, where that stops at its
node limit, the least of its root's Lagrangian bound and the largest of its best leaf and the bounds of the branches it
left open, also valid); the sum's maximum is a longest path over (s, devices) (:func:`_longest_path`).  The
solver's duals only choose :math:`\pi`; the proof is this check, with a margin of ``CERT_REL`` for rounding.
Where the check fails on a longest path through types whose search stopped early, and could hold were their bounds
their best leaves, those types are searched again with ten times the nodes, up to :data:`MAX_REFINE_NODES`
(:func:`_refine`): on eight branches of six at k = 16, 14-16 of 214 searches a round stopped at two million nodes,
and their bounds broke the certificate where the master's LP had none (the all-states master stalled at 0.0085296
after 27.7 s; refined, it converges at 0.0086456 in 18 s).  Under duals equal across the states of a band, types with
the same degrees, micro-batches in flight, first and last, and the same bands of their states are twins: one search
answers for all (:meth:`_Pricer.regroup`; 122 searches a round instead of 214 there, 8.4 s instead of 18).
Pricing runs at :math:`\alpha \pi_c + (1 - \alpha) \pi` (Wentges' smoothing, Wentges 1997), :math:`\pi_c` the
duals whose longest path was least relative to their largest entry so far: the master's duals jump between corners of
its dual polyhedron, and on six branches of eight (k = 8) this proved 0.98 of the plan in 90 rounds where the
master's duals alone took 131 (:data:`SMOOTH_ALPHA`; 0.3, 0.6 and 0.7 took 103, 89 and 97).
:func:`column_bound` searches targets between the proven bound and the best plan's value.  Where the master has a
solution at a target, CP-SAT looks for an integer path of its columns (:func:`_integer_path`): a plan, verified, that
may be better than the best known.

Bands of states.  The certificate holds for any :math:`\pi`, in particular for duals equal across the states of a
band (:math:`\pi_{h, j, s}` the same for every :math:`s` with the same :math:`\lceil s / w \rceil`).  Their master
sums the (link) rows of a band into one row (a relaxation: fewer rows, the same columns) and adds a (state) row per
state :math:`s`: the columns that leave with :math:`s` left (not last) equal those that enter with :math:`s` (not
first).  A plan's path satisfies it (its states go down by each stage's :math:`d`); the rows per state imply it (their
sum over the positions of one chain), the rows of a band do not.  Its duals :math:`\sigma` add
:math:`\sigma_{s - d} - \sigma_s` to a type's reduced cost and telescope along a path, so the certificate is
unchanged.  Without them the master lets every stage take the fewest micro-batches in flight, which is far off where
memory binds (:data:`STATE_ROWS`).  Where the stage bound cannot run (k = 16), the master with one row for all states
(:data:`ALL_STATES`) converges in a few dozen rounds where the master with a row per state (864 rows on ten branches of
four) re-solves its LP in about 2 s a round and proves nothing in a minute.  Standalone, one process: ten branches of
four 0.0071036 in 21 s (0.0070251 without the (state) rows; the best plan known: 0.0071223), eight branches of six
0.0086456 in 8.4 s with the refined pricing and twins (0.0085304 in 51 s before them, 0.00839 without the (state)
rows; the plan 0.00880); six branches of eight (k = 8, memory binding) 0.967 of the plan (0.939) where the
row-per-state master proves 0.981.  ``bands`` of :func:`column_bound_report` runs masters in turn, coarse to
fine, the columns and the proven bound handed over; the chain runs the all-states master where the stage bound
cannot run (the one with a row per band of four states or per state after it where the column bound's share is
long: :data:`milp_partition.joint.solve.BANDS_OF_FOUR_FROM_S`, :data:`~milp_partition.joint.solve.ROW_PER_STATE_FROM_S`),
the row-per-state one elsewhere.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from milp_partition.backends.base import SolveStatus
from milp_partition.backends.ortools_direct import cp_sat, cp_status, glop_solver, lp_status
from milp_partition.budget import Budget
from milp_partition.joint import beside
from milp_partition.joint.problem import JointPlan, JointProblem, JointStage
from milp_partition.joint.segment_bound import stage_options
from milp_partition.joint.stage_bound import ChainData, chain_data
from milp_partition.verifiers.joint import verify_joint

try:  # the compiled branch and bound (optional: the Python one gives the same answers)
    from milp_partition.joint import _jointdp as _ext  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built by setup.py where a C compiler exists
    _ext = None  # type: ignore[assignment]

#: The certificate needs the longest path's value below ``-CERT_REL`` times the size of its terms.
CERT_REL = 1e-9
#: Fitting checks admit this much excess (relative): more columns only weaken the relaxation.
FIT_REL = 1e-9
#: Column generation rounds per target, and the branch and bound's node limit per pricing.
MAX_ROUNDS = 200
MAX_NODES = 2_000_000
#: Where the certificate fails on types whose pricing stopped at ``MAX_NODES``, those on a longest path are priced again
#: with ten times the nodes, up to this many (:func:`_refine`; 200 million: about 2 s in C).
MAX_REFINE_NODES = 200_000_000
#: ... and no more than this many per second left in the budget (the C search does about 100 million a second)
REFINE_NODES_PER_S = 20_000_000
#: At most this many new columns per round (the best by reduced cost; adding fewer made more rounds, not fewer seconds).
MAX_ADD = 10_000
#: The targets tried first, as fractions of the best plan's value: proving one ends within that gap.
FIRST_TARGETS = (0.981, 0.99, 0.995, 0.999, 1 - 5e-7)
#: The search ends where the proven bound and the least target not proven are this close (relative to the plan's
#: value): below the chain's tolerance of a proof (milp_partition.chain.PROOF_REL_TOL), so a tight bound proves a plan.
TARGET_REL_TOL = 1e-7
#: A coarser master (:meth:`_Master.regroup`) ends its search (and hands over to the next) where its proven bound and
#: least refuted target are this close (relative to the plan's value): its relaxation is not tight, and the last
#: digits cost many rounds (on ten branches of four at k = 16, 1e-7 took half its time).
COARSE_REL_TOL = 2e-4
#: ``bands`` of :func:`column_bound_report`: one (link) row for all states of a chain's position.
ALL_STATES = 0
#: A banded master's (state) rows: the columns that leave state ``s`` equal those that enter it (:class:`_Master`).
STATE_ROWS = True
#: ... the first targets where the proven bound is at least this fraction of the plan's value already.
FIRST_TARGETS_FROM = 0.9
#: Dual smoothing (Wentges 1997): pricing at ``SMOOTH_ALPHA`` times the best duals so far plus the rest times the
#: master's (0: the master's alone).
SMOOTH_ALPHA = 0.5
#: Seconds CP-SAT may look for an integer path (a plan) where a target's relaxation has a solution.
PATH_TIME_S = 5.0


@dataclass(frozen=True)
class StageType:
    """A stage column's type: degrees, the sum ``s`` of this and later stages' ``d``, and whether it is first/last."""

    d: int
    t: int
    s: int
    first: bool
    last: bool

    @property
    def y(self) -> int:
        """Micro-batches in flight on one device of the stage."""
        return -(-self.s // self.d)


@dataclass
class _Options:
    """Per chain, the (interval, configuration choice) options of a stage kind: Pareto points in (time, memory)."""

    a: list[np.ndarray]  # per chain: interval start per option
    e: list[np.ndarray]
    time: list[np.ndarray]  # units of the reference time (d T is the capacity)
    mem: list[np.ndarray]  # units of M
    configs: list[list[tuple[int, ...]]]  # per chain and option: the configuration index of each node of the interval
    #: (offsets, chain, a, e, time, mem) over all chains' options end to end (:func:`_flat`, made on first use)
    flat: tuple[np.ndarray, ...] | None = None


_Point = tuple[float, float, tuple[int, ...]]


def _pareto(points: list[_Point]) -> list[_Point]:
    """The (time, memory, configurations) points no other point beats in both time and memory (sorted by time)."""
    points.sort()
    out: list[_Point] = []
    best = math.inf
    for point in points:
        if point[1] < best:
            out.append(point)
            best = point[1]
    return out


@dataclass
class _Data:
    """The problem indexed for the bound: chains, fixed positions, per-node option rows."""

    cd: ChainData
    lengths: list[int]
    first_end: list[int]  # f_h: positions < f_h are first-stage nodes
    last_start: list[int]  # l_h: positions >= l_h are last-stage nodes
    ref: float
    memory: float
    r: float  # 4 / (N B)
    options: dict[tuple[int, int, int, bool, bool], _Options] = field(default_factory=dict)


def _data(problem: JointProblem, ref: float) -> _Data:
    cd = chain_data(problem)
    lengths = [int((cd.node[h] >= 0).sum()) for h in range(cd.node.shape[0])]
    first_end, last_start = [], []
    for h, length in enumerate(lengths):
        nodes = cd.node[h, :length]
        f = 0
        while f < length and cd.fixed[nodes[f]] & 1:
            f += 1
        ell = length
        while ell > 0 and cd.fixed[nodes[ell - 1]] & 2:
            ell -= 1
        first_end.append(f)
        last_start.append(ell)
    cl = problem.cluster
    return _Data(
        cd, lengths, first_end, last_start, ref, problem.memory_bytes, 4.0 / (problem.microbatches * cl.bandwidth_bytes_per_s)
    )


def _options(data: _Data, d: int, t: int, y: int, first: bool, last: bool) -> _Options:
    """Every chain's options for a stage of this kind: intervals allowed by (b), Pareto over configurations."""
    key = (d, t, y, first, last)
    got = data.options.get(key)
    if got is not None:
        return got
    cd = data.cd
    p, w, a_, b_ = cd.p[t], cd.w[t], cd.a[t], cd.b[t]
    out = _Options([], [], [], [], [])
    for h, length in enumerate(data.lengths):
        nodes = cd.node[h, :length]
        node_opts = []
        for v in nodes:
            # (c) time and (d) memory of one node per configuration, in units of ref and M
            row: list[_Point] = [
                ((p[v, o] + data.r * (d - 1) * w[v, o]) / data.ref, (a_[v, o] * y + b_[v, o]) / data.memory, (o,))
                for o in range(p.shape[1])
                if math.isfinite(p[v, o])
            ]
            node_opts.append(_pareto(row))
        to_first = cd.to_first[nodes] / data.ref
        to_last = cd.to_last[nodes] / data.ref
        edge = cd.edge[h, : max(0, length - 1)] / data.ref
        f, ell = data.first_end[h], data.last_start[h]
        A, E, TM, MM, CF = [], [], [], [], []
        for a in range(length + 1):  # (b) on the interval's start
            if first and a != 0:
                break
            if not first and a < f:
                continue
            if last and a > ell:
                break
            pts: list[_Point] = [(0.0, 0.0, ())]
            for e in range(a, length + 1):
                if e > a:
                    opts = node_opts[e - 1]
                    pts = _pareto(  # (d): no point past M
                        [(t0 + t1, m0 + m1, c0 + c1) for t0, m0, c0 in pts for t1, m1, c1 in opts if m0 + m1 <= 1.0 + FIT_REL]
                    )
                    if not pts:
                        break
                if first and e < f:  # (b) on its end
                    continue
                if not last and e > ell:
                    break
                if last and e != length:
                    continue
                extra = 0.0  # (c): the cut edges this interval charges to its stage
                if e > a:
                    if a > 0:
                        extra += edge[a - 1]
                    if e < length:
                        extra += edge[e - 1]
                    if not first:
                        extra += float(np.sum(to_first[a:e]))
                    if not last:
                        extra += float(np.sum(to_last[a:e]))
                if first:
                    extra += float(np.sum(to_first[e:]))  # this chain's nodes after the first stage: cut edges
                if last:
                    extra += float(np.sum(to_last[:a]))
                for tm, mm, cf in pts:
                    A.append(a)
                    E.append(e)
                    TM.append(tm + extra)
                    MM.append(mm)
                    CF.append(cf)
        out.a.append(np.array(A, dtype=np.int64))
        out.e.append(np.array(E, dtype=np.int64))
        out.time.append(np.array(TM))
        out.mem.append(np.array(MM))
        out.configs.append(CF)
    data.options[key] = out
    return out


def _undominated(v: np.ndarray, tm: np.ndarray, mm: np.ndarray, cap_t: float, cap_m: float) -> np.ndarray:
    """The options that fit alone and no other such option beats (value at least, time and memory at most; ties:
    the first stays): the others are never needed for the maximum."""
    keep = (tm <= cap_t) & (mm <= cap_m)
    if _ext is not None and hasattr(_ext, "undominated"):
        flags = keep.astype(np.uint8)
        _ext.undominated(np.ascontiguousarray(v, dtype=float), tm, mm, flags)
        return flags.astype(bool)
    fit = np.flatnonzero(keep)
    vv, tt, mmm = v[fit], tm[fit], mm[fit]
    geq = (vv[None, :] >= vv[:, None]) & (tt[None, :] <= tt[:, None]) & (mmm[None, :] <= mmm[:, None])
    strict = (vv[None, :] > vv[:, None]) | (tt[None, :] < tt[:, None]) | (mmm[None, :] < mmm[:, None])
    earlier = np.arange(fit.size)[None, :] < np.arange(fit.size)[:, None]
    beaten = np.any(geq & (strict | earlier), axis=1)  # row i: some j beats i
    keep[fit[beaten]] = False
    return keep


def _multipliers(
    vals: list[np.ndarray], tms: list[np.ndarray], mms: list[np.ndarray], cap_t: float, cap_m: float
) -> tuple[float, float, float]:
    """(theta, phi, Lagrangian bound) with the least bound on a geometric grid, then finer ones around it."""
    scale = max(1e-12, max(float(np.max(np.abs(v))) for v in vals))
    starts = np.cumsum([0] + [v.size for v in vals[:-1]]).astype(np.int64)
    v_all, t_all, m_all = np.concatenate(vals), np.concatenate(tms), np.concatenate(mms)

    off = np.append(starts, v_all.size).astype(np.int64)

    def bounds(thetas: np.ndarray, phis: np.ndarray) -> np.ndarray:
        th, ph = np.meshgrid(thetas, phis, indexing="ij")
        th, ph = np.ascontiguousarray(th.ravel()), np.ascontiguousarray(ph.ravel())
        if _ext is not None and hasattr(_ext, "lagrange"):
            out = np.empty(th.size)
            _ext.lagrange(len(vals), off, v_all, t_all, m_all, th, ph, out, cap_t, cap_m)
            return out.reshape(thetas.size, phis.size)
        red = v_all[None, :] - th[:, None] * t_all[None, :] - ph[:, None] * m_all[None, :]
        per_chain = np.maximum.reduceat(red, starts, axis=1)
        return (per_chain.sum(axis=1) + th * cap_t + ph * cap_m).reshape(thetas.size, phis.size)

    grid = np.concatenate([[0.0], scale * 2.0 ** np.arange(-12.0, 9.0, 1.5)])
    ub = bounds(grid, grid)
    i, j = np.unravel_index(int(np.argmin(ub)), ub.shape)
    theta, phi, best = float(grid[i]), float(grid[j]), float(ub[i, j])
    for width in (1.0, 0.5, 0.25):
        steps = 2.0 ** np.linspace(-width, width, 5)
        fine_t = np.unique(theta * steps) if theta > 0 else np.array([0.0])
        fine_p = np.unique(phi * steps) if phi > 0 else np.array([0.0])
        ub = bounds(fine_t, fine_p)
        i, j = np.unravel_index(int(np.argmin(ub)), ub.shape)
        if float(ub[i, j]) < best:
            theta, phi, best = float(fine_t[i]), float(fine_p[j]), float(ub[i, j])
    return theta, phi, best


def _flat(opts: _Options) -> tuple[np.ndarray, ...]:
    """The options of every chain end to end: (offsets per chain, chain, a, e, time, mem) (cached)."""
    if opts.flat is None:
        sizes = [x.size for x in opts.a]
        off = np.zeros(len(sizes) + 1, dtype=np.int64)
        off[1:] = np.cumsum(sizes)
        chain = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        opts.flat = (
            off,
            chain,
            np.concatenate(opts.a),
            np.concatenate(opts.e),
            np.ascontiguousarray(np.concatenate(opts.time), dtype=float),
            np.ascontiguousarray(np.concatenate(opts.mem), dtype=float),
        )
    return opts.flat


def _dense(data: _Data, pi: dict[tuple[int, int, int], float], smax: int) -> np.ndarray:
    """The link duals as an array ``[h, j, s]`` (0 where ``pi`` has no row)."""
    out = np.zeros((len(data.lengths), max(data.lengths, default=0) + 1, smax + 1))
    for (h, j, st), x in pi.items():
        if st <= smax:
            out[h, j, st] = x
    return out


def _link_flat(duals: np.ndarray, flat: tuple[np.ndarray, ...], ty: StageType) -> np.ndarray:
    """:func:`_link_values` of every chain end to end, from the dense duals (the same numbers)."""
    _, chain, a, e, _, _ = flat
    out = np.zeros(a.size)
    if not ty.last:
        out += duals[chain, e, ty.s - ty.d]
    if not ty.first:
        out -= duals[chain, a, ty.s]
    return out


def _price_flat(
    v_all: np.ndarray, flat: tuple[np.ndarray, ...], cap_time: float, max_nodes: int = MAX_NODES
) -> tuple[float, list[list[int]], bool]:
    """:func:`_price` in one call of the extension (``v_all``: the values of :func:`_flat`'s options)."""
    off, _, _, _, tm, mm = flat
    upper, exact, leaves = _ext.price(
        off.size - 1, off, np.ascontiguousarray(v_all, dtype=float), tm, mm, cap_time * (1 + FIT_REL), 1.0 + FIT_REL, max_nodes
    )
    return float(upper), leaves, bool(exact)


def _price(
    values: list[np.ndarray], opts: _Options, cap_time: float, max_nodes: int = MAX_NODES
) -> tuple[float, list[list[int]], bool]:
    """Max of ``sum_h values[h][o_h]`` over one option per chain with (c) time <= cap_time and (d) memory <= 1.

    Returns (an upper bound on the maximum, the last few choices that improved the best found (the best last),
    whether the bound is exact).
    Branch and bound over the chains (in C where the extension is built); its bound is the Lagrangian one,
    ``sum_h max_o (v - theta tm - phi mm) + theta cap + phi`` (valid for every theta, phi >= 0), with (theta, phi)
    from a grid search at the root.  Past ``max_nodes`` the search stops and returns the least of the root's
    Lagrangian bound and the largest of the best found and the bounds of the branches left unexplored (each the
    Lagrangian bound at its node; the depth-first search leaves at most one open range of options per level, whose
    first has the largest bound): still an upper bound.
    Where the extension is built it does all of this in one call (:func:`_price_flat`).
    """
    if _ext is not None and hasattr(_ext, "price"):
        return _price_flat(np.concatenate(values), _flat(opts), cap_time, max_nodes)
    H = len(values)
    cap_t = cap_time * (1 + FIT_REL)
    cap_m = 1.0 + FIT_REL
    keep = [_undominated(values[h], opts.time[h], opts.mem[h], cap_t, cap_m) for h in range(H)]
    vals = [values[h][keep[h]] for h in range(H)]
    tms = [opts.time[h][keep[h]] for h in range(H)]
    mms = [opts.mem[h][keep[h]] for h in range(H)]
    idx = [np.flatnonzero(keep[h]) for h in range(H)]
    if any(v.size == 0 for v in vals):
        return -math.inf, [], True
    if sum(float(np.min(tm)) for tm in tms) > cap_t or sum(float(np.min(mm)) for mm in mms) > cap_m:
        return -math.inf, [], True
    theta, phi, root = _multipliers(vals, tms, mms, cap_t, cap_m)
    red = [v - theta * tm - phi * mm for v, tm, mm in zip(vals, tms, mms)]
    # chains with the widest spread of reduced values first; options in decreasing reduced value
    order = sorted(range(H), key=lambda h: -float(np.max(red[h]) - np.min(red[h])))
    sorts = [np.argsort(-red[h], kind="stable") for h in order]
    off = np.zeros(H + 1, dtype=np.int64)
    off[1:] = np.cumsum([red[h].size for h in order])
    cat = [np.ascontiguousarray(np.concatenate([arr[h][o] for h, o in zip(order, sorts)])) for arr in (vals, tms, mms, red)]
    tops = np.array([float(np.max(red[h])) for h in order] + [0.0])
    suffix = np.ascontiguousarray(np.cumsum(tops[::-1])[::-1])
    suffix[H] = 0.0
    rest_t = np.zeros(H + 1)
    rest_m = np.zeros(H + 1)
    rest_t[:H] = np.cumsum([float(np.min(tms[h])) for h in order][::-1])[::-1]
    rest_m[:H] = np.cumsum([float(np.min(mms[h])) for h in order][::-1])[::-1]
    if _ext is not None and hasattr(_ext, "mckp"):
        best, exhausted, _, leaves, opened = _ext.mckp(
            H, off, *cat, suffix, rest_t, rest_m, cap_t, cap_m, theta, phi, -math.inf, max_nodes
        )
    else:
        best, exhausted, _, leaves, opened = _mckp_py(
            H, off, cat[0], cat[1], cat[2], cat[3], suffix, rest_t, rest_m, cap_t, cap_m, theta, phi, max_nodes
        )

    def original(leaf: list[int]) -> list[int]:
        choice = [0] * H
        for g, h in enumerate(order):
            choice[h] = int(idx[h][sorts[g][int(leaf[g]) - int(off[g])]])
        return choice

    choices = [original(leaf) for leaf in leaves if leaf]
    # stopped early: every leaf is explored (at most best) or under an open branch's bound, and under the root's
    return (min(root, max(float(best), opened)) if exhausted else float(best)), choices, not exhausted


def _mckp_py(
    G: int,
    off: np.ndarray,
    v: np.ndarray,
    tm: np.ndarray,
    mm: np.ndarray,
    red: np.ndarray,
    suffix: np.ndarray,
    rest_t: np.ndarray,
    rest_m: np.ndarray,
    cap_t: float,
    cap_m: float,
    theta: float,
    phi: float,
    max_nodes: int,
) -> tuple[float, bool, list[int], list[list[int]], float]:
    """The C extension's ``mckp`` in Python (the same search; slower): the best value, whether stopped at
    ``max_nodes``, the best choice, the last few improving leaves, and where stopped the largest bound of a branch
    left unexplored (``-inf`` otherwise)."""
    vv, tt, mmm, rd = v.tolist(), tm.tolist(), mm.tolist(), red.tolist()
    best = -math.inf
    best_choice: list[int] = []
    leaves: list[list[int]] = []
    choice = [0] * G
    nodes = 0
    exhausted = False
    opened = -math.inf  # where stopped at max_nodes: the largest bound of a branch left unexplored

    def dfs(g: int, value: float, used_t: float, used_m: float) -> None:
        nonlocal best, best_choice, nodes, exhausted, opened
        if g == G:
            if value > best:
                best, best_choice = value, list(choice)
                leaves.append(best_choice)
            return
        base = value + suffix[g + 1] + theta * (cap_t - used_t) + phi * (cap_m - used_m)
        nodes += 1
        if nodes > max_nodes:
            exhausted = True  # this node's branches: at most its best option's bound (options by decreasing red)
            if off[g] < off[g + 1]:
                opened = max(opened, base + rd[int(off[g])])
            return
        for j in range(int(off[g]), int(off[g + 1])):
            if base + rd[j] <= best:
                break
            nt, nm = used_t + tt[j], used_m + mmm[j]
            if nt + rest_t[g + 1] > cap_t or nm + rest_m[g + 1] > cap_m:
                continue
            choice[g] = j
            dfs(g + 1, value + vv[j], nt, nm)
            if exhausted:  # the branches after j, unexplored: at most the next one's bound
                if j + 1 < int(off[g + 1]):
                    opened = max(opened, base + rd[j + 1])
                return

    dfs(0, 0.0, 0.0, 0.0)
    return best, exhausted, best_choice, leaves[-8:], opened


def stage_types(problem: JointProblem) -> list[StageType]:
    """Every stage type a plan's stage can have (a forced shape's degrees only)."""
    cl = problem.cluster
    smax = min(cl.device_count, problem.microbatches)
    out = []
    for d, t in stage_options(problem):
        for s in range(d, smax + 1):
            for first in (True, False):
                out.append(StageType(d, t, s, first, s == d))
    return out


class _Master:
    r"""Phase one of the master LP: artificial variables on every row, columns added by pricing.

    With ``band`` > 1 the (link) rows of the states in one band (:math:`\lceil s / \text{band} \rceil` alike) are
    summed into one row: a relaxation (its duals are the same for every state of a band), whose LP is far smaller and
    quicker to converge (:func:`column_bound_report`); it has a (state) row per state besides (the module docstring).
    """

    def __init__(self, devices: int, band: int = 1) -> None:
        self.devices = devices
        self.band = band
        self.target = math.inf
        #: type, interval starts, ends, time (units of ref), the option chosen per chain
        self.columns: list[tuple[StageType, tuple[int, ...], tuple[int, ...], float, tuple[int, ...]]] = []
        self.seen: dict[tuple[StageType, tuple[int, ...], tuple[int, ...]], int] = {}  # column -> its index
        self._build()

    def _build(self) -> None:
        """A fresh LP with the columns so far (GLOP's incremental solves can stop abnormally)."""
        solver = glop_solver()  # OR-Tools imported here: a quarter second, small cases never get here
        self.solver = solver
        self.objective = solver.Objective()
        self.objective.SetMinimization()
        art = solver.NumVar(0.0, math.inf, "a_first")
        self.first = solver.Constraint(1.0, 1.0, "first")  # (first)
        self.first.SetCoefficient(art, 1.0)
        self.objective.SetCoefficient(art, 1.0)
        art = solver.NumVar(0.0, math.inf, "a_dev")
        self.device = solver.Constraint(-math.inf, float(self.devices), "devices")  # (k)
        self.device.SetCoefficient(art, -1.0)
        self.objective.SetCoefficient(art, 1.0)
        self.links: dict[tuple[int, int, int], Any] = {}
        self.states: dict[int, Any] = {}
        self.vars: list[Any] = [self._variable(*col[:3]) for col in self.columns]

    def _artificials(self, row: Any) -> None:
        """A row's two artificial variables (phase one: their sum is minimised)."""
        for sign in (1.0, -1.0):
            art = self.solver.NumVar(0.0, math.inf, "")
            row.SetCoefficient(art, sign)
            self.objective.SetCoefficient(art, 1.0)

    def link(self, h: int, j: int, s: int) -> Any:
        """The (link) row of chain ``h``, position ``j``, state ``s``'s band (made on first use, with its artificials)."""
        key = (h, j, (s - 1) // self.band)  # the band of state s
        row = self.links.get(key)
        if row is None:
            row = self.links[key] = self.solver.Constraint(0.0, 0.0, f"l{h}_{j}_{key[2]}")
            self._artificials(row)
        return row

    def state(self, s: int) -> Any:
        """The (state) row of state ``s`` (made on first use, with its artificials)."""
        row = self.states.get(s)
        if row is None:
            row = self.states[s] = self.solver.Constraint(0.0, 0.0, f"s{s}")
            self._artificials(row)
        return row

    def add(self, ty: StageType, a: tuple[int, ...], e: tuple[int, ...], stage_time: float, choice: tuple[int, ...]) -> bool:
        """Add a column (``False``: it was there, as fast).

        A column is its type and intervals; of two configuration choices for it the faster is kept (both fit in
        memory, and the faster fits at every target the slower does).  Keeping the first one found instead left a
        column that fits at a lower target out of the LP while pricing found it round after round: the master
        looked converged where the certificate failed."""
        key = (ty, a, e)
        q = self.seen.get(key)
        if q is None:
            self.seen[key] = len(self.columns)
            self.columns.append((ty, a, e, stage_time, choice))
            self.vars.append(self._variable(ty, a, e))
            return True
        if stage_time >= self.columns[q][3]:
            return False
        self.columns[q] = (ty, a, e, stage_time, choice)
        var = self.vars[q]
        was = var.ub()
        var.SetUb(math.inf if stage_time <= ty.d * self.target * (1 + FIT_REL) else 0.0)
        return bool(var.ub() != was)

    def _variable(self, ty: StageType, a: tuple[int, ...], e: tuple[int, ...]) -> Any:
        var = self.solver.NumVar(0.0, math.inf, "")
        self.objective.SetCoefficient(var, 0.0)
        if ty.first:
            self.first.SetCoefficient(var, 1.0)  # (first)
        self.device.SetCoefficient(var, float(ty.d * ty.t))  # (k)
        for h in range(len(a)):  # (link)
            if not ty.last:
                self.link(h, e[h], ty.s - ty.d).SetCoefficient(var, 1.0)
            if not ty.first:
                row = self.link(h, a[h], ty.s)
                row.SetCoefficient(var, row.GetCoefficient(var) - 1.0)
        if self.band != 1 and STATE_ROWS:  # (state): implied by a row per state, not by a band's
            if not ty.last:
                self.state(ty.s - ty.d).SetCoefficient(var, 1.0)
            if not ty.first:
                self.state(ty.s).SetCoefficient(var, -1.0)
        return var

    def regroup(self, band: int) -> None:
        """The same columns with (link) rows summed over bands of ``band`` states (1: a row per state)."""
        self.band = band
        self._build()
        self.restrict(self.target)

    def restrict(self, target: float) -> None:
        """Columns that do not fit at ``target`` get upper bound 0 (they stay for larger targets)."""
        self.target = target
        for (ty, _, _, stage_time, _), var in zip(self.columns, self.vars):
            var.SetUb(math.inf if stage_time <= ty.d * target * (1 + FIT_REL) else 0.0)

    def solve(self, budget: Budget) -> float | None:
        """Phase one's value (``None``: the LP solver failed or ``budget`` ran out first)."""
        for attempt in range(2):
            left = budget.left()
            if left <= 0:
                return None
            if math.isfinite(left):
                self.solver.SetTimeLimit(max(1, int(left * 1000)))  # milliseconds
            if lp_status(self.solver.Solve()) is SolveStatus.OPTIMAL:
                return float(self.objective.Value())
            if attempt == 0 and not budget.expired():
                self._build()  # GLOP's incremental solve can stop abnormally: once more on a fresh model
                self.restrict(self.target)
        return None

    def state_duals(self) -> dict[int, float]:
        """The duals of the (state) rows by state (none with a row per state)."""
        return {s: float(row.dual_value()) for s, row in self.states.items()}

    def duals(self) -> tuple[float, float, dict[tuple[int, int, int], float]]:
        """The duals of (first), (k) and the (link) rows (per state: a band's row's dual for each of its states)."""
        w = self.band
        return (
            float(self.first.dual_value()),
            float(self.device.dual_value()),
            {
                (h, j, s): float(row.dual_value())
                for (h, j, b), row in self.links.items()
                for s in range(b * w + 1, b * w + w + 1)
            },
        )


def _link_values(data: _Data, opts: _Options, ty: StageType, pi: dict[tuple[int, int, int], float]) -> list[np.ndarray]:
    """Per chain and option, its link term: pi at (h, e, s - d) unless last, less pi at (h, a, s) unless first."""
    out = []
    for h, length in enumerate(data.lengths):
        end = np.zeros(length + 1)
        start = np.zeros(length + 1)
        for j in range(length + 1):
            if not ty.last:
                end[j] = pi.get((h, j, ty.s - ty.d), 0.0)
            if not ty.first:
                start[j] = pi.get((h, j, ty.s), 0.0)
        out.append(end[opts.e[h]] - start[opts.a[h]])
    return out


def _longest_path(problem: JointProblem, upper: dict[StageType, float]) -> float:
    """The largest sum of ``upper`` over the type sequences a plan can have ((f) and (k)); ``-inf``: none."""
    return _longest_path_types(problem, upper)[0]


def _longest_path_types(problem: JointProblem, upper: dict[StageType, float]) -> tuple[float, list[StageType]]:
    """:func:`_longest_path` and the types of one sequence that has it (first stage first; empty: none)."""
    cl = problem.cluster
    k = cl.device_count
    smax = min(k, problem.microbatches)
    # best[s][u]: the largest sum over prefixes after which the later stages' degrees sum to s, with u devices used
    best = [[-math.inf] * (k + 1) for _ in range(smax + 1)]
    # how best[s][u] was reached: the last type and the cell before it (None: a first stage)
    came: dict[tuple[int, int], tuple[StageType, tuple[int, int] | None]] = {}
    total = -math.inf
    end: tuple[StageType, tuple[int, int] | None] | None = None
    by_s: dict[int, list[StageType]] = {}
    for ty in upper:
        by_s.setdefault(ty.s, []).append(ty)
    for s in range(smax, 0, -1):
        for ty in by_s.get(s, []):
            val = upper[ty]
            if val == -math.inf:
                continue  # no column of this type fits
            dt = ty.d * ty.t
            if ty.first:
                if dt <= k:
                    if ty.last:
                        if val > total:
                            total, end = val, (ty, None)
                    elif val > best[s - ty.d][dt]:
                        best[s - ty.d][dt] = val
                        came[(s - ty.d, dt)] = (ty, None)
                continue
            for u in range(k + 1 - dt):
                if best[s][u] == -math.inf:
                    continue
                if ty.last:
                    if best[s][u] + val > total:
                        total, end = best[s][u] + val, (ty, (s, u))
                elif best[s][u] + val > best[s - ty.d][u + dt]:
                    best[s - ty.d][u + dt] = best[s][u] + val
                    came[(s - ty.d, u + dt)] = (ty, (s, u))
    path: list[StageType] = []
    step = end
    while step is not None:
        path.append(step[0])
        step = came[step[1]] if step[1] is not None else None
    return total, path[::-1]


def _integer_path(master: _Master, target: float, budget: Budget) -> list[int] | None:
    """A path of the master's columns that fit at ``target`` (an integer flow: a plan), by CP-SAT within ``budget``."""
    fit = [q for q, (ty, _, _, stage_time, _) in enumerate(master.columns) if stage_time <= ty.d * target * (1 + FIT_REL)]
    if not fit or budget.left() < 0.05:
        return None
    cp_model = cp_sat()
    model = cp_model.CpModel()
    x = {q: model.new_bool_var("") for q in fit}
    rows: dict[tuple[int, int, int], list[tuple[Any, int]]] = {}
    firsts, devices = [], []
    for q in fit:
        ty, a, e, _, _ = master.columns[q]
        if ty.first:
            firsts.append(x[q])
        devices.append(ty.d * ty.t * x[q])
        for h in range(len(a)):
            if not ty.last:
                rows.setdefault((h, e[h], ty.s - ty.d), []).append((x[q], 1))
            if not ty.first:
                rows.setdefault((h, a[h], ty.s), []).append((x[q], -1))
    model.add(sum(firsts) == 1)  # (first)
    for terms in rows.values():
        model.add(sum(c * v for v, c in terms) == 0)  # (link)
    model.add(sum(devices) <= master.devices)  # (k)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, budget.left())
    solver.parameters.num_workers = 1
    status = cp_status(solver.Solve(model))
    if status not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        return None
    path = [q for q in fit if solver.Value(x[q])]
    return sorted(path, key=lambda q: -master.columns[q][0].s)


def _plan(problem: JointProblem, data: _Data, master: _Master, path: list[int]) -> JointPlan:
    """The plan of a path of columns (first stage first; empty stages dropped: the others' memory only falls)."""
    stages = []
    for q in path:
        ty, a, e, _, choice = master.columns[q]
        opts = _options(data, ty.d, ty.t, ty.y, ty.first, ty.last)
        nodes: list[int] = []
        configs: dict[str, str] = {}
        for h in range(len(a)):
            for v, o in zip(data.cd.node[h, a[h] : e[h]], opts.configs[h][choice[h]]):
                nd = problem.nodes[int(v)]
                nodes.append(int(v))
                configs[nd.id] = nd.configs[ty.t][o].id
        if nodes:
            ids = tuple(problem.nodes[v].id for v in sorted(nodes))
            stages.append(JointStage(ids, ty.d, ty.t, configs))
    return JointPlan(tuple(stages))


#: A column handed from one search to another: its type, interval starts and ends, its time in seconds (not units of
#: a reference: the two searches' references differ), the option chosen per chain.
PoolColumn = tuple[StageType, tuple[int, ...], tuple[int, ...], float, tuple[int, ...]]


@dataclass
class ColumnBoundReport:
    """What :func:`column_bound_report` found: the bound (s), the targets tried, the master's size."""

    bound: float
    proven: list[float] = field(default_factory=list)  # targets proven (seconds)
    refuted: list[float] = field(default_factory=list)  # targets where the relaxation has a solution (seconds)
    columns: int = 0
    rounds: int = 0
    types: int = 0
    plans: list[JointPlan] = field(default_factory=list)  # from integer paths at targets the relaxation allows
    by_band: list[tuple[int, float]] = field(default_factory=list)  # per master: its band width, the bound at its end
    bound_after_s: float = 0.0  # seconds from the start until the best proven target was proven (0: none proven)
    pool: list[PoolColumn] = field(default_factory=list)  # the master's columns, where asked for (``keep_columns``)


#: A pricing's answers per type, in the types' order: upper bounds on the largest link term, the choices found (the
#: best last), the seconds each took, whether each bound is exact, the best link term found (``-inf``: none).
Priced = tuple[list[float], list[list[tuple[StageType, list[int]]]], list[float], list[bool], list[float]]


def _price_some(
    data: _Data,
    types: list[StageType],
    pi: dict[tuple[int, int, int], float],
    target: float,
    budget: Budget,
    max_nodes: int | None = None,
) -> Priced | None:
    """Per type: the pricing's answers (:data:`Priced`; ``None``: the budget ran out), each search stopped after
    ``max_nodes`` nodes (:data:`MAX_NODES` where ``None``)."""
    nodes = MAX_NODES if max_nodes is None else max_nodes
    out: Priced = ([], [], [], [], [])
    compiled = _ext is not None and hasattr(_ext, "price")
    duals = _dense(data, pi, max(ty.s for ty in types)) if compiled and types else None
    for ty in types:
        t0 = time.perf_counter()
        opts = _options(data, ty.d, ty.t, ty.y, ty.first, ty.last)
        if duals is not None:
            flat = _flat(opts)
            values = _link_flat(duals, flat, ty)
            bound, choices, exact = _price_flat(values, flat, ty.d * target, nodes)
            low = math.fsum(values[flat[0][h] + o] for h, o in enumerate(choices[-1])) if choices else -math.inf
        else:
            per_chain = _link_values(data, opts, ty, pi)
            bound, choices, exact = _price(per_chain, opts, ty.d * target, nodes)
            low = math.fsum(per_chain[h][o] for h, o in enumerate(choices[-1])) if choices else -math.inf
        for got, x in zip(out, (bound, [(ty, choice) for choice in choices], time.perf_counter() - t0, exact, low)):
            got.append(x)  # type: ignore[attr-defined]
        if budget.expired():
            return None
    return out


class _Pricer:
    """Every type's pricing each round, in this process or split with a forked partner (:class:`beside.Partner`).

    With a partner the types are dealt to the two processes by their last pricing times (the longest first, each to
    the less loaded side); the answers are merged in the types' order, so the rounds are the same as in one process.
    Where the partner dies its share is priced here from then on.
    """

    def __init__(self, data: _Data, types: list[StageType], workers: int, band: int = 1) -> None:
        self.data = data
        self.types = types
        self.seconds = [1.0] * len(types)  # each type's last pricing time (the dealing's estimate)
        self.partner: beside.Partner | None = None
        if workers >= 2 and len(types) >= 2 and beside.available():
            self.partner = beside.Partner(self._serve)
        self.regroup(band)

    def regroup(self, band: int) -> None:
        """Twins for duals equal across the states of a band of ``band`` (:class:`_Master`): types with the same
        degrees, micro-batches in flight, first and last, and the same bands of the states they enter and leave have
        the same options and link terms, so one pricing answers for all (each keeps its own type in its columns)."""
        self.band = band
        first: dict[tuple[Any, ...], int] = {}
        self.twin = []  # per type, the index of the first type priced for it
        for i, ty in enumerate(self.types):
            enter = None if ty.first else (ty.s - 1) // band
            leave = None if ty.last else (ty.s - ty.d - 1) // band
            self.twin.append(first.setdefault((ty.d, ty.t, ty.y, ty.first, ty.last, enter, leave), i))
        self.priced = sorted(set(self.twin))  # the types priced each round

    def _serve(self, request: tuple[list[int], dict[tuple[int, int, int], float], float, float]) -> Any:
        """The partner's side: price the types at these indices (the budget's seconds left travel with them)."""
        indices, pi, target, left_s = request
        return _price_some(self.data, [self.types[i] for i in indices], pi, target, Budget.starting_now(left_s))

    def refine(
        self, ty: StageType, pi: dict[tuple[int, int, int], float], target: float, budget: Budget, max_nodes: int
    ) -> tuple[list[StageType], float, list[tuple[StageType, list[int]]], bool, float] | None:
        """One type's pricing again, here, with ``max_nodes``: its twins (itself among them), the upper bound, the
        choices found for every twin, whether exact, the best found (``None``: the budget ran out)."""
        i = self.types.index(ty)
        twins = [self.types[q] for q, w in enumerate(self.twin) if w == self.twin[i]]
        got = _price_some(self.data, [ty], pi, target, budget, max_nodes)
        if got is None:
            return None
        (bound,), (pairs,), _, (exact,), (best,) = got
        return twins, bound, [(twin, choice) for twin in twins for _, choice in pairs], exact, best

    def _deal(self) -> tuple[list[int], list[int]]:
        here: list[int] = []
        there: list[int] = []
        load = [0.0, 0.0]
        for i in sorted(self.priced, key=lambda i: -self.seconds[i]):
            side = 0 if load[0] <= load[1] else 1
            (here, there)[side].append(i)
            load[side] += self.seconds[i]
        return sorted(here), sorted(there)

    def price(
        self, pi: dict[tuple[int, int, int], float], target: float, budget: Budget
    ) -> tuple[dict[StageType, float], list[tuple[StageType, list[int]]], dict[StageType, float]] | None:
        """Every type's pricing at link duals ``pi``: upper bounds on the maximum link term per type, the choices
        found, and per type whose bound is not exact the best link term found (``None``: the budget ran out)."""
        here, there = (list(self.priced), []) if self.partner is None else self._deal()
        if there and not self.partner.ask((there, pi, target, budget.left())):  # type: ignore[union-attr]
            self.stop()
            here, there = list(self.priced), []
        results: dict[int, tuple[float, list[tuple[StageType, list[int]]], float, bool, float]] = {}
        mine = _price_some(self.data, [self.types[i] for i in here], pi, target, budget)
        if mine is None:
            if there:
                self.stop()  # its answer would be stale: the next round cannot read it
            return None
        results.update(zip(here, zip(*mine)))
        if there:
            assert self.partner is not None
            got, theirs = self.partner.answer(budget.left() + 1.0)
            if not got:  # the partner is gone: its share here, now and from now on
                self.stop()
                if budget.expired():
                    return None
                theirs = _price_some(self.data, [self.types[i] for i in there], pi, target, budget)
            if theirs is None:
                return None
            results.update(zip(there, zip(*theirs)))
        upper: dict[StageType, float] = {}
        found: list[tuple[StageType, list[int]]] = []
        inexact: dict[StageType, float] = {}
        for i, ty in enumerate(self.types):
            bound, pairs, seconds, exact, low = results[self.twin[i]]
            upper[ty] = bound
            found += [(ty, choice) for _, choice in pairs]
            self.seconds[i] = seconds
            if not exact:
                inexact[ty] = low
        return upper, found, inexact

    def stop(self) -> None:
        """End the partner (if any): the rest is priced here."""
        if self.partner is not None:
            self.partner.stop()
            self.partner = None


def _prove(
    problem: JointProblem,
    data: _Data,
    master: _Master,
    pricer: _Pricer,
    target: float,
    budget: Budget,
    report: ColumnBoundReport,
) -> bool | None:
    """Proven that no plan has value <= ``target`` (units of ref): True; the relaxation has a solution there: False;
    neither within the budget: None."""
    master.restrict(target)
    center: dict[tuple[int, int, int], float] | None = None  # the duals with the best normalised certificate so far
    center_score = math.inf
    for _ in range(MAX_ROUNDS):
        if budget.expired():
            return None
        value = master.solve(budget)
        if value is None:
            return None
        report.rounds += 1
        if value <= 1e-9:
            return False  # the relaxation has a solution at this target
        pi_first, pi_dev, pi = master.duals()
        # (Wentges) price at a point between the best duals so far and the master's: fewer rounds than at the
        # master's duals alone, which jump between the corners of its dual polyhedron
        total = 0
        points = [pi] if center is None or SMOOTH_ALPHA <= 0 else [_smoothed(center, pi, SMOOTH_ALPHA), pi]
        for at in points:
            priced = pricer.price(at, target, budget)
            if priced is None:
                return None
            upper, found, inexact = priced
            size = 1.0 + sum(abs(x) for x in at.values())
            margin = CERT_REL * size * 4 * len(data.lengths)
            # the certificate: every type sequence's sum of upper bounds is below zero (a plan's link terms sum to 0)
            path, seq = _longest_path_types(problem, upper)
            if path >= -margin and inexact:
                refined = _refine(problem, pricer, at, target, budget, upper, inexact, path, seq, margin)
                if refined is None:
                    return None
                path, more = refined
                found += more
            if path < -margin:
                return True
            norm = max((abs(x) for x in at.values()), default=0.0)
            if norm > 0 and path / norm < center_score:
                center, center_score = at, path / norm
            added = _add_columns(data, master, found, pi_first, pi_dev, pi)
            total += added
            if added:
                break  # else (a mis-price: nothing the master lacks at its duals) price at the master's duals
        if not total:
            return None  # converged without a certificate (a pricing stopped at its node limit)
    return None


def _refine(
    problem: JointProblem,
    pricer: _Pricer,
    pi: dict[tuple[int, int, int], float],
    target: float,
    budget: Budget,
    upper: dict[StageType, float],
    inexact: dict[StageType, float],
    path: float,
    seq: list[StageType],
    margin: float,
) -> tuple[float, list[tuple[StageType, list[int]]]] | None:
    """Where the certificate fails on a longest path through types whose pricing stopped at its node limit: those
    types priced again with ten times the nodes (up to :data:`MAX_REFINE_NODES`, and :data:`REFINE_NODES_PER_S` per
    second left: a search does not look at the clock), ``upper`` and ``inexact`` updated in place, until the
    certificate holds, the longest path's types are all exact or at the limit, the time left allows no deeper search,
    or no exact pricing could give it (the longest path with every inexact type at its best found is not below
    ``-margin``).  ``path`` and ``seq``: the longest path's value and types at ``upper`` as priced.

    Returns the longest path's value and the choices found on the way (``None``: the budget ran out)."""
    # (the Python search is about a hundred times slower than C's: there the node limit stays)
    limit = MAX_REFINE_NODES if _ext is not None and hasattr(_ext, "price") else MAX_NODES
    nodes = dict.fromkeys(inexact, MAX_NODES)
    found: list[tuple[StageType, list[int]]] = []
    while path >= -margin:
        low = {ty: inexact.get(ty, bound) for ty, bound in upper.items()}
        if _longest_path(problem, low) >= -margin:
            break  # the true maxima lie between: no pricing, however long, gives the certificate here
        todo = [ty for ty in dict.fromkeys(seq) if ty in inexact and nodes[ty] < limit]
        if not todo:
            break
        for ty in todo:
            if ty not in inexact:
                continue  # a twin of one refined before
            # a search is not stopped by the budget: at most the nodes the seconds left allow (REFINE_NODES_PER_S)
            more = min(limit, 10 * nodes[ty], int(min(budget.left(), 1e6) * REFINE_NODES_PER_S))
            if more <= nodes[ty]:
                return _longest_path(problem, upper), found  # no time left for a deeper search
            got = pricer.refine(ty, pi, target, budget, more)
            if got is None:
                return None
            twins, bound, pairs, exact, best = got
            found += pairs
            for twin in twins:
                nodes[twin] = more
                upper[twin] = min(upper[twin], bound)
                if exact:
                    inexact.pop(twin, None)
                elif twin in inexact:
                    inexact[twin] = max(inexact[twin], best)
        path, seq = _longest_path_types(problem, upper)
    return path, found


def _smoothed(
    center: dict[tuple[int, int, int], float], pi: dict[tuple[int, int, int], float], alpha: float
) -> dict[tuple[int, int, int], float]:
    """``alpha * center + (1 - alpha) * pi`` (rows missing from one count 0 there)."""
    keys = center.keys() | pi.keys()
    return {key: alpha * center.get(key, 0.0) + (1.0 - alpha) * pi.get(key, 0.0) for key in keys}


def _add_columns(
    data: _Data,
    master: _Master,
    found: list[tuple[StageType, list[int]]],
    pi_first: float,
    pi_dev: float,
    pi: dict[tuple[int, int, int], float],
) -> int:
    """Add the found columns whose reduced cost at the master's duals is positive (the best ``MAX_ADD``)."""
    size = 1.0 + sum(abs(x) for x in pi.values())
    sigma = master.state_duals()
    scored = []
    for ty, choice in found:
        opts = _options(data, ty.d, ty.t, ty.y, ty.first, ty.last)
        link = 0.0
        for h, o in enumerate(choice):  # its link term at the master's duals
            if not ty.last:
                link += pi.get((h, int(opts.e[h][o]), ty.s - ty.d), 0.0)
            if not ty.first:
                link -= pi.get((h, int(opts.a[h][o]), ty.s), 0.0)
        # (state): sigma at the state it leaves (not last) less sigma at the one it enters (not first)
        link += (0.0 if ty.last else sigma.get(ty.s - ty.d, 0.0)) - (0.0 if ty.first else sigma.get(ty.s, 0.0))
        score = link + (pi_first if ty.first else 0.0) + pi_dev * ty.d * ty.t
        if score > 1e-9 * size:
            scored.append((score, ty, opts, choice))
    scored.sort(key=lambda c: -c[0])
    added = 0
    for _, ty, opts, choice in scored[:MAX_ADD]:
        a = tuple(int(opts.a[h][o]) for h, o in enumerate(choice))
        e = tuple(int(opts.e[h][o]) for h, o in enumerate(choice))
        stage_time = math.fsum(float(opts.time[h][o]) for h, o in enumerate(choice))
        added += master.add(ty, a, e, stage_time, tuple(choice))
    return added


def column_bound_report(
    problem: JointProblem,
    lower_s: float,
    upper_s: float,
    budget: Budget,
    progress: Callable[[str], None] | None = None,
    give_up_s: float = math.inf,
    workers: int = 1,
    bands: Sequence[int] = (1,),
    columns: Sequence[PoolColumn] = (),
    keep_columns: bool = False,
) -> ColumnBoundReport:
    """:func:`column_bound` with its working figures; ``progress`` gets a line per target settled.

    ``give_up_s``: seconds after which it stops if it has proven no target yet (the rest of ``budget`` goes back to
    the caller); once a target is proven it may use all of ``budget``.  ``workers``: with 2 or more the pricing is
    split with a second process (:class:`_Pricer`; the same rounds and bound, in less time).  ``bands``: the masters
    in turn, by how many states share a (link) row (1: a row per state, the strongest; :data:`ALL_STATES`: one row for
    all); each but the last hands its columns and proven bound over to the next once its search is within
    :data:`COARSE_REL_TOL`.  ``columns``: a start for the master (another search's :attr:`ColumnBoundReport.pool`;
    columns only steer the duals, the certificate is the pricing's); ``keep_columns``: the master's columns go to the
    report's ``pool``."""
    report = ColumnBoundReport(lower_s)
    if not problem.nodes or not math.isfinite(upper_s) or upper_s <= 0:
        return report
    if problem.shape is not None and problem.shape.stages is not None:
        return report  # a forced number of stages: not modelled here
    data = _data(problem, upper_s)
    if any(f > ell for f, ell in zip(data.first_end, data.last_start)):
        return report  # a node both first and last: one stage only (the DP's case)
    types = stage_types(problem)
    report.types = len(types)
    pricer = _Pricer(data, types, workers)  # forked before the master: the partner needs no LP
    smax = min(problem.cluster.device_count, problem.microbatches)
    widths = [smax if b == ALL_STATES else b for b in bands]
    master = _Master(problem.cluster.device_count, widths[0])
    for ty, a, e, seconds, choice in columns:
        master.add(ty, a, e, seconds / data.ref, choice)
    try:
        lo = max(0.0, lower_s / upper_s)
        best_s = upper_s
        for band in widths:
            if band != master.band:
                master.regroup(band)
            pricer.regroup(band)
            hi = best_s / upper_s  # what a coarser master refuted, this one may prove
            # close to the plan: the targets that settle a 2%, 1%, ... gap first; else bisection from the midpoint (a
            # target well below the relaxation's value is proven in few rounds, one above it needs the columns to
            # converge)
            targets = [x for x in FIRST_TARGETS if lo < x < hi] if lo >= FIRST_TARGETS_FROM else []
            tol = TARGET_REL_TOL if band == 1 else COARSE_REL_TOL
            while not budget.expired() and hi - lo > tol:
                target = targets.pop(0) if targets else 0.5 * (lo + hi)
                probe = budget if report.proven else budget.capped(max(0.0, give_up_s - budget.elapsed()))
                got = _prove(problem, data, master, pricer, target, probe, report)
                if got is None:
                    if probe.expired():
                        break
                    # not settled within MAX_ROUNDS, or converged without a certificate (a pricing stopped early, or
                    # the relaxation's infeasibility there is within the certificate's margin): neither proven nor
                    # refuted, the search goes on below it (only proofs count)
                    hi, targets = target, []
                    if progress is not None:
                        progress(f"[joint] column bound: not settled at {target * upper_s:.6g} s, band {master.band}")
                    continue
                if progress is not None:
                    word = {True: "proven: no plan below", False: "not provable at"}[got]
                    progress(
                        f"[joint] column bound: {word} {target * upper_s:.6g} s ({report.rounds} rounds, "
                        f"{len(master.columns)} columns, {budget.elapsed():.1f} s, band {master.band})"
                    )
                if got:
                    lo = target
                    if not report.proven or target * upper_s > max(report.proven):
                        report.bound_after_s = budget.elapsed()
                    report.proven.append(target * upper_s)
                else:
                    hi = target
                    report.refuted.append(target * upper_s)
                    # the relaxation allows this target: an integer path of its columns may be a plan there (verified)
                    if target * upper_s < best_s * (1 - 1e-6):
                        path = _integer_path(master, target, budget.capped(min(PATH_TIME_S, 0.25 * budget.left())))
                        if path is not None:
                            plan = _plan(problem, data, master, path)
                            checked = verify_joint(problem, plan)
                            if checked.feasible and checked.objective < best_s:
                                report.plans.append(plan)
                                best_s = checked.objective
                                hi = min(hi, best_s / upper_s)  # no target at or above a plan's value is provable
                    targets = []  # below the first refuted target: bisection
            report.by_band.append((band, max(lower_s, lo * upper_s * (1 - CERT_REL))))
            if budget.expired():
                break
    finally:
        pricer.stop()
    report.columns = len(master.columns)
    report.bound = max(lower_s, lo * upper_s * (1 - CERT_REL))
    if keep_columns:
        report.pool = [(ty, a, e, stage_time * data.ref, choice) for ty, a, e, stage_time, choice in master.columns]
    return report


def column_bound(problem: JointProblem, lower_s: float, upper_s: float, budget: Budget) -> float:
    """A proven lower bound on the optimum: ``max(lower_s, the largest target proven)`` (the module's certificate).

    ``upper_s``: the best plan's value (the reference; no bound without one).  Within ``budget``.
    """
    return column_bound_report(problem, lower_s, upper_s, budget).bound
