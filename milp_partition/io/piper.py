"""Joint-problem files: Piper's JSON (Tarnawski et al., NeurIPS 2021) and the native ``milp-partition-joint/1``.

Piper's JSON (as the authors publish it, ``msr-fiddle/piper`` folder ``inputs/``):
top-level ``maxMemoryPerDevice``, ``maxDevices``, ``bandwidth``, ``mbsInBatch``;
``nodes[]`` with ``id``, ``name`` and ``TMPCs`` (tensor-parallel degree -> list of
configurations with ``id``, ``timePerSample``, ``parameterSize``, ``memoryUsageA``,
``memoryUsageB``, ``syncTimeFw``, ``syncTimeBw``); ``edges[]`` with ``sourceId``,
``destId``, ``communicationCost``.  The native format holds the same data under the
project's names; both are documented in ``docs/FORMAT.md``.  Every problem is
reported as one :class:`~milp_partition.errors.InputError` naming file, node or field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milp_partition.cluster import Cluster
from milp_partition.errors import CycleError, InputError
from milp_partition.io.json_text import MAX_NUMBER, check_known_keys, parse_json, read_text_file, write_text_file
from milp_partition.joint.problem import JointConfig, JointEdge, JointNode, JointProblem, joint_cluster
from milp_partition.units import MAX_BYTES, MAX_COUNT, MAX_DEVICES, MAX_RATE_BYTES_PER_S

#: Value of the ``format`` field of a native joint file.
JOINT_FORMAT = "milp-partition-joint/1"


def looks_like_piper(data: Any) -> bool:
    """Whether parsed JSON is Piper's format (nodes with ``TMPCs``)."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        return False
    return bool(data["nodes"]) and isinstance(data["nodes"][0], dict) and "TMPCs" in data["nodes"][0]


def looks_like_joint(data: Any) -> bool:
    """Whether parsed JSON is a joint-problem file (native ``milp-partition-joint/1`` or Piper's)."""
    return (isinstance(data, dict) and data.get("format") == JOINT_FORMAT) or looks_like_piper(data)


def _number(value: Any, where: str, source: str, *, what: str = "a number >= 0", most: float = MAX_NUMBER) -> float:
    """A finite number from 0 to ``most`` (an integer too large for a float is refused, not an internal error)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"expected {what}, got {value!r}", source=source, where=where)
    try:
        x = float(value)
    except OverflowError:
        raise InputError(
            f"expected {what}, got an integer of {len(str(abs(value)))} digits", source=source, where=where
        ) from None
    if not math.isfinite(x) or x < 0:
        raise InputError(
            f"expected {what}, got {value!r} (fix the value: it must be finite and not negative)", source=source, where=where
        )
    if x > most:
        raise InputError(f"expected {what}, got {value!r}: more than {most:g}, check its unit", source=source, where=where)
    return x


def _positive_int(value: Any, where: str, source: str, most: int = MAX_COUNT) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"expected a positive integer, got {value!r}", source=source, where=where)
    try:
        ok = math.isfinite(float(value)) and float(value) == int(value) and int(value) >= 1
    except OverflowError:
        ok = False
    if not ok:
        raise InputError(f"expected a positive integer, got {str(value)[:40]}", source=source, where=where)
    if int(value) > most:
        raise InputError(f"expected a positive integer of at most {most}, got {value!r}", source=source, where=where)
    return int(value)


def _get(obj: Any, key: str, where: str, source: str) -> Any:
    if not isinstance(obj, Mapping):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", source=source, where=where)
    if key not in obj:
        raise InputError(f"missing field '{key}'", source=source, where=where)
    return obj[key]


def _id(value: Any, where: str, source: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, str) and not value):
        raise InputError(f"expected an id (integer or non-empty string), got {value!r}", source=source, where=where)
    return str(value)


def _sync_map(value: Any, allowed: set[str], where: str, source: str, side: str) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise InputError(f"expected an object mapping {side} id to bytes, got {value!r}", source=source, where=where)
    out: dict[str, float] = {}
    for key, v in value.items():
        if str(key) not in allowed:
            raise InputError(
                f"unknown id {key!r}: not a {side} of this node (its {side}s: {_few(sorted(allowed))})",
                source=source,
                where=where,
            )
        out[str(key)] = _number(v, f"{where}[{key!r}]", source)
    return out


def _few(items: list[str], limit: int = 8) -> str:
    if not items:
        return "none"
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _check_acyclic(ids: list[str], edges: list[JointEdge], source: str) -> None:
    succ: dict[str, list[str]] = {i: [] for i in ids}
    for e in edges:
        succ[e.source].append(e.target)
    color = dict.fromkeys(ids, 0)
    parent: dict[str, str] = {}
    for root in ids:
        if color[root]:
            continue
        stack = [(root, iter(succ[root]))]
        color[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
            elif color[nxt] == 0:
                color[nxt] = 1
                parent[nxt] = node
                stack.append((nxt, iter(succ[nxt])))
            elif color[nxt] == 1:
                cycle = [node]
                while cycle[-1] != nxt:
                    cycle.append(parent[cycle[-1]])
                raise CycleError(list(reversed(cycle)), source=source)


def _build(
    raw_nodes: list[tuple[str, str, Any, str]],
    edges: list[JointEdge],
    read_config,
    cluster: dict[str, Any],
    name: str,
    source: str,
) -> JointProblem:
    ids = [i for i, _, _, _ in raw_nodes]
    seen: set[str] = set()
    for i, _, _, where in raw_nodes:
        if i in seen:
            raise InputError(f"duplicate node id {i!r}; ids must be unique", source=source, where=where)
        seen.add(i)
    preds: dict[str, set[str]] = {i: set() for i in ids}
    succs: dict[str, set[str]] = {i: set() for i in ids}
    for e in edges:
        preds[e.target].add(e.source)
        succs[e.source].add(e.target)
    _check_acyclic(ids, edges, source)
    nodes: list[JointNode] = []
    degrees: tuple[int, ...] | None = None
    first = ""
    for node_id, node_name, table, where in raw_nodes:
        if not isinstance(table, Mapping) or not table:
            raise InputError(
                "expected a non-empty object mapping tensor-parallel degree to configurations", source=source, where=where
            )
        configs: dict[int, tuple[JointConfig, ...]] = {}
        for t_key, lst in table.items():
            w = f"{where} degree {t_key!r}"
            try:
                t = int(str(t_key))
            except ValueError:
                t = 0
            if t < 1 or str(t) != str(t_key):  # " 2" or "02" beside "2" would replace one list by the other
                raise InputError(
                    f'tensor-parallel degree {t_key!r} is not a positive integer written plainly (e.g. "2")',
                    source=source,
                    where=w,
                )
            if not isinstance(lst, list) or not lst:
                raise InputError("expected a non-empty list of configurations", source=source, where=w)
            cfgs = tuple(read_config(c, f"{w} configuration {j}", preds[node_id], succs[node_id]) for j, c in enumerate(lst))
            names = [c.id for c in cfgs]
            if len(set(names)) != len(names):
                raise InputError(f"duplicate configuration ids {names}", source=source, where=w)
            configs[t] = cfgs
        ds = tuple(sorted(configs))
        if degrees is None:
            degrees, first = ds, node_id
        elif ds != degrees:
            missing = sorted(set(degrees) ^ set(ds))
            raise InputError(
                f"has configurations for degrees {list(ds)} but node {first!r} has {list(degrees)}: every node needs "
                f"configurations for the same tensor-parallel degrees (differ in {missing})",
                source=source,
                where=where,
            )
        nodes.append(JointNode(node_id, node_name, configs))
    if not nodes:
        raise InputError("the graph has no nodes", source=source, where="nodes")
    on, microbatches = _cluster(cluster, source)
    return JointProblem(tuple(nodes), tuple(edges), on, microbatches, name=name, source=source)


def _cluster(fields: dict[str, Any], source: str) -> tuple[Cluster, int]:
    """The cluster (one kind) and the micro-batches per batch the fields give."""
    missing = [k for k, v in fields.items() if v is None]
    if missing:
        flags = {
            "devices": "--devices K",
            "memory_bytes": "--memory SIZE",
            "bandwidth_bytes_per_s": "--bandwidth RATE",
            "microbatches": "--microbatches N",
        }
        raise InputError(
            "the joint problem needs " + ", ".join(missing) + "; give " + " ".join(flags[m] for m in missing),
            source=source,
        )
    cluster = joint_cluster(
        devices=_positive_int(fields["devices"], "devices", source, MAX_DEVICES),
        memory_bytes=_number(fields["memory_bytes"], "memory", source, what="a size in bytes", most=MAX_BYTES),
        bandwidth_bytes_per_s=_bandwidth(fields["bandwidth_bytes_per_s"], source),
    )
    return cluster, _positive_int(fields["microbatches"], "microbatches (mbsInBatch, N)", source)


def _bandwidth(value: Any, source: str) -> float:
    b = _number(value, "bandwidth", source, what="a positive number of bytes per second", most=MAX_RATE_BYTES_PER_S)
    if b <= 0:
        raise InputError("the bandwidth must be positive", source=source, where="bandwidth")
    return b


def check_joint_values(problem: JointProblem, source: str, hint: str = "") -> None:
    """Every figure of ``problem`` finite, not negative and at most :data:`MAX_NUMBER` (a problem built from other
    data, e.g. an imported graph, whose products overflowed); raises one :class:`InputError` naming node and field."""

    def check(value: float, where: str) -> None:
        if not (math.isfinite(value) and 0 <= value <= MAX_NUMBER):
            raise InputError(
                f"the value {value!r} is not a finite number from 0 to {MAX_NUMBER:g}{hint}", source=source, where=where
            )

    for n in problem.nodes:
        for t, cfgs in n.configs.items():
            for c in cfgs:
                where = f"node {n.id} degree {t} configuration {c.id!r}"
                for key in ("time_per_sample_s", "parameter_bytes", "activation_bytes", "fixed_bytes"):
                    check(getattr(c, key), f"{where}.{key}")
                for side, sync in (("sync_fw_bytes", c.sync_fw_bytes), ("sync_bw_bytes", c.sync_bw_bytes)):
                    for u, x in sync.items():
                        check(x, f"{where}.{side}[{u!r}]")
    for e in problem.edges:
        check(e.bytes, f"edge {e.source} -> {e.target}")
    cl = problem.cluster
    check(problem.memory_bytes, "memory")
    if not (math.isfinite(cl.bandwidth_bytes_per_s) and 0 < cl.bandwidth_bytes_per_s <= MAX_RATE_BYTES_PER_S):
        raise InputError(f"the bandwidth {cl.bandwidth_bytes_per_s!r} is not a finite rate more than 0{hint}", source=source)


def _overrides(fields: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    for k, v in overrides.items():
        if v is not None:
            out[k] = v
    return out


@dataclass(frozen=True)
class _Keys:
    """The field names of one joint format (Piper's JSON, or the native one): the readers share everything else."""

    top: tuple[str, ...]
    configs: str
    edge_source: str
    edge_target: str
    edge_bytes: str
    time: str
    parameters: str
    activation: str
    fixed: str
    sync_fw: str
    sync_bw: str


_PIPER_FIELDS = _Keys(
    ("maxMemoryPerDevice", "maxDevices", "bandwidth", "mbsInBatch", "name", "nodes", "edges"), "TMPCs", "sourceId", "destId", "communicationCost",
    "timePerSample", "parameterSize", "memoryUsageA", "memoryUsageB", "syncTimeFw", "syncTimeBw",
)  # fmt: skip
_NATIVE_FIELDS = _Keys(
    ("format", "name", "cluster", "nodes", "edges"), "configs", "source", "target", "bytes",
    "time_per_sample_s", "parameter_bytes", "activation_bytes", "fixed_bytes", "sync_fw_bytes", "sync_bw_bytes",
)  # fmt: skip


def _read_graph(data: Any, keys: _Keys, cluster: dict[str, Any], source: str) -> JointProblem:
    """Nodes, edges and configurations of either format (field names from ``keys``), then the problem."""
    nodes_raw = _get(data, "nodes", "top level", source)
    edges_raw = _get(data, "edges", "top level", source)
    if not isinstance(nodes_raw, list) or not isinstance(edges_raw, list):
        raise InputError("'nodes' and 'edges' must be lists", source=source, where="top level")
    check_known_keys(data, keys.top, "top level", source)  # a misspelt field is refused, not ignored
    raw: list[tuple[str, str, Any, str]] = []
    for j, n in enumerate(nodes_raw):
        node_id = _id(_get(n, "id", f"nodes[{j}]", source), f"nodes[{j}].id", source)
        where = f"node {node_id}"
        check_known_keys(n, ("id", "name", keys.configs), where, source)
        raw.append((node_id, str(n.get("name", "")), _get(n, keys.configs, where, source), f"{where} {keys.configs}"))
    known = {r[0] for r in raw}
    edges: list[JointEdge] = []
    first_at: dict[tuple[str, str], int] = {}
    for j, e in enumerate(edges_raw):
        where = f"edges[{j}]"
        s = _id(_get(e, keys.edge_source, where, source), f"{where}.{keys.edge_source}", source)
        t = _id(_get(e, keys.edge_target, where, source), f"{where}.{keys.edge_target}", source)
        check_known_keys(e, (keys.edge_source, keys.edge_target, keys.edge_bytes), where, source)
        for key, v in ((keys.edge_source, s), (keys.edge_target, t)):
            if v not in known:
                raise InputError(f"unknown node id {v!r}", source=source, where=f"{where}.{key}")
        if (s, t) in first_at:
            raise InputError(
                f"duplicate edge {s} -> {t} (also edges[{first_at[s, t]}]): give each pair of nodes one edge, "
                "its bytes the sum of the tensors",
                source=source,
                where=where,
            )
        first_at[s, t] = j
        edges.append(JointEdge(s, t, _number(_get(e, keys.edge_bytes, where, source), f"{where}.{keys.edge_bytes}", source)))

    def number(c: Any, key: str, where: str) -> float:
        return _number(_get(c, key, where, source), f"{where}.{key}", source)

    config_keys = ("id", keys.time, keys.parameters, keys.activation, keys.fixed, keys.sync_fw, keys.sync_bw)

    def read_config(c: Any, where: str, preds: set[str], succs: set[str]) -> JointConfig:
        config_id = _get(c, "id", where, source)
        check_known_keys(c, config_keys, where, source)
        if isinstance(config_id, bool) or not isinstance(config_id, (str, int)) or config_id == "":
            raise InputError(
                f"expected a configuration id (a non-empty string), got {config_id!r}", source=source, where=f"{where}.id"
            )
        return JointConfig(
            id=str(config_id),
            time_per_sample_s=number(c, keys.time, where),
            parameter_bytes=number(c, keys.parameters, where),
            activation_bytes=number(c, keys.activation, where),
            fixed_bytes=number(c, keys.fixed, where),
            sync_fw_bytes=_sync_map(c.get(keys.sync_fw, {}), preds, f"{where}.{keys.sync_fw}", source, "predecessor"),
            sync_bw_bytes=_sync_map(c.get(keys.sync_bw, {}), succs, f"{where}.{keys.sync_bw}", source, "successor"),
        )

    return _build(raw, edges, read_config, cluster, str(data.get("name", "")), source)


def piper_from_dict(data: Any, source: str = "", **overrides: Any) -> JointProblem:
    """A :class:`JointProblem` from parsed Piper JSON; ``overrides`` (``devices``, ``memory_bytes``, ...) replace the file's cluster."""
    if not isinstance(data, Mapping):  # the message _get gives (the cluster fields are read first here)
        raise InputError(f"expected a JSON object, got {type(data).__name__}", source=source, where="top level")
    cluster = _overrides(
        {
            "devices": data.get("maxDevices"),
            "memory_bytes": data.get("maxMemoryPerDevice"),
            "bandwidth_bytes_per_s": data.get("bandwidth"),
            "microbatches": data.get("mbsInBatch"),
        },
        overrides,
    )
    return _read_graph(data, _PIPER_FIELDS, cluster, source)


#: The fields of a native file's ``cluster`` object.
_NATIVE_CLUSTER = ("devices", "memory_bytes", "bandwidth_bytes_per_s", "microbatches", "peak_flops_per_s")


def file_cluster(data: Any, source: str) -> dict[str, float | int]:
    """The cluster a joint file gives (either format), each value checked as the solver would check it
    (``info`` prints them: a NaN is refused, not printed); fields the file leaves out are left out."""
    if not isinstance(data, Mapping):
        raise InputError(f"expected a JSON object, got {type(data).__name__}", source=source, where="top level")
    if looks_like_piper(data):
        fields = {"devices": "maxDevices", "memory_bytes": "maxMemoryPerDevice", "bandwidth_bytes_per_s": "bandwidth"}
        raw = {k: data.get(v) for k, v in {**fields, "microbatches": "mbsInBatch"}.items()}
    else:
        cl = data.get("cluster") or {}
        if not isinstance(cl, Mapping):
            raise InputError("expected an object", source=source, where="cluster")
        check_known_keys(cl, _NATIVE_CLUSTER, "cluster", source)
        raw = {k: cl.get(k) for k in _NATIVE_CLUSTER}
    out: dict[str, float | int] = {}
    for key, value in raw.items():
        if value is None:
            continue
        if key == "devices":
            out[key] = _positive_int(value, "devices", source, MAX_DEVICES)
        elif key == "microbatches":
            out[key] = _positive_int(value, "microbatches (mbsInBatch, N)", source)
        elif key == "memory_bytes":
            out[key] = _number(value, "memory", source, what="a size in bytes", most=MAX_BYTES)
        elif key == "peak_flops_per_s":
            out[key] = _peak_flops(value, source)
        else:
            out[key] = _bandwidth(value, source)
    return out


def joint_from_dict(data: Any, source: str = "", **overrides: Any) -> JointProblem:
    """A :class:`JointProblem` from a parsed native ``milp-partition-joint/1`` object (or Piper's, detected)."""
    if looks_like_piper(data):
        return piper_from_dict(data, source, **overrides)
    if not isinstance(data, Mapping) or data.get("format") != JOINT_FORMAT:
        raise InputError(
            f'not a joint-problem file: expected "format": "{JOINT_FORMAT}" or Piper\'s JSON (nodes with TMPCs)', source=source
        )
    cl = data.get("cluster", {}) or {}
    if not isinstance(cl, Mapping):
        raise InputError("expected an object", source=source, where="cluster")
    check_known_keys(cl, _NATIVE_CLUSTER, "cluster", source)
    cluster = _overrides({k: cl.get(k) for k in ("devices", "memory_bytes", "bandwidth_bytes_per_s", "microbatches")}, overrides)
    problem = _read_graph(data, _NATIVE_FIELDS, cluster, source)
    peak = cl.get("peak_flops_per_s")
    return problem if peak is None else problem.with_cluster(problem.cluster.with_peak_flops(_peak_flops(peak, source)))


def _peak_flops(value: Any, source: str) -> float:
    """The optional compute profile of the native format's cluster: peak FLOP/s of one device (read, not priced)."""
    peak = _number(value, "cluster.peak_flops_per_s", source, what="a positive number of FLOP/s", most=MAX_NUMBER)
    if peak <= 0:
        raise InputError("the peak FLOP rate must be positive", source=source, where="cluster.peak_flops_per_s")
    return peak


def read_joint(path: str | Path, **overrides: Any) -> JointProblem:
    """Read a joint-problem file (native or Piper's); ``overrides`` replace the file's cluster fields."""
    source = str(path)
    return joint_from_dict(parse_json(read_text_file(path), source), source, **overrides)


def joint_to_dict(problem: JointProblem) -> dict[str, Any]:
    """The native ``milp-partition-joint/1`` object of ``problem`` (reads back equal)."""
    c = problem.cluster
    return {
        "format": JOINT_FORMAT,
        "name": problem.name,
        "cluster": {
            "devices": c.device_count,
            "memory_bytes": problem.memory_bytes,
            "bandwidth_bytes_per_s": c.bandwidth_bytes_per_s,
            "microbatches": problem.microbatches,
            **({"peak_flops_per_s": c.one_kind.peak_flops_per_s} if c.one_kind.peak_flops_per_s is not None else {}),
        },
        "nodes": [
            {
                "id": n.id,
                "name": n.name,
                "configs": {
                    str(t): [
                        {
                            "id": cf.id,
                            "time_per_sample_s": cf.time_per_sample_s,
                            "parameter_bytes": cf.parameter_bytes,
                            "activation_bytes": cf.activation_bytes,
                            "fixed_bytes": cf.fixed_bytes,
                            "sync_fw_bytes": dict(cf.sync_fw_bytes),
                            "sync_bw_bytes": dict(cf.sync_bw_bytes),
                        }
                        for cf in cfgs
                    ]
                    for t, cfgs in sorted(n.configs.items())
                },
            }
            for n in problem.nodes
        ],
        "edges": [{"source": e.source, "target": e.target, "bytes": e.bytes} for e in problem.edges],
    }


def write_joint(problem: JointProblem, path: str | Path) -> None:
    """Write ``problem`` as native ``milp-partition-joint/1`` JSON."""

    write_text_file(path, json.dumps(joint_to_dict(problem), indent=1) + "\n")
