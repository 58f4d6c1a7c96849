"""Independent verifier: checks a solution against the problem's definition and computes its objective.

This module shares no code with :mod:`formulations`, :mod:`heuristics` or
:mod:`milp_partition.pipeline.costs`: it recomputes every time, transfer and memory
figure from the graph and the cluster, so a bug in a formulation cannot hide
by agreeing with itself.  Every result the tool reports has passed through it.

The pipeline problem (as in ``shared/benchmarks/README.md``): every node on one
device it may run on; nodes of one colocation group together; on each accelerator
the memory within capacity; with ``contiguous``, no path of forward nodes
u -> w -> v with u, v on one device and w off it; the load of an accelerator is
its nodes' time plus, once per source node and direction, the output transfer
time of every node sending to it or from it across devices (with ``messages="per_edge"``,
an imported graph's: the transfer time of every edge it sends or receives across
devices, :mod:`milp_partition.costmodel.messages`); a CPU core's load is
its nodes' time; with the 1F1B memory model (stage i of s = the i-th accelerator
keeps s - i micro-batches of activations) an edge between forward nodes never runs
to an earlier accelerator and one between backward nodes never to a later one.
The objective is the largest load (time per sample), or with
``objective="memory"`` the largest accelerator memory, subject to every load
within ``max_time_per_sample``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from milp_partition.graph import Node
from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution

#: Relative slack when comparing a load with the time bound of the memory objective.
TIME_BOUND_REL_TOL = 1e-9

_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class PipelineReport:
    """What the verifier found.

    Attributes
    ----------
    feasible
        True when no constraint is violated.
    violations
        One line per violated constraint, naming nodes and devices.
    objective
        Time per sample (``objective="time"``) or peak accelerator memory in bytes
        (``objective="memory"``); ``inf`` when infeasible.
    time_per_sample
        The largest device load, in the graph's time unit.
    peak_memory_bytes
        The largest accelerator memory.
    loads, memory_bytes
        Per device id.
    """

    feasible: bool
    violations: list[str] = field(default_factory=list)
    objective: float = math.inf
    time_per_sample: float = math.inf
    peak_memory_bytes: float = 0.0
    loads: dict[str, float] = field(default_factory=dict)
    memory_bytes: dict[str, float] = field(default_factory=dict)


def verify_pipeline(problem: PipelineProblem, solution: PipelineSolution) -> PipelineReport:
    """Check ``solution`` against ``problem`` and compute its objective."""
    graph, cluster, settings = problem.graph, problem.cluster, problem.settings
    accel = {dev.id: dev for dev in cluster.devices}
    cpus = {f"cpu{i}" for i in range(cluster.host_cpu_cores)}
    kind_of = {**{d: dev.kind for d, dev in accel.items()}, **dict.fromkeys(cpus, "cpu")}
    nodes = {nd.id: nd for nd in graph.nodes}
    where = dict(solution.assignment)

    # every node on one known device it may run on
    bad = _assignment_violations(nodes, where, kind_of)
    if bad:
        return PipelineReport(False, bad)

    # colocation groups
    group_device: dict[str, tuple[str, str]] = {}
    for nd in graph.nodes:
        if nd.colocation_group is None:
            continue
        first = group_device.setdefault(nd.colocation_group, (nd.id, where[nd.id]))
        if first[1] != where[nd.id]:
            bad.append(
                f"colocation group {nd.colocation_group!r} is split: {first[0]!r} on {first[1]!r}, {nd.id!r} on {where[nd.id]!r}"
            )

    succ: dict[str, list[str]] = {nid: [] for nid in nodes}
    pred: dict[str, list[str]] = {nid: [] for nid in nodes}
    for e in graph.edges:
        succ[e.source].append(e.target)
        pred[e.target].append(e.source)

    # contiguity: for each device, forward nodes reachable from it through forward edges
    if settings.contiguous:
        forward = {nd.id for nd in graph.nodes if not nd.is_backward}
        position = _forward_positions(forward, succ)
        held: dict[str, set[str]] = {}
        for nid in forward:
            held.setdefault(where[nid], set()).add(nid)
        for dev in kind_of:
            bad.extend(_convexity_violations(dev, held.get(dev, set()), forward, succ, position))

    # stage order of a 1F1B pipeline: activations to later stages, gradients to earlier ones
    positions = {dev.id: i for i, dev in enumerate(cluster.devices)}
    if settings.memory_model == "1f1b":
        bad.extend(_stage_order_violations(graph.edges, nodes, where, positions))

    # memory
    memory = _memory_use(problem, where, positions)
    for dev, used in memory.items():
        cap = accel[dev].memory_bytes
        if cap is not None and used > cap:
            bad.append(f"device {dev!r} holds {used:.0f} bytes, over its {cap} bytes")

    # loads
    loads = _loads(problem, nodes, where, kind_of, succ)
    time_per_sample = max(loads.values(), default=0.0)
    peak = max(memory.values(), default=0.0)

    if settings.objective == "memory":
        limit = float(settings.max_time_per_sample or 0.0)
        for dev, load in loads.items():
            if load > limit * (1 + TIME_BOUND_REL_TOL) + 1e-12:
                bad.append(f"device {dev!r} has load {load:.9g}, over the time bound {limit:.9g}")
        objective = peak
    else:
        objective = time_per_sample
    if not (math.isfinite(objective) and math.isfinite(time_per_sample) and math.isfinite(peak)):
        bad.append(
            f"time per sample {time_per_sample!r}, peak memory {peak!r}: not finite numbers (the instance holds a NaN, "
            "an infinity or values whose sums overflow)"
        )
    return PipelineReport(
        feasible=not bad,
        violations=bad,
        objective=objective if not bad else math.inf,
        time_per_sample=time_per_sample,
        peak_memory_bytes=peak,
        loads=loads,
        memory_bytes=memory,
    )


def _stage_order_violations(edges: tuple, nodes: dict, where: dict[str, str], positions: dict[str, int]) -> list[str]:
    """1F1B's order: an edge between forward nodes may not run to an earlier accelerator, an edge between backward
    nodes to a later one; an edge between a forward and a backward node is not ordered."""
    out = []
    for e in edges:
        a, b = where[e.source], where[e.target]
        if a not in positions or b not in positions:
            continue
        backward = nodes[e.source].is_backward, nodes[e.target].is_backward
        if backward == (False, False) and positions[a] > positions[b]:
            out.append(f"forward edge {e.source!r} -> {e.target!r} goes back from stage {a!r} to earlier stage {b!r}")
        elif backward == (True, True) and positions[a] < positions[b]:
            out.append(f"backward edge {e.source!r} -> {e.target!r} goes from stage {a!r} on to later stage {b!r}")
    return out


def _assignment_violations(nodes: dict[str, Node], where: dict[str, str], kind_of: dict[str, str]) -> list[str]:
    """Every node on one known device whose kind it may run on: what is wrong (empty when nothing)."""
    bad: list[str] = []
    for node_id in nodes:
        if node_id not in where:
            bad.append(f"node {node_id!r} is not assigned to any device")
    for node_id, dev in where.items():
        if node_id not in nodes:
            bad.append(f"the solution names unknown node {node_id!r}")
        elif dev not in kind_of:
            bad.append(f"node {node_id!r} is on unknown device {dev!r}")
        else:
            allowed = nodes[node_id].allowed_kinds
            if allowed is not None and kind_of[dev] not in allowed:
                bad.append(f"node {node_id!r} may not run on {dev!r} (kind {kind_of[dev]!r}; allowed {list(allowed)})")
    return bad


def _memory_use(problem: PipelineProblem, where: dict[str, str], positions: dict[str, int]) -> dict[str, float]:
    """Bytes each accelerator holds (1F1B: optimizer state and the activations of the microbatches in flight)."""
    graph, settings = problem.graph, problem.settings
    stages = len(problem.cluster.devices)
    memory = dict.fromkeys(positions, 0.0)
    for nd in graph.nodes:
        dev = where[nd.id]
        if dev not in positions:
            continue
        if settings.memory_model == "1f1b":
            memory[dev] += math.ceil(
                settings.optimizer_state_factor * nd.param_bytes
                + (stages - positions[dev]) * nd.activation_bytes
                + nd.other_bytes
            )
        else:
            memory[dev] += nd.param_bytes + nd.activation_bytes + nd.other_bytes
    return memory


def _loads(
    problem: PipelineProblem,
    nodes: dict[str, Node],
    where: dict[str, str],
    kind_of: dict[str, str],
    succ: dict[str, list[str]],
) -> dict[str, float]:
    """Each device's time per sample: its nodes' compute plus the transfers it sends and receives."""
    graph = problem.graph
    accel = {dev.id for dev in problem.cluster.devices}
    out_time = {nid: 0.0 for nid in nodes}
    twice = _transfers_twice(problem)
    for e in graph.edges:
        out_time[e.source] = max(out_time[e.source], _transfer_time(problem, e.bytes, e.transfer_time, twice))
    loads = dict.fromkeys(kind_of, 0.0)
    for nd in graph.nodes:
        dev = where[nd.id]
        loads[dev] += nd.time_by_kind.get(kind_of[dev], nd.forward_time + nd.backward_time)
    if problem.settings.messages == "per_edge":
        for e in graph.edges:  # one message per crossing edge, paid by the sender and the receiver
            home, there = where[e.source], where[e.target]
            if home == there:
                continue
            cost = _transfer_time(problem, e.bytes, e.transfer_time, twice)
            for dev in (home, there):
                if dev in accel:
                    loads[dev] += cost
        return loads
    for u in nodes:
        cost = out_time[u]
        if cost == 0.0:
            continue
        home = where[u]
        receivers = {where[v] for v in succ[u]} - {home}
        if receivers and home in accel:
            loads[home] += cost  # outgoing, once per source node
        for dev in receivers:
            if dev in accel:
                loads[dev] += cost  # incoming, once per source node and receiving device
    return loads


def _transfers_twice(problem: PipelineProblem) -> bool:
    """Whether transfers count twice (gradient back along the edge): set, or a training graph without backward nodes."""
    twice = problem.settings.backward_transfers
    if twice is None:
        has_bwd_nodes = any(nd.is_backward for nd in problem.graph.nodes)
        twice = not has_bwd_nodes and any(nd.backward_time > 0 for nd in problem.graph.nodes)
    return twice


def _transfer_time(problem: PipelineProblem, nbytes: int, given: float | None, twice: bool) -> float:
    """Edge transfer time in the graph's unit: given, or latency + bytes / bandwidth (x2 for training)."""
    graph, link = problem.graph, problem.cluster.link
    if given is not None:
        t = float(given)
    elif link.latency_s == 0.0 and math.isinf(link.bandwidth_bytes_per_s):
        t = 0.0
    else:
        unit = _SECONDS.get(graph.time_unit)
        if unit is None:
            raise ValueError(f"cannot convert link seconds to time unit {graph.time_unit!r}")
        seconds = link.latency_s + (0.0 if math.isinf(link.bandwidth_bytes_per_s) else nbytes / link.bandwidth_bytes_per_s)
        t = seconds / unit
    return 2.0 * t if twice else t


def _forward_positions(forward: set[str], succ: dict[str, list[str]]) -> dict[str, int]:
    """Each forward node's position in a topological order of the forward edges (Kahn's); ``{}`` on a cycle."""
    indegree = dict.fromkeys(forward, 0)
    for u in forward:
        for v in succ[u]:
            if v in forward:
                indegree[v] += 1
    ready = [v for v, k in indegree.items() if k == 0]
    position: dict[str, int] = {}
    while ready:
        u = ready.pop()
        position[u] = len(position)
        for v in succ[u]:
            if v in forward:
                indegree[v] -= 1
                if indegree[v] == 0:
                    ready.append(v)
    return position if len(position) == len(forward) else {}


def _convexity_violations(
    dev: str, on: set[str], forward: set[str], succ: dict[str, list[str]], position: dict[str, int]
) -> list[str]:
    """Forward nodes off ``dev`` on a forward path between two of its nodes ``on``.

    A path only climbs in a topological ``position``, so a node past the device's last position reaches none of
    its nodes and is not explored (O(N + E) over all devices of a split in stages, not O(N * D)).
    """
    if not on:
        return []
    last = max(position[v] for v in on) if position else math.inf
    # reached = the forward nodes some node of `on` reaches through forward nodes (a start itself excluded)
    reached: set[str] = set()
    stack = [v for u in on for v in succ[u] if v in forward]
    while stack:
        w = stack.pop()
        if w in reached or (position and position[w] > last):
            continue
        reached.add(w)
        stack.extend(v for v in succ[w] if v in forward)
    out = []
    for w in reached - on:
        for v in succ[w]:
            if v in on:
                out.append(
                    f"device {dev!r} is not contiguous: forward node {w!r} is off it but lies on a path between its nodes (-> {v!r})"
                )
                break
        if len(out) >= 5:
            break
    return out
