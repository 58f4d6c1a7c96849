"""networkx node-link data (``networkx.node_link_data(G, edges="edges")``) in and out.

The object has ``directed`` (must be true), ``multigraph`` (must be false),
``graph`` (graph attributes), ``nodes[]`` and ``edges[]`` (or ``links[]``, the key
of older networkx versions).  Node attributes are the :class:`Node` field names
(the node's key is its ``id``); edge attributes are ``bytes`` and
``transfer_time``.  Attributes with other names are ignored.  The graph
attributes ``name`` and ``time_unit`` name the graph and its unit, and an
optional ``cluster`` holds a cluster object of the native format, so an instance
written here reads back equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from milp_partition.errors import InputError
from milp_partition.graph import Graph, make_graph
from milp_partition.io.json_text import (
    check_list,
    check_object,
    dump_json_lines,
    parse_json,
    read_text_file,
    to_id,
    write_text_file,
)
from milp_partition.io.native import (
    check_time_unit,
    cluster_from_dict,
    cluster_to_dict,
    edge_from_dict,
    edge_to_dict,
    node_from_dict,
    node_to_dict,
)
from milp_partition.pipeline.problem import Instance

if TYPE_CHECKING:
    import networkx as nx

_TOP = "top level"


def looks_like_nodelink(data: Any) -> bool:
    """Whether a parsed JSON value has the shape of node-link data."""
    return isinstance(data, Mapping) and "directed" in data and "nodes" in data and ("links" in data or "edges" in data)


def _graph_attrs(data: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    if data.get("directed", True) is not True:
        raise InputError('the graph must be directed ("directed": true)', source=source, where=_TOP)
    if data.get("multigraph", False) is not False:
        raise InputError("a multigraph cannot be read; merge parallel edges into one", source=source, where=_TOP)
    attrs = data.get("graph")
    return {} if attrs is None else check_object(attrs, "field 'graph'", source)


def _edge_list(data: Mapping[str, Any], source: str) -> list[Any]:
    if "edges" in data and "links" in data:
        raise InputError("has both 'edges' and 'links'; keep one", source=source, where=_TOP)
    key = "edges" if "edges" in data else "links"
    return check_list(data.get(key, []), f"field {key!r}", source)


def nodelink_from_dict(data: Any, source: str = "", *, name: str = "") -> Instance:
    """Build an :class:`Instance` from parsed node-link data.

    Parameters
    ----------
    data
        The parsed object.
    source
        The file, for messages and :attr:`Instance.source`.
    name
        The graph name when the graph attributes have none.

    Raises
    ------
    InputError
        Naming the node or edge and field that is missing or mistyped, or the cycle.
    """
    data = check_object(data, _TOP, source)
    attrs = _graph_attrs(data, source)
    raw_nodes = check_list(data.get("nodes"), "field 'nodes'", source)
    nodes = [node_from_dict(obj, i, source, strict=False) for i, obj in enumerate(raw_nodes)]
    edges = [edge_from_dict(obj, i, source, strict=False) for i, obj in enumerate(_edge_list(data, source))]
    graph_name = attrs.get("name", name)
    if not isinstance(graph_name, str):
        raise InputError(f"must be a string, got {graph_name!r}", source=source, where="graph attribute 'name'")
    time_unit = check_time_unit(attrs.get("time_unit", "unitless"), "graph attribute 'time_unit'", source)
    graph = make_graph(nodes, edges, name=graph_name, time_unit=time_unit, source=source or None)
    cluster = cluster_from_dict(attrs["cluster"], source) if attrs.get("cluster") is not None else None
    return Instance(graph, cluster, source)


def nodelink_to_dict(instance: Instance) -> dict[str, Any]:
    """The instance as node-link data, as ``networkx.node_link_data(G, edges="edges")`` lays it out."""
    graph = instance.graph
    attrs: dict[str, Any] = {"name": graph.name, "time_unit": graph.time_unit}
    if instance.cluster is not None:
        attrs["cluster"] = cluster_to_dict(instance.cluster)
    return {
        "directed": True,
        "multigraph": False,
        "graph": attrs,
        "nodes": [node_to_dict(n) for n in graph.nodes],
        "edges": [edge_to_dict(e) for e in graph.edges],
    }


def read_nodelink(path: str | Path) -> Instance:
    """Read a node-link JSON file; the graph is named after the file when its attributes have no name.

    Raises
    ------
    InputError
        On any failure to read, parse or validate, naming the file.
    """
    source = str(path)
    return nodelink_from_dict(parse_json(read_text_file(path), source), source, name=Path(path).stem)


def write_nodelink(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` as node-link JSON that :func:`read_nodelink` reads back equal."""
    write_text_file(path, dump_json_lines(nodelink_to_dict(instance), source=str(path)))


def to_networkx(graph: Graph) -> nx.DiGraph:
    """The graph as a :class:`networkx.DiGraph`.

    Node keys are the node ids; node attributes are the other :class:`Node` fields;
    edge attributes are ``bytes`` and ``transfer_time``; ``G.graph`` holds ``name``
    and ``time_unit``.
    """
    import networkx as nx

    g = nx.DiGraph(name=graph.name, time_unit=graph.time_unit)
    for node in graph.nodes:
        attrs = node_to_dict(node)
        del attrs["id"]
        attrs["allowed_kinds"] = node.allowed_kinds
        g.add_node(node.id, **attrs)
    for edge in graph.edges:
        g.add_edge(edge.source, edge.target, bytes=edge.bytes, transfer_time=edge.transfer_time)
    return g


def from_networkx(g: nx.DiGraph, name: str | None = None, time_unit: str | None = None) -> Graph:
    """Build a validated :class:`Graph` from a directed networkx graph.

    Parameters
    ----------
    g
        A directed graph whose node attributes are :class:`Node` field names and edge
        attributes ``bytes`` and ``transfer_time`` (missing ones take the defaults,
        other ones are ignored).  Integer node keys become their decimal text.
    name, time_unit
        The graph's name and time unit; ``None`` takes ``g.graph["name"]`` and
        ``g.graph["time_unit"]``, or ``""`` and ``"unitless"``.

    Returns
    -------
    Graph
        Nodes in networkx's node order; edges in its edge order (grouped by source
        node, which may differ from the order the edges were added in).

    Raises
    ------
    InputError
        On an undirected graph, a mistyped attribute, a NaN or negative value, or a cycle.
    """
    if not g.is_directed() or g.is_multigraph():
        raise InputError("from_networkx needs a networkx DiGraph (directed, no parallel edges)")
    nodes = [
        node_from_dict({**attrs, "id": to_id(key, f"node key {key!r}", "")}, i, strict=False)
        for i, (key, attrs) in enumerate(g.nodes(data=True))
    ]
    edges = [
        edge_from_dict({**attrs, "source": u, "target": v}, i, strict=False) for i, (u, v, attrs) in enumerate(g.edges(data=True))
    ]
    graph_name = g.graph.get("name", "") if name is None else name
    unit = check_time_unit(g.graph.get("time_unit", "unitless") if time_unit is None else time_unit, "time_unit", "")
    return make_graph(nodes, edges, name=str(graph_name), time_unit=unit)
