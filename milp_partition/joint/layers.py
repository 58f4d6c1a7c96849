"""A joint problem from an imported layer graph: tensor-parallel splits, recomputation and optimizer state per layer.

Input: a graph file written by ``milp-partition import`` (format ``milp-partition/1``) with its
``layers`` object (:mod:`milp_partition.importers.layer_shapes`: every operator with its layer,
FLOPs and bytes; the shapes of linear, embedding and attention modules; the import settings)
and a device profile.  Output: a :class:`~milp_partition.joint.problem.JointProblem` whose
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
* edges: ``c`` = activation bytes between layers per sample; no sync bytes (every layer's output
  is whole and replicated on its ``t`` devices, so no re-layout at a stage boundary).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from milp_partition.errors import InputError
from milp_partition.importers.layer_shapes import LAYERS_FORMAT, OP_FIELDS
from milp_partition.importers.records import OpRecord
from milp_partition.importers.settings import ImportSettings
from milp_partition.importers.timing import backward_flops, load_profile_spec, op_times
from milp_partition.io.native import FORMAT, instance_from_dict
from milp_partition.joint.megatron import DegreeRefused, LayerSplit, input_activation_bytes, scaled_op, split_layer
from milp_partition.joint.problem import JointCluster, JointConfig, JointEdge, JointNode, JointProblem

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


@dataclass(frozen=True)
class ImportedLayers:
    """The parsed ``layers`` object with the graph's forward layers and edges.

    Attributes
    ----------
    layers
        Forward node id -> (name, its operators in execution order).
    edges
        Forward edges ``(source, target, bytes per import batch)``.
    modules
        Module path -> shape facts.
    batch_size
        Samples in the import batch.
    settings
        The import settings that matter for costs (dtype, backward ratios, optimizer factor).
    profile
        The profile named in the file (``None`` if the import had none).
    """

    layers: Mapping[str, tuple[str, tuple[OpRecord, ...]]]
    edges: tuple[tuple[str, str, float], ...]
    modules: Mapping[str, Mapping[str, Any]]
    batch_size: int
    settings: ImportSettings
    profile: str | None


def looks_like_imported(data: Any) -> bool:
    """Whether parsed JSON is a native graph file (``milp-partition/1``), the kind ``milp-partition import`` writes."""
    return isinstance(data, Mapping) and data.get("format") == FORMAT


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


def _number(obj: Mapping[str, Any], key: str, where: str, source: str, *, optional: bool = False) -> float | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"'{key}' must be a number >= 0, got {value!r}", source=source, where=where)
    return float(value)


def read_layers(data: Any, source: str = "") -> ImportedLayers:
    """The layers, edges and operators of an imported graph (parsed JSON) for :func:`joint_from_imported`.

    Raises
    ------
    InputError
        When the graph is invalid, has no ``layers`` object (not written by ``milp-partition import``),
        or the object is malformed (naming the field and operator).
    """
    instance = instance_from_dict(data, source)
    section = data.get("layers")
    if section is None:
        raise InputError(
            "no 'layers' object (operators with their layers and shapes): the joint planner needs a graph written by "
            "'milp-partition import torch|onnx' (re-import the model with this version)",
            source=source,
            where="top level",
        )
    if not isinstance(section, Mapping) or section.get("format") != LAYERS_FORMAT:
        raise InputError(f'expected an object with "format": "{LAYERS_FORMAT}"', source=source, where="layers")
    batch = section.get("batch_size")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"'batch_size' must be a positive integer, got {batch!r}", source=source, where="layers")
    modules = section.get("modules", {})
    if not isinstance(modules, Mapping) or not all(isinstance(m, Mapping) for m in modules.values()):
        raise InputError("'modules' must map module paths to objects", source=source, where="layers.modules")
    for path, m in modules.items():
        keys = {"Linear": ("in_features", "out_features"), "Embedding": ("num_embeddings", "embedding_dim")}.get(
            str(m.get("type")), ("heads",) if "heads" in m else ()
        )
        for key in keys:
            v = m.get(key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(
                    f"'{key}' must be a positive integer, got {v!r}", source=source, where=f"layers.modules[{path!r}]"
                )
    graph = instance.graph
    forward = {n.id: n for n in graph.nodes if not n.is_backward}
    ops_raw = section.get("ops")
    if not isinstance(ops_raw, list) or not ops_raw:
        raise InputError("'ops' must be a non-empty list", source=source, where="layers")
    by_layer: dict[str, list[OpRecord]] = {v: [] for v in forward}
    for j, o in enumerate(ops_raw):
        where = f"layers.ops[{j}]"
        if not isinstance(o, Mapping):
            raise InputError("expected an object", source=source, where=where)
        node = o.get("node")
        if node not in forward:
            raise InputError(f"'node' {node!r} is not a forward node of the graph", source=source, where=where)
        missing = [f for f in OP_FIELDS if f not in o]
        if missing:
            raise InputError(f"missing field(s) {', '.join(missing)}", source=source, where=where)
        nums = {f: _number(o, f, where, source, optional=f in ("backward_flops", "saved_bytes")) for f in OP_FIELDS[3:]}
        by_layer[str(node)].append(
            OpRecord(
                id=str(o["id"]),
                op_type=str(o["op_type"]),
                module_path=str(o["module_path"]),
                forward_flops=float(nums["forward_flops"] or 0.0),
                backward_flops=nums["backward_flops"],
                input_bytes=int(nums["input_bytes"] or 0),
                output_bytes=int(nums["output_bytes"] or 0),
                param_bytes=int(nums["param_bytes"] or 0),
                buffer_bytes=int(nums["buffer_bytes"] or 0),
                saved_bytes=None if nums["saved_bytes"] is None else int(nums["saved_bytes"]),
            )
        )
    empty = [v for v, ops in by_layer.items() if not ops]
    if empty:
        raise InputError(f"forward node {empty[0]!r} has no operators in 'layers.ops'", source=source, where="layers")
    ratios = {k: _number(section, k, "layers", source) for k in ("backward_flops_ratio", "backward_bytes_ratio")}
    factor = _number(section, "optimizer_state_bytes_per_param_byte", "layers", source)
    settings = ImportSettings(
        training=True,
        dtype=str(section.get("dtype", "float32")),
        backward_flops_ratio=float(ratios["backward_flops_ratio"] or 0.0),
        backward_bytes_ratio=float(ratios["backward_bytes_ratio"] or 0.0),
        optimizer_state_bytes_per_param_byte=float(factor or 0.0),
        profile=None,
    )
    edges = tuple((e.source, e.target, float(e.bytes)) for e in graph.edges if e.source in forward and e.target in forward)
    profile = section.get("profile")
    return ImportedLayers(
        layers={v: (forward[v].name, tuple(by_layer[v])) for v in forward},
        edges=edges,
        modules={str(k): dict(v) for k, v in modules.items()},
        batch_size=batch,
        settings=settings,
        profile=str(profile) if profile else None,
    )


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
    edges = tuple(JointEdge(u, v, nbytes / model.batch_size) for u, v, nbytes in model.edges)
    bandwidth = settings.bandwidth_bytes_per_s
    if bandwidth is None:
        bandwidth = profile.links["d2d"].bandwidth_bytes_per_s
    cluster = JointCluster(settings.devices, float(settings.memory_bytes), float(bandwidth), settings.microbatches)
    name = str(data.get("name", "")) if isinstance(data, Mapping) else ""
    return JointProblem(tuple(nodes), edges, cluster, name=name, source=source, notes=tuple(notes))


def _config(config_id: str, cost: LayerCost) -> JointConfig:
    return JointConfig(
        id=config_id,
        time_per_sample_s=cost.time_per_sample_s,
        parameter_bytes=cost.param_bytes,
        activation_bytes=cost.activation_bytes,
        fixed_bytes=cost.fixed_bytes,
    )
