"""PipeDream ``graph.txt`` profiles (``msr-fiddle/pipedream``, ``profiler/*/profiles/*/graph.txt``).

One line per node, then one indented line (a tab or spaces) per edge::

    node2 -- Conv2d(3, 64, kernel_size=(11, 11)) -- forward_compute_time=22.316, ...
    node3 -- ReLU(inplace) -- forward_compute_time=0.813, backward_compute_time=0.733, ...
        node2 -- node3

where ``...`` stands for the rest of ``backward_compute_time=<ms>, activation_size=<bytes>,
parameter_size=<bytes>``.

The mapping onto the data model: node ``nodeK`` -> :class:`Node` with ``id="nodeK"``,
``name`` the module description, ``op_type`` the description up to its first ``(``,
``forward_time``/``backward_time`` in ms, ``activation_bytes`` and ``param_bytes``
rounded to whole bytes.  An ``activation_size`` that is a list (``[a; b; c]``, a
module with several outputs) counts as its sum, as PipeDream's own parser does.  An
edge carries the source node's ``activation_size`` in ``bytes`` and no
``transfer_time`` (it is derived from the cluster's link).  A trailing
``-- stage_id=N`` token, which PipeDream writes after partitioning, is ignored.
Times are in ``"ms"``; the graph is named after the file and has no cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from milp_partition.errors import InputError
from milp_partition.graph import Edge, Graph, Node, make_graph
from milp_partition.io.json_text import MAX_BYTES, MAX_NUMBER, read_text_file
from milp_partition.pipeline.problem import Instance

_SEP = " -- "
_METRICS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")
_NODE_HINT = (
    "expected 'nodeK -- <description> -- forward_compute_time=<ms>, backward_compute_time=<ms>, "
    "activation_size=<bytes>, parameter_size=<bytes>'"
)
_EDGE_HINT = "expected an indented edge line 'nodeA -- nodeB'"


@dataclass(frozen=True)
class _ParsedNode:
    node: Node
    output_bytes: int
    line: int


def looks_like_pipedream(text: str) -> bool:
    """Whether ``text`` has at least one PipeDream node line."""
    return any(line[:1].strip() and _SEP in line and "forward_compute_time=" in line for line in text.splitlines()[:50])


def _parse_value(text: str, key: str, where: str, source: str) -> float:
    """A metric value: a number, or ``[a; b; ...]`` whose sum is taken."""
    text = text.strip()
    parts = text[1:-1].split(";") if text.startswith("[") and text.endswith("]") else [text]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise InputError(f"must be a number, got {text!r}", source=source, where=f"{where} field {key!r}") from None
    total = sum(values)
    if not math.isfinite(total):
        raise InputError(
            f"must be a finite number, got {text!r}; replace it with a measured value",
            source=source,
            where=f"{where} field {key!r}",
        )
    if total < 0:
        raise InputError(f"must not be negative, got {text!r}", source=source, where=f"{where} field {key!r}")
    limit = MAX_BYTES if key.endswith("_size") else MAX_NUMBER
    if total > limit:
        raise InputError(
            f"is too large ({text.strip()[:40]}; at most {limit:g}): check its unit",
            source=source,
            where=f"{where} field {key!r}",
        )
    return total


def _parse_metrics(text: str, where: str, source: str) -> dict[str, float]:
    metrics: dict[str, str] = {}
    for item in text.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise InputError(f"expected key=value, got {item.strip()!r}; {_NODE_HINT}", source=source, where=where)
        metrics[key.strip()] = value
    missing = [k for k in _METRICS if k not in metrics]
    if missing:
        raise InputError(f"missing {', '.join(missing)}; {_NODE_HINT}", source=source, where=where)
    return {k: _parse_value(metrics[k], k, where, source) for k in _METRICS}


def _parse_node_line(line: str, lineno: int, source: str) -> _ParsedNode:
    where = f"line {lineno}"
    node_id, sep, rest = line.strip().partition(_SEP)
    description, sep2, metrics_text = rest.rpartition(_SEP)
    if sep2 and metrics_text.startswith("stage_id="):
        description, sep2, metrics_text = description.rpartition(_SEP)
    if not sep or not sep2 or not node_id or " " in node_id:
        if len(line.strip().split(_SEP)) == 2:
            raise InputError(f"an edge line must start with a tab or spaces; {_NODE_HINT}", source=source, where=where)
        raise InputError(f"malformed node line {line.strip()[:60]!r}; {_NODE_HINT}", source=source, where=where)
    m = _parse_metrics(metrics_text, f"{where}: node {node_id!r}", source)
    description = description.strip()
    node = Node(
        id=node_id,
        name=description,
        op_type=description.split("(", 1)[0].strip(),
        forward_time=m["forward_compute_time"],
        backward_time=m["backward_compute_time"],
        param_bytes=round(m["parameter_size"]),
        activation_bytes=round(m["activation_size"]),
    )
    return _ParsedNode(node, node.activation_bytes, lineno)


def _parse_edge_line(line: str, lineno: int, source: str) -> tuple[str, str]:
    parts = [p.strip() for p in line.strip().split(_SEP)]
    if len(parts) != 2 or not all(parts) or any(" " in p for p in parts):
        raise InputError(f"malformed edge line {line.strip()[:60]!r}; {_EDGE_HINT}", source=source, where=f"line {lineno}")
    return parts[0], parts[1]


def _check_edges(edges: list[tuple[str, str, int]], nodes: dict[str, _ParsedNode], source: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for src, dst, lineno in edges:
        where = f"line {lineno}"
        for end in (src, dst):
            if end not in nodes:
                raise InputError(
                    f"edge refers to unknown node {end!r}; add its node line or fix the id", source=source, where=where
                )
        if (src, dst) in seen:
            raise InputError(f"duplicate edge {src} -- {dst} (first on line {seen[src, dst]})", source=source, where=where)
        seen[src, dst] = lineno


def parse_pipedream(text: str, source: str = "", *, name: str = "") -> Graph:
    """Parse the text of a PipeDream ``graph.txt`` profile.

    Parameters
    ----------
    text
        The profile's text.
    source
        The file, for messages.
    name
        The graph name.

    Returns
    -------
    Graph
        Nodes in file order; times in ms.

    Raises
    ------
    InputError
        On a malformed line (naming the file and line number), an unknown edge endpoint,
        a duplicate node or edge, a NaN or negative value, or a cycle.
    """
    if not text.strip():
        raise InputError("the file is empty; it should hold a PipeDream profile", source=source)
    nodes: dict[str, _ParsedNode] = {}
    edges: list[tuple[str, str, int]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line[0].isspace():
            edges.append((*_parse_edge_line(line, lineno, source), lineno))
            continue
        parsed = _parse_node_line(line, lineno, source)
        if parsed.node.id in nodes:
            raise InputError(
                f"duplicate node id {parsed.node.id!r} (first on line {nodes[parsed.node.id].line})",
                source=source,
                where=f"line {lineno}",
            )
        nodes[parsed.node.id] = parsed
    if not nodes:
        raise InputError(f"no node line found; {_NODE_HINT}", source=source)
    _check_edges(edges, nodes, source)
    graph_edges = [Edge(src, dst, bytes=nodes[src].output_bytes) for src, dst, _ in edges]
    return make_graph([p.node for p in nodes.values()], graph_edges, name=name, time_unit="ms", source=source or None)


def read_pipedream(path: str | Path) -> Instance:
    """Read a PipeDream ``graph.txt`` profile; the graph is named after the file, with no cluster.

    Raises
    ------
    InputError
        On any failure to read or parse, naming the file (and line number).
    """
    source = str(path)
    return Instance(parse_pipedream(read_text_file(path), source, name=Path(path).stem), None, source)
