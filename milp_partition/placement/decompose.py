r"""Exact series decomposition of a placement problem at its bottleneck tasks.

A task v is a *bottleneck* when every other task is an ancestor or a descendant
of it (tasks that are free -- no predecessor, time 0 on every device, memory 0,
zero transfers out -- are set aside: they start at 0 anywhere and constrain
nothing).  In every schedule all ancestors of v end before v starts and all
descendants start after v ends, so with bottlenecks :math:`v_1, \dots, v_K` in
topological order the time axis splits into segments: the tasks strictly between
:math:`v_t` and :math:`v_{t+1}` run in :math:`[C_{v_t}, S_{v_{t+1}}]` and nothing
else runs there.  Let

.. math::

    \sigma_t(b, b') = \min \{ C_{v_{t+1}} - C_{v_t} \;:\; \text{segment t scheduled},\;
    p(v_t) = b,\; p(v_{t+1}) = b' \}

(segment 0 from time 0 to :math:`C_{v_1}`, the last segment from :math:`C_{v_K}` to
the makespan).  Transfers and (with contention) ports are used only inside their
segment, so the makespan of any schedule is :math:`\sum_t (C_{v_{t+1}} - C_{v_t})
\ge \sum_t \sigma_t(p(v_t), p(v_{t+1}))` and

.. math::

    F_1(b') = \sigma_0(b'), \quad F_{t+1}(b') = \min_b F_t(b) + \sigma_t(b, b'), \quad
    \mathrm{OPT} \ge \min_b F_K(b) + \sigma_K(b).

Edges that skip a bottleneck (from an ancestor of :math:`v_t` straight into a later
segment) are dropped from the segment problems, which only relaxes them.  The
recursion is exact when neither those edges nor memory couple segments (each
device's static memory is a sum over all segments; liveness memory is dropped
inside a segment): the schedules of the segments, concatenated along the
recursion's device path, then form a schedule of that makespan.  The verifier
checks the stitched schedule either way; only a verified one is used.  With a lower
bound of each :math:`\sigma` in place of its value the recursion gives a lower
bound; with each segment's best schedule it gives a schedule (an upper bound).
Each :math:`\sigma_t(b, b')` is a small placement problem (``v_t`` fixed on b with
duration 0 at time 0, ``v_{t+1}`` fixed on b'), solved by the ordinary chain.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from milp_partition.errors import InputError
from milp_partition.placement.bounds import best_bound, device_path
from milp_partition.placement.problem import PlacementProblem, PlacementSettings, PlacementSolution, make_placement_problem


@dataclass(frozen=True)
class Segment:
    """Tasks strictly between two consecutive bottlenecks (``first``/``last`` are ``None`` at the ends)."""

    first: int | None
    last: int | None
    inner: tuple[int, ...]


@dataclass(frozen=True)
class Decomposition:
    """Free tasks, bottlenecks and segments (see the module docstring)."""

    free: np.ndarray
    bottlenecks: tuple[int, ...]
    segments: tuple[Segment, ...]

    @property
    def useful(self) -> bool:
        """True when the split helps: some bottleneck and no segment with more than 3/4 of the tasks."""
        return len(self.bottlenecks) > 0 and max(len(s.inner) for s in self.segments) <= 0.75 * int((~self.free).sum())


def free_tasks(problem: PlacementProblem) -> np.ndarray:
    """(n,) bool: no predecessor, time 0 everywhere, memory 0, zero transfers out."""
    n = problem.num_tasks
    free = (np.where(np.isfinite(problem.time), problem.time, 1.0).max(axis=1) == 0) & (problem.task_memory == 0)
    free &= np.isfinite(problem.time).all(axis=1)
    indeg = np.bincount(problem.edge_target, minlength=n) if problem.num_edges else np.zeros(n, dtype=np.int64)
    free &= indeg == 0
    if problem.num_edges:
        hot = problem.comm.max(axis=(1, 2)) > 0
        free[problem.edge_source[hot]] = False
    free &= problem.colocation < 0
    return free


def decompose(problem: PlacementProblem) -> Decomposition:
    """Find the bottleneck tasks and the segments between them (bitsets over the DAG)."""
    n = problem.num_tasks
    free = free_tasks(problem)
    topo = [i for i in problem.topological_order.tolist() if not free[i]]
    ptr, pred, _ = problem.pred
    sptr, succ, _ = problem.succ
    anc = [0] * n
    desc = [0] * n
    for j in topo:
        a = 0
        for i in pred[ptr[j] : ptr[j + 1]].tolist():
            if not free[i]:
                a |= anc[i] | (1 << i)
        anc[j] = a
    for i in reversed(topo):
        dd = 0
        for j in succ[sptr[i] : sptr[i + 1]].tolist():
            dd |= desc[j] | (1 << j)
        desc[i] = dd
    m = len(topo)
    bottlenecks = [i for i in topo if anc[i].bit_count() + desc[i].bit_count() + 1 == m]
    pos = {v: k for k, v in enumerate(topo)}
    segments: list[Segment] = []
    marks = [None, *bottlenecks, None]
    for a, b in itertools.pairwise(marks):
        lo = pos[a] + 1 if a is not None else 0
        hi = pos[b] if b is not None else m
        segments.append(Segment(a, b, tuple(topo[lo:hi])))
    if not bottlenecks:
        segments = [Segment(None, None, tuple(topo))]
    return Decomposition(free, tuple(bottlenecks), tuple(segments))


def segment_problem(problem: PlacementProblem, seg: Segment, b: int | None, b2: int | None) -> tuple[PlacementProblem, list[int]]:
    """The placement problem of ``seg`` with ``first`` on b (duration 0) and ``last`` on b2; and its task list."""
    tasks = ([seg.first] if seg.first is not None else []) + list(seg.inner) + ([seg.last] if seg.last is not None else [])
    local = {t: k for k, t in enumerate(tasks)}
    time_ = problem.time[tasks].copy()
    mem = problem.task_memory[tasks].copy()
    if seg.first is not None:
        time_[0] = np.inf
        time_[0, b] = 0.0
        mem[0] = problem.task_memory[seg.first]
    if seg.last is not None:
        row = np.full(problem.num_devices, np.inf)
        row[b2] = problem.time[seg.last, b2]
        time_[-1] = row
    liveness = problem.settings.memory_model == "liveness"
    cap = np.full(problem.num_devices, np.inf) if liveness else problem.device_memory.copy()
    keep = [e for e in range(problem.num_edges) if int(problem.edge_source[e]) in local and int(problem.edge_target[e]) in local]
    edges = [(problem.task_ids[int(problem.edge_source[e])], problem.task_ids[int(problem.edge_target[e])]) for e in keep]
    groups = [f"g{int(problem.colocation[t])}" if problem.colocation[t] >= 0 else None for t in tasks]
    sub = make_placement_problem(
        [problem.task_ids[t] for t in tasks],
        problem.device_ids,
        time_,
        mem,
        cap,
        edges,
        problem.comm[keep] if keep else np.zeros((0, problem.num_devices, problem.num_devices)),
        colocation=groups if any(g is not None for g in groups) else None,
        name=f"{problem.name}_segment",
        time_unit=problem.time_unit,
        memory_unit=problem.memory_unit,
        settings=PlacementSettings(problem.settings.link_contention, "static"),
        cluster=problem.cluster,  # the same devices (their capacities relaxed under liveness)
    )
    return sub, tasks


@dataclass
class SegmentValue:
    """A solved (or bounded) :math:`\\sigma_t(b, b')`: bound, best value and its schedule (in segment time)."""

    bound: float
    value: float
    optimal: bool
    device: np.ndarray | None = None
    start: np.ndarray | None = None


@dataclass
class DecomposedOutcome:
    """Result of the recursion: a lower bound, a stitched schedule (or ``None``) and whether every segment was proven."""

    bound: float
    value: float
    solution: PlacementSolution | None
    all_optimal: bool
    seconds: float
    solves: int = 0
    notes: dict[str, object] = field(default_factory=dict)


SegmentSolver = Callable[[PlacementProblem, float], tuple[float, float, bool, PlacementSolution | None]]
"""``(problem, time_limit_s) -> (bound, makespan, optimal, schedule)`` of a segment problem."""


#: How many device pairs left when the decomposition's time is up still get their segment's device-path bound (about
#: a millisecond each); the rest enter the recursion with bound 0 (valid, the weakest) at no cost.  The benchmark
#: graphs have 224-960 pairs in all; on 4,000 bottleneck tasks (64,000 pairs) the device-path bounds alone ran 60 s
#: past a 10 s limit.
CHEAP_PAIRS = 2000


def solve_decomposed(
    problem: PlacementProblem,
    decomposition: Decomposition,
    solve_segment: SegmentSolver,
    time_limit_s: float,
    progress: Callable[[str], None] | None = None,
    upper_bound: float = math.inf,
    tails: np.ndarray | None = None,
    first_pass_fraction: float = 0.35,
    deadline: float | None = None,
) -> DecomposedOutcome:
    """Solve the segments for the device pairs that matter and run the recursion for a bound and a schedule.

    Pass 1 solves every pair briefly (its share of ``first_pass_fraction`` of the time).
    Later passes re-solve, with the time left shared among them, only the pairs not
    yet proven whose forward bound ``F_{t-1}(b)`` plus their own bound plus the backward
    bound ``G_{t+1}(b')`` is below the best recursion value ``U``: no other pair can
    lie on a better schedule.  A pair is skipped outright in pass 1 when
    ``F_{t-1}(b) + lb + q(v_{t+1}, b') >= U0`` with valid tails ``q`` and the initial
    upper bound ``U0``; skipped pairs count as infinite and the bound is
    ``min(U0, recursion)``, which stays valid (any schedule through them is no better than U0).

    Everything stops at ``min(start + time_limit_s, deadline)`` (``deadline`` on
    :func:`time.monotonic`'s clock): a pair not solved by then enters the recursion with
    its segment problem's device-path bound and no schedule, which keeps the bound valid (only weaker); after
    :data:`CHEAP_PAIRS` such pairs, with bound 0 (no segment problem built).
    """

    t0 = time.monotonic()
    end = t0 + time_limit_s if deadline is None else min(t0 + time_limit_s, deadline)
    d = problem.num_devices
    pairs = _PairTables(problem, decomposition.segments, solve_segment)
    tables = pairs.tables
    # pass 1
    pruned = _first_pass(pairs, time_limit_s * first_pass_fraction, t0, end, upper_bound, tails, progress)
    # later passes: only the pairs that can still lie on a better schedule
    rounds = _later_passes(pairs, end, upper_bound, progress)
    lb_last = pairs.forward("bound")[-1]
    ub_all = pairs.forward("value")
    bound = float(min(lb_last.min(), upper_bound))
    value = float(ub_all[-1].min())
    all_optimal = pruned == 0 and all(v.optimal for table in tables for v in table.values())
    solution = None
    if math.isfinite(value):
        back = []
        run_ub = np.zeros(d)
        for table in tables:
            new = np.full(d, np.inf)
            arg = np.full(d, -1)
            for (b, b2), v in table.items():
                kb = max(b2, 0)
                cand = (0.0 if b < 0 else run_ub[b]) + v.value
                if cand < new[kb]:
                    new[kb], arg[kb] = cand, b
            back.append(arg)
            run_ub = new
        solution = _stitch(problem, decomposition, tables, back, int(np.argmin(run_ub)))
    return DecomposedOutcome(
        bound, value, solution, all_optimal, time.monotonic() - t0, pairs.solves, {"pruned_pairs": pruned, "passes": rounds}
    )


class _PairTables:
    """:func:`solve_decomposed`'s tables: per segment, the value of each device pair (b, b'), and the recursion over them."""

    def __init__(self, problem: PlacementProblem, segs: tuple[Segment, ...], solve_segment: SegmentSolver) -> None:
        self.problem = problem
        self.segs = segs
        self.solve_segment = solve_segment
        self.tables: list[dict[tuple[int, int], SegmentValue]] = [{} for _ in segs]
        self.limits: dict[tuple[int, int, int], float] = {}
        self.solves = 0

    def pair_keys(self, seg: Segment) -> list[tuple[int, int]]:
        """The device pairs of a segment's end bottlenecks (-1 for an end without one)."""
        d, allowed = self.problem.num_devices, self.problem.allowed
        bs = [k for k in range(d) if allowed[seg.first, k]] if seg.first is not None else [-1]
        b2s = [k for k in range(d) if allowed[seg.last, k]] if seg.last is not None else [-1]
        return [(b, b2) for b in bs for b2 in b2s]

    def solve_pair(self, s_idx: int, b: int, b2: int, limit: float) -> None:
        """Solve segment ``s_idx`` with its bottlenecks on (b, b2) within ``limit`` seconds; keep the better of two runs."""
        seg = self.segs[s_idx]
        tables = self.tables
        try:
            sub, _ = segment_problem(self.problem, seg, b if b >= 0 else None, b2 if b2 >= 0 else None)
        except InputError:  # e.g. a colocation group that cannot follow its bottleneck onto b
            tables[s_idx][b, b2] = SegmentValue(math.inf, math.inf, True)
            return
        bound, value, optimal, sol = self.solve_segment(sub, limit)
        self.solves += 1
        old = tables[s_idx].get((b, b2))
        if old is not None:  # keep the better of the two runs
            bound = max(bound, old.bound)
            if old.value <= value:
                value, sol_dev, sol_start = old.value, old.device, old.start
            else:
                sol_dev = None if sol is None else np.asarray(sol.device)
                sol_start = None if sol is None else np.asarray(sol.start)
            optimal = optimal or old.optimal or bound >= value * (1 - 1e-12)
        else:
            sol_dev = None if sol is None else np.asarray(sol.device)
            sol_start = None if sol is None else np.asarray(sol.start)
        tables[s_idx][b, b2] = SegmentValue(bound, value, optimal, sol_dev, sol_start)
        self.limits[s_idx, b, b2] = limit

    def forward(self, attr: str) -> list[np.ndarray]:
        """F[s][k]: best sum over segments 0..s ending with v_{s+1} on k (k = 0 for the last segment)."""
        d = self.problem.num_devices
        out: list[np.ndarray] = []
        run = np.zeros(d)
        for _s_idx, table in enumerate(self.tables):
            new = np.full(d, np.inf)
            for (b, b2), v in table.items():
                kb = max(b2, 0)
                new[kb] = min(new[kb], (0.0 if b < 0 else run[b]) + getattr(v, attr))
            out.append(new)
            run = new
        return out

    def backward(self) -> list[np.ndarray]:
        """G[s][k]: least sum of bounds over segments s..end starting with v_s on k."""
        d = self.problem.num_devices
        out: list[np.ndarray] = [np.zeros(d) for _ in self.segs] + [np.zeros(d)]
        for s_idx in range(len(self.segs) - 1, -1, -1):
            new = np.full(d, np.inf)
            nxt = out[s_idx + 1]
            for (b, b2), v in self.tables[s_idx].items():
                kb = max(b, 0)
                new[kb] = min(new[kb], v.bound + (0.0 if b2 < 0 else nxt[b2]))
            out[s_idx] = new
        return out


def _first_pass(
    pairs: _PairTables,
    first_budget: float,
    t0: float,
    end: float,
    upper_bound: float,
    tails: np.ndarray | None,
    progress: Callable[[str], None] | None,
) -> int:
    """Pass 1: every device pair briefly, those that cannot beat ``upper_bound`` skipped; returns how many were skipped."""
    problem, segs, tables = pairs.problem, pairs.segs, pairs.tables
    d = problem.num_devices
    pruned = 0
    all_pairs = [(s_idx, b, b2) for s_idx, seg in enumerate(segs) for b, b2 in pairs.pair_keys(seg)]
    run = np.zeros(d)
    done = cheap = 0
    for s_idx, seg in enumerate(segs):
        for b, b2 in pairs.pair_keys(seg):
            done += 1
            prefix = 0.0 if b < 0 else run[b]
            if time.monotonic() >= end:  # out of time: the segment's device-path bound (a few ms), no schedule
                cheap += 1  # after CHEAP_PAIRS of them, bound 0 (valid, the weakest) at no cost
                spent = cheap > CHEAP_PAIRS
                tables[s_idx][b, b2] = SegmentValue(0.0, math.inf, False) if spent else _cheap_value(problem, seg, b, b2)
                continue
            if math.isfinite(upper_bound) and seg.last is not None:
                try:
                    sub, _ = segment_problem(problem, seg, b if b >= 0 else None, b2)
                except InputError:
                    tables[s_idx][b, b2] = SegmentValue(math.inf, math.inf, True)
                    continue
                after = float(tails[seg.last, b2]) if tails is not None else 0.0
                if not math.isfinite(prefix) or prefix + best_bound(sub).best + after >= upper_bound * (1 - 1e-12):
                    pruned += 1
                    continue
            left = first_budget - (time.monotonic() - t0)
            share = max(0.05, left / max(1, len(all_pairs) - done + 1))
            pairs.solve_pair(s_idx, b, b2, min(share, max(0.05, end - time.monotonic())))
        new = np.full(d, np.inf)
        for (b, b2), v in tables[s_idx].items():
            new[max(b2, 0)] = min(new[max(b2, 0)], (0.0 if b < 0 else run[b]) + v.bound)
        run = new
        if progress is not None:
            progress(
                f"[decompose] pass 1, segment {s_idx + 1}/{len(segs)} ({len(seg.inner)} inner tasks): "
                f"{sum(v.optimal for v in tables[s_idx].values())}/{len(tables[s_idx])} device pairs proven, "
                f"{time.monotonic() - t0:.1f}s"
            )
    return pruned


def _later_passes(pairs: _PairTables, end: float, upper_bound: float, progress: Callable[[str], None] | None) -> int:
    """Re-solve, with the time left shared among them, the open pairs that can still lie on a better schedule.

    Returns the number of passes, the first included.
    """
    rounds = 1
    while time.monotonic() < end - 0.5:
        F, G = pairs.forward("bound"), pairs.backward()
        ub = float(min(upper_bound, pairs.forward("value")[-1].min()))
        open_pairs = []
        for s_idx, table in enumerate(pairs.tables):
            for (b, b2), v in table.items():
                if v.optimal:
                    continue
                before = 0.0 if b < 0 else F[s_idx - 1][b]
                after = 0.0 if b2 < 0 else G[s_idx + 1][b2]
                if before + v.bound + after < ub * (1 - 1e-9):
                    open_pairs.append((s_idx, b, b2))
        if not open_pairs:
            break
        rounds += 1
        left = end - time.monotonic()
        share = left / len(open_pairs)
        if progress is not None:
            lb_now = float(min(upper_bound, F[-1].min()))
            progress(f"[decompose] pass {rounds}: {len(open_pairs)} open device pairs, bound {lb_now:.9g}, best {ub:.9g}")
        for s_idx, b, b2 in open_pairs:
            if time.monotonic() >= end - 0.5:
                break
            limit = min(max(share, 2 * pairs.limits.get((s_idx, b, b2), 0.0)), max(0.05, end - time.monotonic()))
            pairs.solve_pair(s_idx, b, b2, limit)
    return rounds


def _cheap_value(problem: PlacementProblem, seg: Segment, b: int, b2: int) -> SegmentValue:
    """A pair not solved for lack of time: its segment problem's device-path bound (valid), no schedule."""

    try:
        sub, _ = segment_problem(problem, seg, b if b >= 0 else None, b2 if b2 >= 0 else None)
    except InputError:
        return SegmentValue(math.inf, math.inf, True)
    bound = device_path(sub).value
    return SegmentValue(bound if math.isfinite(bound) else 0.0, math.inf, False)


def _stitch(
    problem: PlacementProblem,
    decomposition: Decomposition,
    values: list[dict[tuple[int, int], SegmentValue]],
    back: list[np.ndarray],
    end_key: int,
) -> PlacementSolution | None:
    """Concatenate the segments' schedules along the recursion's device path."""
    segs = decomposition.segments
    keys: list[tuple[int, int]] = []
    kb = end_key
    for t in range(len(segs) - 1, -1, -1):
        b = int(back[t][kb])
        keys.append((b, kb if segs[t].last is not None else -1))
        kb = b
    keys.reverse()
    n = problem.num_tasks
    device = np.full(n, -1, dtype=np.int64)
    start = np.zeros(n)
    offset = 0.0
    for seg, table, key in zip(segs, values, keys):
        v = table[key]
        if v.device is None or v.start is None:
            return None
        tasks = ([seg.first] if seg.first is not None else []) + list(seg.inner) + ([seg.last] if seg.last is not None else [])
        for k, t in enumerate(tasks):
            if seg.first is not None and k == 0:
                continue
            device[t] = int(v.device[k])
            start[t] = offset + float(v.start[k])
        if seg.last is not None:
            offset = start[seg.last] + problem.time[seg.last, device[seg.last]]
    ptr, succ, _ = problem.succ
    for i in np.flatnonzero(decomposition.free).tolist():
        nxt = succ[ptr[i] : ptr[i + 1]]
        device[i] = int(device[nxt[0]]) if len(nxt) and device[nxt[0]] >= 0 else int(np.flatnonzero(problem.allowed[i])[0])
        start[i] = 0.0
    if (device < 0).any():
        return None
    return PlacementSolution(device, start)


def with_segment_settings(settings: object, **changes: object) -> object:
    """A copy of a frozen settings object with ``changes`` (for the segment solves)."""
    return replace(settings, **changes)  # type: ignore[type-var]
