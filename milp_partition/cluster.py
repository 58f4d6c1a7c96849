"""The cluster: accelerators, host CPU cores and the links between them.

This module imports no solver, formulation or heuristic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from milp_partition.errors import InputError

#: Most accelerators (and most host CPU cores) a cluster may have: the exact models are built per device.
MAX_DEVICES = 4096
#: Most memory one device may have, in bytes (1 PiB): sums over devices stay within 64-bit integers.
MAX_MEMORY_BYTES = 2**50
#: The device kind used for host CPU cores.
CPU_KIND = "cpu"
#: The device kind given to accelerators when a source does not name one.
ACCELERATOR_KIND = "gpu"


@dataclass(frozen=True)
class Device:
    """One accelerator.

    Attributes
    ----------
    id
        Unique name, e.g. ``"gpu0"``.
    kind
        Device kind, matched against :attr:`Node.allowed_kinds` and :attr:`Node.time_by_kind`.
    memory_bytes
        Memory capacity; ``None`` means unbounded.
    """

    id: str
    kind: str = ACCELERATOR_KIND
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Link:
    """An alpha-beta link model: moving ``b`` bytes takes ``latency_s + b / bandwidth_bytes_per_s``."""

    latency_s: float = 0.0
    bandwidth_bytes_per_s: float = math.inf

    def transfer_seconds(self, nbytes: int) -> float:
        """Seconds to move ``nbytes`` over this link."""
        return self.latency_s + (0.0 if math.isinf(self.bandwidth_bytes_per_s) else nbytes / self.bandwidth_bytes_per_s)


@dataclass(frozen=True)
class Cluster:
    """Accelerators plus host CPU cores joined by one link model."""

    devices: tuple[Device, ...]
    host_cpu_cores: int = 0
    link: Link = Link()

    @property
    def accelerator_ids(self) -> list[str]:
        return [d.id for d in self.devices]


def homogeneous_cluster(
    count: int,
    memory_bytes: int | None,
    *,
    kind: str = ACCELERATOR_KIND,
    host_cpu_cores: int = 0,
    link: Link | None = None,
    source: str | None = None,
) -> Cluster:
    """``count`` identical accelerators named ``{kind}0 .. {kind}{count-1}``."""
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


def make_cluster(
    devices: list[Device] | tuple[Device, ...],
    *,
    host_cpu_cores: int = 0,
    link: Link | None = None,
    source: str | None = None,
) -> Cluster:
    """Validate and build a :class:`Cluster`."""
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
