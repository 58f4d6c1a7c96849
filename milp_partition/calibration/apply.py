"""Filling node times of a pipeline graph from FLOPs and bytes with a :class:`DeviceProfile`.

A node *lacks measured times* when its ``forward_time`` and ``backward_time`` are both zero
and it has no ``time_by_kind``; such a node with a known ``flops`` (forward plus backward)
gets times from the profile's roofline (:meth:`DeviceProfile.compute_time_s`)::

    forward_time  = compute_time_s((1 - backward_flops_fraction) * flops, forward bytes)    (forward node)
    backward_time = compute_time_s(backward_flops_fraction * flops, backward bytes)
    forward bytes  = param_passes_forward  * param_bytes + activation_passes_forward  * activation_bytes
    backward bytes = param_passes_backward * param_bytes + activation_passes_backward * activation_bytes

A node marked ``is_backward`` puts all of its FLOPs and its backward bytes into
``backward_time``.  Nodes that carry measured times keep them.  Times are written in the
graph's ``time_unit``; a graph whose unit is ``unitless`` and that has no measured time at
all is switched to seconds, while one that mixes unitless measured times with profile times
is refused (the two cannot be put on one scale).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from milp_partition.calibration.profile import DeviceProfile
from milp_partition.errors import InputError
from milp_partition.graph import TIME_UNIT_SECONDS, Graph, Node


@dataclass(frozen=True)
class ApplySettings:
    """How a node's FLOPs and bytes become work for the profile.

    Attributes
    ----------
    dtype
        Data type whose compute rate prices the FLOPs.
    backward_flops_fraction
        Share of a node's ``flops`` (forward plus backward) spent in the backward pass
        (2/3: the backward pass computes gradients of inputs and of weights, each as costly as the forward).
    param_passes_forward, param_passes_backward
        Times the parameters are read (or written) per pass: forward reads them; backward reads
        them and writes their gradients.
    activation_passes_forward, activation_passes_backward
        Times the activations move per pass: forward writes them; backward reads them and writes their gradients.
    """

    dtype: str = "float32"
    backward_flops_fraction: float = 2.0 / 3.0
    param_passes_forward: float = 1.0
    param_passes_backward: float = 2.0
    activation_passes_forward: float = 1.0
    activation_passes_backward: float = 2.0


@dataclass(frozen=True)
class ApplyReport:
    """What :func:`apply_profile` did: node ids filled from the profile, kept, and left without time."""

    filled: tuple[str, ...]
    kept: tuple[str, ...]
    no_flops: tuple[str, ...]
    time_unit: str


def lacks_measured_time(node: Node) -> bool:
    """True when ``node`` has no measured time (zero forward and backward time, no per-kind time)."""
    return node.forward_time == 0 and node.backward_time == 0 and not node.time_by_kind


def apply_profile(
    graph: Graph, profile: DeviceProfile, settings: ApplySettings | None = None, *, source: str | None = None
) -> tuple[Graph, ApplyReport]:
    """A copy of ``graph`` whose nodes without measured times get times from ``profile``.

    Raises
    ------
    InputError
        The graph's time unit is ``unitless`` while some nodes carry measured times and others
        need profile times; or the profile has no compute rate for ``settings.dtype``.
    """
    s = settings or ApplySettings()
    profile.compute_rate(s.dtype)  # fail early, naming the dtypes the profile has
    need = [n for n in graph.nodes if lacks_measured_time(n) and n.flops is not None]
    kept = tuple(n.id for n in graph.nodes if not lacks_measured_time(n))
    no_flops = tuple(n.id for n in graph.nodes if lacks_measured_time(n) and n.flops is None)
    unit = graph.time_unit
    if need and unit not in TIME_UNIT_SECONDS:
        if kept:
            raise InputError(
                f"the graph's time unit is {unit!r}, so its measured times cannot be mixed with profile times "
                f"in seconds ({len(need)} nodes need them, e.g. {need[0].id!r}); give the graph a time unit",
                source=source,
                where="--profile",
            )
        unit = "s"
    per_unit = 1.0 / TIME_UNIT_SECONDS[unit] if need else 1.0
    filled = {n.id: _timed(n, profile, s, per_unit) for n in need}
    nodes = tuple(filled.get(n.id, n) for n in graph.nodes)
    return replace(graph, nodes=nodes, time_unit=unit), ApplyReport(tuple(filled), kept, no_flops, unit)


def _timed(node: Node, profile: DeviceProfile, s: ApplySettings, per_unit: float) -> Node:
    flops = float(node.flops or 0.0)
    bwd_bytes = s.param_passes_backward * node.param_bytes + s.activation_passes_backward * node.activation_bytes
    if node.is_backward:
        return replace(node, backward_time=profile.compute_time_s(flops, bwd_bytes, s.dtype) * per_unit)
    fwd_bytes = s.param_passes_forward * node.param_bytes + s.activation_passes_forward * node.activation_bytes
    fwd = profile.compute_time_s((1.0 - s.backward_flops_fraction) * flops, fwd_bytes, s.dtype)
    bwd = profile.compute_time_s(s.backward_flops_fraction * flops, bwd_bytes, s.dtype) if s.backward_flops_fraction > 0 else 0.0
    return replace(node, forward_time=fwd * per_unit, backward_time=bwd * per_unit)
