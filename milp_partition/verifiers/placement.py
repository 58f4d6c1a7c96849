"""Independent verifier of placement schedules, with a discrete-event simulator.

This module imports nothing from :mod:`formulations` or :mod:`heuristics`: it
recomputes every duration, transfer and memory figure from the
:class:`~milp_partition.placement.PlacementProblem` arrays.

Semantics (fixed for every solver and heuristic of the project)
----------------------------------------------------------------
Let ``p(i)`` be the device of task i, ``d_i = time[i, p(i)]`` its duration,
``S_i`` its start and ``C_i = S_i + d_i`` its end.

(a) assignment   ``p(i)`` is a device with ``time[i, p(i)] < inf``.
(b) colocation   tasks of one colocation group share a device.
(c) precedence   for each edge e = (i, j): ``S_j >= C_i + comm[e, p(i), p(j)]``
                 (the term is 0 when ``p(i) = p(j)``).
(d) no overlap   two tasks of one device with ``d > 0`` do not overlap
                 (a task of duration 0 on its device occupies nothing).
(e) memory       static: ``sum_{i: p(i)=k} task_memory[i] <= device_memory[k]``;
                 liveness: task i holds its memory on ``p(i)`` over
                 ``[S_i, R_i)`` with ``R_i = max_{j in succ(i)} C_j`` (``C_i`` if it
                 has none), and at every instant the held memory fits.
(f) contention   (``settings.link_contention``) a transfer of edge e with
                 ``p(i) != p(j)`` and ``comm > 0`` occupies the out-port of
                 ``p(i)`` and the in-port of ``p(j)`` over ``[T_e, T_e + comm)``
                 with ``T_e >= C_i``; (c) then reads ``S_j >= T_e + comm``.
                 Transfers sharing a port do not overlap.
Makespan ``= max_i C_i``.

The simulator builds the *semi-active* schedule of a device assignment and a
per-device task sequence: every task and transfer as early as its predecessors,
its device's previous task and (with contention) its ports allow.  The verifier
reports the simulator's makespan of the solution's assignment and order (its
order on each device by start time), so a schedule with idle slack is credited
with its left-justified makespan, never worse than the given one.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from milp_partition.errors import InputError
from milp_partition.placement.problem import PlacementProblem, PlacementSolution

#: Absolute slack, relative to the schedule's scale, when comparing times.
TIME_REL_TOL = 1e-9
#: Relative slack when comparing memory with a capacity.
MEMORY_REL_TOL = 1e-9
#: At most this many violation messages are listed (then a count of the rest).
MAX_VIOLATIONS = 50


class ScheduleOrderError(InputError):
    """A per-device (or per-port) order that contradicts the precedence edges: nothing can start."""


@dataclass(frozen=True)
class PlacementReport:
    """What the verifier found.

    Attributes
    ----------
    feasible
        True when the given schedule violates nothing.
    makespan
        The simulator's makespan of the solution's assignment and order (``inf``
        when the assignment cannot be simulated).
    violations
        Human-readable, each naming the task, edge or device.
    device_load
        Device id -> sum of the durations of its tasks.
    peak_memory
        Device id -> static sum, or (liveness) peak held memory of the given schedule.
    given_makespan
        ``max_i S_i + d_i`` of the starts as given.
    schedule
        The schedule whose makespan is reported: the simulated one, or the given one
        when left-justifying it would break liveness memory (see ``notes``).
    notes
        Facts worth knowing (e.g. which schedule the makespan comes from).
    """

    feasible: bool
    makespan: float
    violations: tuple[str, ...]
    device_load: dict[str, float] = field(default_factory=dict)
    peak_memory: dict[str, float] = field(default_factory=dict)
    given_makespan: float = math.inf
    schedule: PlacementSolution | None = None
    notes: tuple[str, ...] = ()


def _durations(problem: PlacementProblem, device: np.ndarray) -> np.ndarray:
    return problem.time[np.arange(problem.num_tasks), device]


def _topo_rank(problem: PlacementProblem) -> np.ndarray:
    rank = np.empty(problem.num_tasks, dtype=np.int64)
    rank[problem.topological_order] = np.arange(problem.num_tasks)
    return rank


def _device_sequences(problem: PlacementProblem, device: np.ndarray, dur: np.ndarray, order: object) -> list[list[int]]:
    """Per device, the tasks of positive duration in their run order."""
    d = problem.num_devices
    blocking = dur > 0
    per_device = (
        order
        if isinstance(order, (list, tuple)) and len(order) == d and all(isinstance(s, (list, tuple, np.ndarray)) for s in order)
        else None
    )
    if per_device is not None:
        seqs = [[int(i) for i in s if blocking[int(i)]] for s in per_device]
        listed = sorted(i for s in seqs for i in s)
        want = np.flatnonzero(blocking).tolist()
        if listed != want:
            raise InputError("the per-device order must list every task of positive duration exactly once", where="order")
        for k, s in enumerate(seqs):
            for i in s:
                if device[i] != k:
                    raise InputError(
                        f"task {problem.task_ids[i]!r} is listed on device {problem.device_ids[k]!r} but assigned elsewhere",
                        where="order",
                    )
        return seqs
    rank = _topo_rank(problem)
    if order is None:
        key = rank.astype(np.float64)
        keys = np.lexsort((rank, key))
    else:
        prio = np.asarray(order, dtype=np.float64)
        if prio.shape != (problem.num_tasks,):
            raise InputError(f"order needs one priority per task ({problem.num_tasks}), got shape {prio.shape}", where="order")
        keys = np.lexsort((rank, prio))
    seqs = [[] for _ in range(d)]
    dev_l = device.tolist()
    for i in keys.tolist():
        if blocking[i]:
            seqs[dev_l[i]].append(i)
    return seqs


def simulate_placement(
    problem: PlacementProblem,
    device: np.ndarray | Sequence[int],
    order: object = None,
    transfer_order: np.ndarray | None = None,
) -> PlacementSolution:
    """The semi-active schedule of an assignment and a per-device order.

    Parameters
    ----------
    device
        (n,) device index per task.
    order
        ``None``: on each device, tasks in the problem's topological order; an
        (n,) array of priorities (smaller first, ties by topological order, e.g. the
        start times of a schedule); or one sequence of task indices per device.
    transfer_order
        Link contention only: (m,) priorities fixing each port's transfer sequence
        (e.g. the transfer starts of a schedule).  ``None``: first come, first
        served, by the time a transfer becomes ready (its source's end, ties by edge index).

    Returns
    -------
    PlacementSolution
        Starts of every task (and, with contention, of every transfer).

    Raises
    ------
    ScheduleOrderError
        When the order contradicts the precedence edges (a deadlock).
    """
    n, m = problem.num_tasks, problem.num_edges
    dev, dur = _checked_durations(problem, device)
    seqs = _device_sequences(problem, dev, dur, order)
    dev_next = [-1] * n
    pending = [0] * n
    for s in seqs:
        for a, b in itertools.pairwise(s):
            dev_next[a] = b
            pending[b] += 1
    src_l, dst_l = problem.edge_source.tolist(), problem.edge_target.tolist()
    for j in dst_l:
        pending[j] += 1
    dev_l, dur_l = dev.tolist(), dur.tolist()
    comm_l = problem.comm[np.arange(m), dev[problem.edge_source], dev[problem.edge_target]].tolist() if m else []
    contention = problem.settings.link_contention
    # fixed port sequences (transfer_order given): a transfer waits for its source and both port predecessors
    fixed = contention and transfer_order is not None
    t_pending = [0] * m
    t_next: list[list[int]] = [[] for _ in range(m)]
    is_transfer = [dev_l[src_l[e]] != dev_l[dst_l[e]] and comm_l[e] > 0 for e in range(m)] if contention else [False] * m
    if fixed:
        _port_sequences(transfer_order, m, is_transfer, dev_l, src_l, dst_l, t_pending, t_next)
    start, tstart = _run_events(
        problem, dev_l, dur_l, src_l, dst_l, comm_l, dev_next, pending, is_transfer, fixed, t_pending, t_next
    )
    if n and any(math.isnan(s) for s in start):
        stuck = next(i for i in range(n) if math.isnan(start[i]))
        raise ScheduleOrderError(
            "the per-device order contradicts the precedence edges (a task waits for one that waits for it)",
            where=f"task {problem.task_ids[stuck]!r}",
        )
    return PlacementSolution(
        dev.copy(), np.asarray(start, dtype=np.float64), np.asarray(tstart, dtype=np.float64) if contention else None
    )


def _checked_durations(problem: PlacementProblem, device: np.ndarray | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The device indices as an array and each task's duration there; InputError when one cannot run there."""
    n = problem.num_tasks
    dev = np.asarray(device, dtype=np.int64)
    if dev.shape != (n,) or (n and (dev.min() < 0 or dev.max() >= problem.num_devices)):
        raise InputError(f"need one device index in [0, {problem.num_devices}) per task ({n})", where="device")
    dur = _durations(problem, dev)
    if not np.isfinite(dur).all():
        i = int(np.flatnonzero(~np.isfinite(dur))[0])
        raise InputError(
            f"cannot run on device {problem.device_ids[dev[i]]!r} (no time there)", where=f"task {problem.task_ids[i]!r}"
        )
    return dev, dur


def _port_sequences(
    transfer_order: np.ndarray | None,
    m: int,
    is_transfer: list[bool],
    dev_l: list[int],
    src_l: list[int],
    dst_l: list[int],
    t_pending: list[int],
    t_next: list[list[int]],
) -> None:
    """Each port's transfers in ``transfer_order``: fills ``t_next`` (port successors) and ``t_pending`` (waits)."""
    prio = np.asarray(transfer_order, dtype=np.float64)
    if prio.shape != (m,):
        raise InputError(f"transfer_order needs one priority per edge ({m}), got shape {prio.shape}", where="transfer_order")
    ports: dict[tuple[str, int], list[int]] = {}
    for e in np.lexsort((np.arange(m), prio)).tolist():
        if is_transfer[e]:
            ports.setdefault(("out", dev_l[src_l[e]]), []).append(e)
            ports.setdefault(("in", dev_l[dst_l[e]]), []).append(e)
    for seq in ports.values():
        for a, b in itertools.pairwise(seq):
            t_next[a].append(b)
            t_pending[b] += 1
    for e in range(m):
        if is_transfer[e]:
            t_pending[e] += 1  # its source


def _run_events(
    problem: PlacementProblem,
    dev_l: list[int],
    dur_l: list[float],
    src_l: list[int],
    dst_l: list[int],
    comm_l: list[float],
    dev_next: list[int],
    pending: list[int],
    is_transfer: list[bool],
    fixed: bool,
    t_pending: list[int],
    t_next: list[list[int]],
) -> tuple[list[float], list[float]]:
    """The discrete-event run: each task's and transfer's start (NaN for one that never starts: a deadlock)."""
    n, m = problem.num_tasks, problem.num_edges
    out_ptr, _, out_edge = problem.succ
    out_ptr_l, out_edge_l = out_ptr.tolist(), out_edge.tolist()
    ready = [0.0] * n
    start = [math.nan] * n
    tstart = [math.nan] * m
    heap: list[tuple[float, int, int]] = []  # (time, kind, index); kind 0 task end, 1 transfer ready (FIFO), 2 transfer end
    t_ready = [0.0] * m
    out_free = [0.0] * problem.num_devices
    in_free = [0.0] * problem.num_devices

    def release(j: int, t: float) -> None:
        if t > ready[j]:
            ready[j] = t
        pending[j] -= 1
        if pending[j] == 0:
            start[j] = ready[j]
            heapq.heappush(heap, (ready[j] + dur_l[j], 0, j))

    def release_transfer(e: int, t: float) -> None:
        if t > t_ready[e]:
            t_ready[e] = t
        t_pending[e] -= 1
        if t_pending[e] == 0:
            tstart[e] = t_ready[e]
            heapq.heappush(heap, (t_ready[e] + comm_l[e], 2, e))

    for i in range(n):
        if pending[i] == 0:
            start[i] = 0.0
            heapq.heappush(heap, (dur_l[i], 0, i))
    while heap:
        t, kind, x = heapq.heappop(heap)
        if kind == 0:
            if dev_next[x] >= 0:
                release(dev_next[x], t)
            for e in out_edge_l[out_ptr_l[x] : out_ptr_l[x + 1]]:
                if is_transfer[e]:
                    if fixed:
                        release_transfer(e, t)
                    else:
                        heapq.heappush(heap, (t, 1, e))
                elif dev_l[src_l[e]] != dev_l[dst_l[e]]:
                    release(dst_l[e], t + comm_l[e])
                else:
                    release(dst_l[e], t)
        elif kind == 1:
            a, b = dev_l[src_l[x]], dev_l[dst_l[x]]
            begin = max(t, out_free[a], in_free[b])
            tstart[x] = begin
            out_free[a] = in_free[b] = begin + comm_l[x]
            heapq.heappush(heap, (begin + comm_l[x], 2, x))
        else:
            release(dst_l[x], t)
            for f in t_next[x]:
                release_transfer(f, t)
    return start, tstart


def makespan_of(problem: PlacementProblem, solution: PlacementSolution) -> float:
    """``max_i S_i + d_i`` of a schedule as given (0 for no tasks)."""
    if problem.num_tasks == 0:
        return 0.0
    return float(np.max(solution.start + _durations(problem, np.asarray(solution.device, dtype=np.int64))))


def release_times(problem: PlacementProblem, end: np.ndarray) -> np.ndarray:
    """``R_i``: the end of the last successor of task i (its own end if none) -- memory (e), liveness."""
    rel = end.copy()
    if problem.num_edges:
        np.maximum.at(rel, problem.edge_source, end[problem.edge_target])
    return rel


def _liveness_peaks(
    problem: PlacementProblem, device: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """Peak held memory per device, and (device, time) of each peak above capacity (first per device)."""
    rel = release_times(problem, end)
    peaks = np.zeros(problem.num_devices)
    over: list[tuple[int, float]] = []
    for k in range(problem.num_devices):
        idx = np.flatnonzero((device == k) & (problem.task_memory > 0) & (rel > start))
        if not len(idx):
            continue
        times = np.concatenate([start[idx], rel[idx]])
        deltas = np.concatenate([problem.task_memory[idx], -problem.task_memory[idx]])
        order = np.lexsort((deltas, times))  # at one instant, releases (negative) first: intervals are half-open
        held = np.cumsum(deltas[order])
        top = int(np.argmax(held))
        peaks[k] = held[top]
        cap = problem.device_memory[k]
        if held[top] > cap * (1 + MEMORY_REL_TOL) + 1e-12:
            over.append((k, float(times[order][top])))
    return peaks, over


def verify_placement(problem: PlacementProblem, solution: PlacementSolution) -> PlacementReport:
    """Check ``solution`` against (a)-(f) and compute the simulator's makespan of its assignment and order."""
    d = problem.num_devices
    ids, dids = problem.task_ids, problem.device_ids
    violations: list[str] = []
    notes: list[str] = []
    checked = _checked_arrays(problem, solution)
    if isinstance(checked, PlacementReport):
        return checked
    device, start = checked
    dur = _durations(problem, device)
    # (a) assignment
    for i in np.flatnonzero(~np.isfinite(dur)).tolist():
        violations.append(f"task {ids[i]!r} cannot run on device {dids[device[i]]!r} (no time there)")
    if violations:
        return PlacementReport(False, math.inf, tuple(violations[:MAX_VIOLATIONS]))
    for i in np.flatnonzero(~np.isfinite(start) | (start < 0)).tolist():
        violations.append(f"task {ids[i]!r} has start {start[i]!r}; a start must be finite and >= 0")
    end = start + dur
    tol = _time_tolerance(problem)
    # (b) colocation
    _check_colocation(problem, device, violations)
    # (c) precedence and (f) contention
    tstart, lag, transfer = _check_precedence(problem, solution, device, start, end, tol, violations)
    # (d) no overlap
    _check_overlap(problem, device, start, end, dur, tol, violations)
    if problem.settings.link_contention and problem.num_edges:
        _check_ports(problem, device, tstart, lag, transfer, tol, violations)
    # (e) memory
    load, peak = _check_memory(problem, device, start, end, dur, violations)
    given = float(end.max()) if problem.num_tasks else 0.0
    schedule, makespan = _simulated_makespan(problem, solution, device, start, dur, tstart, given, violations, notes)
    if not math.isfinite(float(makespan)):
        violations.append(f"makespan {float(makespan)!r} is not a finite number (the instance holds a NaN or an infinity)")
    if len(violations) > MAX_VIOLATIONS:
        violations = [*violations[:MAX_VIOLATIONS], f"... and {len(violations) - MAX_VIOLATIONS} more violations"]
    return PlacementReport(
        feasible=not violations,
        makespan=float(makespan),
        violations=tuple(violations),
        device_load={dids[k]: float(load[k]) for k in range(d)},
        peak_memory={dids[k]: float(peak[k]) for k in range(d)},
        given_makespan=given,
        schedule=schedule,
        notes=tuple(notes),
    )


def _checked_arrays(problem: PlacementProblem, solution: PlacementSolution) -> tuple[np.ndarray, np.ndarray] | PlacementReport:
    """The solution's devices (int64) and starts (float64), or the report of an infeasible shape or index."""
    n, d = problem.num_tasks, problem.num_devices
    device = np.asarray(solution.device)
    if device.shape != (n,) or (not np.issubdtype(device.dtype, np.integer) and not np.all(np.mod(device, 1) == 0)):
        return PlacementReport(False, math.inf, (f"need one integer device index per task ({n}), got shape {device.shape}",))
    device = device.astype(np.int64)
    if n and (device.min() < 0 or device.max() >= d):
        i = int(np.flatnonzero((device < 0) | (device >= d))[0])
        return PlacementReport(
            False, math.inf, (f"task {problem.task_ids[i]!r}: device index {int(device[i])} is not in [0, {d})",)
        )
    start = np.asarray(solution.start, dtype=np.float64)
    if start.shape != (n,):
        return PlacementReport(False, math.inf, (f"need one start time per task ({n}), got shape {start.shape}",))
    return device, start


def _time_tolerance(problem: PlacementProblem) -> float:
    """The slack when comparing times: TIME_REL_TOL of the instance's serial makespan (at least 1)."""
    # the tolerance scales with the instance (its serial makespan), not with the given starts: starts of 1e12 must
    # not widen it past the tasks' own durations
    serial = float(np.where(np.isfinite(problem.time), problem.time, 0.0).max(axis=1, initial=0.0).sum())
    if problem.num_edges:
        comm = np.where(np.isfinite(problem.comm), problem.comm, 0.0)
        serial += float(comm.reshape(problem.num_edges, -1).max(axis=1).sum())
    return TIME_REL_TOL * max(1.0, serial)


def _check_colocation(problem: PlacementProblem, device: np.ndarray, violations: list[str]) -> None:
    """(b) colocation: each group on one device."""
    ids, dids = problem.task_ids, problem.device_ids
    for g in np.unique(problem.colocation[problem.colocation >= 0]).tolist():
        members = np.flatnonzero(problem.colocation == g)
        if len(set(device[members].tolist())) > 1:
            violations.append(
                "colocation group of tasks "
                + ", ".join(repr(ids[i]) for i in members[:5])
                + (" ..." if len(members) > 5 else "")
                + " is split over devices "
                + ", ".join(sorted({dids[k] for k in device[members].tolist()}))
            )


def _check_precedence(
    problem: PlacementProblem,
    solution: PlacementSolution,
    device: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    tol: float,
    violations: list[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(c) precedence, with (f) a transfer's start after its source's end.

    Returns each edge's transfer start (its source's end where none is given or it is no transfer),
    its lag (0 on one device) and whether it is a transfer that occupies ports.
    """
    m = problem.num_edges
    ids, dids = problem.task_ids, problem.device_ids
    contention = problem.settings.link_contention
    src, dst = problem.edge_source, problem.edge_target
    cross = device[src] != device[dst]
    lag = np.where(cross, problem.comm[np.arange(m), device[src], device[dst]], 0.0) if m else np.zeros(0)
    transfer = cross & (lag > 0) if contention else np.zeros(m, dtype=bool)
    if contention and solution.transfer_start is not None:
        tstart = np.asarray(solution.transfer_start, dtype=np.float64)
        if tstart.shape != (m,):
            violations.append(f"need one transfer start per edge ({m}), got shape {tstart.shape}")
            tstart = end[src].copy()
        tstart = np.where(transfer & np.isfinite(tstart), tstart, end[src])
    else:
        tstart = end[src].copy() if m else np.zeros(0)
    for e in np.flatnonzero(tstart < end[src] - tol).tolist():
        violations.append(
            f"edge {e} ({ids[src[e]]!r} -> {ids[dst[e]]!r}): transfer starts at {tstart[e]:.9g}, before its source ends at {end[src[e]]:.9g}"
        )
    arrival = np.where(transfer, tstart + lag, end[src] + lag) if m else np.zeros(0)
    for e in np.flatnonzero(start[dst] < arrival - tol).tolist():
        what = f"the transfer from {dids[device[src[e]]]} to {dids[device[dst[e]]]} ({lag[e]:.9g})" if cross[e] else "same device"
        violations.append(
            f"edge {e} ({ids[src[e]]!r} -> {ids[dst[e]]!r}): {ids[dst[e]]!r} starts at {start[dst[e]]:.9g} but its input "
            f"arrives at {arrival[e]:.9g} ({what})"
        )
    return tstart, lag, transfer


def _check_overlap(
    problem: PlacementProblem,
    device: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    dur: np.ndarray,
    tol: float,
    violations: list[str],
) -> None:
    """(d) no overlap: the tasks of positive duration of one device, in start order, do not overlap."""
    ids, dids = problem.task_ids, problem.device_ids
    for k in range(problem.num_devices):
        idx = np.flatnonzero((device == k) & (dur > 0))
        if len(idx) < 2:
            continue
        idx = idx[np.lexsort((end[idx], start[idx]))]
        bad = np.flatnonzero(start[idx[1:]] < end[idx[:-1]] - tol)
        for b in bad.tolist():
            a, c = int(idx[b]), int(idx[b + 1])
            violations.append(
                f"device {dids[k]!r}: tasks {ids[a]!r} [{start[a]:.9g}, {end[a]:.9g}) and {ids[c]!r} [{start[c]:.9g}, {end[c]:.9g}) overlap"
            )


def _check_ports(
    problem: PlacementProblem,
    device: np.ndarray,
    tstart: np.ndarray,
    lag: np.ndarray,
    transfer: np.ndarray,
    tol: float,
    violations: list[str],
) -> None:
    """(f) contention: the transfers sharing a port (a device's out- or in-port) do not overlap."""
    ids, dids = problem.task_ids, problem.device_ids
    src, dst = problem.edge_source, problem.edge_target
    tend = tstart + lag
    for port, owner in (("out", device[src]), ("in", device[dst])):
        for k in range(problem.num_devices):
            idx = np.flatnonzero(transfer & (owner == k))
            if len(idx) < 2:
                continue
            idx = idx[np.lexsort((tend[idx], tstart[idx]))]
            for b in np.flatnonzero(tstart[idx[1:]] < tend[idx[:-1]] - tol).tolist():
                a, c = int(idx[b]), int(idx[b + 1])
                violations.append(
                    f"device {dids[k]!r} {port}-port: transfers of edge {a} ({ids[src[a]]!r} -> {ids[dst[a]]!r}) "
                    f"[{tstart[a]:.9g}, {tend[a]:.9g}) and edge {c} ({ids[src[c]]!r} -> {ids[dst[c]]!r}) "
                    f"[{tstart[c]:.9g}, {tend[c]:.9g}) overlap"
                )


def _check_memory(
    problem: PlacementProblem,
    device: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    dur: np.ndarray,
    violations: list[str],
) -> tuple[np.ndarray, np.ndarray]:
    """(e) memory (static or liveness); returns each device's load (sum of durations) and peak memory."""
    n, d = problem.num_tasks, problem.num_devices
    dids = problem.device_ids
    load = np.bincount(device, weights=dur, minlength=d) if n else np.zeros(d)
    if problem.settings.memory_model == "static":
        peak = np.bincount(device, weights=problem.task_memory, minlength=d) if n else np.zeros(d)
        for k in np.flatnonzero(peak > problem.device_memory * (1 + MEMORY_REL_TOL) + 1e-12).tolist():
            violations.append(f"device {dids[k]!r}: its tasks need memory {peak[k]:.9g}, capacity {problem.device_memory[k]:.9g}")
    else:
        peak, over = _liveness_peaks(problem, device, start, end)
        for k, t in over:
            violations.append(
                f"device {dids[k]!r}: held memory reaches {peak[k]:.9g} at time {t:.9g}, capacity {problem.device_memory[k]:.9g}"
            )
    return load, peak


def _simulated_makespan(
    problem: PlacementProblem,
    solution: PlacementSolution,
    device: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    tstart: np.ndarray,
    given: float,
    violations: list[str],
    notes: list[str],
) -> tuple[PlacementSolution, float]:
    """The simulator's schedule of this assignment and order and its makespan (or the given one's: see ``notes``)."""
    contention = problem.settings.link_contention
    schedule: PlacementSolution
    order_key = np.where(np.isfinite(start), start, np.inf)
    try:
        schedule = simulate_placement(problem, device, order_key, tstart if contention else None)
    except ScheduleOrderError:
        schedule = simulate_placement(problem, device)
        notes.append("the given order deadlocks; simulated in topological order instead")
    makespan = makespan_of(problem, schedule)
    if problem.settings.memory_model == "liveness":
        s_end = schedule.start + dur
        _, s_over = _liveness_peaks(problem, device, schedule.start, s_end)
        if s_over:
            if not violations:
                notes.append("left-justifying the schedule breaks liveness memory; the given schedule's makespan is reported")
                schedule, makespan = PlacementSolution(device, start, solution.transfer_start), given
            else:
                notes.append("the simulated schedule also exceeds liveness memory")
    return schedule, makespan
