"""From captured operators to the project's :class:`~milp_partition.graph.Graph`.

Forward graph
    One node per group of operators (:mod:`~milp_partition.importers.grouping`): FLOPs, time,
    parameter bytes summed; its ``name`` is the module path and operator id of a single
    operator (``h.3.attn.qkv/linear_12``) or the layer and its operator count; an edge per pair of groups joined by a tensor, carrying the bytes of
    the distinct tensors that cross (a tensor read twice by one group counts once).

Training graph (``settings.training``)
    Beside each forward node ``v`` a backward node ``v:bwd`` (``is_backward``) with the backward
    FLOPs (traced, or ``backward_flops_ratio`` times forward) and time.  Edges: ``v -> v:bwd``
    and, for each forward edge ``u -> v``, ``v:bwd -> u:bwd`` carrying the gradient (as many
    bytes as the activation).  What crosses a stage boundary is then exactly the activations
    forward and their gradients backward: ``v -> v:bwd`` orders the two passes and carries
    0 bytes when they are colocated (the saved activations stay on the device that made them;
    costing them would count a transfer that never happens), the saved activations' bytes
    when ``colocate_backward`` is off.  Both nodes share colocation group ``v``
    unless ``colocate_backward`` is off.  Memory sits on the forward node: ``activation_bytes``
    are the activations autograd saves for backward (per micro-batch); ``other_bytes`` are
    buffers plus ``optimizer_state_bytes_per_param_byte`` times the parameter bytes.

Times
    In ``settings.time_unit`` (ms by default) from :mod:`~milp_partition.importers.timing`;
    with a profile and ``edge_times`` each edge gets the profile's device-to-device transfer time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from milp_partition.errors import InputError
from milp_partition.graph import TIME_UNIT_SECONDS, Edge, Graph, Node, make_graph
from milp_partition.importers.grouping import choose_layer_depth, group_operators
from milp_partition.importers.layer_shapes import layers_section
from milp_partition.importers.records import CapturedModel
from milp_partition.importers.settings import ImportSettings
from milp_partition.importers.timing import backward_flops, load_profile_spec, op_times
from milp_partition.io.json_text import dump_json_lines, write_text_file
from milp_partition.io.native import instance_to_dict
from milp_partition.pipeline.problem import Instance

#: Suffix of a backward node's id.
BACKWARD_SUFFIX = ":bwd"


@dataclass(frozen=True)
class ImportedGraph:
    """A graph built from a model, with what is known about how.

    Attributes
    ----------
    graph
        The graph (forward nodes, and backward nodes for training).
    captured
        The operator records it was built from.
    settings
        The import settings.
    metadata
        Capture method, totals, profile, unknown operators, notes (written to the graph
        file's ``description``).
    """

    graph: Graph
    captured: CapturedModel
    settings: ImportSettings
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def total_flops(self) -> float:
        """Sum of node FLOPs (forward, plus backward in a training graph)."""
        return sum(n.flops or 0.0 for n in self.graph.nodes)

    @property
    def total_param_bytes(self) -> int:
        """Sum of node parameter bytes."""
        return sum(n.param_bytes for n in self.graph.nodes)


def build_graph(captured: CapturedModel, settings: ImportSettings) -> ImportedGraph:
    """Group operators, add the backward pass and times, and validate the graph.

    Raises
    ------
    InputError
        When the profile cannot be read, or the result is not a valid graph.
    """
    if settings.time_unit not in TIME_UNIT_SECONDS:
        raise ValueError(f"time_unit must be one of {', '.join(TIME_UNIT_SECONDS)}, got {settings.time_unit!r}")
    unit_s = TIME_UNIT_SECONDS[settings.time_unit]
    if not captured.ops:
        raise InputError("the captured graph has no operators (the model computes nothing from its inputs)", source=captured.name)
    profile = load_profile_spec(settings.profile) if settings.profile and not settings.measure else None
    depth = settings.layer_depth
    if depth is None:  # automatic, and only where it means something
        depth = choose_layer_depth(captured.ops, settings.max_layer_share) if settings.granularity == "layer" else 1
    groups = group_operators(captured.ops, settings.granularity, depth)
    group_of = {op.id: gid for gid, ops in groups for op in ops}

    nodes: list[Node] = []
    backward: list[Node] = []
    for gid, ops in groups:
        times = [op_times(op, settings, profile) for op in ops]
        fwd_flops = sum(op.forward_flops for op in ops)
        params = sum(op.param_bytes for op in ops)
        buffers = sum(op.buffer_bytes for op in ops)
        op_type = ops[0].op_type if len(ops) == 1 else "layer"
        if len(ops) > 1:
            name = f"{gid} ({len(ops)} ops)"
        elif not ops[0].module_path:  # an operator of the model's own forward (it was "top/top")
            op = ops[0].op_type
            name = f"{op.split('.')[1] if op.startswith('aten.') and op.count('.') >= 2 else op} (model's own forward)"
        else:  # the module path it came from, then the operator
            name = f"{ops[0].module_path}/{gid}" if ops[0].module_path != gid else gid
        colocation = gid if settings.training and settings.colocate_backward else None
        saved = sum(op.output_bytes if op.saved_bytes is None else op.saved_bytes for op in ops) if settings.training else 0
        optimizer = round(settings.optimizer_state_bytes_per_param_byte * params) if settings.training else 0
        nodes.append(
            Node(
                id=gid,
                name=name,
                op_type=op_type,
                forward_time=sum(t.forward_s for t in times) / unit_s,
                flops=fwd_flops,
                param_bytes=params,
                activation_bytes=saved,
                other_bytes=buffers + optimizer,
                colocation_group=colocation,
            )
        )
        if settings.training:
            backward.append(
                Node(
                    id=gid + BACKWARD_SUFFIX,
                    name=name + " backward",
                    op_type=op_type + " backward",
                    backward_time=sum(t.backward_s for t in times) / unit_s,
                    flops=sum(backward_flops(op, settings) for op in ops),
                    colocation_group=colocation,
                    is_backward=True,
                )
            )

    crossing: dict[tuple[str, str], dict[str, int]] = {}
    for use in captured.uses:
        a, b = group_of[use.source], group_of[use.target]
        if a != b:
            crossing.setdefault((a, b), {})[use.tensor] = use.bytes

    def edge_time(nbytes: int) -> float | None:
        if profile is None or not settings.edge_times:
            return None
        return profile.transfer_time_s(nbytes, "d2d") / unit_s

    forward_edges = [Edge(a, b, sum(t.values()), edge_time(sum(t.values()))) for (a, b), t in crossing.items()]
    edges = list(forward_edges)
    if settings.training:
        # (saved activations cross only when forward and backward may sit apart)
        own = (lambda n: 0) if settings.colocate_backward else (lambda n: n.activation_bytes)
        edges += [Edge(n.id, n.id + BACKWARD_SUFFIX, own(n), edge_time(own(n))) for n in nodes]
        edges += [Edge(e.target + BACKWARD_SUFFIX, e.source + BACKWARD_SUFFIX, e.bytes, e.transfer_time) for e in forward_edges]
    how = f"{captured.capture}, {settings.granularity}" + (f" depth {depth}" if settings.granularity == "layer" else "")
    graph = make_graph(
        nodes + backward,
        edges,
        name=f"{captured.name} ({how}{', training' if settings.training else ''})",
        time_unit=settings.time_unit,
        source=captured.name,
    )
    metadata = _metadata(captured, settings, profile, graph, depth)
    return ImportedGraph(graph, captured, settings, metadata)


def _metadata(captured: CapturedModel, settings: ImportSettings, profile: Any | None, graph: Graph, depth: int) -> dict[str, Any]:
    if settings.measure:
        times = f"measured on this machine's CPU (median of {settings.measure_repeats})"
    elif profile is not None:
        times = (
            f"profile {profile.name}" + ("" if profile.source in profile.name else f" ({profile.source})") + f", {settings.dtype}"
        )
    else:
        times = "none (no profile): times are zero"
    forward = [n for n in graph.nodes if not n.is_backward]
    fwd_total = sum(n.flops or 0.0 for n in forward)
    return {
        "framework": captured.framework,
        "capture": captured.capture,
        "granularity": settings.granularity,
        "layer_depth": depth if settings.granularity == "layer" else None,
        "layer_depth_automatic": settings.layer_depth is None,
        "largest_node": max(forward, key=lambda n: n.flops or 0.0).id if forward else None,
        "largest_node_share": max((n.flops or 0.0) for n in forward) / fwd_total if fwd_total > 0 else 0.0,
        "training": settings.training,
        "times": times,
        "nodes": len(graph.nodes),
        "edges": len(graph.edges),
        "flops": sum(n.flops or 0.0 for n in graph.nodes),
        "forward_flops": sum(n.flops or 0.0 for n in graph.nodes if not n.is_backward),
        "param_bytes": sum(n.param_bytes for n in graph.nodes),
        "reference_flops": dict(captured.reference_flops),
        "unknown_ops": list(captured.unknown_ops),
        "notes": list(captured.notes),
    }


def describe(metadata: dict[str, Any]) -> str:
    """One line of text for the graph file's ``description`` and the CLI."""
    parts = [
        f"imported from {metadata['framework']} by {metadata['capture']}",
        f"granularity {metadata['granularity']}"
        + (
            f" (depth {metadata['layer_depth']}{', automatic' if metadata.get('layer_depth_automatic') else ''})"
            if metadata["layer_depth"]
            else ""
        ),
        "training graph" if metadata["training"] else "forward graph",
        f"times: {metadata['times']}",
        f"{metadata['nodes']} nodes, {metadata['edges']} edges",
        f"FLOPs {metadata['flops']:.6g}",
        f"parameters {metadata['param_bytes']} bytes",
    ]
    if metadata["unknown_ops"]:
        parts.append("ops without a FLOP count, costed by bytes: " + ", ".join(metadata["unknown_ops"]))
    parts += metadata["notes"]
    return "; ".join(parts)


def write_imported(imported: ImportedGraph, path: str) -> None:
    """Write the graph as a native ``milp-partition/1`` file with :func:`describe` as its description.

    The file also carries the ``layers`` object (:func:`~milp_partition.importers.layer_shapes.layers_section`)
    that the joint planner reads (``solve --problem joint``).
    """

    data = instance_to_dict(Instance(imported.graph))
    data["description"] = describe(imported.metadata)
    data["layers"] = layers_section(imported)
    write_text_file(path, dump_json_lines(data, source=str(path)))
