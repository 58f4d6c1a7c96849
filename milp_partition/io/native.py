"""The native JSON format (``"format": "milp-partition/1"``) and the cluster file.

The native format holds every field of :class:`~milp_partition.graph.Node`,
:class:`~milp_partition.graph.Edge` and :class:`~milp_partition.cluster.Cluster`
under the same names, so writing then reading gives back an equal instance.
The schema is documented in ``docs/FORMAT.md``.

The checked-field readers, the file reader and the JSON parser that every format
shares are in :mod:`milp_partition.io.json_text`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from milp_partition.cluster import ACCELERATOR_KIND, Cluster, Device, Link, make_cluster
from milp_partition.errors import InputError
from milp_partition.graph import TIME_UNIT_SECONDS, Edge, Graph, Node, make_graph
from milp_partition.io.json_text import (
    _field,
    _short,
    check_known_keys,
    check_list,
    check_object,
    dump_json_lines,
    get_bool,
    get_bytes,
    get_float,
    get_optional_bytes,
    get_optional_float,
    get_optional_str,
    get_str,
    get_value,
    parse_json,
    read_text_file,
    to_float,
    to_id,
    to_number,
    write_text_file,
)
from milp_partition.pipeline.problem import Instance

#: Value of the ``format`` field of a native graph file.
FORMAT = "milp-partition/1"
#: Value of the ``format`` field of a standalone cluster file.
CLUSTER_FORMAT = "milp-partition-cluster/1"
#: Time units a file may name.
TIME_UNITS: tuple[str, ...] = (*TIME_UNIT_SECONDS, "unitless")

NODE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Node))
EDGE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Edge))
#: ``layers``: layer shapes an importer records for tensor-parallel planning (read by milp_partition.joint.layers, ignored here).
_TOP_FIELDS = ("format", "name", "time_unit", "nodes", "edges", "cluster", "description", "layers")
_CLUSTER_FIELDS = ("devices", "host_cpu_cores", "link")
_DEVICE_FIELDS = ("id", "kind", "memory_bytes")
_LINK_FIELDS = ("latency_s", "bandwidth_bytes_per_s")


def _time_by_kind(value: Any, where: str, source: str) -> dict[str, float]:
    mapping = check_object(value, _field(where, "time_by_kind"), source)
    result: dict[str, float] = {}
    for kind, t in mapping.items():
        if not isinstance(kind, str) or not kind:
            raise InputError(
                f"device kinds must be non-empty strings, got {kind!r}",
                source=source,
                where=_field(where, "time_by_kind"),
            )
        result[kind] = to_float(t, _field(where, f"time_by_kind[{kind!r}]"), source)
    return result


def _allowed_kinds(value: Any, where: str, source: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    fwhere = _field(where, "allowed_kinds")
    kinds = check_list(value, fwhere, source)
    if not kinds:
        raise InputError("must list at least one device kind, or be null for every kind", source=source, where=fwhere)
    for kind in kinds:
        if not isinstance(kind, str) or not kind:
            raise InputError(f"device kinds must be non-empty strings, got {kind!r}", source=source, where=fwhere)
    return tuple(kinds)


# ---------------------------------------------------------------------------
# Nodes, edges and clusters as dicts
# ---------------------------------------------------------------------------


def node_from_dict(obj: Any, position: int, source: str = "", *, strict: bool = True) -> Node:
    """Build a :class:`Node` from its native JSON object, checking every field's type.

    Parameters
    ----------
    obj
        The object; only ``id`` is required, every other field has the dataclass default.
    position
        Its position in the ``nodes`` array, for messages about a node without an id.
    source
        The file, for messages.
    strict
        Reject fields that are not :class:`Node` fields (native); ignore them (node-link).

    Raises
    ------
    InputError
        Naming the node and field that is missing or mistyped.
    """
    pwhere = f"nodes[{position}]"
    obj = check_object(obj, pwhere, source)
    node_id = to_id(get_value(obj, "id", pwhere, source), _field(pwhere, "id"), source)
    where = f"node {node_id!r}"
    if strict:
        check_known_keys(obj, NODE_FIELDS, where, source)
    return Node(
        id=node_id,
        name=get_str(obj, "name", where, source, ""),
        op_type=get_str(obj, "op_type", where, source, ""),
        forward_time=get_float(obj, "forward_time", where, source, 0.0),
        backward_time=get_float(obj, "backward_time", where, source, 0.0),
        time_by_kind=_time_by_kind(obj.get("time_by_kind", {}), where, source),
        flops=get_optional_float(obj, "flops", where, source),
        param_bytes=get_bytes(obj, "param_bytes", where, source, 0),
        activation_bytes=get_bytes(obj, "activation_bytes", where, source, 0),
        other_bytes=get_bytes(obj, "other_bytes", where, source, 0),
        colocation_group=get_optional_str(obj, "colocation_group", where, source),
        allowed_kinds=_allowed_kinds(obj.get("allowed_kinds"), where, source),
        is_backward=get_bool(obj, "is_backward", where, source, False),
    )


def node_to_dict(node: Node) -> dict[str, Any]:
    """Every field of ``node`` as a JSON-ready dict (the inverse of :func:`node_from_dict`)."""
    return {
        "id": node.id,
        "name": node.name,
        "op_type": node.op_type,
        "forward_time": node.forward_time,
        "backward_time": node.backward_time,
        "time_by_kind": dict(node.time_by_kind),
        "flops": node.flops,
        "param_bytes": node.param_bytes,
        "activation_bytes": node.activation_bytes,
        "other_bytes": node.other_bytes,
        "colocation_group": node.colocation_group,
        "allowed_kinds": None if node.allowed_kinds is None else list(node.allowed_kinds),
        "is_backward": node.is_backward,
    }


def edge_from_dict(obj: Any, position: int, source: str = "", *, strict: bool = True) -> Edge:
    """Build an :class:`Edge` from its native JSON object (``source`` and ``target`` required).

    Raises
    ------
    InputError
        Naming the edge and field that is missing or mistyped.
    """
    pwhere = f"edges[{position}]"
    obj = check_object(obj, pwhere, source)
    src = obj.get("source")
    dst = obj.get("target")
    label = f"edges[{position}] ({'?' if src is None else repr(src)} -> {'?' if dst is None else repr(dst)})"
    src = to_id(get_value(obj, "source", label, source), _field(label, "source"), source)
    dst = to_id(get_value(obj, "target", label, source), _field(label, "target"), source)
    where = f"edge {position} ({src!r} -> {dst!r})"
    if strict:
        check_known_keys(obj, EDGE_FIELDS, where, source)
    return Edge(
        source=src,
        target=dst,
        bytes=get_bytes(obj, "bytes", where, source, 0),
        transfer_time=get_optional_float(obj, "transfer_time", where, source),
    )


def edge_to_dict(edge: Edge) -> dict[str, Any]:
    """Every field of ``edge`` as a JSON-ready dict."""
    return {"source": edge.source, "target": edge.target, "bytes": edge.bytes, "transfer_time": edge.transfer_time}


def _device_from_dict(obj: Any, position: int, source: str) -> Device:
    pwhere = f"cluster devices[{position}]"
    obj = check_object(obj, pwhere, source)
    device_id = get_str(obj, "id", pwhere, source)
    where = f"device {device_id!r}"
    check_known_keys(obj, _DEVICE_FIELDS, where, source)
    return Device(
        id=device_id,
        kind=get_str(obj, "kind", where, source, ACCELERATOR_KIND),
        memory_bytes=get_optional_bytes(obj, "memory_bytes", where, source),
    )


def _link_from_dict(obj: Any, source: str) -> Link:
    where = "cluster link"
    obj = check_object(obj, where, source)
    check_known_keys(obj, _LINK_FIELDS, where, source)
    bandwidth = get_value(obj, "bandwidth_bytes_per_s", where, source, None)
    if isinstance(bandwidth, float) and math.isinf(bandwidth):
        raise InputError(
            "must be a finite number; write null for infinite bandwidth",
            source=source,
            where=_field(where, "bandwidth_bytes_per_s"),
        )
    bandwidth = to_number(bandwidth, _field(where, "bandwidth_bytes_per_s"), source, allow_none=True)
    return Link(
        latency_s=get_float(obj, "latency_s", where, source, 0.0),
        bandwidth_bytes_per_s=math.inf if bandwidth is None else bandwidth,
    )


def cluster_from_dict(obj: Any, source: str = "", *, extra_keys: Iterable[str] = ()) -> Cluster:
    """Build a :class:`Cluster` from its JSON object (``devices``, ``host_cpu_cores``, ``link``).

    Parameters
    ----------
    obj
        The object; every field is optional (no devices, no CPU cores, an ideal link),
        but the cluster must have at least one device or CPU core.
    source
        The file, for messages.
    extra_keys
        Further keys to tolerate (``format`` in a standalone cluster file).

    Raises
    ------
    InputError
        On a missing, mistyped or inconsistent field.
    """
    obj = check_object(obj, "cluster", source)
    check_known_keys(obj, (*_CLUSTER_FIELDS, *extra_keys), "cluster", source)
    devices = check_list(obj.get("devices", []), "cluster field 'devices'", source)
    cores = get_value(obj, "host_cpu_cores", "cluster", source, 0)
    if isinstance(cores, bool) or not isinstance(cores, numbers.Integral):
        raise InputError(
            f"must be a non-negative integer, got {_short(cores)}",
            source=source,
            where="cluster field 'host_cpu_cores'",
        )
    return make_cluster(
        [_device_from_dict(d, i, source) for i, d in enumerate(devices)],
        host_cpu_cores=int(cores),
        link=_link_from_dict(obj.get("link", {}), source),
        source=source or None,
    )


def cluster_to_dict(cluster: Cluster) -> dict[str, Any]:
    """The cluster as a JSON-ready dict (infinite bandwidth written as ``None``)."""
    bandwidth = cluster.link.bandwidth_bytes_per_s
    return {
        "devices": [{"id": d.id, "kind": d.kind, "memory_bytes": d.memory_bytes} for d in cluster.devices],
        "host_cpu_cores": cluster.host_cpu_cores,
        "link": {
            "latency_s": cluster.link.latency_s,
            "bandwidth_bytes_per_s": None if math.isinf(bandwidth) else bandwidth,
        },
    }


def check_time_unit(value: Any, where: str, source: str) -> str:
    """``value`` if it is a known time unit, else :class:`InputError`."""
    if value not in TIME_UNITS:
        raise InputError(f"must be one of {', '.join(TIME_UNITS)}; got {_short(value)}", source=source, where=where)
    return value


# ---------------------------------------------------------------------------
# Whole instances
# ---------------------------------------------------------------------------


def check_format(data: Mapping[str, Any], expected: str, source: str) -> None:
    """Check the ``format`` field against ``expected``, explaining a wrong kind or version."""
    if "format" not in data:
        raise InputError(f'missing field "format"; add "format": "{expected}"', source=source, where="top level")
    fmt = data["format"]
    if fmt == expected:
        return
    family = expected.rsplit("/", 1)[0]
    if isinstance(fmt, str) and fmt.rsplit("/", 1)[0] == family:
        raise InputError(
            f"format version {fmt!r} is not supported; this version of milp_partition reads {expected!r}",
            source=source,
            where="field 'format'",
        )
    if fmt == CLUSTER_FORMAT:
        raise InputError("this is a cluster file, not a graph; pass it as the cluster", source=source)
    if fmt == FORMAT:
        raise InputError("this is a graph file, not a cluster file", source=source)
    raise InputError(f"expected {expected!r}, got {_short(fmt)}", source=source, where="field 'format'")


def instance_from_dict(data: Any, source: str = "", *, default_name: str = "") -> Instance:
    """Build an :class:`Instance` from a parsed native JSON object.

    Parameters
    ----------
    data
        The parsed object with ``"format": "milp-partition/1"``.
    source
        The file, for messages and :attr:`Instance.source`.
    default_name
        The graph name when the object has no ``name``.

    Raises
    ------
    InputError
        On a wrong format version, unknown or mistyped field, or an invalid graph or cluster.
    """
    data = check_object(data, "top level", source)
    check_format(data, FORMAT, source)
    check_known_keys(data, _TOP_FIELDS, "top level", source)
    name = get_str(data, "name", "top level", source, default_name)
    time_unit = check_time_unit(data.get("time_unit", "unitless"), "field 'time_unit'", source)
    raw_nodes = check_list(get_value(data, "nodes", "top level", source), "field 'nodes'", source)
    raw_edges = check_list(data.get("edges", []), "field 'edges'", source)
    nodes = [node_from_dict(obj, i, source) for i, obj in enumerate(raw_nodes)]
    edges = [edge_from_dict(obj, i, source) for i, obj in enumerate(raw_edges)]
    graph = make_graph(nodes, edges, name=name, time_unit=time_unit, source=source or None)
    cluster = cluster_from_dict(data["cluster"], source) if data.get("cluster") is not None else None
    return Instance(graph, cluster, source)


def instance_to_dict(instance: Instance) -> dict[str, Any]:
    """The instance as a native JSON-ready dict (the inverse of :func:`instance_from_dict`)."""
    graph: Graph = instance.graph
    data: dict[str, Any] = {
        "format": FORMAT,
        "name": graph.name,
        "time_unit": graph.time_unit,
        "nodes": [node_to_dict(n) for n in graph.nodes],
        "edges": [edge_to_dict(e) for e in graph.edges],
    }
    if instance.cluster is not None:
        data["cluster"] = cluster_to_dict(instance.cluster)
    return data


def dumps(instance: Instance, *, source: str = "") -> str:
    """The instance as native JSON text, one node or edge per line (``source`` names the file in errors)."""
    return dump_json_lines(instance_to_dict(instance), source=source)


def loads(text: str, source: str = "", *, default_name: str = "") -> Instance:
    """Parse native JSON text into an :class:`Instance` (see :func:`instance_from_dict`)."""
    return instance_from_dict(parse_json(text, source), source, default_name=default_name)


def read_native(path: str | Path) -> Instance:
    """Read a native graph file; the graph is named after the file when it has no ``name``.

    Raises
    ------
    InputError
        On any failure to read, parse or validate, naming the file.
    """
    return loads(read_text_file(path), str(path), default_name=Path(path).stem)


def write_native(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` as a native graph file that :func:`read_native` reads back equal."""
    write_text_file(path, dumps(instance, source=str(path)))


def read_cluster(path: str | Path) -> Cluster:
    """Read a standalone cluster file (``"format": "milp-partition-cluster/1"``).

    Raises
    ------
    InputError
        On any failure to read, parse or validate, naming the file.
    """
    source = str(path)
    data = check_object(parse_json(read_text_file(path), source), "top level", source)
    check_format(data, CLUSTER_FORMAT, source)
    return cluster_from_dict(data, source, extra_keys=("format",))


def write_cluster(cluster: Cluster, path: str | Path) -> None:
    """Write ``cluster`` as a standalone cluster file that :func:`read_cluster` reads back equal."""
    data = {"format": CLUSTER_FORMAT, **cluster_to_dict(cluster)}
    write_text_file(path, dump_json_lines(data, ("devices",), source=str(path)))
