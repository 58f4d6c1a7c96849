"""The cluster: device kinds, the accelerators, host CPU cores and the links between them (one model for every problem).

A :class:`Cluster` holds

- its device **kinds** (:class:`DeviceKind`: name, memory, devices per node, an optional compute profile);
- the named accelerators (:attr:`Cluster.devices`) when the source names them (pipeline, placement and
  Tarnawski files name devices and may give each its own memory); a source that only counts devices per kind
  (the joint problem, Galvatron's and Sailor's folders) leaves them out;
- how many devices of each kind each zone has (:class:`KindColumn`; derived from the named devices when there are
  some, one column per kind in zone :data:`DEFAULT_ZONE`);
- the host CPU cores;
- the links: an alpha-beta :class:`Link` between nodes (:attr:`Cluster.link`) and one within a node
  (:attr:`Cluster.node_link`, ``None``: the same), plus, where a source gives them, fitted curves between
  (zone, kind, count) ends (:class:`LinkFit` by :data:`LinkKey`: Sailor's network fits) and measured collective
  tables (:class:`CollectiveTables`: Galvatron's hardware profile).

A homogeneous cluster is one kind (:func:`homogeneous_cluster`, :func:`one_kind_cluster`); :func:`make_cluster`
builds one from a list of named devices, :func:`kinds_cluster` from kinds and counts per zone.  Every reader of
``io/`` fills this class; every problem, verifier and C pass reads it (the C passes take the kinds as arrays).

This module imports no solver, formulation or heuristic (layer 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from milp_partition.errors import InputError

#: Most accelerators (and most host CPU cores) a cluster may have: the exact models are built per device.
MAX_DEVICES = 4096
#: Most memory one device may have, in bytes (1 PiB): sums over devices stay within 64-bit integers.
MAX_MEMORY_BYTES = 2**50
#: The device kind used for host CPU cores.
CPU_KIND = "cpu"
#: The device kind given to accelerators when a source does not name one.
ACCELERATOR_KIND = "gpu"
#: The zone of a cluster whose source names no zone.
DEFAULT_ZONE = "zone0"

#: A fitted link's key: (sender zone, sender kind, sender devices, receiver zone, receiver kind, receiver devices).
LinkKey = tuple[str, str, int, str, str, int]


@dataclass(frozen=True)
class DeviceKind:
    """One kind of accelerator.

    Attributes
    ----------
    name
        E.g. ``"gpu"`` or ``"A100-40"``; matched against :attr:`Node.allowed_kinds` and :attr:`Node.time_by_kind`.
    memory_bytes
        Memory a plan may fill on one device of this kind; ``None``: unbounded (or, for a cluster of named
        devices, not the same on every device of the kind: each :class:`Device` then holds its own).  A float
        where the source gives one (the joint problem's files).
    devices_per_node
        Devices of this kind per machine (the largest tensor-parallel group of the kind); 1 where the source does not
        say (every device its own node: every transfer crosses :attr:`Cluster.link`).
    peak_flops_per_s
        The compute profile where a source gives one (peak FLOP/s of one device); ``None``: not given (layer times come
        from profiles per kind).
    """

    name: str
    memory_bytes: float | None = None
    devices_per_node: int = 1
    peak_flops_per_s: float | None = None


@dataclass(frozen=True)
class Device:
    """One named accelerator.

    Attributes
    ----------
    id
        Unique name, e.g. ``"gpu0"``.
    kind
        The name of its :class:`DeviceKind`.
    memory_bytes
        Memory capacity (the pipeline, placement and Tarnawski files give memory per device); ``None`` means unbounded.
    """

    id: str
    kind: str = ACCELERATOR_KIND
    memory_bytes: int | None = None


@dataclass(frozen=True)
class KindColumn:
    """``count`` devices of kind ``kind`` available in zone ``zone`` (one ``<kind>_<zone>`` column of a trace row)."""

    kind: str
    zone: str
    count: int

    @property
    def label(self) -> str:
        return f"{self.kind}_{self.zone}"


@dataclass(frozen=True)
class Link:
    """An alpha-beta link model: moving ``b`` bytes takes ``latency_s + b / bandwidth_bytes_per_s``."""

    latency_s: float = 0.0
    bandwidth_bytes_per_s: float = math.inf

    def transfer_seconds(self, nbytes: int) -> float:
        """Seconds to move ``nbytes`` over this link."""
        return self.latency_s + (0.0 if math.isinf(self.bandwidth_bytes_per_s) else nbytes / self.bandwidth_bytes_per_s)


@dataclass(frozen=True)
class LinkFit:
    """A fitted link: moving ``x`` bytes takes ``(x / 1e9) / bw(x)`` seconds, ``bw(x) = poly(log2(x / 1e6))`` GB/s.

    ``coefficients`` are the polynomial's, highest degree first (Sailor's fits are quadratics).  The fit is used
    as it is, also outside the range it was fitted on (where ``bw`` may be negative: a negative time).
    """

    coefficients: tuple[float, ...]

    def seconds(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` (0 for 0 bytes)."""
        if nbytes == 0:
            return 0.0
        lx = math.log2(nbytes / 1e6)
        n = len(self.coefficients)
        bw = sum(c * lx ** (n - k - 1) for k, c in enumerate(self.coefficients))
        return (nbytes / 1e9) / bw


@dataclass(frozen=True)
class LatencyTable:
    """Collective latency for one group size: measured ms per message size (MB) and a linear fit (ms = a*MB + b)."""

    measured_ms: dict[float, float]
    slope: float
    intercept: float

    def ms(self, size_mb: float) -> float:
        """The measured time when ``size_mb`` is a measured size (as Galvatron looks it up), else the fit."""
        if size_mb in self.measured_ms:
            return self.measured_ms[size_mb]
        return self.slope * size_mb + self.intercept


@dataclass(frozen=True)
class CollectiveTables:
    """Measured collectives (Galvatron's hardware profile): all-reduce ms per MB (keys ``'8'``, ``'4_1'`` consecutive,
    ``'4_0'`` not, ...), p2p ms per MB per pipeline degree, the compute/communication overlap coefficient, all-gather and
    all-to-all latency tables per group size.  ``source``: the folder they were read from."""

    allreduce_ms_per_mb: dict[str, float]
    p2p_ms_per_mb: dict[int, float]
    overlap: float
    allgather: dict[int, LatencyTable]
    all2all: dict[int, LatencyTable]
    source: str = ""


@dataclass(frozen=True)
class Cluster:
    """Device kinds, the named accelerators (where the source names them), host CPU cores, counts per (kind, zone)
    and the links.

    Attributes
    ----------
    devices
        The named accelerators, in the source's order; empty where the source only counts devices per kind.
    host_cpu_cores
        Host CPU cores (kind :data:`CPU_KIND`), for the problems that place work on them.
    link
        The alpha-beta link between nodes (the only one when :attr:`node_link` is ``None``).
    kinds
        Name -> :class:`DeviceKind`.  For named devices, every device's kind is here (filled from the devices when
        not given; the kind's memory is the devices' when they all agree, else ``None``).
    columns
        Devices per (kind, zone), in the source's order; for named devices, one column per kind in
        :data:`DEFAULT_ZONE` (derived).
    node_link
        The alpha-beta link within a node; ``None``: :attr:`link`.  Filled where a source measures it (Galvatron's
        hardware folder: its point-to-point bandwidth within one node).  No problem prices with it today: the
        pipeline and joint problems put every device on its own node (one price, :attr:`link`; the joint problem's
        tensor-parallel all-reduces come from its profile), Galvatron prices from its measured collectives, and the
        hetero problem from Sailor's fits and per-tp profiles.
    link_fits
        :data:`LinkKey` -> :class:`LinkFit` where a source gives fitted curves (Sailor); a missing key means that link
        is unknown: pricing a plan that uses it raises :class:`InputError` naming the link (:meth:`link_fit`).
    collectives
        Measured collective tables where a source gives them (Galvatron), else ``None``.
    """

    devices: tuple[Device, ...] = ()
    host_cpu_cores: int = 0
    link: Link = Link()
    kinds: Mapping[str, DeviceKind] = field(default_factory=dict, hash=False)
    columns: tuple[KindColumn, ...] = ()
    node_link: Link | None = None
    link_fits: Mapping[LinkKey, LinkFit] = field(default_factory=dict, hash=False)
    collectives: CollectiveTables | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if not self.devices:
            return
        # named devices: their kinds and columns follow them (also after dataclasses.replace(devices=...))
        kinds: dict[str, DeviceKind] = {}
        counts: dict[str, int] = {}
        memory: dict[str, set[int | None]] = {}
        for d in self.devices:
            counts[d.kind] = counts.get(d.kind, 0) + 1
            memory.setdefault(d.kind, set()).add(d.memory_bytes)
        for name, mems in memory.items():
            given = self.kinds.get(name) or DeviceKind(name)
            kinds[name] = replace(given, memory_bytes=next(iter(mems)) if len(mems) == 1 else None)
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "columns", tuple(KindColumn(k, DEFAULT_ZONE, n) for k, n in counts.items()))

    @property
    def accelerator_ids(self) -> list[str]:
        return [d.id for d in self.devices]

    @property
    def device_count(self) -> int:
        """Accelerators in the cluster (every kind, every zone)."""
        return len(self.devices) if self.devices else sum(c.count for c in self.columns)

    def devices_of_kind(self, kind: str) -> int:
        """Accelerators of kind ``kind`` (every zone)."""
        return sum(c.count for c in self.columns if c.kind == kind)

    def memory_of(self, kind: str) -> float:
        """The memory of one device of kind ``kind`` (``inf``: unbounded)."""
        memory = self.kinds[kind].memory_bytes
        return math.inf if memory is None else memory

    @property
    def one_kind(self) -> DeviceKind:
        """The cluster's only kind; :class:`InputError` when it has several (a problem that takes one kind only)."""
        if len(self.kinds) != 1:
            raise InputError(
                f"the cluster has {len(self.kinds)} device kinds ({', '.join(sorted(self.kinds)) or 'none'}); "
                "this problem takes one kind: give a homogeneous cluster",
                where="cluster",
            )
        return next(iter(self.kinds.values()))

    @property
    def memory_bytes(self) -> float | None:
        """The memory of one device of the cluster's one kind (``None``: unbounded); :class:`InputError` when the cluster
        has several kinds or its named devices differ in memory."""
        kind = self.one_kind
        if self.devices and len({d.memory_bytes for d in self.devices}) > 1:
            raise InputError(
                f"the devices of kind {kind.name!r} differ in memory; this problem takes one memory for every device",
                where="cluster",
            )
        return kind.memory_bytes

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Bandwidth between nodes, bytes per second."""
        return self.link.bandwidth_bytes_per_s

    def link_fit(self, key: LinkKey) -> LinkFit:
        """The fit of ``key``; :class:`InputError` naming the key when the network file has none."""
        try:
            return self.link_fits[key]
        except KeyError:
            zs, ks, cs, zr, kr, cr = key
            raise InputError(
                f"no network fit from {ks} (count {cs}) in {zs} to {kr} (count {cr}) in {zr}: a plan of this setting "
                "needs that link and the fits do not cover it (Sailor's simulator could not price it either); leave "
                "that kind or zone out of the setting",
                where="network fits",
            ) from None

    def with_memory(self, memory_bytes: float | None) -> Cluster:
        """The same one-kind cluster with another memory per device (unchecked: the readers check figures)."""
        kind = self.one_kind
        devices = tuple(replace(d, memory_bytes=memory_bytes) for d in self.devices)  # type: ignore[arg-type]
        return replace(self, devices=devices, kinds={kind.name: replace(kind, memory_bytes=memory_bytes)})

    def with_peak_flops(self, peak_flops_per_s: float | None) -> Cluster:
        """The same one-kind cluster with its kind's compute profile (peak FLOP/s of one device; ``None``: not given)."""
        kind = self.one_kind
        return replace(self, kinds={kind.name: replace(kind, peak_flops_per_s=peak_flops_per_s)})

    def kind_arrays(self) -> tuple[list[float], list[int]]:
        """The kinds as arrays, in :attr:`kinds` order: memory per device (``inf`` for unbounded) and device count.

        What the C passes read (today's problems take one kind: arrays of length 1)."""
        memory = [math.inf if k.memory_bytes is None else float(k.memory_bytes) for k in self.kinds.values()]
        return memory, [self.devices_of_kind(name) for name in self.kinds]


def homogeneous_cluster(
    count: int,
    memory_bytes: int | None,
    *,
    kind: str = ACCELERATOR_KIND,
    host_cpu_cores: int = 0,
    link: Link | None = None,
    source: str | None = None,
) -> Cluster:
    """``count`` identical accelerators named ``{kind}0 .. {kind}{count-1}`` (one kind)."""
    if not isinstance(count, int) or count < 1:
        raise InputError(f"the number of devices must be a positive integer, got {count!r}", source=source, where="devices")
    if count > MAX_DEVICES:
        raise InputError(f"{count} devices is more than the {MAX_DEVICES} the models take", source=source, where="devices")
    return make_cluster(
        [Device(f"{kind}{i}", kind, memory_bytes) for i in range(count)],
        host_cpu_cores=host_cpu_cores,
        link=link or Link(),
        source=source,
    )


def one_kind_cluster(
    count: int,
    memory_bytes: float | None,
    *,
    kind: str = ACCELERATOR_KIND,
    devices_per_node: int = 1,
    zone: str = DEFAULT_ZONE,
    link: Link | None = None,
    link_fits: Mapping[LinkKey, LinkFit] | None = None,
    collectives: CollectiveTables | None = None,
    node_link: Link | None = None,
    peak_flops_per_s: float | None = None,
) -> Cluster:
    """``count`` devices of one kind in one zone, counted, not named (the joint problem, Galvatron's hardware).

    The figures are taken as they are (the readers check them, naming the file and field: a NaN is kept for the
    verifiers to refuse)."""
    return Cluster(
        link=link or Link(),
        kinds={kind: DeviceKind(kind, memory_bytes, devices_per_node, peak_flops_per_s)},
        columns=(KindColumn(kind, zone, count),),
        node_link=node_link,
        link_fits=dict(link_fits or {}),
        collectives=collectives,
    )


def make_cluster(
    devices: list[Device] | tuple[Device, ...],
    *,
    host_cpu_cores: int = 0,
    link: Link | None = None,
    source: str | None = None,
) -> Cluster:
    """Validate and build a :class:`Cluster` of named devices (their kinds and columns follow from them)."""
    link = link or Link()
    if len(devices) > MAX_DEVICES:
        raise InputError(f"{len(devices)} devices is more than the {MAX_DEVICES} the models take", source=source, where="devices")
    if isinstance(host_cpu_cores, int) and not isinstance(host_cpu_cores, bool) and host_cpu_cores > MAX_DEVICES:
        raise InputError(
            f"{host_cpu_cores} CPU cores is more than the {MAX_DEVICES} the models take", source=source, where="host_cpu_cores"
        )
    seen: set[str] = set()
    for d in devices:
        where = f"device {d.id!r}"
        if not isinstance(d.id, str) or not d.id:
            raise InputError(f"device id must be a non-empty string, got {d.id!r}", source=source, where="device")
        if d.id in seen:
            raise InputError("duplicate device id", source=source, where=where)
        seen.add(d.id)
        if not isinstance(d.kind, str) or not d.kind.strip():
            raise InputError(f"device kind must be a non-empty name, got {d.kind!r}", source=source, where=where)
        if d.kind == CPU_KIND:
            raise InputError(
                f"kind {CPU_KIND!r} is reserved for host CPU cores; give them as host_cpu_cores, or name the kind otherwise",
                source=source,
                where=where,
            )
        if isinstance(host_cpu_cores, int) and d.id.startswith(CPU_KIND) and d.id[len(CPU_KIND) :].isdigit():
            if int(d.id[len(CPU_KIND) :]) < host_cpu_cores:
                raise InputError(
                    f"the id is taken by host CPU core {d.id} (host_cpu_cores {host_cpu_cores}); rename the device",
                    source=source,
                    where=where,
                )
        if d.memory_bytes is not None and (
            isinstance(d.memory_bytes, bool) or not isinstance(d.memory_bytes, int) or not 0 <= d.memory_bytes <= MAX_MEMORY_BYTES
        ):
            raise InputError(
                f"memory_bytes must be a whole number from 0 to 2**50 (1 PiB) or null, got {d.memory_bytes!r}",
                source=source,
                where=where,
            )
    if not devices and host_cpu_cores <= 0:
        raise InputError("the cluster has no device: give at least one accelerator or CPU core", source=source)
    if isinstance(host_cpu_cores, bool) or not isinstance(host_cpu_cores, int) or host_cpu_cores < 0:
        raise InputError(f"must be a non-negative integer, got {host_cpu_cores!r}", source=source, where="host_cpu_cores")
    for fname in ("latency_s", "bandwidth_bytes_per_s"):
        v = getattr(link, fname)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
            raise InputError(f"must be a non-negative number, got {v!r}", source=source, where=f"link field {fname!r}")
    if link.bandwidth_bytes_per_s == 0:
        raise InputError("must be positive", source=source, where="link field 'bandwidth_bytes_per_s'")
    return Cluster(tuple(devices), host_cpu_cores, link)


def kinds_cluster(
    kinds: Mapping[str, DeviceKind],
    columns: list[KindColumn] | tuple[KindColumn, ...],
    link_fits: Mapping[LinkKey, LinkFit],
    *,
    source: str | None = None,
) -> Cluster:
    """Validate and build a :class:`Cluster` of kinds counted per zone (every column's kind known, counts
    non-negative, at least one device), with fitted links (Sailor's trace rows and network fits)."""
    seen: set[tuple[str, str]] = set()
    for c in columns:
        where = f"column {c.label!r}"
        if c.kind not in kinds:
            raise InputError(f"unknown device kind {c.kind!r}; known: {', '.join(sorted(kinds))}", source=source, where=where)
        if isinstance(c.count, bool) or not isinstance(c.count, int) or c.count < 0:
            raise InputError(f"the device count must be a whole number >= 0, got {c.count!r}", source=source, where=where)
        if (c.kind, c.zone) in seen:
            raise InputError("the column is given twice", source=source, where=where)
        seen.add((c.kind, c.zone))
    for k in kinds.values():
        if k.memory_bytes is None or k.memory_bytes <= 0 or k.devices_per_node < 1:
            raise InputError(
                f"memory_bytes must be > 0 and devices_per_node >= 1, got {k.memory_bytes!r}, {k.devices_per_node!r}",
                source=source,
                where=f"kind {k.name!r}",
            )
    if not any(c.count > 0 for c in columns):
        raise InputError("the cluster has no device: every column counts 0", source=source)
    return Cluster(kinds=dict(kinds), columns=tuple(columns), link_fits=dict(link_fits))
