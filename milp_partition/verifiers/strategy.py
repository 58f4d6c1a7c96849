"""Independent verifier of the strategy problem: checks a choice of configurations and computes its cost.

Shares no code with :mod:`milp_partition.formulations` or :mod:`milp_partition.heuristics`:
the objective (node costs plus one matrix entry per edge) and the memory (static sum,
or the liveness replay) are recomputed from the problem's tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from milp_partition.strategy.problem import StrategyProblem, StrategySolution


@dataclass(frozen=True)
class StrategyReport:
    """What the verifier found for a strategy solution.

    Attributes
    ----------
    objective
        Sum of the chosen node costs plus, for each edge once, the chosen matrix entry.
    node_cost, edge_cost
        The two parts of the objective.
    memory_bytes
        Sum of the chosen configurations' memory (0 when the instance has none).
    """

    feasible: bool
    violations: list[str] = field(default_factory=list)
    objective: float = math.inf
    node_cost: float = 0.0
    edge_cost: float = 0.0
    memory_bytes: float = 0.0


def verify_strategy(problem: StrategyProblem, solution: StrategySolution) -> StrategyReport:
    """Check a strategy ``solution`` (every layer one of its configurations; memory within the limit) and cost it."""
    nodes = {n.id: n for n in problem.nodes}
    choice = dict(solution.choice)
    bad: list[str] = []
    picked: dict[str, int] = {}
    for node_id, node in nodes.items():
        if node_id not in choice:
            bad.append(f"layer {node_id!r} has no configuration")
            continue
        names = list(node.configs)
        if choice[node_id] not in names:
            bad.append(f"layer {node_id!r}: {choice[node_id]!r} is not one of its configurations")
            continue
        picked[node_id] = names.index(choice[node_id])
    for node_id in choice:
        if node_id not in nodes:
            bad.append(f"the solution names unknown layer {node_id!r}")
    if bad:
        return StrategyReport(False, bad)
    node_cost = math.fsum(float(nodes[v].cost[i]) for v, i in picked.items())
    edge_cost = math.fsum(float(e.cost[picked[e.source], picked[e.target]]) for e in problem.edges)
    memory = 0.0
    where_peak = ""
    if all(n.memory_bytes is not None for n in nodes.values()):
        if problem.memory_model == "liveness":
            memory, where_peak = _live_peak(problem, picked)
        else:
            memory = math.fsum(_entry(nodes[v].memory_bytes, i) for v, i in picked.items())
    limit = problem.memory_limit_bytes
    if limit is not None:
        if any(n.memory_bytes is None for n in nodes.values()):
            bad.append("a memory limit is set but some layers carry no memory per configuration")
        elif memory > limit:
            bad.append(f"the chosen configurations need {memory:.0f} bytes per device{where_peak}, over the limit of {limit}")
    total = node_cost + edge_cost
    if not (math.isfinite(total) and math.isfinite(memory)):
        bad.append(
            f"cost {total!r}, memory {memory!r}: not finite numbers (the instance holds a NaN, an infinity or values "
            "whose sums overflow)"
        )
    return StrategyReport(not bad, bad, total if not bad else math.inf, node_cost, edge_cost, memory)


def _live_peak(problem: StrategyProblem, picked: dict[str, int]) -> tuple[float, str]:
    """Peak per-device memory under the liveness model, replaying the schedule step by step.

    The schedule runs, at each step, the first layer in the node list whose
    producers have all run; resident memory (``memory_bytes - activation_bytes``)
    counts throughout, an output activation from its producer's step through its
    last consumer's step.
    """
    nodes = {n.id: n for n in problem.nodes}
    producers: dict[str, set[str]] = {v: set() for v in nodes}
    consumers: dict[str, set[str]] = {v: set() for v in nodes}
    for e in problem.edges:
        producers[e.target].add(e.source)
        consumers[e.source].add(e.target)
    resident = 0.0
    activation: dict[str, float] = {}
    for v, i in picked.items():
        act = _entry(nodes[v].activation_bytes, i)
        activation[v] = act
        resident += _entry(nodes[v].memory_bytes, i) - act
    done: set[str] = set()
    waiting: dict[str, set[str]] = {}  # produced activations -> consumers not yet run
    peak, peak_layer = resident, ""
    while len(done) < len(nodes):
        runnable = next((v for v in nodes if v not in done and producers[v] <= done), None)
        if runnable is None:
            raise ValueError("the layer graph has a cycle; the liveness model needs an acyclic graph")
        done.add(runnable)
        waiting[runnable] = set(consumers[runnable])
        now = resident + math.fsum(activation[v] for v in waiting)
        if now > peak:
            peak, peak_layer = now, runnable
        for v in [v for v in waiting if runnable in waiting[v] or v == runnable]:
            waiting[v].discard(runnable)
            if not waiting[v]:
                del waiting[v]
    return peak, (f" at layer {peak_layer!r}" if peak_layer else "")


def _entry(table: np.ndarray | None, i: int) -> float:
    """Entry i of a per-configuration table; 0 when the layer has no such table."""
    return 0.0 if table is None else float(table[i])
