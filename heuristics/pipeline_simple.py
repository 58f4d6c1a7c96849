"""Two simple pipeline splits used as baselines: PipeDream-style equal split and a memory-aware greedy.

Both cut one topological order of the forward nodes into consecutive intervals,
one per accelerator in cluster order (an interval of a topological order is
convex, so the forward nodes of each accelerator are contiguous).  A node joins
the interval of its colocation group's first forward node (backward nodes follow
their forward node); nodes that no accelerator may run go to the least-loaded CPU
core.  Neither looks at transfers; the verifier scores the result.

``equal_split``
    PipeDream's equal-time starting point: accelerator j takes the nodes whose
    cumulative compute time (midpoint of the node) falls in ``[j T / k, (j + 1) T / k)``,
    T the total accelerator time.  Memory is ignored (the verifier may reject the split).
``greedy_fill``
    Walks the order and keeps a node on the current accelerator while its load stays
    within ``T / k`` of the remaining-work share and its memory fits; otherwise moves
    on.  The last accelerator takes whatever is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from milp_partition.cluster import CPU_KIND
from milp_partition.errors import MilpPartitionError
from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution


class PipelineHeuristicError(MilpPartitionError):
    """A simple split cannot be built (e.g. a node that no device may run)."""


def _units(problem: PipelineProblem) -> tuple[list[list[str]], list[str]]:
    """Groups of nodes that move together, in topological order; and the nodes no accelerator may run.

    A unit is a maximal run of the topological order closed under colocation: the span
    from a group's first to its last forward node is merged with every span it overlaps,
    so that cutting the order between units keeps each group whole and each device's
    forward nodes an interval of the order (hence convex).  Backward nodes go with their
    group, or without one with the unit of the forward node before them.
    """
    graph = problem.graph
    order = [graph.nodes[i] for i in graph.arrays.topo_order.tolist()]
    kinds = {d.kind for d in problem.cluster.devices}
    cpu = [n.id for n in order if not any(n.can_run_on(k) for k in kinds)]
    on_cpu = set(cpu)
    forward = [n for n in order if not n.is_backward and n.id not in on_cpu]
    pos = {n.id: i for i, n in enumerate(forward)}
    span: dict[str, list[int]] = {}
    for n in forward:
        if n.colocation_group is not None:
            lo_hi = span.setdefault(n.colocation_group, [pos[n.id], pos[n.id]])
            lo_hi[1] = pos[n.id]
    reach = list(range(len(forward)))  # reach[i]: last position that must share a unit with i
    for lo, hi in span.values():
        reach[lo] = max(reach[lo], hi)
    units: list[list[str]] = []
    unit_of_pos: list[int] = []
    i = 0
    while i < len(forward):
        end = reach[i]
        j = i
        while j <= end:
            end = max(end, reach[j])
            j += 1
        units.append([n.id for n in forward[i:j]])
        unit_of_pos += [len(units) - 1] * (j - i)
        i = j
    unit_of_group = {g: unit_of_pos[lo] for g, (lo, _) in span.items()}
    last = 0
    for n in order:
        if n.id in on_cpu:
            continue
        if not n.is_backward:
            last = unit_of_pos[pos[n.id]]
            continue
        g = n.colocation_group
        units[unit_of_group[g] if g in unit_of_group else last].append(n.id)
    return [u for u in units if u], cpu


def _node_time(problem: PipelineProblem, node_id: str) -> float:
    kind = problem.cluster.devices[0].kind
    return problem.graph.node(node_id).time_on(kind)


def _node_bytes(problem: PipelineProblem, node_id: str) -> int:
    nd = problem.graph.node(node_id)
    return nd.param_bytes + nd.activation_bytes + nd.other_bytes


def _place_cpu(problem: PipelineProblem, cpu: list[str], assignment: dict[str, str]) -> None:
    cores = problem.cluster.host_cpu_cores
    if cpu and cores == 0:
        raise PipelineHeuristicError(f"node {cpu[0]!r} cannot run on an accelerator and the cluster has no CPU cores")
    load = [0.0] * cores
    for node_id in cpu:
        k = min(range(cores), key=load.__getitem__)
        assignment[node_id] = f"{CPU_KIND}{k}"
        load[k] += problem.graph.node(node_id).time_on(CPU_KIND)


def equal_split(problem: PipelineProblem) -> PipelineSolution:
    """PipeDream-style equal split of compute time over the accelerators (see the module docstring)."""
    units, cpu = _units(problem)
    devices = problem.cluster.accelerator_ids
    k = len(devices)
    if k == 0:
        raise PipelineHeuristicError("the cluster has no accelerators")
    times = [sum(_node_time(problem, v) for v in unit) for unit in units]
    total = sum(times)
    assignment: dict[str, str] = {}
    before = 0.0
    for unit, t in zip(units, times):
        mid = before + t / 2
        j = min(k - 1, int(mid / total * k)) if total > 0 else 0
        for v in unit:
            assignment[v] = devices[j]
        before += t
    _place_cpu(problem, cpu, assignment)
    return PipelineSolution(assignment)


def greedy_fill(problem: PipelineProblem) -> PipelineSolution:
    """Memory-aware greedy fill of the accelerators in order (see the module docstring)."""
    units, cpu = _units(problem)
    devices = list(problem.cluster.devices)
    k = len(devices)
    if k == 0:
        raise PipelineHeuristicError("the cluster has no accelerators")
    times = [sum(_node_time(problem, v) for v in unit) for unit in units]
    sizes = [sum(_node_bytes(problem, v) for v in unit) for unit in units]
    left = sum(times)
    assignment: dict[str, str] = {}
    j, load, used = 0, 0.0, 0
    for unit, t, b in zip(units, times, sizes):
        cap = devices[j].memory_bytes
        share = left / (k - j) if k > j else left
        fits = cap is None or used + b <= cap
        if j < k - 1 and load > 0 and (load + t > share or not fits):
            left -= load
            j, load, used = j + 1, 0.0, 0
        for v in unit:
            assignment[v] = devices[j].id
        load += t
        used += b
    _place_cpu(problem, cpu, assignment)
    return PipelineSolution(assignment)


def timed(fn: Callable[[PipelineProblem], PipelineSolution], problem: PipelineProblem) -> tuple[PipelineSolution, float]:
    """``fn(problem)`` and its wall-clock seconds."""
    t0 = time.perf_counter()
    return fn(problem), time.perf_counter() - t0
