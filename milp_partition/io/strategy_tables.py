"""The strategy-table JSON format (``"format": "strategy-tables/1"``) of ``shared/benchmarks/strategy/``.

One JSON object holds a :class:`~milp_partition.strategy.StrategyProblem`:

``format``
    ``"strategy-tables/1"`` (required).
``name``, ``source``, ``cost_unit``
    Strings (optional; ``name`` defaults to the file's stem).  ``source`` is the
    provenance text and lands in ``StrategyProblem.extra["source_text"]``;
    :attr:`StrategyProblem.source` holds the file path.
``devices``
    The number of devices p, a positive integer (required): the count of the problem's one-kind
    :class:`~milp_partition.cluster.Cluster`.
``nodes[]``
    ``id`` (string; an integer is kept as its decimal text), ``name`` (string,
    optional), ``configs`` (non-empty list of distinct strings), ``cost`` (one
    finite non-negative number per configuration) and, as an extension this
    project writes, ``memory_bytes`` (one whole non-negative number per
    configuration) and ``activation_bytes`` (the part of ``memory_bytes`` that
    is the output activation, freed under the liveness memory model).
``edges[]``
    ``source``, ``target`` (node ids) and ``cost``: a matrix with one row per
    source configuration and one column per target configuration.
``memory_limit_bytes``
    Extension: a whole non-negative number or ``null`` (optional): the memory of one device of the cluster.
``memory_model``
    Extension: ``"static"`` (default) or ``"liveness"``
    (see :class:`~milp_partition.strategy.StrategyProblem`).

Costs become float64 arrays and memory int64 arrays.  Writing with
:func:`write_strategy_tables` then reading with :func:`read_strategy_tables`
gives back equal arrays and fields (floats are written with ``repr``
precision).  Every defect raises :class:`~milp_partition.errors.InputError`
naming the file, the node or edge and the field.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from milp_partition.errors import InputError
from milp_partition.io.json_text import (
    check_known_keys,
    check_list,
    check_object,
    dump_json_lines,
    get_str,
    get_value,
    parse_json,
    read_text_file,
    to_bytes,
    to_id,
    write_text_file,
)
from milp_partition.io.native import check_format
from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, strategy_cluster

__all__ = [
    "STRATEGY_FORMAT",
    "looks_like_strategy_tables",
    "read_strategy_tables",
    "strategy_from_dict",
    "strategy_to_dict",
    "write_strategy_tables",
]

#: Value of the ``format`` field of a strategy-table file.
STRATEGY_FORMAT = "strategy-tables/1"

_TOP_FIELDS = ("format", "name", "source", "devices", "cost_unit", "nodes", "edges", "memory_limit_bytes", "memory_model")
_NODE_FIELDS = ("id", "name", "configs", "cost", "memory_bytes", "activation_bytes")
_EDGE_FIELDS = ("source", "target", "cost")
_NUMBER_TYPES = frozenset({int, float})


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _field(where: str, key: str) -> str:
    return f"{where} field '{key}'"


# ---------------------------------------------------------------------------
# Numbers, vectors and matrices
# ---------------------------------------------------------------------------


def _first_non_number(values: list[Any]) -> int | None:
    """Position of the first value that is not a JSON number (bools excluded), or ``None``."""
    if set(map(type, values)) <= _NUMBER_TYPES:
        return None
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return i
    return None


def _to_float_array(values: list[Any], where: str, source: str) -> np.ndarray:
    """``values`` (numbers only) as a float64 array; huge integers raise :class:`InputError`."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (OverflowError, ValueError, TypeError) as exc:
        raise InputError(f"holds a number float64 cannot represent ({exc})", source=source, where=where) from None


def _check_costs(array: np.ndarray, where: str, source: str) -> None:
    """Reject NaN, infinite and negative entries of ``array``, naming the first one."""
    bad = ~np.isfinite(array) | (array < 0)
    if not bad.any():
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    value = float(array[index])
    what = "a finite number" if not np.isfinite(value) else "non-negative"
    position = "".join(f"[{i}]" for i in index)
    raise InputError(f"{position} must be {what}, got {value!r}; costs are finite and >= 0", source=source, where=where)


def _cost_vector(value: Any, length: int, where: str, source: str) -> np.ndarray:
    """A list of ``length`` finite non-negative numbers as a float64 array."""
    values = check_list(value, where, source)
    if len(values) != length:
        raise InputError(
            f"has {len(values)} entries but the node has {length} configurations; give one cost per configuration",
            source=source,
            where=where,
        )
    bad = _first_non_number(values)
    if bad is not None:
        raise InputError(f"[{bad}] must be a number, got {_short(values[bad])}", source=source, where=where)
    array = _to_float_array(values, where, source)
    _check_costs(array, where, source)
    return array


def _cost_matrix(value: Any, shape: tuple[int, int], where: str, source: str) -> np.ndarray:
    """A ``shape`` matrix (list of rows) of finite non-negative numbers as a float64 array."""
    rows = check_list(value, where, source)
    expected = f"expected shape {shape[0]}x{shape[1]} (source configurations x target configurations)"
    if len(rows) != shape[0]:
        raise InputError(f"has {len(rows)} rows; {expected}, got {len(rows)} rows", source=source, where=where)
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise InputError(f"row {i} must be a JSON array, got {_short(row)}", source=source, where=where)
        if len(row) != shape[1]:
            raise InputError(
                f"row {i} has {len(row)} entries; {expected}, got a row of length {len(row)}", source=source, where=where
            )
        bad = _first_non_number(row)
        if bad is not None:
            raise InputError(f"[{i}][{bad}] must be a number, got {_short(row[bad])}", source=source, where=where)
    array = _to_float_array(rows, where, source).reshape(shape)
    _check_costs(array, where, source)
    return array


def _memory_vector(value: Any, length: int, where: str, source: str) -> np.ndarray:
    """A list of ``length`` whole non-negative byte counts as an int64 array."""
    values = check_list(value, where, source)
    if len(values) != length:
        raise InputError(
            f"has {len(values)} entries but the node has {length} configurations; give one byte count per configuration",
            source=source,
            where=where,
        )
    result = [to_bytes(v, f"{where}[{i}]", source) for i, v in enumerate(values)]
    for i, v in enumerate(result):
        if v < 0 or v >= 2**63:
            raise InputError(f"[{i}] must be a byte count in [0, 2**63), got {v}", source=source, where=where)
    return np.asarray(result, dtype=np.int64)


# ---------------------------------------------------------------------------
# Nodes and edges
# ---------------------------------------------------------------------------


def _configs(value: Any, where: str, source: str) -> tuple[str, ...]:
    configs = check_list(value, where, source)
    if not configs:
        raise InputError("is empty; a node needs at least one configuration", source=source, where=where)
    seen: dict[str, int] = {}
    for i, name in enumerate(configs):
        if not isinstance(name, str) or not name:
            raise InputError(f"[{i}] must be a non-empty string, got {_short(name)}", source=source, where=where)
        if name in seen:
            raise InputError(
                f"names configuration {name!r} twice (positions {seen[name]} and {i}); configuration names must be distinct",
                source=source,
                where=where,
            )
        seen[name] = i
    return tuple(configs)


def _node_from_dict(obj: Any, position: int, source: str) -> StrategyNode:
    pwhere = f"nodes[{position}]"
    obj = check_object(obj, pwhere, source)
    node_id = to_id(get_value(obj, "id", pwhere, source), _field(pwhere, "id"), source)
    where = f"node {node_id!r}"
    check_known_keys(obj, _NODE_FIELDS, where, source)
    configs = _configs(get_value(obj, "configs", where, source), _field(where, "configs"), source)
    cost = _cost_vector(get_value(obj, "cost", where, source), len(configs), _field(where, "cost"), source)
    memory = obj.get("memory_bytes")
    memory_bytes = None if memory is None else _memory_vector(memory, len(configs), _field(where, "memory_bytes"), source)
    activation = obj.get("activation_bytes")
    activation_bytes = None
    if activation is not None:
        if memory_bytes is None:
            raise InputError("is given without 'memory_bytes'; give both", source=source, where=_field(where, "activation_bytes"))
        activation_bytes = _memory_vector(activation, len(configs), _field(where, "activation_bytes"), source)
        over = np.flatnonzero(activation_bytes > memory_bytes)
        if len(over):
            raise InputError(
                f"[{int(over[0])}] is larger than memory_bytes[{int(over[0])}]; the activation is a part of the memory",
                source=source,
                where=_field(where, "activation_bytes"),
            )
    return StrategyNode(
        id=node_id,
        name=get_str(obj, "name", where, source, ""),
        configs=configs,
        cost=cost,
        memory_bytes=memory_bytes,
        activation_bytes=activation_bytes,
    )


def _edge_from_dict(obj: Any, position: int, nodes: Mapping[str, StrategyNode], source: str) -> StrategyEdge:
    pwhere = f"edges[{position}]"
    obj = check_object(obj, pwhere, source)
    ends = []
    for key in ("source", "target"):
        node_id = to_id(get_value(obj, key, pwhere, source), _field(pwhere, key), source)
        if node_id not in nodes:
            raise InputError(
                f"names unknown node {node_id!r}; every edge end must be the id of a node",
                source=source,
                where=_field(pwhere, key),
            )
        ends.append(node_id)
    src, tgt = ends
    where = f"edge {src!r} -> {tgt!r} ({pwhere})"
    check_known_keys(obj, _EDGE_FIELDS, where, source)
    if src == tgt:
        raise InputError("is a self-loop; an edge joins two different layers", source=source, where=where)
    shape = (len(nodes[src].configs), len(nodes[tgt].configs))
    cost = _cost_matrix(get_value(obj, "cost", where, source), shape, _field(where, "cost"), source)
    return StrategyEdge(source=src, target=tgt, cost=cost)


def _devices(data: Mapping[str, Any], source: str) -> int:
    value = get_value(data, "devices", "top level", source)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"must be a positive integer, got {_short(value)}", source=source, where="field 'devices'")
    return int(value)


def _memory_limit(data: Mapping[str, Any], source: str) -> int | None:
    value = data.get("memory_limit_bytes")
    if value is None:
        return None
    where = "field 'memory_limit_bytes'"
    limit = to_bytes(value, where, source, expected="a whole number of bytes or null")
    if limit < 0:
        raise InputError(f"must be non-negative, got {limit}", source=source, where=where)
    return limit


def _memory_model(data: Mapping[str, Any], source: str) -> str:
    value = get_str(data, "memory_model", "top level", source, "static")
    if value not in ("static", "liveness"):
        raise InputError(f"must be 'static' or 'liveness', got {value!r}", source=source, where="field 'memory_model'")
    return value


# ---------------------------------------------------------------------------
# Whole problems
# ---------------------------------------------------------------------------


def looks_like_strategy_tables(data: Any) -> bool:
    """Whether a parsed JSON value claims the strategy-table format (any version).

    Parameters
    ----------
    data
        The parsed JSON value.

    Returns
    -------
    bool
        True for an object whose ``format`` starts with ``"strategy-tables/"``;
        :func:`strategy_from_dict` then reports an unsupported version.
    """
    if not isinstance(data, Mapping):
        return False
    fmt = data.get("format")
    return isinstance(fmt, str) and fmt.startswith("strategy-tables/")


def strategy_from_dict(data: Any, source: str = "", *, default_name: str = "") -> StrategyProblem:
    """Build a :class:`StrategyProblem` from a parsed ``strategy-tables/1`` object.

    Parameters
    ----------
    data
        The parsed JSON object.
    source
        The file it came from: named in messages and kept as :attr:`StrategyProblem.source`.
    default_name
        The problem's name when the object has no ``name``.

    Returns
    -------
    StrategyProblem
        With float64 cost arrays, int64 memory arrays where given, and the
        ``source`` text under ``extra["source_text"]``.

    Raises
    ------
    InputError
        On a wrong format, a missing, unknown or mistyped field, a duplicate node
        id or configuration name, a cost list or matrix of the wrong shape, a
        NaN, infinite or negative cost, an edge to an unknown node, a self-loop
        or a duplicate edge.
    """
    data = check_object(data, "top level", source)
    check_format(data, STRATEGY_FORMAT, source)
    check_known_keys(data, _TOP_FIELDS, "top level", source)
    name = get_str(data, "name", "top level", source, default_name)
    source_text = get_str(data, "source", "top level", source, "")
    cost_unit = get_str(data, "cost_unit", "top level", source, "")
    devices = _devices(data, source)
    raw_nodes = check_list(get_value(data, "nodes", "top level", source), "field 'nodes'", source)
    raw_edges = check_list(get_value(data, "edges", "top level", source), "field 'edges'", source)

    nodes: dict[str, StrategyNode] = {}
    for i, obj in enumerate(raw_nodes):
        node = _node_from_dict(obj, i, source)
        if node.id in nodes:
            raise InputError("duplicate node id; every node id must be unique", source=source, where=f"nodes[{i}] ({node.id!r})")
        nodes[node.id] = node

    edges: list[StrategyEdge] = []
    seen: dict[tuple[str, str], int] = {}
    for i, obj in enumerate(raw_edges):
        edge = _edge_from_dict(obj, i, nodes, source)
        key = (edge.source, edge.target)
        if key in seen:
            raise InputError(
                f"duplicates edges[{seen[key]}] (same source and target); merge their cost matrices into one edge",
                source=source,
                where=f"edge {edge.source!r} -> {edge.target!r} (edges[{i}])",
            )
        seen[key] = i
        edges.append(edge)

    return StrategyProblem(
        nodes=tuple(nodes.values()),
        edges=tuple(edges),
        name=name,
        cost_unit=cost_unit,
        source=source,
        memory_model=_memory_model(data, source),
        extra={"source_text": source_text},
        cluster=strategy_cluster(devices, _memory_limit(data, source)),
    )


def read_strategy_tables(path: str | Path) -> StrategyProblem:
    """Read a ``strategy-tables/1`` file; the problem is named after the file when it has no ``name``.

    Parameters
    ----------
    path
        The file.

    Returns
    -------
    StrategyProblem
        With ``source=str(path)``.

    Raises
    ------
    InputError
        On any failure to read, parse or validate, naming the file (see :func:`strategy_from_dict`).
    """
    source = str(path)
    data = parse_json(read_text_file(path), source)
    return strategy_from_dict(data, source, default_name=Path(path).stem)


def strategy_to_dict(problem: StrategyProblem) -> dict[str, Any]:
    """The problem as a JSON-ready ``strategy-tables/1`` dict (the inverse of :func:`strategy_from_dict`).

    Parameters
    ----------
    problem
        What to write.  ``memory_bytes`` is written for the nodes that have it and
        ``memory_limit_bytes`` when it is not ``None``.

    Returns
    -------
    dict
        Plain lists, floats and ints only.
    """
    source_text = problem.extra.get("source_text", "")
    data: dict[str, Any] = {
        "format": STRATEGY_FORMAT,
        "name": problem.name,
        "source": source_text if isinstance(source_text, str) else str(source_text),
        "devices": int(problem.devices),
        "cost_unit": problem.cost_unit,
    }
    if problem.memory_limit_bytes is not None:
        data["memory_limit_bytes"] = int(problem.memory_limit_bytes)
    if problem.memory_model != "static":
        data["memory_model"] = problem.memory_model
    data["nodes"] = [_node_to_dict(node) for node in problem.nodes]
    data["edges"] = [
        {"source": e.source, "target": e.target, "cost": np.asarray(e.cost, dtype=np.float64).tolist()} for e in problem.edges
    ]
    return data


def _node_to_dict(node: StrategyNode) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": node.id,
        "name": node.name,
        "configs": list(node.configs),
        "cost": np.asarray(node.cost, dtype=np.float64).tolist(),
    }
    if node.memory_bytes is not None:
        obj["memory_bytes"] = [int(v) for v in np.asarray(node.memory_bytes).tolist()]
    if node.activation_bytes is not None:
        obj["activation_bytes"] = [int(v) for v in np.asarray(node.activation_bytes).tolist()]
    return obj


def write_strategy_tables(problem: StrategyProblem, path: str | Path) -> None:
    """Write ``problem`` as a ``strategy-tables/1`` file that :func:`read_strategy_tables` reads back equal.

    Parameters
    ----------
    problem
        What to write.
    path
        The file (overwritten); one node or edge per line.

    Raises
    ------
    InputError
        When a cost is NaN or infinite, or the file cannot be written.
    """
    source = str(path)
    write_text_file(path, dump_json_lines(strategy_to_dict(problem), ("nodes", "edges"), source=source))
