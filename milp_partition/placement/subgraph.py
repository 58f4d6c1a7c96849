r"""Lower bounds from induced subgraphs: drop the side branches that hide the bottlenecks.

For a set R of tasks, the *induced* problem keeps R's tasks (times, memory,
colocation), the edges with both ends in R and the devices with their
capacities.  Every schedule of the whole problem, restricted to R, is a schedule
of the induced problem with a makespan no larger: tasks on one device still do
not overlap, each kept edge still has its transfer, a device holds a subset of
its tasks' memory (static; with liveness each task's release is at most the
whole problem's, as it has fewer successors) and link contention has fewer
transfers.  So ``OPT(induced) <= OPT(whole)``, and any proven lower bound of the
induced problem is one of the whole.

That matters when the whole graph has no bottleneck task (see
:mod:`milp_partition.placement.decompose`) only because of a side branch that runs
beside the main line -- the transformer's encoder next to its decoder: without
the branch, the main line splits at bottlenecks into small segments that the
decomposition solves per device pair, and its bound counts the main line's
transfers and device loads together, which no relaxation of the whole graph here does.

:func:`main_line` picks R: the tasks that are incomparable (neither ancestor nor
descendant) with at most ``max_incomparable`` others, for the smallest of a few
thresholds at which the induced problem decomposes usefully.
"""

from __future__ import annotations

import time

import numpy as np

from milp_partition.placement.decompose import Decomposition, decompose
from milp_partition.placement.problem import PlacementProblem, make_placement_problem

#: What :func:`main_line` finds: the tasks R, their induced problem and its decomposition.
MainLine = tuple[np.ndarray, PlacementProblem, Decomposition]


def induced(problem: PlacementProblem, tasks: list[int] | np.ndarray, name_suffix: str = "_induced") -> PlacementProblem:
    """The problem restricted to ``tasks`` (see the module docstring); task ids are kept."""
    tasks = sorted(int(t) for t in tasks)
    keep_set = set(tasks)
    keep = [
        e for e in range(problem.num_edges) if int(problem.edge_source[e]) in keep_set and int(problem.edge_target[e]) in keep_set
    ]
    edges = [(problem.task_ids[int(problem.edge_source[e])], problem.task_ids[int(problem.edge_target[e])]) for e in keep]
    groups = [f"g{int(problem.colocation[t])}" if problem.colocation[t] >= 0 else None for t in tasks]
    d = problem.num_devices
    return make_placement_problem(
        [problem.task_ids[t] for t in tasks],
        problem.device_ids,
        problem.time[tasks].copy(),
        problem.task_memory[tasks].copy(),
        problem.device_memory.copy(),
        edges,
        problem.comm[keep] if keep else np.zeros((0, d, d)),
        colocation=groups if any(g is not None for g in groups) else None,
        name=f"{problem.name}{name_suffix}",
        time_unit=problem.time_unit,
        memory_unit=problem.memory_unit,
        settings=problem.settings,
        cluster=problem.cluster,
    )


def incomparable_counts(problem: PlacementProblem) -> np.ndarray:
    """(n,) int: for each task, how many tasks are neither its ancestors nor its descendants."""
    n = problem.num_tasks
    ptr, pred, _ = problem.pred
    sptr, succ, _ = problem.succ
    order = problem.topological_order.tolist()
    anc = [0] * n
    desc = [0] * n
    for j in order:
        a = 0
        for i in pred[ptr[j] : ptr[j + 1]].tolist():
            a |= anc[i] | (1 << i)
        anc[j] = a
    for i in reversed(order):
        dd = 0
        for j in succ[sptr[i] : sptr[i + 1]].tolist():
            dd |= desc[j] | (1 << j)
        desc[i] = dd
    return np.array([n - 1 - anc[i].bit_count() - desc[i].bit_count() for i in range(n)], dtype=np.int64)


#: :func:`main_line` accepts an induced problem whose largest segment has at most this many tasks.
MAX_SEGMENT_TASKS = 96
#: :func:`main_line` looks only at graphs up to this many tasks (its bitsets grow with the square of it).
MAX_TASKS = 5000


def main_line(problem: PlacementProblem, max_tries: int = 200, deadline: float | None = None) -> MainLine | None:
    """Tasks R, their induced problem and its decomposition, when some threshold splits it into small segments.

    R is ``{v : incomparable(v) <= theta}``; thresholds are the distinct incomparable counts
    that keep at least half of the tasks, tried from large to small (at most ``max_tries`` of
    them, evenly spread); the first whose induced problem decomposes with no segment over
    :data:`MAX_SEGMENT_TASKS` tasks wins (the largest such R: more tasks, a stronger bound).
    ``None`` when none does, for graphs of fewer than 8 or more than :data:`MAX_TASKS` tasks,
    and when :func:`time.monotonic` passes ``deadline`` before one is found.
    """

    n = problem.num_tasks
    if n < 8 or n > MAX_TASKS:
        return None
    inc = incomparable_counts(problem)
    values = np.unique(inc)[::-1][1:]
    values = np.array([v for v in values.tolist() if int((inc <= v).sum()) >= n // 2], dtype=np.int64)
    if len(values) == 0:
        return None
    if len(values) > max_tries:
        values = values[np.unique(np.linspace(0, len(values) - 1, max_tries).round().astype(np.int64))]
    for v in values.tolist():
        if deadline is not None and time.monotonic() >= deadline:
            return None
        keep = np.flatnonzero(inc <= v)
        sub = induced(problem, keep, "_main_line")
        dec = decompose(sub)
        if dec.bottlenecks and max(len(s.inner) for s in dec.segments) <= MAX_SEGMENT_TASKS:
            return keep, sub, dec
    return None
