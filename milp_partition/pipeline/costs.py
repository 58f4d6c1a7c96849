"""The cost model of the pipeline problem, as arrays shared by formulations and heuristics.

The independent verifier (:mod:`milp_partition.verifiers.pipeline`) does **not** use this
module: it recomputes every quantity from the graph and the cluster, so a bug
here cannot hide by agreeing with itself.

Definitions
-----------
- Time of node v on device d: ``node.time_on(kind(d))``; a node may not run on a
  device whose kind it does not allow.
- Transfer time of an edge: its ``transfer_time`` if given, else the cluster link's
  ``latency_s + bytes / bandwidth_bytes_per_s`` converted to the graph's time unit;
  times two when backward transfers are counted (gradient back along the edge).
- Output transfer time of node u, ``out_transfer[u]``: the largest transfer time over
  u's out-edges.  A device pays it once for each node u it sends to, or receives
  from, another device (once per source node and direction, not per edge).  In the
  Tarnawski files all out-edges of a node carry the same cost, so this is that cost.
- With ``messages="per_edge"`` (an imported graph, :mod:`milp_partition.costmodel.messages`) every crossing
  edge is its own message: :func:`per_edge_graph` gives each edge of a node with several out-edges a relay node
  of no time and no bytes, colocated with its source, so that the rule above (once per source node) prices
  each edge once; the chain solves that graph and drops the relay nodes from its splits.
- Stage order of a 1F1B pipeline, :func:`stage_order_pairs`: activations flow to later
  stages and gradients to earlier ones, so an edge between two forward nodes may not run
  to an earlier accelerator, an edge between two backward nodes may not run to a later
  one, and an edge between a forward and a backward node is not ordered (an imported
  training graph ties each backward node to its forward node by a colocation group).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from milp_partition.errors import InputError
from milp_partition.graph import TIME_UNIT_SECONDS, Edge, Graph, Node
from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution


def edge_transfer_time(edge: Edge, problem: PipelineProblem, twice: bool | None = None) -> float:
    """Transfer time of ``edge`` in the graph's time unit (see module docstring).

    ``twice``: whether transfers count twice, :func:`backward_transfers` when ``None`` (an O(N) scan: callers that
    loop over edges pass it, computed once).
    """
    graph = problem.graph
    if edge.transfer_time is not None:
        t = float(edge.transfer_time)
    else:
        link = problem.cluster.link
        if link.latency_s == 0 and np.isinf(link.bandwidth_bytes_per_s):
            t = 0.0
        else:
            unit = TIME_UNIT_SECONDS.get(graph.time_unit)
            if unit is None:
                raise InputError(
                    f"edge {edge.source!r} -> {edge.target!r} has no transfer_time and the graph's time unit "
                    f"{graph.time_unit!r} cannot be converted from the link's seconds; give transfer times or a time unit",
                    source=problem.source or None,
                )
            t = link.transfer_seconds(edge.bytes) / unit
    if twice is None:
        twice = backward_transfers(problem)
    return t * (2.0 if twice else 1.0)


def backward_transfers(problem: PipelineProblem) -> bool:
    """Whether derived transfers are counted twice (see :class:`PipelineSettings`)."""
    flag = problem.settings.backward_transfers
    if flag is not None:
        return flag
    nodes = problem.graph.nodes
    return any(n.backward_time > 0 and not n.is_backward for n in nodes) and not any(n.is_backward for n in nodes)


@dataclass(frozen=True)
class PipelineCosts:
    """Arrays of one :class:`PipelineProblem`, indexed by node position and device position.

    Attributes
    ----------
    node_time
        ``(n, D)`` time of node v on device d (0 where not allowed).
    allowed
        ``(n, D)`` whether node v may run on device d.
    out_transfer
        ``(n,)`` output transfer time of each node.
    is_cpu
        ``(D,)`` True for host CPU cores (they pay no transfer time).
    memory_capacity
        ``(D,)`` capacity in bytes, -1 for unbounded.
    param_bytes, activation_bytes, other_bytes
        ``(n,)`` integer byte counts.
    colocation_class
        ``(n,)`` class index; nodes of one class share a device.
    forward
        ``(n,)`` True for forward nodes (the contiguity rule applies to them).
    """

    node_time: np.ndarray
    allowed: np.ndarray
    out_transfer: np.ndarray
    is_cpu: np.ndarray
    memory_capacity: np.ndarray
    param_bytes: np.ndarray
    activation_bytes: np.ndarray
    other_bytes: np.ndarray
    colocation_class: np.ndarray
    forward: np.ndarray

    @property
    def static_bytes(self) -> np.ndarray:
        return self.param_bytes + self.activation_bytes + self.other_bytes


def pipeline_costs(problem: PipelineProblem) -> PipelineCosts:
    """Build the :class:`PipelineCosts` of ``problem``."""
    graph: Graph = problem.graph
    kinds = problem.device_kinds
    n = len(graph.nodes)
    # one column per kind, taken for its devices: O(N * kinds) Python work, not O(N * D)
    distinct = list(dict.fromkeys(kinds))
    kind_allowed = np.zeros((n, len(distinct)), dtype=bool)
    kind_time = np.zeros((n, len(distinct)))
    for j, kind in enumerate(distinct):
        kind_allowed[:, j] = [node.can_run_on(kind) for node in graph.nodes]
        kind_time[:, j] = [node.time_on(kind) if ok else 0.0 for node, ok in zip(graph.nodes, kind_allowed[:, j].tolist())]
    column = np.array([distinct.index(k) for k in kinds], dtype=np.int64) if distinct else np.zeros(0, dtype=np.int64)
    allowed = kind_allowed[:, column]
    node_time = kind_time[:, column]
    out_transfer = np.zeros(n)
    index = graph.index
    twice = backward_transfers(problem)  # once, not once per edge: O(N + E) in all
    for edge in graph.edges:
        u = index[edge.source]
        out_transfer[u] = max(out_transfer[u], edge_transfer_time(edge, problem, twice))
    capacity = np.array([-1 if m is None else m for m in problem.device_memory_bytes], dtype=np.int64)
    return PipelineCosts(
        node_time=node_time,
        allowed=allowed,
        out_transfer=out_transfer,
        is_cpu=np.array([k == "cpu" for k in kinds], dtype=bool),
        memory_capacity=capacity,
        param_bytes=np.array([nd.param_bytes for nd in graph.nodes], dtype=np.int64),
        activation_bytes=np.array([nd.activation_bytes for nd in graph.nodes], dtype=np.int64),
        other_bytes=np.array([nd.other_bytes for nd in graph.nodes], dtype=np.int64),
        colocation_class=colocation_classes(graph),
        forward=np.array([not nd.is_backward for nd in graph.nodes], dtype=bool),
    )


def class_times(costs: PipelineCosts) -> tuple[np.ndarray, np.ndarray]:
    """``(allowed, time)``, each ``(C, D)``: whether every node of colocation class c may run on device d, and their
    summed time there (classes in index order)."""
    num_classes = int(costs.colocation_class.max(initial=-1)) + 1
    num_devices = costs.node_time.shape[1]
    if num_classes == len(costs.colocation_class):  # no colocation group: each node is its class, in order
        return costs.allowed, costs.node_time
    time = np.zeros((num_classes, num_devices))
    np.add.at(time, costs.colocation_class, costs.node_time)
    barred = np.zeros((num_classes, num_devices), dtype=np.int64)
    np.add.at(barred, costs.colocation_class, (~costs.allowed).astype(np.int64))
    return barred == 0, time


def load_bound(problem: PipelineProblem) -> float:
    """:func:`time_lower_bound` of ``problem`` from one column per device kind (O(N * kinds), not O(N * D): a
    cluster of thousands of identical devices has one column)."""
    graph = problem.graph
    kinds = list(dict.fromkeys(problem.device_kinds))
    cls = colocation_classes(graph)
    num_classes = int(cls.max(initial=-1)) + 1
    allowed = np.ones((num_classes, len(kinds)), dtype=bool)
    time = np.zeros((num_classes, len(kinds)))
    for j, kind in enumerate(kinds):
        can = np.array([node.can_run_on(kind) for node in graph.nodes], dtype=bool)
        times = np.array([node.time_on(kind) if ok else 0.0 for node, ok in zip(graph.nodes, can.tolist())])
        np.add.at(time[:, j], cls, times)
        np.logical_and.at(allowed[:, j], cls, can)
    return time_lower_bound(allowed, time, len(problem.device_kinds))


def time_lower_bound(class_allowed: np.ndarray, class_time: np.ndarray, num_devices: int | None = None) -> float:
    r"""A proven lower bound of the time per sample: :math:`L = \max(\max_c f_c, \sum_c f_c / |D|)`.

    :math:`f_c` is class c's time on its fastest allowed device.  Every class runs somewhere, so some device's
    load is at least :math:`f_c`; the loads (transfers only add to them) sum to at least :math:`\sum_c f_c`, so
    the largest is at least the mean.  ``inf`` when a class may run nowhere (no assignment exists).
    ``num_devices``: |D| where the columns are fewer than the devices (one column per kind); else one per device.
    """
    if class_time.size == 0:
        return 0.0
    fastest = np.where(class_allowed, class_time, np.inf).min(axis=1)
    devices = class_time.shape[1] if num_devices is None else num_devices
    return max(float(fastest.max(initial=0.0)), float(fastest.sum()) / max(devices, 1))


def stage_order_pairs(src: np.ndarray, dst: np.ndarray, forward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Node pairs ``(first[k], second[k])`` where, under 1F1B, ``first[k]`` may not be on a later accelerator than
    ``second[k]``: each edge between forward nodes as it is, each edge between backward nodes reversed."""
    fwd = forward[src] & forward[dst]
    bwd = ~forward[src] & ~forward[dst]
    return np.concatenate((src[fwd], dst[bwd])), np.concatenate((dst[fwd], src[bwd]))


def colocation_classes(graph: Graph) -> np.ndarray:
    """Class index per node: nodes of one ``colocation_group`` share a class, others are alone."""
    groups: dict[str, int] = {}
    out = np.empty(len(graph.nodes), dtype=np.int64)
    next_class = 0
    for v, node in enumerate(graph.nodes):
        if node.colocation_group is None:
            out[v] = next_class
            next_class += 1
        else:
            if node.colocation_group not in groups:
                groups[node.colocation_group] = next_class
                next_class += 1
            out[v] = groups[node.colocation_group]
    return out


#: Suffix of a relay node's id (:func:`per_edge_graph`).
RELAY_SUFFIX = "#message"


def per_edge_graph(problem: PipelineProblem) -> tuple[PipelineProblem, frozenset[str]]:
    """``problem`` under ``messages="per_edge"`` as a ``"per_source"`` problem that prices every split the same.

    Each edge ``(u, v)`` of a node ``u`` with two or more out-edges becomes ``u -> r -> v`` through a relay node
    ``r`` (no time, no bytes, ``u``'s kinds and direction, in ``u``'s colocation group): ``u -> r`` costs nothing
    and never crosses, ``r -> v`` carries the edge's bytes and transfer time, so "once per source node" is once per
    edge.  Paths, convexity and the 1F1B stage order are those of the edge (``r`` sits where ``u`` does).  A node
    with one out-edge is priced per edge already.  Returns the problem and the relay nodes' ids
    (:func:`drop_relays` lifts a split back).
    """
    graph = problem.graph
    out_degree: dict[str, int] = {}
    for e in graph.edges:
        out_degree[e.source] = out_degree.get(e.source, 0) + 1
    taken = {n.id for n in graph.nodes}
    groups = {n.colocation_group for n in graph.nodes if n.colocation_group is not None}
    group_of: dict[str, str] = {}
    nodes: list[Node] = []
    for n in graph.nodes:
        if out_degree.get(n.id, 0) > 1 and n.colocation_group is None:
            name, k = f"{n.id}{RELAY_SUFFIX}", 1
            while name in groups:
                name, k = f"{n.id}{RELAY_SUFFIX}{k}", k + 1
            groups.add(name)
            n = replace(n, colocation_group=name)
        group_of[n.id] = n.colocation_group or ""
        nodes.append(n)
    kinds = {n.id: n.allowed_kinds for n in graph.nodes}
    backward = {n.id: n.is_backward for n in graph.nodes}
    relays: set[str] = set()
    edges: list[Edge] = []
    for e in graph.edges:
        if out_degree[e.source] < 2:
            edges.append(e)
            continue
        rid, k = f"{e.source}->{e.target}{RELAY_SUFFIX}", 1
        while rid in taken:
            rid, k = f"{e.source}->{e.target}{RELAY_SUFFIX}{k}", k + 1
        taken.add(rid)
        relays.add(rid)
        nodes.append(
            Node(
                rid,
                name=rid,
                op_type="message",
                colocation_group=group_of[e.source],
                allowed_kinds=kinds[e.source],
                is_backward=backward[e.source],
            )
        )
        edges += [Edge(e.source, rid, 0, 0.0), Edge(rid, e.target, e.bytes, e.transfer_time)]
    expanded = Graph(tuple(nodes), tuple(edges), name=graph.name, time_unit=graph.time_unit)
    settings = replace(problem.settings, messages="per_source")
    return replace(problem, graph=expanded, settings=settings), frozenset(relays)


def drop_relays(solution: PipelineSolution, relays: frozenset[str]) -> PipelineSolution:
    """A split of :func:`per_edge_graph`'s problem as a split of the original graph (its relay nodes left out)."""
    return PipelineSolution({v: d for v, d in solution.assignment.items() if v not in relays})
