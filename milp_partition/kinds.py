"""A cluster of GPU kinds: the cluster model the problems move onto (issue 40).

A :class:`KindCluster` is a set of device kinds (name, memory, devices per node), how
many devices of each kind are available in each zone (a :class:`KindColumn` per
``<kind>_<zone>``, as a trace row of Sailor's has it), and the links between them as
fitted curves (:class:`LinkFit`) keyed by the two ends' ``(zone, kind, device count)``.
A homogeneous cluster is one kind in one zone (:func:`one_kind_cluster`).

The older :class:`milp_partition.cluster.Cluster` (a list of devices with one alpha-beta
link) stays as it is for the problems that read it; the heterogeneous planner
(:mod:`milp_partition.hetero`) is the first to read this model.

This module imports no solver, formulation or heuristic (layer 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from milp_partition.errors import InputError

#: A link's key: (sender zone, sender kind, sender devices, receiver zone, receiver kind, receiver devices).
LinkKey = tuple[str, str, int, str, str, int]


@dataclass(frozen=True)
class DeviceKind:
    """One kind of accelerator.

    Attributes
    ----------
    name
        E.g. ``"A100-40"``.
    memory_bytes
        Memory a plan may fill on one device.
    devices_per_node
        Devices per machine: the largest tensor-parallel group of this kind.
    """

    name: str
    memory_bytes: int
    devices_per_node: int


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
class KindCluster:
    """Device kinds, how many of each kind each zone has, and the fitted links between (zone, kind, count) ends.

    Attributes
    ----------
    kinds
        The device kinds, by name.
    columns
        Available devices per (kind, zone), in the order of the source (a trace row's columns).
    links
        :data:`LinkKey` -> :class:`LinkFit`; a missing key means that link is unknown (plans using it are refused).
    """

    kinds: Mapping[str, DeviceKind]
    columns: tuple[KindColumn, ...]
    links: Mapping[LinkKey, LinkFit] = field(default_factory=dict)

    def kind(self, name: str) -> DeviceKind:
        return self.kinds[name]

    def column_index(self, kind: str, zone: str) -> int | None:
        for i, c in enumerate(self.columns):
            if c.kind == kind and c.zone == zone:
                return i
        return None

    def link(self, key: LinkKey) -> LinkFit:
        """The fit of ``key``; :class:`InputError` naming the key when the network file has none."""
        try:
            return self.links[key]
        except KeyError:
            raise InputError(f"no network fit for link {key!r}", where="network fits") from None

    @property
    def total_devices(self) -> int:
        return sum(c.count for c in self.columns)

    def devices_of_kind(self, kind: str) -> int:
        return sum(c.count for c in self.columns if c.kind == kind)


def make_kind_cluster(
    kinds: Mapping[str, DeviceKind],
    columns: list[KindColumn] | tuple[KindColumn, ...],
    links: Mapping[LinkKey, LinkFit],
    *,
    source: str | None = None,
) -> KindCluster:
    """Validate and build a :class:`KindCluster` (every column's kind known, counts non-negative, at least one device)."""
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
        if k.memory_bytes <= 0 or k.devices_per_node < 1:
            raise InputError(
                f"memory_bytes must be > 0 and devices_per_node >= 1, got {k.memory_bytes!r}, {k.devices_per_node!r}",
                source=source,
                where=f"kind {k.name!r}",
            )
    if not any(c.count > 0 for c in columns):
        raise InputError("the cluster has no device: every column counts 0", source=source)
    return KindCluster(dict(kinds), tuple(columns), dict(links))


def one_kind_cluster(
    name: str,
    count: int,
    memory_bytes: int,
    devices_per_node: int,
    *,
    zone: str = "zone0",
    links: Mapping[LinkKey, LinkFit] | None = None,
) -> KindCluster:
    """A homogeneous cluster: ``count`` devices of one kind in one zone."""
    return make_kind_cluster(
        {name: DeviceKind(name, memory_bytes, devices_per_node)}, [KindColumn(name, zone, count)], links or {}
    )
