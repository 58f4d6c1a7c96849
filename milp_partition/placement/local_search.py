r"""Improve a placement schedule by moving single tasks between devices, each move scored by the simulator.

A schedule is kept as a device per task and a priority per task (its start in the
last simulated schedule); :func:`~milp_partition.verifiers.placement.simulate_placement`
turns the pair into the semi-active schedule, whose makespan is the verifier's.
A *move* puts one task on another device it may run on (static memory permitting:
the device's memory after the move, :math:`\sum_{i: p(i)=k} m_i \le M_k`; tasks of
a colocation group never move) and keeps every priority.  Priorities taken from a
schedule's starts never contradict the precedence edges (a successor starts no
earlier than its predecessor ends; ties go by topological order), so every move
simulates without a deadlock.

Moves are tried for the tasks of the current critical path first (moving any other
task cannot shorten the makespan by itself), then for the rest; a move is kept when
it lowers the makespan, or keeps it and lowers the sum of the tasks' ends (which
frees room that a later move turns into a shorter makespan).  A pass over all
tasks with no kept move ends the search, as does the deadline.  The result is a
heuristic schedule: the caller verifies it like any other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from milp_partition.placement.problem import PlacementProblem, PlacementSolution
from milp_partition.verifiers.placement import ScheduleOrderError, simulate_placement

#: Relative improvement a move must bring to count (guards against float noise).
REL_EPS = 1e-12


@dataclass(frozen=True)
class LocalSearchSettings:
    """How long to search.

    Attributes
    ----------
    time_limit_s
        Wall-clock budget of the whole search.
    max_passes
        Most passes over all tasks.
    """

    time_limit_s: float = 30.0
    max_passes: int = 50


@dataclass
class _Scored:
    """A simulated schedule and its score (makespan, sum of ends)."""

    solution: PlacementSolution
    makespan: float
    total_end: float


def _score(problem: PlacementProblem, device: np.ndarray, priority: np.ndarray) -> _Scored | None:
    """Simulate ``device`` with ``priority``; ``None`` when the order deadlocks."""
    try:
        sol = simulate_placement(problem, device, priority)
    except ScheduleOrderError:
        return None
    dur = problem.time[np.arange(problem.num_tasks), device]
    end = sol.start + dur
    return _Scored(sol, float(end.max()) if len(end) else 0.0, float(end.sum()))


def critical_tasks(problem: PlacementProblem, solution: PlacementSolution) -> np.ndarray:
    """Indices of the tasks with no slack in ``solution`` (a semi-active schedule): the critical paths.

    A task is critical when it ends at the makespan, or when a critical task on its
    device starts right at its end, or a critical successor starts right at its end
    plus the edge's transfer.
    """
    n = problem.num_tasks
    dev = np.asarray(solution.device)
    start = np.asarray(solution.start, dtype=np.float64)
    end = start + problem.time[np.arange(n), dev]
    span = float(end.max()) if n else 0.0
    tol = 1e-9 * max(1.0, span)
    crit = np.abs(end - span) <= tol
    src, dst = problem.edge_source, problem.edge_target
    lag = problem.comm[np.arange(problem.num_edges), dev[src], dev[dst]] if problem.num_edges else np.zeros(0)
    order = np.argsort(start, kind="stable")
    for j in order[::-1].tolist():  # latest first: a task's followers are decided before it
        if not crit[j]:
            continue
        hits = (dst == j) & (np.abs(end[src] + lag - start[j]) <= tol)
        crit[src[hits]] = True
        same = (dev == dev[j]) & (np.abs(end - start[j]) <= tol) & (end <= start[j] + tol)
        same[j] = False
        crit[same] = True
    return np.flatnonzero(crit)


def improve_by_moves(
    problem: PlacementProblem, solution: PlacementSolution, settings: LocalSearchSettings = LocalSearchSettings()
) -> PlacementSolution:
    """The best schedule found by single-task device moves from ``solution`` (see the module docstring)."""
    end_at = time.monotonic() + settings.time_limit_s
    device = np.asarray(solution.device, dtype=np.int64).copy()
    best = _score(problem, device, np.asarray(solution.start, dtype=np.float64))
    if best is None:
        return solution
    allowed = problem.allowed
    movable = problem.colocation < 0
    mem = problem.task_memory
    used = np.array([mem[device == k].sum() for k in range(problem.num_devices)])
    cap = problem.device_memory
    for _ in range(settings.max_passes):
        crit = critical_tasks(problem, best.solution)
        rest = np.setdiff1d(np.arange(problem.num_tasks), crit)
        changed = False
        for i in [*crit.tolist(), *rest.tolist()]:
            if time.monotonic() >= end_at:
                return best.solution
            if not movable[i]:
                continue
            here = int(device[i])
            for k in np.flatnonzero(allowed[i]).tolist():
                if k == here or used[k] + mem[i] > cap[k] * (1 + 1e-9):
                    continue
                device[i] = k
                cand = _score(problem, device, best.solution.start)
                if cand is not None and _better(cand, best):
                    best, changed = cand, True
                    used[here] -= mem[i]
                    used[k] += mem[i]
                    here = k
            device[i] = here
        swapped = _swap_pass(problem, device, best, end_at)
        if swapped is not None:
            best, changed = swapped, True
        if not changed:
            break
    return best.solution


def _swap_pass(problem: PlacementProblem, device: np.ndarray, best: _Scored, end_at: float) -> _Scored | None:
    """Move each critical task before the task that precedes it on its device (kept when better); ``None`` if none is."""
    found = None
    for i in critical_tasks(problem, best.solution).tolist():
        if time.monotonic() >= end_at:
            break
        start = best.solution.start
        mine = np.flatnonzero(
            (device == device[i]) & (start < start[i]) & (problem.time[np.arange(problem.num_tasks), device] > 0)
        )
        if len(mine) == 0:
            continue
        prev = int(mine[np.argmax(start[mine])])
        priority = start.copy()
        priority[i] = start[prev] - 1e-9 * max(1.0, best.makespan)
        cand = _score(problem, device, priority)
        if cand is not None and _better(cand, best):
            best = found = cand
    return found


def _better(a: _Scored, b: _Scored) -> bool:
    """Lexicographically smaller (makespan, sum of ends), with a relative tolerance."""
    if a.makespan < b.makespan * (1 - REL_EPS):
        return True
    return a.makespan <= b.makespan * (1 + REL_EPS) and a.total_end < b.total_end * (1 - REL_EPS)
