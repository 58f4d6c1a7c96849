"""Brute force for tiny placement problems: every device assignment times every task order.

For static memory and no link contention, some optimal schedule is the
semi-active schedule of its own assignment and start order, and that order is a
linear extension of the precedence graph; so the least simulated makespan over
all assignments that meet colocation and memory, and over all linear extensions
(used as per-device priorities), is the optimum.  Exponential: ``d**n * n!``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from milp_partition.placement.problem import PlacementProblem
from milp_partition.verifiers.placement import simulate_placement


def linear_extensions(problem: PlacementProblem) -> list[tuple[int, ...]]:
    """Every topological order of the tasks."""
    n = problem.num_tasks
    preds = [set() for _ in range(n)]
    for a, b in zip(problem.edge_source.tolist(), problem.edge_target.tolist()):
        preds[b].add(a)
    out: list[tuple[int, ...]] = []

    def rec(prefix: list[int], placed: set[int]) -> None:
        if len(prefix) == n:
            out.append(tuple(prefix))
            return
        for v in range(n):
            if v not in placed and preds[v] <= placed:
                placed.add(v)
                prefix.append(v)
                rec(prefix, placed)
                prefix.pop()
                placed.discard(v)

    rec([], set())
    return out


def brute_force_makespan(problem: PlacementProblem) -> float:
    """The optimal makespan (``inf`` if no assignment is feasible)."""
    assert problem.settings.memory_model == "static" and not problem.settings.link_contention
    n, d = problem.num_tasks, problem.num_devices
    orders = linear_extensions(problem)
    best = math.inf
    for dev in itertools.product(range(d), repeat=n):
        device = np.asarray(dev, dtype=np.int64)
        if not np.isfinite(problem.time[np.arange(n), device]).all():
            continue
        if np.any(np.bincount(device, weights=problem.task_memory, minlength=d) > problem.device_memory + 1e-9):
            continue
        groups = problem.colocation
        if any(len(set(device[groups == g].tolist())) > 1 for g in set(groups[groups >= 0].tolist())):
            continue
        for order in orders:
            prio = np.empty(n)
            prio[list(order)] = np.arange(n)
            sol = simulate_placement(problem, device, prio)
            best = min(best, float(np.max(sol.start + problem.time[np.arange(n), device])))
    return best
