"""The ``placement-instance/1`` JSON format (Moirai's instances, converted).

One JSON object::

    {"format": "placement-instance/1", "name": ..., "source": ..., "time_unit": ..., "memory_unit": ..., "notes": ...,
     "devices": [{"id": "d0", "memory": 14}, ...],
     "tasks":   [{"id": "1", "time": [8.0, 9.0, 7.0], "memory": 5}, ...],
     "edges":   [{"source": "0", "target": "1", "comm": [[0, 1, 2], [1, 0, 1], [2, 1, 0]]}, ...]}

``time`` has one number per device in ``devices`` order (``null`` marks a device
the task cannot run on); ``comm[a][b]`` is the transfer time when the source
runs on device a and the target on device b (zero diagonal).  Extensions read
here and written back: a device's ``memory`` may be ``null`` (unbounded) and it
may name its ``kind``; a task may carry ``"colocation": "group"`` and ``"name"``.

The devices read into the problem's :class:`~milp_partition.cluster.Cluster`
(:func:`~milp_partition.placement.problem.placement_cluster`): named devices,
a kind per distinct (time column, capacity) unless the file names the kinds,
each device's ``memory`` in bytes when ``memory_unit`` is a unit of bits or
bytes (Moirai's files: ``"bit"``) and none in bytes when it is abstract (the
capacities then stay in ``memory_unit``, in the problem's ``device_memory``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from milp_partition.cluster import CPU_KIND
from milp_partition.errors import InputError
from milp_partition.io.json_text import (
    check_known_keys,
    check_list,
    check_object,
    dump_json_lines,
    get_optional_str,
    get_str,
    get_value,
    parse_json,
    read_text_file,
    to_float,
    to_id,
    write_text_file,
)
from milp_partition.placement.problem import PlacementProblem, PlacementSettings, make_placement_problem

FORMAT = "placement-instance/1"
_TOP_KEYS = ("format", "name", "source", "time_unit", "memory_unit", "notes", "devices", "tasks", "edges")


def looks_like_placement_instance(data: Any) -> bool:
    """True for a parsed JSON object that declares this format."""
    return isinstance(data, Mapping) and data.get("format") == FORMAT


def placement_from_dict(data: Any, source: str = "", settings: PlacementSettings | None = None) -> PlacementProblem:
    """Build a validated :class:`PlacementProblem` from a parsed ``placement-instance/1`` object.

    Raises
    ------
    InputError
        Naming the file and the task, device, edge or field that is wrong.
    """
    obj = check_object(data, "the top level", source)
    fmt = obj.get("format")
    if fmt != FORMAT:
        raise InputError(f"'format' must be {FORMAT!r}, got {fmt!r}; is this a placement instance?", source=source)
    check_known_keys(obj, _TOP_KEYS, "the top level", source)
    devices = check_list(get_value(obj, "devices", "the top level", source), "field 'devices'", source)
    tasks = check_list(get_value(obj, "tasks", "the top level", source), "field 'tasks'", source)
    edges = check_list(get_value(obj, "edges", "the top level", source, default=[]), "field 'edges'", source)
    device_ids: list[str] = []
    capacity: list[float] = []
    kinds: list[str | None] = []
    for k, dev in enumerate(devices):
        where = f"device {k}"
        dev = check_object(dev, where, source)
        check_known_keys(dev, ("id", "memory", "kind", "name"), where, source)
        device_ids.append(to_id(get_value(dev, "id", where, source), f"{where} field 'id'", source))
        where = f"device {device_ids[-1]!r}"
        mem = dev.get("memory")
        capacity.append(math.inf if mem is None else to_float(mem, f"{where} field 'memory'", source))
        kinds.append(get_optional_str(dev, "kind", where, source) or None)
    d = len(device_ids)
    task_ids: list[str] = []
    names: list[str] = []
    times: list[list[float]] = []
    memory: list[float] = []
    groups: list[str | None] = []
    for i, task in enumerate(tasks):
        where = f"task {i}"
        task = check_object(task, where, source)
        check_known_keys(task, ("id", "time", "memory", "colocation", "name"), where, source)
        tid = to_id(get_value(task, "id", where, source), f"{where} field 'id'", source)
        where = f"task {tid!r}"
        row = check_list(get_value(task, "time", where, source), f"{where} field 'time'", source)
        if len(row) != d:
            raise InputError(
                f"needs one time per device ({d}: {', '.join(device_ids)}), got {len(row)}",
                source=source,
                where=f"{where} field 'time'",
            )
        times.append([math.inf if t is None else to_float(t, f"{where} field 'time[{k}]'", source) for k, t in enumerate(row)])
        memory.append(to_float(task.get("memory", 0), f"{where} field 'memory'", source))
        groups.append(get_optional_str(task, "colocation", where, source))
        names.append(get_str(task, "name", where, source, default=""))
        task_ids.append(tid)
    pairs: list[tuple[str, str]] = []
    comm: list[list[list[float]]] = []
    for e, edge in enumerate(edges):
        where = f"edge {e}"
        edge = check_object(edge, where, source)
        check_known_keys(edge, ("source", "target", "comm", "bytes"), where, source)
        a = to_id(get_value(edge, "source", where, source), f"{where} field 'source'", source)
        b = to_id(get_value(edge, "target", where, source), f"{where} field 'target'", source)
        where = f"edge {e} ({a!r} -> {b!r})"
        rows = check_list(get_value(edge, "comm", where, source), f"{where} field 'comm'", source)
        if len(rows) != d or any(not isinstance(r, (list, tuple)) or len(r) != d for r in rows):
            raise InputError(
                f"must be a {d} x {d} matrix (one row and one column per device), got "
                f"{len(rows)} rows of lengths {[len(r) if isinstance(r, (list, tuple)) else '?' for r in rows][:6]}",
                source=source,
                where=f"{where} field 'comm'",
            )
        comm.append(
            [[to_float(x, f"{where} field 'comm[{r}][{c}]'", source) for c, x in enumerate(row)] for r, row in enumerate(rows)]
        )
        pairs.append((a, b))
    return make_placement_problem(
        task_ids,
        device_ids,
        times if task_ids else [[0.0] * d][:0],
        memory,
        capacity,
        pairs,
        comm,
        colocation=groups if any(g is not None for g in groups) else None,
        name=str(obj.get("name") or Path(source).stem if source else obj.get("name") or ""),
        time_unit=str(obj.get("time_unit") or "abstract"),
        memory_unit=str(obj.get("memory_unit") or "abstract"),
        settings=settings,
        task_names=tuple(names) if any(names) else (),
        source=source,
        device_kinds=kinds if any(k is not None for k in kinds) else None,
    )


def read_placement_instance(path: str | Path, settings: PlacementSettings | None = None) -> PlacementProblem:
    """Read and validate a ``placement-instance/1`` file."""
    source = str(path)
    return placement_from_dict(parse_json(read_text_file(path), source), source, settings)


def placement_to_dict(problem: PlacementProblem, *, source_note: str = "") -> dict[str, Any]:
    """The ``placement-instance/1`` object of a problem (inverse of :func:`placement_from_dict`)."""

    def num(x: float) -> float | int | None:
        if math.isinf(x):
            return None
        return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)

    tasks = []
    for i, tid in enumerate(problem.task_ids):
        task: dict[str, Any] = {
            "id": tid,
            "time": [num(t) for t in problem.time[i].tolist()],
            "memory": num(problem.task_memory[i]),
        }
        if problem.task_names and problem.task_names[i]:
            task["name"] = problem.task_names[i]
        if problem.colocation[i] >= 0:
            task["colocation"] = f"g{int(problem.colocation[i])}"
        tasks.append(task)
    edges = [
        {
            "source": problem.task_ids[int(a)],
            "target": problem.task_ids[int(b)],
            "comm": [[num(x) for x in row] for row in problem.comm[e].tolist()],
        }
        for e, (a, b) in enumerate(zip(problem.edge_source.tolist(), problem.edge_target.tolist()))
    ]
    kind_of = {d.id: d.kind for d in problem.cluster.devices}
    kind_of.update({f"{CPU_KIND}{c}": CPU_KIND for c in range(problem.cluster.host_cpu_cores)})
    devices = [
        {"id": dev, "memory": num(problem.device_memory[k]), **({"kind": kind_of[dev]} if dev in kind_of else {})}
        for k, dev in enumerate(problem.device_ids)
    ]
    return {
        "format": FORMAT,
        "name": problem.name,
        "source": source_note or "written by milp-partition",
        "time_unit": problem.time_unit,
        "memory_unit": problem.memory_unit,
        "devices": devices,
        "tasks": tasks,
        "edges": edges,
    }


def write_placement_instance(problem: PlacementProblem, path: str | Path) -> None:
    """Write a problem as ``placement-instance/1`` JSON, one task or edge per line."""
    write_text_file(path, dump_json_lines(placement_to_dict(problem), ("devices", "tasks", "edges"), source=str(path)))
