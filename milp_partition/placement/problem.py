"""Data model of the operator placement and scheduling problem (Moirai, Baechi, ParDNN).

Each task runs on one device for a time that depends on the device; tasks on one
device do not overlap; a task starts after each predecessor has finished plus,
when the two run on different devices ``a != b``, the edge's transfer time
``comm[e, a, b]``.  The memory of a device's tasks stays within its capacity.
The objective is the makespan.

The problem is held array-first, because heuristics and generators work on graphs
of up to hundreds of thousands of tasks:

========================  ==============  =============================================
array                     shape           meaning
========================  ==============  =============================================
``time``                  (n, d) float    run time of task i on device k (``inf``: cannot run there)
``task_memory``           (n,) float      memory the task holds on its device
``device_memory``         (d,) float      capacity (``inf``: unbounded)
``edge_source/target``    (m,) int        task indices of each edge
``comm``                  (m, d, d) float transfer time of edge e from device a to b; zero diagonal
``colocation``            (n,) int        colocation group index, ``-1`` for none
========================  ==============  =============================================

Times are in ``time_unit`` and memory in ``memory_unit``, the instance's own
(Moirai's data give no units; the native path uses seconds and bytes).

The devices are also the problem's :class:`~milp_partition.cluster.Cluster` (:attr:`PlacementProblem.cluster`):
a problem built from a graph file holds the graph's cluster (its accelerators, then its host CPU cores); a
placement instance file's devices become named devices (:func:`placement_cluster`), one kind per distinct
(time column, capacity) pair -- the device's speed on every task and its memory -- unless the file names the kinds,
each device with its capacity in bytes when ``memory_unit`` is a unit of bits or bytes (:data:`BYTES_PER_UNIT`) and
``None`` when it is abstract (the capacity then lives only in ``device_memory``, in ``memory_unit``).  The solvers
read the arrays; the cluster says what hardware the instance describes.  A task
whose time is zero on every device (a virtual input) occupies no device: it is
still placed, for its edges' transfers, but never blocks another task.

This module knows no solver, formulation or heuristic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from milp_partition.cluster import ACCELERATOR_KIND, CPU_KIND, Cluster, Device, DeviceKind
from milp_partition.errors import CycleError, InputError
from milp_partition.graph import _csr, find_cycle

MemoryModel = Literal["static", "liveness"]


@dataclass(frozen=True)
class PlacementSettings:
    """Options of the placement problem.

    Attributes
    ----------
    link_contention
        Serialize the transfers that leave one device, and those that enter one
        device (Moirai's congestion constraints): each transfer then occupies its
        source's out-port and its target's in-port for its duration.
    memory_model
        ``"static"``: a device holds the sum of its tasks' memory for the whole
        step.  ``"liveness"``: a task's memory is held from its start until the
        last of its successors has finished (until its own end if it has none),
        and the peak over time must fit.
    """

    link_contention: bool = False
    memory_model: MemoryModel = "static"

    def __post_init__(self) -> None:
        if self.memory_model not in ("static", "liveness"):
            raise InputError(f"memory_model must be 'static' or 'liveness', got {self.memory_model!r}", where="settings")


#: Bytes per unit of memory for the ``memory_unit`` names that are units of information (case-sensitive: ``b`` is
#: not read as bits).  Any other unit (``"abstract"``, Moirai's own) has no bytes: the cluster's devices then carry no
#: memory in bytes.
BYTES_PER_UNIT: dict[str, float] = {
    "bit": 1 / 8,
    "bits": 1 / 8,
    "B": 1.0,
    "byte": 1.0,
    "bytes": 1.0,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "KiB": 2.0**10,
    "MiB": 2.0**20,
    "GiB": 2.0**30,
}


@dataclass(frozen=True, eq=False)
class PlacementProblem:
    """A validated placement instance; build it with :func:`make_placement_problem`.

    ``cluster`` is the hardware the devices are (see the module docstring): its named devices, then its host CPU
    cores, are ``device_ids`` in order."""

    task_ids: tuple[str, ...]
    device_ids: tuple[str, ...]
    time: np.ndarray
    task_memory: np.ndarray
    device_memory: np.ndarray
    edge_source: np.ndarray
    edge_target: np.ndarray
    comm: np.ndarray
    colocation: np.ndarray
    name: str = ""
    time_unit: str = "abstract"
    memory_unit: str = "abstract"
    settings: PlacementSettings = field(default_factory=PlacementSettings)
    task_names: tuple[str, ...] = ()
    cluster: Cluster = field(default_factory=Cluster)

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)

    @property
    def num_devices(self) -> int:
        return len(self.device_ids)

    @property
    def num_edges(self) -> int:
        return int(self.edge_source.shape[0])

    @cached_property
    def task_index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.task_ids)}

    @cached_property
    def device_index(self) -> dict[str, int]:
        return {d: k for k, d in enumerate(self.device_ids)}

    @cached_property
    def succ(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr, task, edge)``: successors of task i are ``task[ptr[i]:ptr[i+1]]`` via edges ``edge[...]``."""
        return _adjacency(self.edge_source, self.edge_target, self.num_tasks)

    @cached_property
    def pred(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr, task, edge)``: predecessors of task i, as for :attr:`succ`."""
        return _adjacency(self.edge_target, self.edge_source, self.num_tasks)

    @cached_property
    def topological_order(self) -> np.ndarray:
        """Task indices in a topological order (Kahn's algorithm, smallest index first among ready tasks)."""
        order = _topological_order(self.num_tasks, self.edge_source, self.edge_target)
        assert order is not None, "make_placement_problem rejects cycles"
        return order

    @cached_property
    def occupies_device(self) -> np.ndarray:
        """(n,) bool: False for tasks whose time is zero on every device (they never block a device)."""
        finite = np.where(np.isfinite(self.time), self.time, 0.0)
        return finite.max(axis=1) > 0

    @cached_property
    def allowed(self) -> np.ndarray:
        """(n, d) bool: task i can run on device k (finite time and memory within capacity)."""
        return np.isfinite(self.time) & (self.task_memory[:, None] <= self.device_memory[None, :])

    def with_settings(self, settings: PlacementSettings) -> PlacementProblem:
        """The same instance under other settings."""
        from dataclasses import replace

        return replace(self, settings=settings)


@dataclass(frozen=True, eq=False)
class PlacementSolution:
    """Where and when every task runs.

    Attributes
    ----------
    device
        (n,) int: the device index of each task.
    start
        (n,) float: the start time of each task, in the problem's time unit.
    transfer_start
        (m,) float or ``None``: when each edge's transfer starts (only meaningful
        for edges whose ends are on different devices); needed to check link
        contention, ignored otherwise.  ``None`` means "as early as possible",
        i.e. when its source ends.
    """

    device: np.ndarray
    start: np.ndarray
    transfer_start: np.ndarray | None = None

    def to_dict(self, problem: PlacementProblem) -> dict[str, dict[str, object]]:
        """``{task id: {"device": device id, "start": start}}`` for JSON output."""
        return {
            t: {"device": problem.device_ids[int(self.device[i])], "start": float(self.start[i])}
            for i, t in enumerate(problem.task_ids)
        }


def _adjacency(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.lexsort((b, a))
    counts = np.bincount(a, minlength=n) if len(a) else np.zeros(n, dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, b[order].astype(np.int64), order.astype(np.int64)


def _topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    ptr, nxt = _csr(src, dst, n)
    indegree = (np.bincount(dst, minlength=n) if len(dst) else np.zeros(n, dtype=np.int64)).tolist()
    ptr_l, nxt_l = ptr.tolist(), nxt.tolist()
    order = [v for v in range(n) if indegree[v] == 0]
    head = 0
    while head < len(order):
        v = order[head]
        head += 1
        for w in nxt_l[ptr_l[v] : ptr_l[v + 1]]:
            indegree[w] -= 1
            if indegree[w] == 0:
                order.append(w)
    return np.asarray(order, dtype=np.int64) if len(order) == n else None


def _check_array(values: np.ndarray, what: str, source: str | None, ids: tuple[str, ...] | None, *, allow_inf: bool) -> None:
    bad = np.isnan(values) | (values < 0) | (~allow_inf & np.isinf(values))
    if bad.any():
        pos = np.argwhere(bad)[0]
        value = values[tuple(pos)]
        label = ids[int(pos[0])] if ids is not None else str(int(pos[0]))
        reason = "NaN" if math.isnan(value) else ("negative" if value < 0 else "infinite")
        raise InputError(
            f"{what} is {reason} ({value!r}) at position {tuple(int(p) for p in pos)}; give a finite, non-negative value",
            source=source,
            where=label,
        )


def placement_cluster(
    device_ids: tuple[str, ...],
    device_memory: np.ndarray,
    time: np.ndarray,
    memory_unit: str,
    kinds: list[str | None] | tuple[str | None, ...] | None = None,
) -> Cluster:
    """The named devices of a placement instance as a :class:`~milp_partition.cluster.Cluster`.

    Parameters
    ----------
    device_ids
        The devices, in the instance's order.
    device_memory
        (d,) capacities in ``memory_unit`` (``inf``: unbounded).
    time
        (n, d) run times: column k is device k's speed on every task.
    memory_unit
        The capacities' unit; a unit of :data:`BYTES_PER_UNIT` gives each device its memory in whole bytes (rounded
        down), any other (abstract) unit leaves it ``None``.
    kinds
        The kind of each device where the instance names it (``None``: derived).

    Returns
    -------
    Cluster
        One :class:`~milp_partition.cluster.Device` per id.  A device without a named kind takes the kind of the
        devices with its (time column, capacity): :data:`~milp_partition.cluster.ACCELERATOR_KIND` when every
        device has the same, else ``kind0``, ``kind1``, ... in order of first appearance.  The kinds have one
        device per node (the instance's transfer times are per edge and device pair, not a link model).
    """
    factor = BYTES_PER_UNIT.get(memory_unit)
    d = len(device_ids)
    signature: dict[tuple[bytes, float], int] = {}
    derived: list[int] = []
    for k in range(d):
        derived.append(
            signature.setdefault((np.ascontiguousarray(time[:, k]).tobytes(), float(device_memory[k])), len(signature))
        )
    devices = []
    for k, dev in enumerate(device_ids):
        given = kinds[k] if kinds is not None else None
        kind = given if given else (ACCELERATOR_KIND if len(signature) == 1 else f"kind{derived[k]}")
        cap = float(device_memory[k])
        memory = None if factor is None or math.isinf(cap) else int(math.floor(cap * factor))
        devices.append(Device(dev, kind, memory))
    return Cluster(devices=tuple(devices), kinds={dv.kind: DeviceKind(dv.kind) for dv in devices})


def _check_cluster(cluster: Cluster, device_ids: tuple[str, ...], source: str | None) -> None:
    """InputError unless ``cluster``'s named devices, then its host CPU cores, are ``device_ids`` in order."""
    ids = (*cluster.accelerator_ids, *(f"{CPU_KIND}{c}" for c in range(cluster.host_cpu_cores)))
    if ids != device_ids:
        raise InputError(
            f"the cluster's devices ({', '.join(ids[:6])}{', ...' if len(ids) > 6 else ''}) are not the instance's "
            f"({', '.join(device_ids[:6])}{', ...' if len(device_ids) > 6 else ''}); give the cluster the instance was built on",
            source=source,
            where="cluster",
        )


def make_placement_problem(
    task_ids: list[str] | tuple[str, ...],
    device_ids: list[str] | tuple[str, ...],
    time: np.ndarray | list,
    task_memory: np.ndarray | list,
    device_memory: np.ndarray | list,
    edges: list[tuple[str, str]] | tuple[tuple[str, str], ...],
    comm: np.ndarray | list,
    *,
    colocation: list[str | None] | None = None,
    name: str = "",
    time_unit: str = "abstract",
    memory_unit: str = "abstract",
    settings: PlacementSettings | None = None,
    task_names: tuple[str, ...] = (),
    source: str | None = None,
    cluster: Cluster | None = None,
    device_kinds: list[str | None] | None = None,
) -> PlacementProblem:
    """Validate arrays and build a :class:`PlacementProblem`.

    Parameters
    ----------
    time
        (n, d) run times; ``inf`` marks a device the task cannot run on.
    device_memory
        (d,) capacities; ``inf`` for unbounded.
    edges
        ``(source id, target id)`` pairs, one per edge.
    comm
        (m, d, d) transfer times, ``comm[e][a][b]`` from device a to device b.
    colocation
        Optional group name per task (``None``: no group); tasks of one group share a device.
    cluster
        The hardware the devices are (its named devices, then its host CPU cores, must be ``device_ids``); ``None``:
        :func:`placement_cluster` of the devices, with ``device_kinds`` where the source names them.

    Raises
    ------
    InputError
        On a duplicate or unknown id, an array of the wrong shape, a NaN or
        negative value, a non-zero diagonal in a comm matrix, a task that no
        device can hold (no finite time, or memory above every capacity where it
        can run), a colocation group with no common device.
    CycleError
        When the edges form a directed cycle.
    """
    task_ids = tuple(str(t) for t in task_ids)
    device_ids = tuple(str(d) for d in device_ids)
    n, d = len(task_ids), len(device_ids)
    if d == 0:
        raise InputError("the instance has no devices; list at least one", source=source, where="devices")
    for ids, kind in ((task_ids, "task"), (device_ids, "device")):
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(x for x in ids if x in seen or seen.add(x))  # type: ignore[func-returns-value]
            raise InputError(f"duplicate {kind} id; every {kind} needs its own id", source=source, where=f"{kind} {dup!r}")
    time_a, mem_a, cap_a = _task_arrays(time, task_memory, device_memory, task_ids, device_ids, source)

    index = {t: i for i, t in enumerate(task_ids)}
    src, dst, comm_a = _edge_arrays(edges, comm, index, d, source)

    order = _topological_order(n, src, dst)
    if order is None:
        cycle = find_cycle(list(task_ids), [(task_ids[a], task_ids[b]) for a, b in zip(src.tolist(), dst.tolist())])
        raise CycleError(cycle or [], source=source)

    fits = _runnable(time_a, mem_a, cap_a, task_ids, source)
    groups = _colocation_groups(colocation, n, fits, mem_a, cap_a, settings, source)
    if cluster is None:
        cluster = placement_cluster(device_ids, cap_a, time_a, memory_unit, device_kinds)
    else:
        _check_cluster(cluster, device_ids, source)
    return PlacementProblem(
        task_ids=task_ids,
        device_ids=device_ids,
        time=time_a,
        task_memory=mem_a,
        device_memory=cap_a,
        edge_source=src,
        edge_target=dst,
        comm=comm_a,
        colocation=groups,
        name=name,
        time_unit=time_unit,
        memory_unit=memory_unit,
        settings=settings or PlacementSettings(),
        task_names=tuple(task_names),
        cluster=cluster,
    )


def _task_arrays(
    time: np.ndarray | list,
    task_memory: np.ndarray | list,
    device_memory: np.ndarray | list,
    task_ids: tuple[str, ...],
    device_ids: tuple[str, ...],
    source: str | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (n, d) times, (n,) task memory and (d,) capacities as float arrays, shapes and values checked."""
    n, d = len(task_ids), len(device_ids)
    time_a = np.asarray(time, dtype=np.float64)
    mem_a = np.asarray(task_memory, dtype=np.float64)
    cap_a = np.asarray(device_memory, dtype=np.float64)
    if time_a.shape != (n, d):
        raise InputError(
            f"task times must form a {n} x {d} table (one time per device), got shape {time_a.shape}", source=source, where="time"
        )
    if mem_a.shape != (n,):
        raise InputError(f"need one memory value per task ({n}), got shape {mem_a.shape}", source=source, where="memory")
    if cap_a.shape != (d,):
        raise InputError(f"need one memory capacity per device ({d}), got shape {cap_a.shape}", source=source, where="devices")
    _check_array(time_a, "task time", source, task_ids, allow_inf=True)
    _check_array(mem_a, "task memory", source, task_ids, allow_inf=False)
    _check_array(cap_a, "device memory", source, device_ids, allow_inf=True)
    return time_a, mem_a, cap_a


def _edge_arrays(
    edges: list[tuple[str, str]] | tuple[tuple[str, str], ...],
    comm: np.ndarray | list,
    index: dict[str, int],
    d: int,
    source: str | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each edge's source and target index and the (m, d, d) transfer times, checked (ids, duplicates, shapes, diagonal)."""
    m = len(edges)
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    pairs: set[tuple[int, int]] = set()
    for e, (a, b) in enumerate(edges):
        where = f"edge {e} ({a!r} -> {b!r})"
        for end in (a, b):
            if end not in index:
                raise InputError(f"refers to unknown task id {end!r}; add the task or fix the id", source=source, where=where)
        src[e], dst[e] = index[a], index[b]
        if src[e] == dst[e]:
            raise CycleError([str(a)], source=source)
        if (src[e], dst[e]) in pairs:
            raise InputError("duplicate edge; merge the two transfers into one edge", source=source, where=where)
        pairs.add((int(src[e]), int(dst[e])))
    comm_a = np.asarray(comm, dtype=np.float64) if m else np.zeros((0, d, d))
    if comm_a.shape != (m, d, d):
        bad_e = next((e for e in range(m) if np.shape(comm[e]) != (d, d)), None) if m and isinstance(comm, list) else None
        where = f"edge {bad_e} ({edges[bad_e][0]!r} -> {edges[bad_e][1]!r})" if bad_e is not None else "comm"
        raise InputError(
            f"each comm matrix must be {d} x {d} (one row and column per device), got shape "
            f"{np.shape(comm[bad_e]) if bad_e is not None else comm_a.shape}",
            source=source,
            where=where,
        )
    if m:
        edge_labels = tuple(f"edge {e} ({edges[e][0]!r} -> {edges[e][1]!r})" for e in range(m))
        _check_array(comm_a, "transfer time", source, edge_labels, allow_inf=False)
        diag = comm_a[:, np.arange(d), np.arange(d)]
        if (diag != 0).any():
            e = int(np.argwhere(diag != 0)[0][0])
            raise InputError("comm[a][a] must be 0 (no transfer within a device)", source=source, where=edge_labels[e])
    return src, dst, comm_a


def _runnable(
    time_a: np.ndarray, mem_a: np.ndarray, cap_a: np.ndarray, task_ids: tuple[str, ...], source: str | None
) -> np.ndarray:
    """(n, d): task i has a finite time on device k and fits its capacity; InputError for a task no device can run."""
    n = len(task_ids)
    fits = np.isfinite(time_a) & (mem_a[:, None] <= cap_a[None, :])
    if n and not fits.all(axis=1).all():
        bad = np.flatnonzero(~fits.any(axis=1))
        if len(bad):
            i = int(bad[0])
            runnable = np.isfinite(time_a[i])
            reason = (
                "has no finite time on any device"
                if not runnable.any()
                else f"needs memory {mem_a[i]:g} but the devices it can run on hold at most {cap_a[runnable].max():g}"
            )
            raise InputError(
                f"{reason}; no device can run it (give a time on a device large enough, or more memory)",
                source=source,
                where=f"task {task_ids[i]!r}",
            )
    return fits


def _colocation_groups(
    colocation: list[str | None] | None,
    n: int,
    fits: np.ndarray,
    mem_a: np.ndarray,
    cap_a: np.ndarray,
    settings: PlacementSettings | None,
    source: str | None,
) -> np.ndarray:
    """(n,) group index per task (-1: none); InputError for a group no device can run (or hold, static memory)."""
    groups = np.full(n, -1, dtype=np.int64)
    if colocation is not None:
        if len(colocation) != n:
            raise InputError(
                f"need one colocation entry per task ({n}), got {len(colocation)}", source=source, where="colocation"
            )
        names: dict[str, int] = {}
        for i, g in enumerate(colocation):
            if g is not None:
                groups[i] = names.setdefault(str(g), len(names))
        for g, k in names.items():
            members = np.flatnonzero(groups == k)
            common = fits[members].all(axis=0)
            if not common.any():
                raise InputError(
                    "no device can run every task of this colocation group; free one of them or fix its times",
                    source=source,
                    where=f"colocation group {g!r}",
                )
            if settings is None or settings.memory_model == "static":
                need = mem_a[members].sum()
                if need > cap_a[common].max():
                    raise InputError(
                        f"the group needs memory {need:g} together, more than any device it can run on holds "
                        f"({cap_a[common].max():g})",
                        source=source,
                        where=f"colocation group {g!r}",
                    )
    return groups
