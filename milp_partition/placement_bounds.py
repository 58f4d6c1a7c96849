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

:func:`best_bound` returns the largest of them with each one's value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from milp_partition.placement import PlacementProblem

#: The LP bound is lowered by this relative amount (GLOP's primal feasibility tolerance is about 1e-7).
LP_SAFETY_REL = 1e-6


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
    value = float(np.min(head + t + tail, axis=1).max()) if n else 0.0
    head = np.where(np.isfinite(t), head, np.inf)
    tail = np.where(np.isfinite(t), tail, np.inf)
    return PathBounds(head, tail, value)


def fractional_load(problem: PlacementProblem) -> float:
    """The LP ``min T`` over fractional assignments with every device's busy time ``<= T`` (GLOP)."""
    from ortools.linear_solver import pywraplp

    t = usable_times(problem)
    n, d = t.shape
    if n == 0:
        return 0.0
    solver = pywraplp.Solver.CreateSolver("GLOP")
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
    status = solver.Solve()
    simple = max(float(np.sum(t.min(axis=1))) / d, float(t.min(axis=1).max()))
    if status != pywraplp.Solver.OPTIMAL:
        return simple
    return max(simple, float(T.solution_value()) * (1 - LP_SAFETY_REL))


@dataclass(frozen=True)
class BoundReport:
    """Each bound's value and the best.

    Attributes
    ----------
    values
        Name -> value: ``critical_path``, ``device_path``, ``fractional_load``.
    best
        The largest value.
    path
        The heads and tails of the device-path recursion (for redundant constraints).
    """

    values: dict[str, float]
    best: float
    path: PathBounds


def best_bound(problem: PlacementProblem) -> BoundReport:
    """Every bound of this module and the best of them."""
    path = device_path(problem)
    values = {
        "critical_path": critical_path(problem),
        "device_path": path.value,
        "fractional_load": fractional_load(problem),
    }
    best = max(values.values(), default=0.0)
    return BoundReport(values, best if math.isfinite(best) else 0.0, path)
