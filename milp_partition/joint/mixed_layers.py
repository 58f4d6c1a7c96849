"""The joint problem of an imported graph on a cluster of kinds: each kind's configurations priced with its profile.

``--kinds H100:8,A100:16`` names the kinds (``KIND:COUNT[:MEMORY[:PER_NODE]]``; memory defaults to the kind's
datasheet, devices per node to 8); the graph's per-layer configurations are built once per kind by
:func:`milp_partition.joint.layers.joint_from_imported` with that kind's profile (its datasheet, or
``--kind-profile KIND=FILE``), so every figure of a stage on kind ``k`` comes from ``k``'s profile: the one cost
model.  The kinds go through the one :class:`milp_partition.cluster.Cluster` (its kinds, one zone) in :func:`mixed_kinds`,
the one place this problem reads that model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from milp_partition.cluster import Cluster, DeviceKind, KindColumn, kinds_cluster
from milp_partition.errors import InputError
from milp_partition.importers.timing import load_profile_spec
from milp_partition.joint.layers import ALLOWED_TP_DEGREES, DEFAULT_MICROBATCHES, LayerPlanSettings, joint_from_imported
from milp_partition.joint.mixed_problem import MixedJointProblem, MixedKind, check_tables
from milp_partition.units import parse_bytes

#: Devices per node when ``--kinds`` does not say (an HGX / DGX board).
DEFAULT_DEVICES_PER_NODE = 8
#: The zone every kind of ``--kinds`` is in (one alpha-beta link between kinds and nodes).
ZONE = "zone0"


@dataclass(frozen=True)
class KindSpec:
    """One entry of ``--kinds``: a kind's name, its count, and its memory and devices per node where given."""

    name: str
    count: int
    memory_bytes: int | None = None
    devices_per_node: int = DEFAULT_DEVICES_PER_NODE


def parse_kinds(text: str, flag: str = "--kinds") -> tuple[KindSpec, ...]:
    """``"H100:8,A100:16:40GB"`` -> kind specs.

    Raises
    ------
    InputError
        Naming ``flag``: a malformed entry, a count below 1, a kind given twice, devices per node below 1.
    """
    specs: list[KindSpec] = []
    entries = [e.strip() for e in str(text).split(",") if e.strip()]
    if not entries:
        raise InputError("give at least one KIND:COUNT, e.g. H100:8,A100:16", where=flag)
    for entry in entries:
        parts = [p.strip() for p in entry.split(":")]
        if len(parts) < 2 or len(parts) > 4 or not parts[0]:
            raise InputError(f"{entry!r} is not KIND:COUNT[:MEMORY[:PER_NODE]] (e.g. A100:16 or A100:16:40GB)", where=flag)
        name = parts[0]
        try:
            count = int(parts[1])
        except ValueError:
            count = -1
        if count < 1:
            raise InputError(f"{entry!r}: the count of {name} must be a whole number >= 1, got {parts[1]!r}", where=flag)
        memory = parse_bytes(parts[2], f"{flag} {name}") if len(parts) > 2 and parts[2] else None
        if memory is not None and memory <= 0:
            raise InputError(f"{entry!r}: the memory of {name} must be positive", where=flag)
        per_node = DEFAULT_DEVICES_PER_NODE
        if len(parts) > 3:
            try:
                per_node = int(parts[3])
            except ValueError:
                per_node = 0
            if per_node < 1:
                raise InputError(
                    f"{entry!r}: devices per node of {name} must be a whole number >= 1, got {parts[3]!r}", where=flag
                )
        if any(s.name.upper() == name.upper() for s in specs):
            raise InputError(f"kind {name} is given twice", where=flag)
        specs.append(KindSpec(name, count, memory, per_node))
    return tuple(specs)


def parse_kind_profiles(values: list[str] | None, kinds: tuple[KindSpec, ...], flag: str = "--kind-profile") -> dict[str, str]:
    """``["A100=a100.json"]`` -> ``{"A100": "a100.json"}``; each kind must be one of ``kinds``."""
    out: dict[str, str] = {}
    names = {k.name for k in kinds}
    for value in values or []:
        for item in (x.strip() for x in str(value).split(",") if x.strip()):
            name, sep, path = item.partition("=")
            if not sep or not name.strip() or not path.strip():
                raise InputError(f"{item!r} is not KIND=FILE (e.g. A100=profiles/a100.json)", where=flag)
            if name.strip() not in names:
                raise InputError(f"{name.strip()!r} is not a kind of --kinds ({', '.join(sorted(names))})", where=flag)
            out[name.strip()] = path.strip()
    return out


def mixed_kinds(cluster: Cluster, bandwidths: dict[str, float], profiles: dict[str, str]) -> tuple[MixedKind, ...]:
    """The problem's kinds from the cluster-of-kinds model (counts summed over zones), each with its bandwidth."""
    return tuple(
        MixedKind(
            name,
            cluster.devices_of_kind(name),
            cluster.memory_of(name),
            kind.devices_per_node,
            bandwidths[name],
            profiles[name],
        )
        for name, kind in cluster.kinds.items()
    )


def mixed_from_imported(
    data: Any,
    source: str,
    kinds: tuple[KindSpec, ...],
    *,
    kind_profiles: dict[str, str] | None = None,
    bandwidth_bytes_per_s: float | None = None,
    microbatches: int = DEFAULT_MICROBATCHES,
    tp_degrees: tuple[int, ...] = ALLOWED_TP_DEGREES,
    recompute: bool = True,
) -> MixedJointProblem:
    """The mixed joint problem of an imported graph (parsed JSON) on ``kinds``.

    Raises
    ------
    InputError
        An unknown kind (neither a datasheet name nor given a profile file), a kind without a known memory, no offered
        tensor-parallel degree fitting a kind's node (naming ``--tp-degrees``), or what
        :func:`~milp_partition.joint.layers.joint_from_imported` refuses.
    """
    kind_profiles = kind_profiles or {}
    tables = {}
    memories: dict[str, int] = {}
    bandwidths: dict[str, float] = {}
    specs: dict[str, str] = {}
    notes: list[str] = []
    for spec in kinds:
        profile_spec = kind_profiles.get(spec.name, spec.name)
        try:
            profile = load_profile_spec(profile_spec)
        except InputError as exc:
            if spec.name in kind_profiles:
                raise InputError(f"kind {spec.name!r}: {exc}", where="--kind-profile") from None
            raise InputError(
                f"unknown kind {spec.name!r}: not a datasheet name (V100, A100, H100, H200); give its profile with "
                f"--kind-profile {spec.name}=FILE",
                where="--kinds",
            ) from None
        memory = spec.memory_bytes if spec.memory_bytes is not None else profile.memory_bytes
        if memory is None:
            raise InputError(
                f"kind {spec.name!r}: its profile has no memory size; write {spec.name}:{spec.count}:MEMORY", where="--kinds"
            )
        degrees = tuple(t for t in tp_degrees if t <= spec.devices_per_node)
        if not degrees:
            raise InputError(
                f"no tensor-parallel degree of {list(tp_degrees)} fits a node of {spec.name} ({spec.devices_per_node} devices per "
                "node): offer a smaller one",
                where="--tp-degrees",
            )
        settings = LayerPlanSettings(
            devices=spec.count,
            memory_bytes=float(memory),
            bandwidth_bytes_per_s=bandwidth_bytes_per_s,
            microbatches=microbatches,
            tp_degrees=degrees,
            profile=profile_spec,
            recompute=recompute,
        )
        try:
            table = joint_from_imported(data, source, settings)
        except InputError as exc:
            if exc.source == source:  # the graph file's own fault: as the homogeneous path reports it
                raise
            raise InputError(f"kind {spec.name!r} (profile {profile_spec}): {exc}", where="--kinds") from None
        tables[spec.name] = table
        memories[spec.name] = int(memory)
        bandwidths[spec.name] = table.cluster.bandwidth_bytes_per_s
        specs[spec.name] = profile_spec
        notes += [f"{spec.name}: {n}" for n in table.notes]
    cluster = kinds_cluster(
        {s.name: DeviceKind(s.name, memories[s.name], s.devices_per_node) for s in kinds},
        [KindColumn(s.name, ZONE, s.count) for s in kinds],
        {},
        source="--kinds",
    )
    first = tables[kinds[0].name]
    problem = MixedJointProblem(
        mixed_kinds(cluster, bandwidths, specs), tables, microbatches, name=first.name, source=source, notes=tuple(notes)
    )
    bad = check_tables(problem)
    if bad:
        raise InputError("; ".join(bad), source=source)
    return problem


def one_kind(problem: MixedJointProblem, name: str) -> MixedJointProblem:
    """The same graph on kind ``name`` alone (a homogeneous plan's problem)."""
    kind = problem.kind(name)
    return replace(problem, kinds=(kind,), tables={name: problem.tables[name]})
