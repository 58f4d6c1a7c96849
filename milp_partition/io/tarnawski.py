"""The JSON of Tarnawski et al., NeurIPS 2020 (``msr-fiddle/dnn-partitioning``).

One object with ``maxSizePerFPGA``, ``maxFPGAs``, ``maxCPUs``, ``nodes[]`` and
``edges[]``; "FPGA" means any accelerator.  The mapping onto the data model:

* node -> :class:`Node` with ``id=str(id)``, ``name=name``, the ``fpgaLatency`` in
  ``forward_time`` (or ``backward_time`` for a node with ``isBackwardNode``),
  ``time_by_kind={"cpu": cpuLatency}``, ``other_bytes=size``,
  ``colocation_group=str(colorClass)`` (``None`` where the key is missing) and
  ``allowed_kinds=("cpu",)`` where ``supportedOnFpga`` is false;
* edge -> :class:`Edge` with ``bytes=int(size)`` and ``transfer_time=cost``;
* cluster -> ``maxFPGAs`` identical accelerators of kind ``"gpu"`` with
  ``maxSizePerFPGA`` bytes each and ``maxCPUs`` host CPU cores.

Times are ``"unitless"``; the graph is named after the file.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from milp_partition.cluster import ACCELERATOR_KIND, CPU_KIND, Cluster, Link, homogeneous_cluster
from milp_partition.errors import InputError
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.io.json_text import (
    check_list,
    check_object,
    dump_json_lines,
    get_float,
    get_value,
    parse_json,
    read_text_file,
    to_float,
    write_text_file,
)
from milp_partition.pipeline.problem import Instance

_TOP = "top level"


def _flag(obj: Mapping[str, Any], key: str, where: str, source: str, default: bool) -> bool:
    """A 0/1 or false/true field."""
    value = obj.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise InputError(f"must be 0, 1, false or true, got {value!r}", source=source, where=f"{where} field {key!r}")


def _int_id(value: Any, where: str, source: str) -> str:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise InputError(f"must be an integer, got {value!r}", source=source, where=where)


def _size(obj: Mapping[str, Any], key: str, where: str, source: str, *, whole: bool) -> int:
    """A non-negative byte count; ``whole`` rejects fractions, otherwise they are truncated."""
    fwhere = f"{where} field {key!r}"
    value = to_float(get_value(obj, key, where, source), fwhere, source)
    if value < 0:
        raise InputError(f"must not be negative, got {obj[key]!r}", source=source, where=fwhere)
    if whole and not value.is_integer():
        raise InputError(f"must be a whole number of bytes, got {obj[key]!r}", source=source, where=fwhere)
    return round(value) if whole else int(value)


def _node(obj: Any, position: int, source: str) -> Node:
    obj = check_object(obj, f"nodes[{position}]", source)
    node_id = _int_id(get_value(obj, "id", f"nodes[{position}]", source), f"nodes[{position}] field 'id'", source)
    where = f"node {node_id!r}"
    latency = get_float(obj, "fpgaLatency", where, source)
    cpu_latency = get_float(obj, "cpuLatency", where, source)
    backward = _flag(obj, "isBackwardNode", where, source, False)
    name = obj.get("name", "")
    if not isinstance(name, str):
        raise InputError(f"must be a string, got {name!r}", source=source, where=f"{where} field 'name'")
    color = obj.get("colorClass")
    if color is not None and (isinstance(color, bool) or not isinstance(color, (numbers.Integral, str))):
        raise InputError(f"must be an integer, got {color!r}", source=source, where=f"{where} field 'colorClass'")
    return Node(
        id=node_id,
        name=name,
        forward_time=0.0 if backward else latency,
        backward_time=latency if backward else 0.0,
        time_by_kind={CPU_KIND: cpu_latency},
        other_bytes=_size(obj, "size", where, source, whole=True),
        colocation_group=None if color is None else str(color),
        allowed_kinds=None if _flag(obj, "supportedOnFpga", where, source, True) else (CPU_KIND,),
        is_backward=backward,
    )


def _edge(obj: Any, position: int, source: str) -> Edge:
    pwhere = f"edges[{position}]"
    obj = check_object(obj, pwhere, source)
    src = _int_id(get_value(obj, "sourceId", pwhere, source), f"{pwhere} field 'sourceId'", source)
    dst = _int_id(get_value(obj, "destId", pwhere, source), f"{pwhere} field 'destId'", source)
    where = f"edge {position} ({src!r} -> {dst!r})"
    return Edge(
        source=src,
        target=dst,
        bytes=_size(obj, "size", where, source, whole=False) if "size" in obj else 0,
        transfer_time=get_float(obj, "cost", where, source),
    )


def _cluster(data: Mapping[str, Any], source: str) -> Cluster:
    count = get_value(data, "maxFPGAs", _TOP, source)
    cores = get_value(data, "maxCPUs", _TOP, source, 0)
    for key, value in (("maxFPGAs", count), ("maxCPUs", cores)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise InputError(f"must be a non-negative integer, got {value!r}", source=source, where=f"field {key!r}")
    memory = to_float(get_value(data, "maxSizePerFPGA", _TOP, source), "field 'maxSizePerFPGA'", source)
    if memory < 0:
        raise InputError(f"must not be negative, got {memory!r}", source=source, where="field 'maxSizePerFPGA'")
    return homogeneous_cluster(int(count), int(memory), kind=ACCELERATOR_KIND, host_cpu_cores=int(cores), source=source or None)


def tarnawski_from_dict(data: Any, source: str = "", *, name: str = "") -> Instance:
    """Build an :class:`Instance` from a parsed Tarnawski JSON object.

    Parameters
    ----------
    data
        The parsed object.
    source
        The file, for messages and :attr:`Instance.source`.
    name
        The graph name (the format has none; readers use the file name).

    Raises
    ------
    InputError
        Naming the node or edge and field that is missing or invalid, or the cycle.
    """
    data = check_object(data, _TOP, source)
    raw_nodes = check_list(get_value(data, "nodes", _TOP, source), "field 'nodes'", source)
    raw_edges = check_list(get_value(data, "edges", _TOP, source), "field 'edges'", source)
    nodes = [_node(obj, i, source) for i, obj in enumerate(raw_nodes)]
    edges = [_edge(obj, i, source) for i, obj in enumerate(raw_edges)]
    graph = make_graph(nodes, edges, name=name, time_unit="unitless", source=source or None)
    return Instance(graph, _cluster(data, source), source)


def read_tarnawski(path: str | Path) -> Instance:
    """Read a Tarnawski JSON file; the graph is named after the file.

    Raises
    ------
    InputError
        On any failure to read, parse or validate, naming the file.
    """
    source = str(path)
    return tarnawski_from_dict(parse_json(read_text_file(path), source), source, name=Path(path).stem)


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def _is_int_text(text: str) -> bool:
    try:
        return str(int(text)) == text
    except ValueError:
        return False


def _cannot(reason: str, source: str, where: str | None = None) -> InputError:
    return InputError(f"cannot be written in the Tarnawski format: {reason}", source=source, where=where)


def _check_cluster(cluster: Cluster | None, source: str) -> Cluster:
    if cluster is None:
        raise _cannot("the instance has no cluster (the format needs maxFPGAs, maxSizePerFPGA, maxCPUs)", source)
    if not cluster.devices:
        raise _cannot("the cluster has no accelerator (the format needs maxFPGAs >= 1)", source)
    memory = cluster.devices[0].memory_bytes
    if memory is None:
        raise _cannot("accelerator memory is unbounded; the format needs maxSizePerFPGA", source)
    expected = homogeneous_cluster(len(cluster.devices), memory, host_cpu_cores=cluster.host_cpu_cores)
    if cluster.devices != expected.devices:
        raise _cannot(
            f"the accelerators must be identical, of kind {ACCELERATOR_KIND!r}, named "
            f"{ACCELERATOR_KIND}0 .. {ACCELERATOR_KIND}{len(cluster.devices) - 1}",
            source,
        )
    if cluster.link != Link():
        raise _cannot("the format has no link model (edge costs are explicit); use an ideal link", source)
    return cluster


def _check_node(node: Node, source: str) -> None:
    where = f"node {node.id!r}"
    problems = [
        (not _is_int_text(node.id), "the id must be an integer"),
        (node.op_type != "", "op_type has no place in the format"),
        (node.flops is not None, "flops has no place in the format"),
        (node.param_bytes or node.activation_bytes, "memory must be in other_bytes only"),
        (set(node.time_by_kind) != {CPU_KIND}, f"time_by_kind must hold exactly the {CPU_KIND!r} time"),
        (node.allowed_kinds not in (None, (CPU_KIND,)), f"allowed_kinds must be null or [{CPU_KIND!r}]"),
        (node.is_backward and node.forward_time != 0, "a backward node must have no forward_time"),
        (not node.is_backward and node.backward_time != 0, "a forward node must have no backward_time"),
        (
            node.colocation_group is not None and not _is_int_text(node.colocation_group),
            "colocation_group must be an integer",
        ),
    ]
    for failed, reason in problems:
        if failed:
            raise _cannot(reason, source, where)


def tarnawski_to_dict(instance: Instance, source: str = "") -> dict[str, Any]:
    """The instance as a Tarnawski JSON object that :func:`tarnawski_from_dict` reads back equal.

    Raises
    ------
    InputError
        Saying why the instance cannot be expressed in the format (no cluster, different
        accelerators, a link model, a time unit, node fields the format lacks, non-integer ids,
        an edge without ``transfer_time``).
    """
    source = source or instance.source
    graph = instance.graph
    cluster = _check_cluster(instance.cluster, source)
    if graph.time_unit != "unitless":
        raise _cannot(f"the format has no time unit; the graph's is {graph.time_unit!r}", source)
    nodes = []
    for node in graph.nodes:
        _check_node(node, source)
        entry: dict[str, Any] = {
            "name": node.name,
            "id": int(node.id),
            "supportedOnFpga": int(node.allowed_kinds is None),
            "cpuLatency": node.time_by_kind[CPU_KIND],
            "fpgaLatency": node.backward_time if node.is_backward else node.forward_time,
            "isBackwardNode": int(node.is_backward),
            "size": node.other_bytes,
        }
        if node.colocation_group is not None:
            entry["colorClass"] = int(node.colocation_group)
        nodes.append(entry)
    edges = []
    for i, edge in enumerate(graph.edges):
        if edge.transfer_time is None:
            raise _cannot(
                "the format needs an explicit transfer_time (cost)",
                source,
                f"edge {i} ({edge.source!r} -> {edge.target!r})",
            )
        edges.append({"sourceId": int(edge.source), "destId": int(edge.target), "cost": edge.transfer_time, "size": edge.bytes})
    return {
        "maxSizePerFPGA": cluster.devices[0].memory_bytes,
        "maxFPGAs": len(cluster.devices),
        "maxCPUs": cluster.host_cpu_cores,
        "nodes": nodes,
        "edges": edges,
    }


def write_tarnawski(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` as a Tarnawski JSON file that :func:`read_tarnawski` reads back equal.

    The graph name is not stored: the reader names the graph after the file.

    Raises
    ------
    InputError
        When the instance cannot be expressed in the format (see :func:`tarnawski_to_dict`)
        or the file cannot be written.
    """
    write_text_file(path, dump_json_lines(tarnawski_to_dict(instance, str(path)), source=str(path)))
