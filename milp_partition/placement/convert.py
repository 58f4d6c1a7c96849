"""Turn a native graph and a cluster (or a PipeDream profile) into a :class:`PlacementProblem`.

Devices are the cluster's accelerators, then ``host_cpu_cores`` CPU cores
(``cpu0``, ...).  Per device kind a task's time is ``time_by_kind[kind]`` when
given, otherwise the node's accelerator time; a node whose ``allowed_kinds``
excludes a kind gets ``inf`` there (the task cannot run there).

Training step
-------------
A graph of forward nodes that carry a backward time (a PipeDream profile; a
native graph without backward nodes) becomes one training step: node v gives a
forward task ``v`` (its forward time) and a backward task ``v.bwd`` (its backward
time); edge u -> v gives the forward edge u -> v and the backward edge
``v.bwd -> u.bwd`` with the same bytes (an activation and its gradient have one
size); each forward task feeds its own backward task (``v -> v.bwd``, it needs the
saved activation).  With ``colocate_backward`` (default) ``v`` and ``v.bwd`` form a
colocation group, as in training frameworks; the user may free them.  With
``time_by_kind``, the kind's total splits between forward and backward in the
node's forward:backward ratio.  A graph that already has backward nodes is taken
as it is.

Memory
------
A forward task holds ``param_bytes + activation_bytes + other_bytes``; a backward
task holds nothing extra (its gradients replace the activations it frees).

Transfers
---------
``comm[e, a, b] = edge.transfer_time`` when the edge gives one, otherwise the
cluster link's alpha-beta time ``latency + bytes / bandwidth`` converted to the
graph's time unit, for every ``a != b`` (zero diagonal).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from milp_partition.cluster import Cluster
from milp_partition.errors import InputError
from milp_partition.graph import TIME_UNIT_SECONDS, Graph, Node
from milp_partition.io import read_instance
from milp_partition.placement.problem import PlacementProblem, PlacementSettings, make_placement_problem

BACKWARD_SUFFIX = ".bwd"


def _device_list(cluster: Cluster) -> list[tuple[str, str, float]]:
    devices = [(d.id, d.kind, math.inf if d.memory_bytes is None else float(d.memory_bytes)) for d in cluster.devices]
    devices += [(f"cpu{c}", "cpu", math.inf) for c in range(cluster.host_cpu_cores)]
    return devices


def _kind_time(node: Node, kind: str, base: float) -> float:
    if node.allowed_kinds is not None and kind not in node.allowed_kinds:
        return math.inf
    if kind in node.time_by_kind:
        total = node.forward_time + node.backward_time
        kt = float(node.time_by_kind[kind])
        return kt if total <= 0 else kt * base / total
    return base


def placement_from_graph(
    graph: Graph,
    cluster: Cluster,
    *,
    training_step: bool | None = None,
    colocate_backward: bool = True,
    settings: PlacementSettings | None = None,
    source: str | None = None,
) -> PlacementProblem:
    """The placement problem of ``graph`` on ``cluster`` (see the module docstring).

    Parameters
    ----------
    training_step
        Split every node into forward and backward tasks; default: when no node is a
        backward node and some node has a backward time.
    colocate_backward
        Put each backward task in its forward task's colocation group.
    """
    devices = _device_list(cluster)
    if not devices:
        raise InputError("the cluster has no devices", source=source, where="cluster")
    if training_step is None:
        training_step = not any(n.is_backward for n in graph.nodes) and any(n.backward_time > 0 for n in graph.nodes)
    link = cluster.link
    unit = TIME_UNIT_SECONDS.get(graph.time_unit)

    def transfer(edge_bytes: int, given: float | None, where: str) -> float:
        if given is not None:
            return float(given)
        if link.latency_s == 0 and math.isinf(link.bandwidth_bytes_per_s):
            return 0.0
        if unit is None:
            raise InputError(
                f"no transfer_time and the graph's time unit {graph.time_unit!r} cannot be converted from the link's seconds; "
                "give transfer times or a time unit (s, ms, us, ns)",
                source=source,
                where=where,
            )
        return link.transfer_seconds(edge_bytes) / unit

    task_ids: list[str] = []
    times: list[list[float]] = []
    memory: list[float] = []
    groups: list[str | None] = []
    names: list[str] = []
    for node in graph.nodes:
        fwd = node.backward_time if node.is_backward else node.forward_time
        fwd_only = node.forward_time if training_step else fwd + (0.0 if node.is_backward else node.backward_time)
        task_ids.append(node.id)
        times.append([_kind_time(node, kind, fwd_only) for _, kind, _ in devices])
        memory.append(float(node.param_bytes + node.activation_bytes + node.other_bytes))
        group = node.colocation_group
        if training_step and colocate_backward and group is None:
            group = f"step:{node.id}"
        groups.append(group)
        names.append(node.name)
        if training_step:
            task_ids.append(node.id + BACKWARD_SUFFIX)
            times.append([_kind_time(node, kind, node.backward_time) for _, kind, _ in devices])
            memory.append(0.0)
            groups.append(group)
            names.append(f"{node.name} (backward)" if node.name else "")
    edges: list[tuple[str, str]] = []
    lag: list[float] = []
    for edge in graph.edges:
        where = f"edge {edge.source!r} -> {edge.target!r}"
        c = transfer(edge.bytes, edge.transfer_time, where)
        edges.append((edge.source, edge.target))
        lag.append(c)
        if training_step:
            edges.append((edge.target + BACKWARD_SUFFIX, edge.source + BACKWARD_SUFFIX))
            lag.append(c)
    if training_step:
        for node in graph.nodes:
            edges.append((node.id, node.id + BACKWARD_SUFFIX))
            lag.append(0.0 if colocate_backward else transfer(node.activation_bytes, None, f"node {node.id!r}"))
    d = len(devices)
    off = 1.0 - np.eye(d)
    comm = np.asarray(lag, dtype=np.float64)[:, None, None] * off[None, :, :] if edges else np.zeros((0, d, d))
    return make_placement_problem(
        task_ids,
        [dev for dev, _, _ in devices],
        np.asarray(times, dtype=np.float64).reshape(len(task_ids), d),
        memory,
        [cap for _, _, cap in devices],
        edges,
        comm,
        colocation=groups if any(g is not None for g in groups) else None,
        name=graph.name,
        time_unit=graph.time_unit,
        memory_unit="bytes",
        settings=settings,
        task_names=tuple(names) if any(names) else (),
        source=source,
        cluster=cluster,
    )


def placement_from_instance_file(
    path: str | Path,
    cluster: Cluster | None = None,
    *,
    settings: PlacementSettings | None = None,
    colocate_backward: bool = True,
) -> PlacementProblem:
    """Read a graph file (native, Tarnawski, PipeDream, node-link) and convert it with its own or the given cluster."""

    inst = read_instance(path)
    cl = cluster if cluster is not None else inst.cluster
    if cl is None:
        raise InputError(
            "this graph file carries no cluster; placement needs devices (convert it with placement_from_graph and a cluster, "
            "or write a placement-instance/1 file)",
            source=str(path),
        )
    return placement_from_graph(inst.graph, cl, colocate_backward=colocate_backward, settings=settings, source=str(path))
