"""Lower bounds on the makespan of a placement problem, in the instance's real time unit.

Notation: ``d_ik = time[i, k]`` (``inf`` where task i cannot run on k, by time
or by memory), ``c^e_ab = comm[e, a, b]``, ``D`` the devices.  Every bound
below is a valid lower bound on the makespan of every feasible schedule under
either memory model and with or without link contention (they relax those).

critical_path
    ``CP = max_P sum_{i in P} min_k d_ik``: the longest path at each task's fastest
    device, transfers dropped.
device_path  (critical path with device choices)
    ``f(j, b) = d_jb + max_{e=(i,j)} min_a ( f(i, a) + c^e_ab )`` over a topological
    order, and ``DP = max_j min_b f(j, b)``.  For the actual assignment p and its
    longest path ``g(j)`` one has ``f(j, p(j)) <= g(j)`` by induction (each
    predecessor's min over a is at most its value at p(i)), so ``DP <= makespan``.
    It keeps the device choice and the transfer times along paths; ``DP >= CP``.
    The per-(task, device) heads ``f(j, b) - d_jb`` and tails (the same recursion
    run backwards) are also returned: a task on b cannot start before its head, and
    the makespan is at least start + ``d_jb`` + tail.
fractional_load  (work over devices with per-device speeds, an LP)
    ``min T  s.t.  sum_k y_ik = 1  (i),   sum_i d_ik y_ik <= T  (k),   y >= 0``
    (``y_ik = 0`` where ``d_ik = inf``): each device's busy time is at most the
    makespan.  Solved with GLOP; the reported value is lowered by its tolerance.
    At least ``sum_i min_k d_ik / |D|`` and ``max_i min_k d_ik``.

transfer_flow  (fractional assignment, loads and paths that pay for device changes, an LP)
    The fractional load LP plus completion times along every edge, where the edge's
    transfer is paid by a joint distribution ``z^e`` of its endpoints' fractional
    devices (see :func:`transfer_flow`).  Integral assignments are feasible points, so
    it is a relaxation; it contains the fractional load LP.  Its value is recomputed
    from GLOP's duals by weak duality, so solver tolerances cannot make it invalid.

:func:`best_bound` returns the largest of them with each one's value.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from milp_partition.backends.base import SolveStatus
from milp_partition.backends.ortools_direct import glop_solver, lp_status
from milp_partition.placement.problem import PlacementProblem

#: The LP bound is lowered by this relative amount (GLOP's primal feasibility tolerance is about 1e-7).
LP_SAFETY_REL = 1e-6
#: :func:`best_bound` runs the transfer-flow LP only up to this many variables (the transformer, 1,820 edges
#: on 4 devices, has about 35,000 and takes about 10 s with GLOP).
TRANSFER_FLOW_MAX_VARS = 60_000


@dataclass(frozen=True)
class PathBounds:
    """Heads and tails per (task, device) from the device-path recursion.

    Attributes
    ----------
    head
        (n, d): earliest start of task i if it runs on k (``inf`` where it cannot).
    tail
        (n, d): least time from the end of task i on k to the end of the schedule.
    value
        ``max_i min_k head + d + tail``, the device-path bound.
    """

    head: np.ndarray
    tail: np.ndarray
    value: float


def usable_times(problem: PlacementProblem) -> np.ndarray:
    """``d_ik`` with ``inf`` where task i cannot run on k (no time, or its memory alone exceeds k's)."""
    return np.where(problem.allowed, problem.time, np.inf)


def critical_path(problem: PlacementProblem) -> float:
    """Longest path at each task's fastest usable device, transfers dropped."""
    fastest = usable_times(problem).min(axis=1)
    finish = fastest.copy()
    ptr, pred, _ = problem.pred
    ptr_l, pred_l = ptr.tolist(), pred.tolist()
    fin = finish.tolist()
    fast = fastest.tolist()
    for j in problem.topological_order.tolist():
        preds = pred_l[ptr_l[j] : ptr_l[j + 1]]
        if preds:
            fin[j] = fast[j] + max(fin[i] for i in preds)
    return max(fin, default=0.0)


def device_path(problem: PlacementProblem) -> PathBounds:
    """The device-path recursion forwards (heads) and backwards (tails)."""
    n = problem.num_tasks
    d = problem.num_devices
    t = usable_times(problem)
    comm = problem.comm
    finish = np.full((n, d), np.inf)
    ptr, pred, pedge = problem.pred
    for j in problem.topological_order.tolist():
        ready = np.zeros(d)
        for i, e in zip(pred[ptr[j] : ptr[j + 1]].tolist(), pedge[ptr[j] : ptr[j + 1]].tolist()):
            # min over the predecessor's device a of its finish plus the transfer a -> b
            arrive = (finish[i][:, None] + comm[e]).min(axis=0)
            np.maximum(ready, arrive, out=ready)
        finish[j] = ready + t[j]
    with np.errstate(invalid="ignore"):
        head = finish - t
    rest = np.full((n, d), np.inf)  # rest[i, a] = d_ia + tail
    sptr, succ, sedge = problem.succ
    for i in problem.topological_order[::-1].tolist():
        after = np.zeros(d)
        for j, e in zip(succ[sptr[i] : sptr[i + 1]].tolist(), sedge[sptr[i] : sptr[i + 1]].tolist()):
            need = (comm[e] + rest[j][None, :]).min(axis=1)
            np.maximum(after, need, out=after)
        rest[i] = t[i] + after
    with np.errstate(invalid="ignore"):
        tail = rest - t
    head = np.where(np.isfinite(t), head, np.inf)
    tail = np.where(np.isfinite(t), tail, np.inf)
    # (inf - inf gave nan above where a task cannot run on a device; those pairs are inf now)
    value = float(np.min(head + t + tail, axis=1).max()) if n else 0.0
    return PathBounds(head, tail, value)


def solve_interruptibly(solver: Any) -> int:
    """``solver.Solve()`` (an OR-Tools ``pywraplp`` solver) in a worker thread, so that Ctrl-C or SIGTERM stops it.

    The solve releases the GIL, so the main thread keeps handling signals: on a KeyboardInterrupt it asks the
    solver to stop (``InterruptSolve``), waits for it (a few seconds at most) and re-raises, so the chain settles on
    what it has verified at once.  Called in the main thread, a long LP (the transfer-flow bound takes a fifth of a
    300 s limit) held a SIGTERM for its whole time limit.
    """
    box: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            box.append(solver.Solve())
        except BaseException as exc:  # pragma: no cover - re-raised below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=work, name="glop-solve", daemon=True)
    try:
        thread.start()
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        solver.InterruptSolve()
        done.wait(INTERRUPT_WAIT_S)
        raise
    if errors:
        raise errors[0]
    return box[0]


#: How long an interrupted LP may take to stop before the interrupt goes on without it.
INTERRUPT_WAIT_S = 5.0


def fractional_load(problem: PlacementProblem) -> float:
    """The LP ``min T`` over fractional assignments with every device's busy time ``<= T`` (GLOP)."""
    t = usable_times(problem)
    n, d = t.shape
    if n == 0:
        return 0.0
    solver = glop_solver()
    big = float(np.sum(np.where(np.isfinite(t), t, 0.0).max(axis=1)))
    T = solver.NumVar(0.0, big, "T")
    y = {}
    for i in range(n):
        row = solver.Constraint(1.0, 1.0)
        for k in range(d):
            if np.isfinite(t[i, k]):
                y[i, k] = solver.NumVar(0.0, 1.0, "")
                row.SetCoefficient(y[i, k], 1.0)
    for k in range(d):
        row = solver.Constraint(-solver.infinity(), 0.0)
        row.SetCoefficient(T, -1.0)
        for i in range(n):
            if (i, k) in y and t[i, k] > 0:
                row.SetCoefficient(y[i, k], float(t[i, k]))
    solver.Minimize(T)
    status = lp_status(solve_interruptibly(solver))
    simple = max(float(np.sum(t.min(axis=1))) / d, float(t.min(axis=1).max()))
    if status is not SolveStatus.OPTIMAL:
        return simple
    return max(simple, float(T.solution_value()) * (1 - LP_SAFETY_REL))


@dataclass(frozen=True)
class BoundReport:
    """Each bound's value and the best.

    Attributes
    ----------
    values
        Name -> value: ``critical_path``, ``device_path``, ``fractional_load``, ``transfer_flow``.
    best
        The largest value.
    path
        The heads and tails of the device-path recursion (for redundant constraints).
    """

    values: dict[str, float]
    best: float
    path: PathBounds


def best_bound(problem: PlacementProblem, *, flow: bool = True, flow_time_limit_s: float | None = None) -> BoundReport:
    """Every bound of this module and the best of them.

    ``flow=False``: without the transfer-flow LP; ``flow_time_limit_s``: the LP's time limit
    (``<= 0``: skip it); an LP cut short adds nothing, the other bounds stand.
    """
    path = device_path(problem)
    values = {
        "critical_path": critical_path(problem),
        "device_path": path.value,
        "fractional_load": fractional_load(problem),
    }
    if flow and transfer_flow_size(problem) <= TRANSFER_FLOW_MAX_VARS and (flow_time_limit_s is None or flow_time_limit_s > 0):
        values["transfer_flow"] = transfer_flow(problem, time_limit_s=flow_time_limit_s)
    best = max(values.values(), default=0.0)
    return BoundReport(values, best if math.isfinite(best) else 0.0, path)


def _lagrangian_bound(
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    cost: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    dual: np.ndarray,
) -> float:
    """A rigorous lower bound on ``min cost.x  s.t. lo <= Ax <= hi, lb <= x <= ub`` from any multipliers.

    For every ``pi``: ``cost.x = (cost - A^T pi).x + pi.(Ax) >= sum_j min((cost - A^T pi)_j x_j over
    [lb_j, ub_j]) + sum_r min(pi_r s over s in [lo_r, hi_r])`` (weak duality); ``pi_r`` is clipped to the
    sign its row allows so that every term is finite.  The box must be finite.  Holds for any ``pi``,
    so an inexact LP solve costs tightness, never validity (up to float summation, which the caller
    allows for).
    """
    pi = dual.copy()
    pi = np.where(np.isinf(lo), np.minimum(pi, 0.0), pi)
    pi = np.where(np.isinf(hi), np.maximum(pi, 0.0), pi)
    pi = np.where(np.isinf(lo) & np.isinf(hi), 0.0, pi)
    rc = cost - np.bincount(cols, weights=vals * pi[rows], minlength=cost.shape[0])
    var_part = np.minimum(rc * lb, rc * ub).sum()
    with np.errstate(invalid="ignore"):
        row_part = np.where(pi > 0, pi * np.where(np.isinf(lo), 0.0, lo), pi * np.where(np.isinf(hi), 0.0, hi))
    return float(var_part + row_part.sum())


def transfer_flow_size(problem: PlacementProblem) -> int:
    """The number of variables of :func:`transfer_flow`'s LP (an upper estimate)."""
    d = problem.num_devices
    return problem.num_tasks * (d + 1) + 1 + problem.num_edges * d * d


def transfer_flow(problem: PlacementProblem, upper: float | None = None, time_limit_s: float | None = None) -> float:
    """The transfer-flow LP: fractional assignment, loads, and paths that pay for device changes.

    ``min T`` over ``y_ik >= 0`` (``sum_k y_ik = 1``), completions ``C_i`` and, per edge
    ``e = (u, v)`` with a transfer, a joint ``z^e_ab >= 0`` with marginals ``y_u.`` and ``y_v.``
    (``sum_b z^e_ab = y_ua``, ``sum_a z^e_ab = y_vb``)::

        C_i >= sum_k d_ik y_ik,        C_v >= C_u + sum_k d_vk y_vk + sum_ab c^e_ab z^e_ab,
        T >= C_i,                      T >= sum_i d_ik y_ik  (every device k),
        0 <= C_i, T <= U.

    Validity: a schedule of makespan ``M <= U`` with assignment p gives ``y_ik = [p(i) = k]``,
    ``z^e_ab = [p(u) = a][p(v) = b]``, ``C_i`` its completion times and ``T = M``: every row holds
    (its transfer is exactly ``c^e_{p(u)p(v)}``; no device is busy longer than M), so the LP's
    optimum is at most the optimal makespan.  It relaxes memory, colocation, link contention and
    the order on each device.  A fractional ``y`` pays transfers only for the part of a task's mass
    that changes device along an edge, so it is stronger than the fractional load LP when paths are
    long and transfers are large.  ``U`` is ``upper`` (a known makespan) or the horizon.

    The value reported is not GLOP's objective but a weak-duality bound recomputed from its dual
    values (:func:`_lagrangian_bound`), lowered by ``LP_SAFETY_REL`` for float summation, so
    GLOP's tolerances cannot make it invalid.  With ``time_limit_s``, GLOP stops there; a
    solve cut short gives 0 (always valid), so callers keep their other bounds.
    """
    t = usable_times(problem)
    n, d = t.shape
    m = problem.num_edges
    if n == 0:
        return 0.0
    finite = np.where(np.isfinite(t), t, 0.0)
    horizon = float(finite.max(axis=1).sum() + (problem.comm.max(axis=(1, 2)).sum() if m else 0.0))
    U = min(horizon, float(upper)) if upper is not None and math.isfinite(upper) else horizon
    U = max(U, 1e-9)
    # variables: y (allowed pairs), C (n), T, z (per edge with a transfer, allowed pairs)
    yidx = -np.ones((n, d), dtype=np.int64)
    allowed = np.isfinite(t)
    yidx[allowed] = np.arange(int(allowed.sum()))
    nv = int(allowed.sum())
    cidx = nv + np.arange(n)
    tidx = nv + n
    nv = tidx + 1
    lb: list[float] = [0.0] * nv
    ub: list[float] = [1.0] * (tidx - n) + [U] * (n + 1)
    R: list[int] = []
    Cc: list[int] = []
    V: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def row(terms: list[tuple[int, float]], low: float, high: float) -> None:
        r = len(lo)
        for j, v in terms:
            R.append(r)
            Cc.append(j)
            V.append(v)
        lo.append(low)
        hi.append(high)

    inf = math.inf
    for i in range(n):
        ks = np.flatnonzero(allowed[i]).tolist()
        row([(int(yidx[i, k]), 1.0) for k in ks], 1.0, 1.0)
        row([(int(cidx[i]), 1.0)] + [(int(yidx[i, k]), -float(t[i, k])) for k in ks if t[i, k] != 0], 0.0, inf)
        row([(tidx, 1.0), (int(cidx[i]), -1.0)], 0.0, inf)
    for k in range(d):
        row(
            [(tidx, 1.0)] + [(int(yidx[i, k]), -float(t[i, k])) for i in np.flatnonzero(allowed[:, k]).tolist() if t[i, k] != 0],
            0.0,
            inf,
        )
    src, dst = problem.edge_source.tolist(), problem.edge_target.tolist()
    for e in range(m):
        u, v = src[e], dst[e]
        c = problem.comm[e]
        kv = np.flatnonzero(allowed[v]).tolist()
        terms = [(int(cidx[v]), 1.0), (int(cidx[u]), -1.0)] + [(int(yidx[v, k]), -float(t[v, k])) for k in kv if t[v, k] != 0]
        ku = np.flatnonzero(allowed[u]).tolist()
        if not any(c[a, b] > 0 for a in ku for b in kv):
            row(terms, 0.0, inf)
            continue
        z: dict[tuple[int, int], int] = {}
        for a in ku:
            for b in kv:
                z[a, b] = nv
                nv += 1
                lb.append(0.0)
                ub.append(1.0)
        row(terms + [(z[a, b], -float(c[a, b])) for (a, b) in z if c[a, b] != 0], 0.0, inf)
        for a in ku:
            row([(int(yidx[u, a]), -1.0)] + [(z[a, b], 1.0) for b in kv], 0.0, 0.0)
        for b in kv:
            row([(int(yidx[v, b]), -1.0)] + [(z[a, b], 1.0) for a in ku], 0.0, 0.0)
    solver = glop_solver()
    xs = [solver.NumVar(lb[j], ub[j], "") for j in range(nv)]
    cons = [
        solver.Constraint(-solver.infinity() if lo[r] == -inf else lo[r], solver.infinity() if hi[r] == inf else hi[r])
        for r in range(len(lo))
    ]
    for r, j, v in zip(R, Cc, V):
        cons[r].SetCoefficient(xs[j], v)
    solver.Minimize(xs[tidx])
    if time_limit_s is not None:
        solver.SetTimeLimit(max(1, int(1000 * time_limit_s)))
    status = lp_status(solve_interruptibly(solver))
    if status not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        return 0.0
    cost = np.zeros(nv)
    cost[tidx] = 1.0
    arrays = (
        np.asarray(R),
        np.asarray(Cc),
        np.asarray(V, dtype=float),
        np.asarray(lo),
        np.asarray(hi),
        cost,
        np.asarray(lb),
        np.asarray(ub),
    )
    duals = np.array([c.dual_value() for c in cons])
    value = max(_lagrangian_bound(*arrays, duals), _lagrangian_bound(*arrays, -duals))
    return max(0.0, value - LP_SAFETY_REL * abs(value) - 1e-12)
