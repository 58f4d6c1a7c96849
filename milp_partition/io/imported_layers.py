"""The ``layers`` object of an imported graph file, read for the joint planner.

A graph file written by ``milp-partition import`` (native ``milp-partition/1``) carries a
``layers`` object (``milp-partition-layers/1``, :mod:`milp_partition.importers.layer_shapes`,
``docs/FORMAT.md``): every operator with its layer, FLOPs and bytes, the shapes of the linear,
embedding and attention modules and the import settings.  :func:`read_layers` checks it and
returns the graph's forward layers with their operators (:class:`ImportedLayers`); every problem
is one :class:`~milp_partition.errors.InputError` naming the file and field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from milp_partition.errors import InputError
from milp_partition.importers.layer_shapes import LAYERS_FORMAT, OP_FIELDS
from milp_partition.importers.records import OpRecord
from milp_partition.importers.settings import ImportSettings
from milp_partition.io.json_text import MAX_NUMBER, check_known_keys
from milp_partition.io.native import FORMAT, instance_from_dict
from milp_partition.units import MAX_COUNT, MAX_FACTOR


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


#: The fields of the ``layers`` object (``milp_partition.importers.layer_shapes.layers_section`` writes them).
_SECTION_FIELDS = (
    "format", "batch_size", "dtype", "profile", "backward_flops_ratio", "backward_bytes_ratio",
    "optimizer_state_bytes_per_param_byte", "modules", "ops", "model",
)  # fmt: skip


def looks_like_imported(data: Any) -> bool:
    """Whether parsed JSON is a native graph file (``milp-partition/1``), the kind ``milp-partition import`` writes."""
    return isinstance(data, Mapping) and data.get("format") == FORMAT


def _number(obj: Mapping[str, Any], key: str, where: str, source: str, *, optional: bool = False) -> float | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    x = math.nan
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        try:
            x = float(value)
        except OverflowError:  # an integer past float range
            pass
    if not 0 <= x <= MAX_NUMBER:
        raise InputError(
            f"'{key}' must be a finite number from 0 to {MAX_NUMBER:g}, got {str(value)[:40]}", source=source, where=where
        )
    return x


def _count(value: Any, key: str, where: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise InputError(
            f"'{key}' must be a positive integer of at most {MAX_COUNT}, got {str(value)[:40]}", source=source, where=where
        )
    return value


def _check_modules(modules: Mapping[str, Any], source: str) -> None:
    """Each module's shape facts: known fields only, positive integer sizes and head counts."""
    for path, m in modules.items():
        keys = {"Linear": ("in_features", "out_features"), "Embedding": ("num_embeddings", "embedding_dim")}.get(
            str(m.get("type")), ("heads",) if "heads" in m else ()
        )
        optional = ("kv_heads",) if keys == ("heads",) else ()
        check_known_keys(m, ("type", *keys, *optional), f"layers.modules[{path!r}]", source)
        for key in optional:
            if key in m:
                _count(m[key], key, f"layers.modules[{path!r}]", source)
        for key in keys:
            _count(m.get(key), key, f"layers.modules[{path!r}]", source)


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
    check_known_keys(section, _SECTION_FIELDS, "layers", source)  # a misspelt field is refused, not ignored
    batch = _count(section.get("batch_size"), "batch_size", "layers", source)
    modules = section.get("modules", {})
    if not isinstance(modules, Mapping) or not all(isinstance(m, Mapping) for m in modules.values()):
        raise InputError("'modules' must map module paths to objects", source=source, where="layers.modules")
    _check_modules(modules, source)
    graph = instance.graph
    if not any(n.is_backward for n in graph.nodes):
        raise InputError(
            "the graph was imported forward only (no backward nodes): the joint planner plans training steps "
            "(backward passes, gradients, optimizer state); import the model again with --training, or partition "
            "this graph with --problem pipeline",
            source=source,
        )
    forward = {n.id: n for n in graph.nodes if not n.is_backward}
    ops_raw = section.get("ops")
    if not isinstance(ops_raw, list) or not ops_raw:
        raise InputError("'ops' must be a non-empty list", source=source, where="layers")
    by_layer: dict[str, list[OpRecord]] = {v: [] for v in forward}
    first_at: dict[str, int] = {}
    for j, o in enumerate(ops_raw):
        where = f"layers.ops[{j}]"
        if not isinstance(o, Mapping):
            raise InputError("expected an object", source=source, where=where)
        check_known_keys(o, ("node", *OP_FIELDS), where, source)
        op_id = o.get("id")
        if isinstance(op_id, bool) or not isinstance(op_id, (str, int)):
            raise InputError(f"'id' must be an operator id (a string), got {str(op_id)[:40]}", source=source, where=where)
        if str(op_id) in first_at:  # listed twice, it would count twice in every cost of its layer
            raise InputError(
                f"operator {op_id!r} is listed twice (also layers.ops[{first_at[str(op_id)]}])", source=source, where=where
            )
        first_at[str(op_id)] = j
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
    for key, x in (*ratios.items(), ("optimizer_state_bytes_per_param_byte", factor)):
        if x is not None and x > MAX_FACTOR:  # as the import's flags cap them
            raise InputError(f"'{key}' must be from 0 to {MAX_FACTOR:g}, got {x!r}", source=source, where="layers")
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
