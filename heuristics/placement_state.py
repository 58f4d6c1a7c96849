"""The partial schedule that the placement heuristics build one task at a time.

Every placement heuristic in this package (HEFT, m-TOPO, m-ETF, the ParDNN-style
clustering) is a *list scheduler*: it takes tasks whose predecessors are all
placed, picks a device (or is told one) and puts the task at the earliest start
the partial schedule allows.  :class:`ScheduleState` holds that partial schedule
and answers the two questions every list scheduler asks:

* :meth:`ScheduleState.evaluate`: for a ready task, the earliest start and finish
  on each device, with ``inf`` where the task cannot go (infinite time, colocation
  group elsewhere, not enough memory left);
* :meth:`ScheduleState.commit`: place it, updating the device timeline, the
  memory left, the link ports and the transfer start times.

The semantics are those of :mod:`milp_partition.placement.problem` (and of the independent
verifier): a task starts no earlier than each predecessor's end plus the edge's
transfer time when the two devices differ; tasks that take time do not overlap on
a device; a task whose time is zero on every device occupies nothing.

Device timelines
    With ``insertion=True`` (HEFT's insertion policy, Topcuoglu et al. 2002) a
    task may go into an idle gap between two tasks already on the device.  The
    gaps of a device are kept sorted (they are disjoint, so by start and by end
    at once); a bisection finds the first gap that ends late enough and at most
    :attr:`ScheduleState.gap_scan` gaps from there are tried, after which the task
    is appended at the end of the device.  Every step therefore costs
    ``O(log g + gap_scan)``, never a scan of the whole timeline.

Memory
    Static: a device's tasks' memory sums to at most its capacity; the free
    memory is tracked per device and a task is only offered the devices where it
    still fits.  A colocation group reserves the memory of all its members when
    its first member is placed.  The static sum bounds the peak of the liveness
    model from above, so schedules built here are feasible under
    ``memory_model="liveness"`` as well (conservatively).

Link contention
    When the problem asks for it, each device has one out-port and one in-port;
    a transfer between different devices takes both for its comm time.  Ports are
    filled append-only: a transfer starts at the latest of its source's end, the
    source's out-port and the target's in-port becoming free.  The transfers into
    one task are planned in the order of their sources' ends.

Floating tasks
    A task that takes no time anywhere, has no predecessor and no colocation
    group (a virtual input such as Moirai's) is not placed on its own: the first
    of its successors to be placed takes it along to its own device, so its
    outgoing transfer costs nothing there.  When a task and its floating inputs
    fit no device together, the inputs are first placed on their own
    (:meth:`ScheduleState.detach_floating`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np
from milp_partition.heuristics.placement_memory import MemoryGuard

from milp_partition.errors import MilpPartitionError
from milp_partition.placement.problem import PlacementProblem, PlacementSolution

INF = math.inf


class PlacementHeuristicError(MilpPartitionError):
    """A placement heuristic cannot place a task (memory or allowed devices run out)."""


class ScheduleState:
    """A partial schedule of a :class:`PlacementProblem` (see the module docstring).

    Parameters
    ----------
    problem
        The instance.
    insertion
        Allow a task into an idle gap of a device timeline (bounded gap search).
    gap_scan
        At most this many gaps are tried per device and task.
    heuristic
        Name used in error messages.
    floating
        Let virtual inputs follow their first placed successor (off when the
        caller has fixed every task's device).
    """

    def __init__(
        self,
        problem: PlacementProblem,
        *,
        insertion: bool,
        gap_scan: int = 16,
        heuristic: str = "heuristic",
        floating: bool = True,
    ) -> None:
        self.problem = problem
        self.heuristic = heuristic
        self.insertion = insertion
        self.gap_scan = gap_scan
        n, d = problem.num_tasks, problem.num_devices
        self.n, self.d = n, d
        self.time = problem.time.tolist()
        self.occupies = problem.occupies_device.tolist()
        self.mem = problem.task_memory.tolist()
        self.guard = MemoryGuard(problem, reserve=floating)
        self.free = self.guard.free
        self.contention = bool(problem.settings.link_contention)
        ptr, ptask, pedge = problem.pred
        self.pred_ptr = ptr.tolist()
        self.pred_task_a = ptask
        self.pred_edge_a = pedge
        self.pred_task = ptask.tolist()
        self.pred_edge = pedge.tolist()
        self.comm = problem.comm
        self.device = [-1] * n
        self.device_a = np.full(n, -1, dtype=np.int64)
        self.start = [0.0] * n
        self.finish = [0.0] * n
        self.finish_a = np.zeros(n)
        self.transfer_start = [0.0] * problem.num_edges
        self.avail = [0.0] * d
        self.gap_start: list[list[float]] = [[] for _ in range(d)]
        self.gap_end: list[list[float]] = [[] for _ in range(d)]
        self.out_free = [0.0] * d
        self.in_free = [0.0] * d
        groups = problem.colocation
        self.group = groups.tolist()
        num_groups = int(groups.max()) + 1 if n and groups.max() >= 0 else 0
        self.group_device = [-1] * num_groups
        if num_groups:
            member = groups >= 0
            self.group_memory = np.bincount(groups[member], weights=problem.task_memory[member], minlength=num_groups).tolist()
            runnable = np.isfinite(problem.time)
            blocked = np.zeros((num_groups, d), dtype=bool)
            np.logical_or.at(blocked, groups[member], ~runnable[member])
            self.group_allowed = (~blocked).tolist()
        else:
            self.group_memory = []
            self.group_allowed = []
        indeg = np.diff(ptr)
        floats = (~problem.occupies_device) & (indeg == 0) & (groups < 0) if floating else np.zeros(n, dtype=bool)
        self.floating = floats.tolist()
        self.placed = 0

    # ------------------------------------------------------------------ queries
    def _floating_preds(self, i: int) -> list[int]:
        lo, hi = self.pred_ptr[i], self.pred_ptr[i + 1]
        dev = self.device
        fl = self.floating
        return [p for p in self.pred_task[lo:hi] if fl[p] and dev[p] < 0]

    def memory_need(self, i: int) -> tuple[float, int, list[int]]:
        """Memory task ``i`` (with its floating inputs) takes on a device, the device its group forces (-1: none), and its memory items."""
        need = 0.0
        forced = -1
        items: list[int] = []
        g = self.group[i]
        if g >= 0:
            forced = self.group_device[g]
            if forced < 0:
                need += self.group_memory[g]
                items.append(self.n + g)
        else:
            need += self.mem[i]
            items.append(i)
        for p in self._floating_preds(i):
            need += self.mem[p]
            items.append(p)
        return need, forced, items

    def data_ready(self, i: int) -> list[float]:
        """Earliest time the inputs of ``i`` can be on each device (ports included under contention)."""
        lo, hi = self.pred_ptr[i], self.pred_ptr[i + 1]
        d = self.d
        if lo == hi:
            return [0.0] * d
        if hi - lo == 1:
            p = self.pred_task[lo]
            a = self.device[p]
            if a < 0:
                return [0.0] * d
            if not self.contention:
                f = self.finish[p]
                return [f + c for c in self.comm[self.pred_edge[lo], a].tolist()]
        pt = self.pred_task_a[lo:hi]
        pe = self.pred_edge_a[lo:hi]
        dev = self.device_a[pt]
        fixed = dev >= 0
        if not fixed.all():
            pt, pe, dev = pt[fixed], pe[fixed], dev[fixed]
            if len(pt) == 0:
                return [0.0] * d
        if not self.contention:
            return (self.comm[pe, dev, :] + self.finish_a[pt][:, None]).max(axis=0).tolist()
        ready = [0.0] * d
        for k in range(d):
            ready[k] = self._port_plan(pt, pe, dev, k, None)
        return ready

    def _port_plan(self, pt: np.ndarray, pe: np.ndarray, dev: np.ndarray, k: int, record: list | None) -> float:
        """Plan the transfers into a task on device ``k``; return when its last input arrives."""
        ends = self.finish_a[pt]
        order = np.argsort(ends, kind="stable").tolist()
        ends_l = ends.tolist()
        dev_l = dev.tolist()
        pe_l = pe.tolist()
        comm = self.comm
        in_f = self.in_free[k]
        out_local: dict[int, float] = {}
        ready = 0.0
        for j in order:
            a = dev_l[j]
            end = ends_l[j]
            if a == k:
                if end > ready:
                    ready = end
                if record is not None:
                    record.append((pe_l[j], end, -1, 0.0))
                continue
            c = float(comm[pe_l[j], a, k])
            s = max(end, out_local.get(a, self.out_free[a]), in_f)
            in_f = s + c
            out_local[a] = s + c
            if s + c > ready:
                ready = s + c
            if record is not None:
                record.append((pe_l[j], s, a, c))
        return ready

    def slot(self, k: int, ready: float, duration: float) -> float:
        """Earliest start on device ``k`` at or after ``ready`` for a task that occupies it for ``duration``."""
        avail = self.avail[k]
        if ready >= avail or not self.insertion:
            return ready if ready > avail else avail
        ends = self.gap_end[k]
        if ends:
            starts = self.gap_start[k]
            j = bisect.bisect_left(ends, ready + duration)
            stop = min(len(ends), j + self.gap_scan)
            while j < stop:
                s = starts[j] if starts[j] > ready else ready
                if s + duration <= ends[j]:
                    return s
                j += 1
        return avail

    def evaluate(self, i: int, devices: Sequence[int] | None = None) -> tuple[list[float], list[float]]:
        """Earliest start and finish of ready task ``i`` on each device (``inf`` where it cannot go)."""
        d = self.d
        need, forced, items = self.memory_need(i)
        fits = self.guard.fits
        times = self.time[i]
        ready = self.data_ready(i)
        starts = [INF] * d
        finishes = [INF] * d
        g = self.group[i]
        allowed_g = self.group_allowed[g] if g >= 0 and forced < 0 else None
        occupies = self.occupies[i]
        blocked: list[tuple[float, float, int]] = []
        for k in devices if devices is not None else range(d):
            t = times[k]
            if t == INF or (forced >= 0 and k != forced):
                continue
            if allowed_g is not None and not allowed_g[k]:
                continue
            s = self.slot(k, ready[k], t) if occupies else ready[k]
            if not fits(k, items, need):
                if need <= self.free[k]:
                    blocked.append((s + t, s, k))  # only the reservations keep it out
                continue
            starts[k] = s
            finishes[k] = s + t
        if blocked:
            f, s, k = min(blocked)
            if f < min(finishes) and self.guard.repack(k, items, need):
                starts[k], finishes[k] = s, f
        if len(items) > 1 and self.group[i] < 0 and min(finishes) == INF and self.detach_floating(i):
            return self.evaluate(i, devices)
        return starts, finishes

    def detach_floating(self, i: int) -> bool:
        """Place the floating inputs of ``i`` on their own (where their memory fits); True if any was placed.

        Used when task ``i`` and its floating inputs fit no device together: each
        input alone still fits its fallback device (see :mod:`milp_partition.heuristics.placement_memory`).
        """
        placed = False
        for p in self._floating_preds(i):
            m = self.mem[p]
            k = max((k for k in range(self.d) if self.guard.fits(k, [p], m)), key=lambda k: self.free[k], default=-1)
            if k >= 0:
                self.guard.take(k, [p], m)
                self._set(p, k, 0.0)
                placed = True
        return placed

    def fail(self, i: int, why: str = "") -> PlacementHeuristicError:
        """The error for a task that fits no device."""
        p = self.problem
        need, forced, _ = self.memory_need(i)
        free = ", ".join(f"{p.device_ids[k]}: {self.free[k]:g}" for k in range(self.d))
        extra = f"; its colocation group is on {p.device_ids[forced]}" if forced >= 0 else ""
        return PlacementHeuristicError(
            f"{self.heuristic} cannot place task {p.task_ids[i]!r}: it needs memory {need:g} (time "
            f"{self.time[i]}) and the devices it may run on have too little left ({free}){extra}{why}; "
            "give the devices more memory, or try another heuristic or the exact solver"
        )

    # ------------------------------------------------------------------ update
    def commit(self, i: int, k: int, start: float) -> None:
        """Place task ``i`` on device ``k`` at ``start`` (a value :meth:`evaluate` returned)."""
        need, _, items = self.memory_need(i)
        if need > self.free[k]:  # never write an over-full device, whatever the caller did
            raise self.fail(i, f" (device {self.problem.device_ids[k]} has {self.free[k]:g} left)")
        for p in self._floating_preds(i):
            self._set(p, k, 0.0)
        t = self.time[i][k]
        self.guard.take(k, items, need)
        g = self.group[i]
        if g >= 0 and self.group_device[g] < 0:
            self.group_device[g] = k
        self._set(i, k, start)
        if self.occupies[i] and t > 0:
            self._occupy(k, start, start + t)
        lo, hi = self.pred_ptr[i], self.pred_ptr[i + 1]
        if lo == hi:
            return
        if self.contention:
            pt = self.pred_task_a[lo:hi]
            pe = self.pred_edge_a[lo:hi]
            dev = self.device_a[pt]
            record: list = []
            self._port_plan(pt, pe, dev, k, record)
            for e, s, a, c in record:
                self.transfer_start[e] = s
                if a >= 0:
                    self.out_free[a] = max(self.out_free[a], s + c)
                    self.in_free[k] = max(self.in_free[k], s + c)
        else:
            fin = self.finish
            ts = self.transfer_start
            for j in range(lo, hi):
                ts[self.pred_edge[j]] = fin[self.pred_task[j]]

    def _set(self, i: int, k: int, start: float) -> None:
        self.device[i] = k
        self.device_a[i] = k
        self.start[i] = start
        t = self.time[i][k]
        f = start + (t if t != INF else 0.0)
        self.finish[i] = f
        self.finish_a[i] = f
        self.placed += 1

    def _occupy(self, k: int, s: float, f: float) -> None:
        avail = self.avail[k]
        if s >= avail:
            if s > avail and self.insertion:
                self.gap_start[k].append(avail)
                self.gap_end[k].append(s)
            self.avail[k] = f
            return
        starts, ends = self.gap_start[k], self.gap_end[k]
        j = bisect.bisect_right(starts, s) - 1
        assert j >= 0 and starts[j] <= s and f <= ends[j] + 1e-9 * max(1.0, abs(f)), "slot outside a gap"
        gs, ge = starts[j], ends[j]
        new = []
        if s > gs:
            new.append((gs, s))
        if ge > f:
            new.append((f, ge))
        starts[j : j + 1] = [a for a, _ in new]
        ends[j : j + 1] = [b for _, b in new]

    def place_leftovers(self) -> None:
        """Place floating tasks that no successor took along (isolated virtual tasks)."""
        for i in range(self.n):
            if self.device[i] < 0:
                starts, _ = self.evaluate(i)
                k = min(range(self.d), key=lambda k: (starts[k], k))
                if starts[k] == INF:
                    raise self.fail(i)
                self.commit(i, k, starts[k])

    def solution(self) -> PlacementSolution:
        """The finished schedule; every task must be placed."""
        self.place_leftovers()
        return PlacementSolution(
            device=np.asarray(self.device, dtype=np.int64),
            start=np.asarray(self.start, dtype=np.float64),
            transfer_start=np.asarray(self.transfer_start, dtype=np.float64),
        )

    def makespan(self) -> float:
        return max(self.finish, default=0.0)
