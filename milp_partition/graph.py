"""The computational graph: operators or layers joined by tensors.

Plain frozen dataclasses for what a user reads and writes, and a NumPy view
(:class:`GraphArrays`) built once for what loops over thousands of nodes.
This module imports no solver, formulation or heuristic.

Units
-----
Times are in the graph's ``time_unit`` (``"ms"`` for PipeDream profiles,
``"unitless"`` where the source does not say, as in the Tarnawski files).
Memory is in whole bytes.  FLOPs are counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from milp_partition.errors import CycleError, InputError

#: Seconds per unit for the time units the tool knows; ``unitless`` has none.
TIME_UNIT_SECONDS: Mapping[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class Node:
    """One operator or layer.

    Attributes
    ----------
    id
        Unique identifier (a string; integer ids of other formats are kept as their decimal text).
    name, op_type
        Free text for people.
    forward_time, backward_time
        Compute time on an accelerator, in the graph's time unit.  A separate backward
        node (``is_backward``) keeps its time in ``backward_time``.
    time_by_kind
        Total time (forward plus backward) on a device kind, overriding the sum above
        for that kind (e.g. ``{"cpu": 6.96}``).
    flops
        Floating-point operations of forward plus backward, when known.
    param_bytes, activation_bytes, other_bytes
        Parameter memory, activation memory kept for the backward pass per micro-batch,
        and any other resident memory, in bytes.
    colocation_group
        Nodes sharing a group must run on the same device.
    allowed_kinds
        Device kinds that may run this node; ``None`` means every kind.
    is_backward
        True for a node of the backward pass; contiguity rules apply to forward nodes.
    """

    id: str
    name: str = ""
    op_type: str = ""
    forward_time: float = 0.0
    backward_time: float = 0.0
    time_by_kind: Mapping[str, float] = field(default_factory=dict)
    flops: float | None = None
    param_bytes: int = 0
    activation_bytes: int = 0
    other_bytes: int = 0
    colocation_group: str | None = None
    allowed_kinds: tuple[str, ...] | None = None
    is_backward: bool = False

    @property
    def total_time(self) -> float:
        """Forward plus backward time on an accelerator."""
        return self.forward_time + self.backward_time

    def time_on(self, kind: str) -> float:
        """Time of this node on a device of ``kind``."""
        return self.time_by_kind.get(kind, self.total_time)

    def can_run_on(self, kind: str) -> bool:
        """Whether a device of ``kind`` may run this node."""
        return self.allowed_kinds is None or kind in self.allowed_kinds


@dataclass(frozen=True)
class Edge:
    """A tensor from ``source`` to ``target``.

    Attributes
    ----------
    bytes
        Size of the tensor in bytes.
    transfer_time
        Time to move it between devices, in the graph's time unit; ``None`` means
        "derive it from the cluster's link (latency + bytes / bandwidth)".
    """

    source: str
    target: str
    bytes: int = 0
    transfer_time: float | None = None


@dataclass(frozen=True)
class Graph:
    """A directed acyclic graph of :class:`Node` joined by :class:`Edge`.

    Construct through :func:`make_graph` (or a reader in :mod:`milp_partition.io`),
    which validates; the constructor itself trusts its arguments.
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    name: str = ""
    time_unit: str = "unitless"

    @cached_property
    def index(self) -> dict[str, int]:
        """Map from node id to its position in ``nodes``."""
        return {n.id: i for i, n in enumerate(self.nodes)}

    @cached_property
    def arrays(self) -> GraphArrays:
        """The NumPy view of this graph, built once."""
        return GraphArrays.from_graph(self)

    def node(self, node_id: str) -> Node:
        """The node with id ``node_id``."""
        return self.nodes[self.index[node_id]]

    @property
    def has_backward(self) -> bool:
        """True when the graph models a training step (backward time or backward nodes)."""
        return any(n.is_backward or n.backward_time > 0 for n in self.nodes)


@dataclass(frozen=True)
class GraphArrays:
    """Index-based view of a :class:`Graph` for fast loops.

    Attributes
    ----------
    n
        Number of nodes.
    src, dst
        Edge endpoints as node positions.
    succ_ptr, succ_idx
        CSR successor lists: successors of ``v`` are ``succ_idx[succ_ptr[v]:succ_ptr[v+1]]``.
    pred_ptr, pred_idx
        CSR predecessor lists.
    topo_order
        A topological order of node positions (ties broken by position).
    """

    n: int
    src: np.ndarray
    dst: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    topo_order: np.ndarray

    @staticmethod
    def from_graph(graph: Graph) -> GraphArrays:
        index = graph.index
        n = len(graph.nodes)
        src = np.array([index[e.source] for e in graph.edges], dtype=np.int64)
        dst = np.array([index[e.target] for e in graph.edges], dtype=np.int64)
        succ_ptr, succ_idx = _csr(src, dst, n)
        pred_ptr, pred_idx = _csr(dst, src, n)
        order = _topological_order(n, succ_ptr, succ_idx, dst)
        if order is None:  # pragma: no cover - make_graph rejects cycles first
            raise ValueError("graph has a cycle")
        return GraphArrays(n, src, dst, succ_ptr, succ_idx, pred_ptr, pred_idx, np.array(order, dtype=np.int64))

    def successors(self, v: int) -> np.ndarray:
        return self.succ_idx[self.succ_ptr[v] : self.succ_ptr[v + 1]]

    def predecessors(self, v: int) -> np.ndarray:
        return self.pred_idx[self.pred_ptr[v] : self.pred_ptr[v + 1]]


def _csr(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((b, a))
    counts = np.bincount(a, minlength=n) if len(a) else np.zeros(n, dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, b[order].astype(np.int64)


def _topological_order(n: int, succ_ptr: np.ndarray, succ_idx: np.ndarray, dst: np.ndarray) -> list[int] | None:
    indegree = np.bincount(dst, minlength=n) if len(dst) else np.zeros(n, dtype=np.int64)
    indegree = indegree.tolist()
    import heapq

    ready = [v for v in range(n) if indegree[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for w in succ_idx[succ_ptr[v] : succ_ptr[v + 1]].tolist():
            indegree[w] -= 1
            if indegree[w] == 0:
                heapq.heappush(ready, w)
    return order if len(order) == n else None


def find_cycle(node_ids: list[str], edges: list[tuple[str, str]]) -> list[str] | None:
    """Return the node ids of one directed cycle, or ``None`` if the graph is acyclic."""
    succ: dict[str, list[str]] = {v: [] for v in node_ids}
    for a, b in edges:
        succ[a].append(b)
    color = dict.fromkeys(node_ids, 0)  # 0 new, 1 on stack, 2 done
    parent: dict[str, str] = {}
    for root in node_ids:
        if color[root]:
            continue
        stack = [(root, iter(succ[root]))]
        color[root] = 1
        while stack:
            v, it = stack[-1]
            for w in it:
                if color[w] == 0:
                    color[w] = 1
                    parent[w] = v
                    stack.append((w, iter(succ[w])))
                    break
                if color[w] == 1:
                    cycle = [v]
                    while cycle[-1] != w:
                        cycle.append(parent[cycle[-1]])
                    return cycle[::-1]
            else:
                color[v] = 2
                stack.pop()
    return None


def _check_number(value: object, what: str, source: str | None, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number, got {value!r}", source=source, where=what)
    if math.isnan(value) or math.isinf(value):
        raise InputError(f"must be a finite number, got {value!r}; replace it with a measured value", source=source, where=what)
    if value < 0:
        raise InputError(f"must not be negative, got {value!r}", source=source, where=what)


def make_graph(
    nodes: list[Node] | tuple[Node, ...],
    edges: list[Edge] | tuple[Edge, ...],
    *,
    name: str = "",
    time_unit: str = "unitless",
    source: str | None = None,
) -> Graph:
    """Validate nodes and edges and build a :class:`Graph`.

    Raises
    ------
    InputError
        On a duplicate or unknown id, a NaN, infinite or negative cost, a
        self-loop or duplicate edge.
    CycleError
        When the edges form a directed cycle (the message prints one).
    """
    seen: set[str] = set()
    for node in nodes:
        where = f"node {node.id!r}"
        if not isinstance(node.id, str) or not node.id:
            raise InputError(f"node id must be a non-empty string, got {node.id!r}", source=source, where="node")
        if node.id in seen:
            raise InputError("duplicate node id; every node needs its own id", source=source, where=where)
        seen.add(node.id)
        for fname in ("forward_time", "backward_time", "param_bytes", "activation_bytes", "other_bytes"):
            _check_number(getattr(node, fname), f"{where} field {fname!r}", source)
        _check_number(node.flops, f"{where} field 'flops'", source, allow_none=True)
        for kind, t in node.time_by_kind.items():
            _check_number(t, f"{where} field 'time_by_kind[{kind!r}]'", source)
        for fname in ("param_bytes", "activation_bytes", "other_bytes"):
            if int(getattr(node, fname)) != getattr(node, fname):
                raise InputError(
                    f"must be a whole number of bytes, got {getattr(node, fname)!r}",
                    source=source,
                    where=f"{where} field {fname!r}",
                )
    pairs: set[tuple[str, str]] = set()
    for i, edge in enumerate(edges):
        where = f"edge {i} ({edge.source!r} -> {edge.target!r})"
        for end in (edge.source, edge.target):
            if end not in seen:
                raise InputError(f"refers to unknown node id {end!r}; add the node or fix the id", source=source, where=where)
        if edge.source == edge.target:
            raise CycleError([edge.source], source=source)
        if (edge.source, edge.target) in pairs:
            raise InputError("duplicate edge; merge the two tensors into one edge", source=source, where=where)
        pairs.add((edge.source, edge.target))
        _check_number(edge.bytes, f"{where} field 'bytes'", source)
        _check_number(edge.transfer_time, f"{where} field 'transfer_time'", source, allow_none=True)
    cycle = find_cycle([n.id for n in nodes], [(e.source, e.target) for e in edges])
    if cycle is not None:
        raise CycleError(cycle, source=source)
    return Graph(tuple(nodes), tuple(edges), name=name, time_unit=time_unit)
