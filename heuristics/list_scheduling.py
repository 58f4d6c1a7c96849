"""List-scheduling heuristics for operator placement: HEFT (and iterated HEFT), m-TOPO and m-ETF.

All three build a schedule with :class:`milp_partition.heuristics.placement_state.ScheduleState`,
so each returned schedule respects precedence with transfer delays, no overlap on
a device, colocation groups, allowed devices, static memory (hence liveness
memory too) and, when the problem asks for it, link contention.  When memory runs
out they raise :class:`~milp_partition.heuristics.placement_state.PlacementHeuristicError`
instead of returning an infeasible schedule.

* **HEFT** (Topcuoglu, Hariri and Wu, "Performance-effective and low-complexity
  task scheduling for heterogeneous computing", IEEE TPDS 13(3), 2002): tasks in
  decreasing *upward rank* (mean time over the devices a task can run on, plus the
  mean off-diagonal transfer time of each edge), each put on the device with the
  earliest finish time, with insertion into idle gaps.  The gap search is bounded
  (bisection on gap ends, then at most ``gap_scan`` gaps; see
  :mod:`milp_partition.heuristics.placement_state`), and memory-aware: devices where the task no
  longer fits are skipped.
* **heft-iter**: HEFT run with several rank functions (mean, optimistic, blended
  with the previous schedule's own costs; after Zhao and Sakellariou, Euro-Par 2003),
  keeping the best schedule.
* **m-TOPO** (Jeon et al., "Baechi: fast device placement of machine learning
  graphs", SoCC 2020): tasks in topological order fill the devices one after the
  other, moving to the next device when the current one holds its share of the
  total memory (shares proportional to device speed, capped by capacity; shares
  of time when tasks carry no memory); then a list schedule in upward-rank order
  on the fixed devices.
* **m-ETF** (Baechi's memory-constrained Earliest Task First, after Hwang et al.
  1989): repeatedly the ready (task, device) pair with the earliest start among
  devices with room is scheduled, ties to the earliest finish; tasks are appended
  to devices.  One heap per device holds the ready tasks keyed by their inputs'
  arrival there, so a step peeks ``d`` heap tops instead of scanning all ready
  tasks (with link contention, one heap with lazy re-evaluation).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from milp_partition.heuristics.placement_memory import MemoryGuard
from milp_partition.heuristics.placement_state import PlacementHeuristicError, ScheduleState

from milp_partition.placement.problem import PlacementProblem, PlacementSolution

INF = math.inf


@dataclass(frozen=True)
class ListSchedulingSettings:
    """Options shared by the list schedulers.

    Attributes
    ----------
    insertion
        Let a task use an idle gap on a device (HEFT's insertion policy).
    gap_scan
        Most gaps tried per device and task in the insertion search.
    """

    insertion: bool = True
    gap_scan: int = 16


def mean_costs(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray]:
    """HEFT's mean task times (over devices where finite) and mean off-diagonal transfer times per edge."""
    finite = np.isfinite(problem.time)
    t = np.where(finite, problem.time, 0.0)
    w = t.sum(axis=1) / np.maximum(finite.sum(axis=1), 1)
    d = problem.num_devices
    if problem.num_edges and d > 1:
        c = problem.comm.sum(axis=(1, 2)) / (d * (d - 1))
    else:
        c = np.zeros(problem.num_edges)
    return w, c


def upward_rank(problem: PlacementProblem, task_cost: np.ndarray, edge_cost: np.ndarray) -> np.ndarray:
    """``rank[i] = task_cost[i] + max over edges i->j of (edge_cost[e] + rank[j])`` (0 for no successors)."""
    n = problem.num_tasks
    ptr, succ, edge = problem.succ
    ptr_l, succ_l, edge_l = ptr.tolist(), succ.tolist(), edge.tolist()
    w = task_cost.tolist()
    c = edge_cost.tolist()
    rank = [0.0] * n
    for i in problem.topological_order[::-1].tolist():
        best = 0.0
        for j in range(ptr_l[i], ptr_l[i + 1]):
            v = c[edge_l[j]] + rank[succ_l[j]]
            if v > best:
                best = v
        rank[i] = w[i] + best
    return np.asarray(rank)


def rank_order(problem: PlacementProblem, rank: np.ndarray) -> list[int]:
    """Tasks by decreasing rank, ties in topological order (so the order is itself topological)."""
    pos = np.empty(problem.num_tasks, dtype=np.int64)
    pos[problem.topological_order] = np.arange(problem.num_tasks)
    return np.lexsort((pos, -rank)).tolist()


def _best(starts: list[float], finishes: list[float]) -> int:
    k = min(range(len(finishes)), key=lambda k: (finishes[k], starts[k], k))
    return k


def heft(problem: PlacementProblem, settings: ListSchedulingSettings | None = None) -> PlacementSolution:
    """HEFT with bounded insertion and memory awareness (see the module docstring).

    Raises
    ------
    PlacementHeuristicError
        When a task fits on no device with the memory left.
    """
    w, c = mean_costs(problem)
    solution, _ = _heft_ranked(problem, upward_rank(problem, w, c), settings or ListSchedulingSettings(), "heft")
    return solution


def _heft_ranked(
    problem: PlacementProblem, rank: np.ndarray, settings: ListSchedulingSettings, name: str
) -> tuple[PlacementSolution, float]:
    """HEFT's device choice (earliest finish, insertion) in the order of ``rank``; the schedule and its makespan."""
    order = rank_order(problem, rank)
    state = ScheduleState(problem, insertion=settings.insertion, gap_scan=settings.gap_scan, heuristic=name)
    floating = state.floating
    for i in order:
        if floating[i]:
            continue
        starts, finishes = state.evaluate(i)
        k = _best(starts, finishes)
        if finishes[k] == INF:
            raise state.fail(i)
        state.commit(i, k, starts[k])
    solution = state.solution()
    return solution, state.makespan()


@dataclass(frozen=True)
class IteratedHEFTSettings:
    """Options of :func:`heft_iterated`.

    Attributes
    ----------
    max_rounds
        Most HEFT passes (mean ranks, optimistic ranks, then ranks blended with
        the previous schedule's own costs).
    round_task_budget
        Passes are also limited to ``max(2, round_task_budget // num_tasks)``.
    blend
        Weight of the previous schedule's own costs in the blended ranks.
    """

    max_rounds: int = 6
    round_task_budget: int = 400_000
    blend: float = 0.5
    schedule: ListSchedulingSettings = ListSchedulingSettings()


def heft_iterated(problem: PlacementProblem, settings: IteratedHEFTSettings | None = None) -> PlacementSolution:
    """HEFT over several rank functions, keeping the best schedule.

    Zhao and Sakellariou ("An experimental investigation into the rank function of
    the heterogeneous earliest finish time scheduling algorithm", Euro-Par 2003)
    show that HEFT's result depends strongly on how a task's time and an edge's
    transfer are averaged into the rank.  This runs HEFT with (1) mean costs
    (plain HEFT), (2) each task's least time and no transfers (optimistic), then
    (3...) ranks that blend the mean costs with the costs of the previous blended
    pass's schedule (plain HEFT's for the first: its devices' times and its
    transfers), and returns the schedule with the least makespan.  Deterministic;
    each pass is one HEFT run.

    Raises
    ------
    PlacementHeuristicError
        When every pass runs out of memory (the first error is raised).
    """
    settings = settings or IteratedHEFTSettings()
    n, m = problem.num_tasks, problem.num_edges
    rounds = min(settings.max_rounds, max(2, settings.round_task_budget // max(n, 1)))
    w_mean, c_mean = mean_costs(problem)
    finite = np.isfinite(problem.time)
    w_min = np.where(finite, problem.time, INF).min(axis=1) if n else np.zeros(0)
    ranks = [upward_rank(problem, w_mean, c_mean), upward_rank(problem, w_min, np.zeros(m))]
    best: tuple[float, PlacementSolution] | None = None
    last: PlacementSolution | None = None
    first_error: PlacementHeuristicError | None = None
    a = settings.blend
    for r in range(rounds):
        if r < len(ranks):
            rank = ranks[r]
        elif last is not None:
            dev = last.device
            w_own = problem.time[np.arange(n), dev]
            c_own = problem.comm[np.arange(m), dev[problem.edge_source], dev[problem.edge_target]]
            rank = upward_rank(problem, a * w_own + (1 - a) * w_mean, a * c_own + (1 - a) * c_mean)
        else:
            break
        try:
            solution, value = _heft_ranked(problem, rank, settings.schedule, "heft-iter")
        except PlacementHeuristicError as exc:
            first_error = first_error or exc
            continue
        if r == 0 or r >= len(ranks):
            last = solution  # blended ranks follow plain HEFT, then each other
        if best is None or value < best[0]:
            best = (value, solution)
    if best is None:
        assert first_error is not None
        raise first_error
    return best[1]


def m_etf(problem: PlacementProblem, settings: ListSchedulingSettings | None = None) -> PlacementSolution:
    """Baechi's memory-constrained Earliest Task First (see the module docstring).

    Without link contention a ready task's input arrival time on each device is
    fixed, and on device k the earliest start of task i is
    ``max(ready[i, k], avail[k])`` (tasks are appended; m-ETF does not insert), so
    the best task of each device is the top of a per-device heap keyed by
    ``ready[i, k]``: a step costs ``O(d log n)``.  With contention the arrival
    times move with the ports, and a single heap with lazy re-evaluation is used.

    Raises
    ------
    PlacementHeuristicError
        When a ready task fits on no device with the memory left.
    """
    settings = settings or ListSchedulingSettings()
    n, d = problem.num_tasks, problem.num_devices
    state = ScheduleState(problem, insertion=False, gap_scan=settings.gap_scan, heuristic="m-etf")
    floating = state.floating
    pred_ptr = state.pred_ptr
    pred_task = state.pred_task
    indeg = [0] * n
    for i in range(n):
        indeg[i] = sum(1 for p in pred_task[pred_ptr[i] : pred_ptr[i + 1]] if not floating[p])
    pos = np.empty(n, dtype=np.int64)
    pos[problem.topological_order] = np.arange(n)
    pos_l = pos.tolist()
    sptr, succ, _ = problem.succ
    sptr_l, succ_l = sptr.tolist(), succ.tolist()
    time_l = state.time
    occupies = state.occupies
    device = state.device
    heaps: list[list[tuple[float, float, int, int]]] = [[] for _ in range(d)]
    lazy: list[tuple[float, float, int, int]] = []
    ready_stack = [i for i in range(n) if indeg[i] == 0 and not floating[i]]
    waiting: dict[int, list[float]] = {}  # released, not yet placed: task -> input arrival per device

    def place(i: int, k: int, start: float) -> None:
        state.commit(i, k, start)
        for j in succ_l[sptr_l[i] : sptr_l[i + 1]]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready_stack.append(j)

    def release() -> None:
        while ready_stack:
            i = ready_stack.pop()
            if not occupies[i] or state.contention:
                starts, finishes = state.evaluate(i)
                k = min(range(d), key=lambda k: (starts[k], finishes[k], k))
                if starts[k] == INF:
                    raise state.fail(i)
                if not occupies[i]:  # occupies nothing: place it now, at its inputs' arrival
                    place(i, k, starts[k])
                else:
                    heapq.heappush(lazy, (starts[k], finishes[k], pos_l[i], i))
                continue
            ready = state.data_ready(i)
            waiting[i] = ready
            row = time_l[i]
            for k in range(d):
                if row[k] != INF:
                    heapq.heappush(heaps[k], (ready[k], row[k], pos_l[i], i))

    release()
    if state.contention:
        _metf_lazy(state, lazy, place, release, pos_l)
        return state.solution()
    _metf_heaps(state, heaps, waiting, place, release, pos_l)
    for i in range(n):
        if device[i] < 0 and not floating[i]:
            raise state.fail(i)
    return state.solution()


def _metf_lazy(
    state: ScheduleState,
    lazy: list[tuple[float, float, int, int]],
    place: Callable[[int, int, float], None],
    release: Callable[[], None],
    pos_l: list[int],
) -> None:
    """m-ETF with link contention: one heap of ready tasks keyed by their earliest start, re-evaluated lazily."""
    d = state.problem.num_devices
    while lazy:
        key, _, _, i = heapq.heappop(lazy)
        starts, finishes = state.evaluate(i)
        k = min(range(d), key=lambda k: (starts[k], finishes[k], k))
        if starts[k] == INF:
            raise state.fail(i)
        if starts[k] > key and lazy and starts[k] > lazy[0][0]:
            heapq.heappush(lazy, (starts[k], finishes[k], pos_l[i], i))
            continue
        place(i, k, starts[k])
        release()


def _metf_heaps(
    state: ScheduleState,
    heaps: list[list[tuple[float, float, int, int]]],
    waiting: dict[int, list[float]],
    place: Callable[[int, int, float], None],
    release: Callable[[], None],
    pos_l: list[int],
) -> None:
    """m-ETF without contention: each step places the earliest (start, finish) top of the per-device heaps that fits."""
    d = state.problem.num_devices
    time_l = state.time
    device = state.device
    avail = state.avail
    fits = state.guard.fits
    retry = True
    while True:
        best: tuple[float, float, int, int] | None = None
        for k in range(d):
            h = heaps[k]
            while h:
                i = h[0][3]
                if device[i] >= 0:
                    heapq.heappop(h)
                    continue
                need, forced, items = state.memory_need(i)
                if (forced >= 0 and forced != k) or not fits(k, items, need):
                    if len(items) > 1 and forced < 0 and state.detach_floating(i):
                        continue  # its floating inputs now sit on their own; look again
                    if forced < 0 and state.guard.repack(k, items, need):
                        break
                    heapq.heappop(h)  # never again: see the memory guard (its fallback device keeps it)
                    continue
                break
            if h:
                r, t, _, i = h[0]
                s = r if r > avail[k] else avail[k]
                cand = (s, s + t, k, i)
                if best is None or cand < best:
                    best = cand
        if best is None:
            if not waiting or not retry:
                break
            # every heap ran dry while released tasks wait: a re-packing moved their fallback device; offer them again
            retry = False
            for i, ready in waiting.items():
                row = time_l[i]
                for k in range(d):
                    if row[k] != INF:
                        heapq.heappush(heaps[k], (ready[k], row[k], pos_l[i], i))
            continue
        s, _, k, i = best
        need, _, items = state.memory_need(i)
        if not fits(k, items, need):
            continue  # a re-packing for another device's task took its room: look again
        heapq.heappop(heaps[k])
        del waiting[i]
        retry = True
        place(i, k, s)
        release()


def device_speed(problem: PlacementProblem) -> np.ndarray:
    """(d,) relative speed of each device: the tasks' least times summed over their times there (finite ones only)."""
    finite = np.isfinite(problem.time)
    best = np.where(finite, problem.time, INF).min(axis=1)
    best = np.where(np.isfinite(best), best, 0.0)
    t = np.where(finite, problem.time, 0.0)
    num = (finite * best[:, None]).sum(axis=0)
    den = t.sum(axis=0)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0)


def schedule_assignment(
    problem: PlacementProblem, device: np.ndarray, *, heuristic: str, settings: ListSchedulingSettings | None = None
) -> PlacementSolution:
    """List-schedule tasks on fixed devices, in decreasing upward rank with the real costs of the assignment.

    Raises
    ------
    PlacementHeuristicError
        When the assignment breaks memory, an allowed device or a colocation group.
    """
    settings = settings or ListSchedulingSettings()
    device = np.asarray(device, dtype=np.int64)
    n = problem.num_tasks
    w = problem.time[np.arange(n), device]
    c = problem.comm[np.arange(problem.num_edges), device[problem.edge_source], device[problem.edge_target]]
    order = rank_order(problem, upward_rank(problem, w, c))
    state = ScheduleState(problem, insertion=settings.insertion, gap_scan=settings.gap_scan, heuristic=heuristic, floating=False)
    dev = device.tolist()
    for i in order:
        k = dev[i]
        starts, _ = state.evaluate(i, (k,))
        if starts[k] == INF:
            raise state.fail(i, f" (on its assigned device {problem.device_ids[k]})")
        state.commit(i, k, starts[k])
    return state.solution()


def place_virtual_inputs(problem: PlacementProblem, device: np.ndarray, guard: MemoryGuard) -> None:
    """Put each unplaced (``-1``) task on its first successor's device where it fits, else on the first device with room.

    ``device`` and ``guard`` are updated in place; tasks in colocation groups must already be placed.
    """
    sptr, succ, _ = problem.succ
    for i in np.flatnonzero(device < 0).tolist():
        cands = [int(device[j]) for j in succ[sptr[i] : sptr[i + 1]].tolist() if device[j] >= 0]
        cands += list(range(problem.num_devices))
        need = float(problem.task_memory[i])
        k = next((k for k in cands if np.isfinite(problem.time[i, k]) and guard.fits(k, [i], need)), None)
        if k is None:
            raise PlacementHeuristicError(
                f"cannot place task {problem.task_ids[i]!r}: it needs memory {need:g} and no device it may run on has that left"
            )
        device[i] = k
        guard.take(k, [i], need)


def m_topo(problem: PlacementProblem, settings: ListSchedulingSettings | None = None) -> PlacementSolution:
    """Baechi's memory-constrained topological placement (see the module docstring).

    Raises
    ------
    PlacementHeuristicError
        When a task fits on no device with the memory left.
    """
    n, d = problem.num_tasks, problem.num_devices
    speed = device_speed(problem)
    dev_order = sorted(range(d), key=lambda k: (-speed[k], k))
    cap = problem.device_memory.astype(np.float64)
    total_mem = float(problem.task_memory.sum())
    if total_mem > 0:
        size = problem.task_memory
        share = total_mem * speed / speed.sum()
        limit = np.minimum(cap, share)
    else:
        w, _ = mean_costs(problem)
        size = w
        share = float(w.sum()) * speed / speed.sum()
        limit = share
    guard = MemoryGuard(problem)
    free = guard.free
    used = np.zeros(d)
    device = np.full(n, -1, dtype=np.int64)
    group = problem.colocation
    group_device: dict[int, int] = {}
    group_mem: dict[int, float] = {}
    if (group >= 0).any():
        for g, m in zip(group.tolist(), problem.task_memory.tolist()):
            if g >= 0:
                group_mem[g] = group_mem.get(g, 0.0) + m
    indeg = np.diff(problem.pred[0])
    floating = (~problem.occupies_device) & (indeg == 0) & (group < 0)
    time_l = problem.time.tolist()
    size_l = np.asarray(size, dtype=np.float64).tolist()
    mem_l = problem.task_memory.tolist()
    group_l = group.tolist()
    cur = 0
    for i in problem.topological_order.tolist():
        if floating[i]:
            continue
        g = group_l[i]
        if g >= 0 and g in group_device:
            device[i] = group_device[g]
            used[device[i]] += size_l[i]
            continue
        need = group_mem[g] if g >= 0 else mem_l[i]
        items = [n + g] if g >= 0 else [i]
        members_ok = None
        if g >= 0:
            members_ok = np.isfinite(problem.time[group == g]).all(axis=0)
        k0 = dev_order[cur]
        while cur < d - 1 and used[k0] > 0 and used[k0] + size_l[i] > limit[k0]:
            cur += 1  # the current device holds its share: move on for good
            k0 = dev_order[cur]
        chosen = -1
        for k in dev_order[cur:] + dev_order[:cur]:
            if time_l[i][k] == INF or not guard.fits(k, items, need) or (members_ok is not None and not members_ok[k]):
                continue
            chosen = k
            break
        if chosen < 0:
            raise PlacementHeuristicError(
                f"m-topo cannot place task {problem.task_ids[i]!r}: it needs memory {need:g} and no device it may run "
                f"on has that left ({', '.join(f'{problem.device_ids[k]}: {free[k]:g}' for k in range(d))}); "
                "give the devices more memory, or try another heuristic or the exact solver"
            )
        device[i] = chosen
        guard.take(chosen, items, need)
        used[chosen] += size_l[i]
        if g >= 0:
            group_device[g] = chosen
    place_virtual_inputs(problem, device, guard)
    return schedule_assignment(problem, device, heuristic="m-topo", settings=settings)
