"""A joint problem from an imported layer graph: tensor-parallel splits, recomputation and optimizer state per layer.

Input: a graph file written by ``milp-partition import`` (format ``milp-partition/1``) with its
``layers`` object (:mod:`milp_partition.importers.layer_shapes`: every operator with its layer,
FLOPs and bytes; the shapes of linear, embedding and attention modules; the import settings;
read by :mod:`milp_partition.io.imported_layers`) and a device profile.  Output: a :class:`~milp_partition.joint.problem.JointProblem` whose
nodes are the graph's forward nodes (layers).

Units.  A *sample* is one item of the example input's first dimension (one sequence of the
imported length); a *micro-batch* is one sample (Piper's formula amortises the data-parallel
gradient all-reduce over ``N`` micro-batches per batch, so ``N`` = ``--microbatches`` is the
number of samples in a batch).  The import ran the model on ``batch_size`` samples; its
operator FLOPs and bytes are divided by ``batch_size``.

For each layer and tensor-parallel degree ``t`` (:func:`split_layer`: Megatron-style column /
row splits), with ``op_times`` the importer's cost of one operator on the profile
(:func:`milp_partition.importers.timing.op_times`) applied to the operator as one of ``t``
devices runs it (:func:`milp_partition.joint.megatron.scaled_op`), and ``AR(x, t)`` the profile's
ring all-reduce of ``x`` bytes over ``t`` devices (``2 (t - 1) / t * x * beta + 2 (t - 1) alpha``):

* ``F = sum_ops fwd + sum_row-layers AR(output, t)``, ``G = sum_ops bwd + sum_column-groups AR(input, t)``
  (seconds for the import batch);
* configuration ``vanilla``: ``p = (F + G) / batch_size``, ``a = sum_ops saved bytes / batch_size``;
* configuration ``activation recomp`` (offered where it saves memory): the layer keeps only its
  input (the bytes of its incoming edges, whole: the input of a layer is replicated over its
  ``t`` devices) and runs its forward pass again before the backward pass:
  ``p = (2 F + G) / batch_size``, ``a = input bytes / batch_size``;
* ``w`` = parameter bytes on one device; ``b = w (1 + f) + buffers`` with ``f`` the import's
  optimizer-state factor (gradients plus optimizer state per parameter byte);
* edges: no sync bytes (every layer's output is whole and replicated on its ``t`` devices, so no
  re-layout at a stage boundary).  An edge's ``c`` is the price of its message as bytes at the
  cluster's bandwidth ``B`` (:func:`edge_bytes`): ``c = B t(x)`` with ``x`` the activation bytes
  between the layers per sample and ``t(x)`` the link's time of one message of ``x`` bytes (the
  profile's device-to-device link, ``alpha + x beta``: the same function the import priced the
  graph's edges with; with ``--bandwidth``, ``alpha + x / B``), so Piper's ``E_i / B`` charges each
  crossing edge ``t(x)`` each way, latency included: the pipeline problem's price of the same
  messages on the same graph (:mod:`milp_partition.costmodel.messages`; issue 42).  This is for
  imported graphs only: on Piper's own instances ``c`` is bytes and Piper's objective is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from milp_partition.costmodel.messages import message_as_bytes, message_time_s
from milp_partition.errors import InputError
from milp_partition.importers.records import OpRecord
from milp_partition.importers.timing import backward_flops, load_profile_spec, op_times
from milp_partition.io.imported_layers import ImportedLayers, read_layers
from milp_partition.io.piper import check_joint_values
from milp_partition.joint.megatron import DegreeRefused, LayerSplit, input_activation_bytes, scaled_op, split_layer
from milp_partition.joint.problem import JointConfig, JointEdge, JointNode, JointProblem, joint_cluster

#: Tensor-parallel degrees a layer may be split over.
ALLOWED_TP_DEGREES: tuple[int, ...] = (1, 2, 4, 8)
#: Micro-batches (samples) per batch when ``--microbatches`` is not given.
DEFAULT_MICROBATCHES = 64
#: Profile when neither the command line nor the file names one.
DEFAULT_PROFILE = "H100"
#: Configuration ids.
VANILLA, RECOMPUTE = "vanilla", "activation recomp"


@dataclass(frozen=True)
class LayerPlanSettings:
    """The cluster and choices of :func:`joint_from_imported`.

    Attributes
    ----------
    devices
        ``k``, the number of identical devices.
    memory_bytes
        Memory per device.
    bandwidth_bytes_per_s
        ``B``, bandwidth from each device to the outside; ``None``: the profile's device-to-device link.
    microbatches
        ``N``, micro-batches (samples) per batch.
    tp_degrees
        Tensor-parallel degrees to offer (a subset of :data:`ALLOWED_TP_DEGREES`; those above
        ``devices`` are dropped).
    profile
        Device profile (datasheet name or JSON path); ``None``: the one the file was imported with.
    recompute
        Offer activation recomputation as a second configuration.
    """

    devices: int
    memory_bytes: float
    bandwidth_bytes_per_s: float | None = None
    microbatches: int = DEFAULT_MICROBATCHES
    tp_degrees: tuple[int, ...] = ALLOWED_TP_DEGREES
    profile: str | None = None
    recompute: bool = True


@dataclass(frozen=True)
class LayerCost:
    """One layer at one degree, one configuration: the figures its :class:`JointConfig` is made from.

    Attributes
    ----------
    forward_flops, backward_flops
        FLOPs on one device for the import batch.
    forward_s, backward_s
        Compute seconds for the import batch (the profile's kernel model), all-reduces excluded.
    allreduce_fw_bytes, allreduce_bw_bytes
        Bytes of the tensor-parallel all-reduces, forward and backward, for the import batch.
    allreduce_s
        Seconds of those all-reduces (forward and backward) for the import batch.
    param_bytes
        Parameter bytes on one device (``w``).
    activation_bytes
        Bytes kept per sample for the backward pass (``a``).
    fixed_bytes
        Parameters, gradients, optimizer state and buffers on one device (``b``).
    time_per_sample_s
        ``p``.
    """

    forward_flops: float
    backward_flops: float
    forward_s: float
    backward_s: float
    allreduce_fw_bytes: float
    allreduce_bw_bytes: float
    allreduce_s: float
    param_bytes: float
    activation_bytes: float
    fixed_bytes: float
    time_per_sample_s: float


def parse_tp_degrees(text: str) -> tuple[int, ...]:
    """``"4"`` -> ``(1, 2, 4)`` (every allowed degree up to 4); ``"1,2,8"`` -> ``(1, 2, 8)``.

    Raises
    ------
    InputError
        When a degree is not one of :data:`ALLOWED_TP_DEGREES`.
    """
    allowed = ", ".join(map(str, ALLOWED_TP_DEGREES))
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if not values or any(v not in ALLOWED_TP_DEGREES for v in values):
        raise InputError(
            f"tensor-parallel degrees must be among {allowed} (a maximum, e.g. 4, or a list, e.g. 1,2,4), got {text!r}",
            where="--tp-degrees",
        )
    if len(values) == 1:
        return tuple(t for t in ALLOWED_TP_DEGREES if t <= values[0])
    return tuple(sorted(set(values)))


def layer_cost(
    ops: Sequence[OpRecord],
    split: LayerSplit,
    t: int,
    model: ImportedLayers,
    profile: Any,
    *,
    recompute: bool,
    input_bytes: float,
) -> LayerCost:
    """The figures of one layer at degree ``t`` (see the module docstring); ``input_bytes`` per import batch."""
    scaled = [scaled_op(op, role, t) for op, role in zip(ops, split.roles, strict=True)]
    times = [op_times(op, model.settings, profile) for op in scaled]
    fwd_s = sum(x.forward_s for x in times)
    bwd_s = sum(x.backward_s for x in times)
    ar_fw = sum(profile.allreduce_time_s(x, t) for x in split.allreduce_fw_bytes)
    ar_bw = sum(profile.allreduce_time_s(x, t) for x in split.allreduce_bw_bytes)
    batch = model.batch_size
    params = float(sum(op.param_bytes for op in scaled))
    saved = float(sum(op.output_bytes if op.saved_bytes is None else op.saved_bytes for op in scaled))
    buffers = float(sum(op.buffer_bytes for op in scaled))
    forward_total = fwd_s + ar_fw
    total = fwd_s + bwd_s + ar_fw + ar_bw + (forward_total if recompute else 0.0)
    return LayerCost(
        forward_flops=sum(op.forward_flops for op in scaled),
        backward_flops=sum(backward_flops(op, model.settings) for op in scaled),
        forward_s=fwd_s,
        backward_s=bwd_s,
        allreduce_fw_bytes=float(sum(split.allreduce_fw_bytes)),
        allreduce_bw_bytes=float(sum(split.allreduce_bw_bytes)),
        allreduce_s=ar_fw + ar_bw,
        param_bytes=params,
        activation_bytes=(input_bytes if recompute else saved) / batch,
        fixed_bytes=params * (1.0 + model.settings.optimizer_state_bytes_per_param_byte) + buffers,
        time_per_sample_s=total / batch,
    )


def _profile(settings: LayerPlanSettings, model: ImportedLayers) -> tuple[Any, list[str]]:
    notes: list[str] = []
    spec = settings.profile or model.profile
    if spec is None:
        spec = DEFAULT_PROFILE
        notes.append(f"the import had no profile: times from the {DEFAULT_PROFILE} datasheet (give --profile)")
    return load_profile_spec(spec), notes


def joint_from_imported(data: Any, source: str, settings: LayerPlanSettings) -> JointProblem:
    """The joint problem of an imported graph (parsed JSON) on the cluster of ``settings``.

    A degree that some attention layer's heads do not divide is not offered for any layer (a
    note says why); degrees above ``settings.devices`` are dropped.

    Raises
    ------
    InputError
        On a malformed file (:func:`read_layers`), an unknown profile, or a degree outside
        :data:`ALLOWED_TP_DEGREES`.
    """
    bad = [t for t in settings.tp_degrees if t not in ALLOWED_TP_DEGREES]
    if bad or not settings.tp_degrees:
        raise InputError(f"tensor-parallel degrees must be among {ALLOWED_TP_DEGREES}, got {bad or '[]'}", where="--tp-degrees")
    model = read_layers(data, source)
    profile, notes = _profile(settings, model)
    if not model.modules:
        notes.append("no module shapes in the file (an ONNX import): every layer is replicated at every tensor-parallel degree")
    successors = {u for u, _, _ in model.edges}
    incoming: dict[str, float] = {v: 0.0 for v in model.layers}
    for _, v, nbytes in model.edges:
        incoming[v] += nbytes
    for v, (_, ops) in model.layers.items():  # a layer reading the model's inputs keeps them
        if not any(target == v for _, target, _ in model.edges):
            incoming[v] = input_activation_bytes(ops[0])
    degrees = [t for t in sorted(set(settings.tp_degrees)) if t <= settings.devices]
    if not degrees:
        degrees = [min(settings.tp_degrees)]
    splits: dict[int, dict[str, LayerSplit]] = {}
    for t in degrees:
        try:
            splits[t] = {
                v: split_layer(ops, model.modules, t, last_layer=v not in successors) for v, (_, ops) in model.layers.items()
            }
        except DegreeRefused as why:
            notes.append(f"tensor-parallel degree {t} not offered: {why}")
    if not splits:
        raise InputError(
            "no tensor-parallel degree splits every layer: " + "; ".join(notes) + " (allow degree 1 with --tp-degrees)",
            source=source,
        )
    for t in splits:
        distinct = sorted({n for s in splits[t].values() for n in s.notes})
        notes += [f"t={t}: {note}" for note in distinct[:3]]
        if len(distinct) > 3:
            notes.append(f"t={t}: and {len(distinct) - 3} more such notes")
    nodes = []
    for v, (name, ops) in model.layers.items():
        configs: dict[int, tuple[JointConfig, ...]] = {}
        for t, by_layer in splits.items():
            cfgs = [_config(VANILLA, layer_cost(ops, by_layer[v], t, model, profile, recompute=False, input_bytes=incoming[v]))]
            if settings.recompute:
                cost = layer_cost(ops, by_layer[v], t, model, profile, recompute=True, input_bytes=incoming[v])
                if cost.activation_bytes < cfgs[0].activation_bytes:
                    cfgs.append(_config(RECOMPUTE, cost))
            configs[t] = tuple(cfgs)
        nodes.append(JointNode(v, name, configs))
    bandwidth = settings.bandwidth_bytes_per_s
    if bandwidth is None:
        bandwidth = profile.links["d2d"].bandwidth_bytes_per_s
    if not (math.isfinite(bandwidth) and bandwidth > 0):  # an edge's message is priced as bytes at this rate
        raise InputError(
            f"the bandwidth {bandwidth!r} is not a finite rate more than 0 (the profile's device-to-device link: give --bandwidth)",
            source=source,
        )
    edges = tuple(
        JointEdge(u, v, edge_bytes(nbytes / model.batch_size, profile, settings.bandwidth_bytes_per_s, bandwidth))
        for u, v, nbytes in model.edges
    )
    rate = profile.compute.get(model.settings.dtype)  # the compute profile of the kind: the import's dtype's peak
    cluster = joint_cluster(settings.devices, float(settings.memory_bytes), float(bandwidth)).with_peak_flops(
        None if rate is None else rate.peak_flop_per_s
    )
    name = str(data.get("name", "")) if isinstance(data, Mapping) else ""
    problem = JointProblem(tuple(nodes), edges, cluster, settings.microbatches, name=name, source=source, notes=tuple(notes))
    check_joint_values(problem, source, hint=" (from the 'layers' object and the profile: check their values)")
    return problem


def edge_bytes(nbytes: float, profile: Any, given_bandwidth: float | None, bandwidth: float) -> float:
    """An edge's ``c`` (see the module docstring): its message of ``nbytes`` bytes priced as bytes at ``bandwidth``.

    ``t(x)`` is the profile's device-to-device link (``profile.transfer_time_s``, what the import priced the
    graph's edges with) unless ``given_bandwidth`` (``--bandwidth``) replaces its rate: then ``alpha + x / B``
    with the link's latency ``alpha`` (:func:`milp_partition.costmodel.messages.message_time_s`).
    """
    if given_bandwidth is None:
        seconds = profile.transfer_time_s(nbytes, "d2d") if nbytes > 0 else 0.0
    else:
        seconds = message_time_s(nbytes, profile.links["d2d"].alpha_s, 1.0 / given_bandwidth)
    return message_as_bytes(seconds, bandwidth)


def _config(config_id: str, cost: LayerCost) -> JointConfig:
    return JointConfig(
        id=config_id,
        time_per_sample_s=cost.time_per_sample_s,
        parameter_bytes=cost.param_bytes,
        activation_bytes=cost.activation_bytes,
        fixed_bytes=cost.fixed_bytes,
    )
