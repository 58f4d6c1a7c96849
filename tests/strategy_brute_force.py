"""Brute force for tiny strategy problems, with no memory limit, the static or the liveness memory model.

Every assignment is enumerated (vectorized over all of them at once) and costed by the
problem's definition (:class:`~milp_partition.strategy.problem.StrategyProblem`), written
here a third time: it shares no code with the formulation, the DPs or the verifier.
Exponential: ``prod |C_v|`` assignments.
"""

from __future__ import annotations

import math

import numpy as np

from milp_partition.strategy.problem import StrategyProblem, StrategySolution


def schedule(problem: StrategyProblem) -> list[int]:
    """The liveness schedule: repeatedly run the ready layer listed first (Kahn on the node order)."""
    index = problem.index
    preds: list[set[int]] = [set() for _ in problem.nodes]
    for e in problem.edges:
        preds[index[e.target]].add(index[e.source])
    order: list[int] = []
    done: set[int] = set()
    while len(order) < len(problem.nodes):
        v = next(v for v in range(len(problem.nodes)) if v not in done and preds[v] <= done)
        order.append(v)
        done.add(v)
    return order


def _peak_bytes(problem: StrategyProblem, grid: np.ndarray) -> np.ndarray:
    """Per-device memory of every assignment (rows of ``grid``) under the problem's memory model."""
    n = len(problem.nodes)
    mem = [np.asarray(nd.memory_bytes, dtype=float)[grid[:, v]] for v, nd in enumerate(problem.nodes)]
    if problem.memory_model == "static":
        return np.sum(mem, axis=0)
    act = [
        np.asarray(nd.activation_bytes if nd.activation_bytes is not None else np.zeros(len(nd.configs)), dtype=float)[grid[:, v]]
        for v, nd in enumerate(problem.nodes)
    ]
    index = problem.index
    order = schedule(problem)
    step = {v: t for t, v in enumerate(order)}
    last = dict(step)
    for e in problem.edges:
        s, t = index[e.source], index[e.target]
        last[s] = max(last[s], step[t])
    resident = np.sum([mem[v] - act[v] for v in range(n)], axis=0)
    peaks = [resident + sum(act[v] for v in range(n) if step[v] <= t <= last[v]) for t in range(n)]
    return np.max(peaks, axis=0)


def brute_force_strategy(problem: StrategyProblem) -> tuple[float, StrategySolution | None]:
    """The optimum and one optimal choice; ``(inf, None)`` when no assignment fits the memory limit."""
    index = problem.index
    sizes = [len(nd.configs) for nd in problem.nodes]
    grid = np.stack(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij"), axis=-1).reshape(-1, len(sizes))
    total = np.zeros(grid.shape[0])
    for v, nd in enumerate(problem.nodes):
        total += np.asarray(nd.cost, dtype=float)[grid[:, v]]
    for e in problem.edges:
        total += np.asarray(e.cost, dtype=float)[grid[:, index[e.source]], grid[:, index[e.target]]]
    if problem.memory_limit_bytes is not None:
        total[_peak_bytes(problem, grid) > problem.memory_limit_bytes] = math.inf
    best = int(np.argmin(total))
    if not math.isfinite(total[best]):
        return math.inf, None
    return float(total[best]), StrategySolution({nd.id: nd.configs[grid[best, v]] for v, nd in enumerate(problem.nodes)})
