"""Import an ONNX model: shape inference, FLOP formulas (:mod:`.onnx_flops`), bytes, parameters.

Each ONNX node is an operator record, except constants: ``Constant`` nodes and nodes whose
inputs are all initializers or constants (``Identity`` of a shared weight) are folded into the
initializers they stand for.  Floating-point initializers are parameters; others (masks,
indices, shapes) are buffers.  A tied weight that an exporter wrote twice (an LM head sharing
the embedding's matrix becomes a second, transposed initializer) is recognised by its content,
equal to another initializer's or to its transpose, and counted once (matrices whose entries
are not all equal, so that zero biases or unit norm weights are never merged).  The module path
of a node, for layer granularity, is read from its metadata as torch's current exporter writes
it (``pkg.torch.onnx.name_scopes``: ``['', 'h.0', 'h.0.attn', 'linear']`` -> ``h.0.attn``),
else from its name as the TorchScript exporter writes it
(``/layer1/layer1.0/conv1/Conv`` -> ``layer1.0.conv1``).  ONNX has no backward pass, so a training graph uses the ratios of
:class:`~milp_partition.importers.settings.ImportSettings`.  Needs the ``onnx`` extra.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.graph import Graph
from milp_partition.importers.build import ImportedGraph, build_graph
from milp_partition.importers.deps import require
from milp_partition.importers.onnx_flops import VIEWS, known_op, numel, op_flops
from milp_partition.importers.records import CapturedModel, OpRecord, TensorUse
from milp_partition.importers.settings import ImportSettings


def module_path_from_name(name: str) -> str:
    """``/layer1/layer1.0/downsample/downsample.0/Conv`` -> ``layer1.0.downsample.0`` ("" for a bare name)."""
    if "/" not in name:
        return ""
    parts: list[str] = []
    for comp in name.split("/")[1:-1]:
        if not comp:
            continue
        if parts and comp.startswith(parts[-1] + "."):
            parts[-1] = comp
        else:
            parts.append(comp)
    return ".".join(parts)


#: Metadata key of torch's current (``dynamo=True``) ONNX exporter holding a node's module scopes.
NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"


def scope_path(node: Any) -> str | None:
    """Module path from :data:`NAME_SCOPES_KEY` metadata (``""``: the top level), or ``None`` if the node has none."""
    for prop in getattr(node, "metadata_props", ()):
        if prop.key != NAME_SCOPES_KEY:
            continue
        try:
            scopes = ast.literal_eval(prop.value)
        except (ValueError, SyntaxError):
            return None
        if isinstance(scopes, list) and all(isinstance(x, str) for x in scopes):
            modules = [x for x in scopes[:-1] if x]  # the last scope is the operator itself
            return modules[-1] if modules else ""
        return None
    return None


def module_path_of(node: Any) -> str:
    """Module path of an ONNX node: from :data:`NAME_SCOPES_KEY` metadata if present, else from its name."""
    path = scope_path(node)
    return module_path_from_name(node.name) if path is None else path


def tied_initializers(initializers: Sequence[Any]) -> dict[str, str]:
    """Floating-point initializers equal to an earlier one or to its transpose: name -> the earlier name.

    Only tensors of rank 2 or more whose entries are not all equal are compared (by a hash of
    their bytes), so constant tensors (zero biases, unit scales) are never merged.
    """
    numpy_helper = require("onnx.numpy_helper")
    seen: dict[tuple[Any, ...], str] = {}
    tied: dict[str, str] = {}
    for init in initializers:
        if init.data_type not in _FLOAT_TYPES or len(init.dims) < 2:
            continue
        array = numpy_helper.to_array(init)
        if array.size < 2 or (array.flat[0] == array).all():
            continue
        keys = [(array.shape, array.dtype.str, hashlib.blake2b(array.tobytes(), digest_size=16).digest())]
        if array.ndim == 2:
            transposed = array.T.copy()
            keys.append((transposed.shape, array.dtype.str, hashlib.blake2b(transposed.tobytes(), digest_size=16).digest()))
        owner = next((seen[k] for k in keys if k in seen), None)
        if owner is not None:
            tied[init.name] = owner
        else:
            seen[keys[0]] = init.name
    return tied


def load_model(path: str | Path, input_shapes: Sequence[tuple[int, ...]] | None = None) -> tuple[Any, list[str]]:
    """Load, check and shape-infer an ONNX file, fixing the graph inputs' shapes if given.

    Returns
    -------
    (model, notes)
        The shape-inferred model; notes say when strict shape inference failed and a partial
        inference was used instead.

    Raises
    ------
    InputError
        When the file is missing, not an ONNX model, fails the checker or shape inference, or
        ``input_shapes`` does not match the graph inputs.
    """
    onnx = require("onnx")
    source = str(path)
    if Path(path).is_dir():
        raise InputError("is a directory, not an ONNX file; give the .onnx file inside it", source=source)
    if not Path(path).is_file():
        raise InputError("no such file; check the path", source=source)
    try:
        model = onnx.load(source)
    except Exception as exc:
        raise InputError(
            f"is not a valid ONNX model (cannot parse it: {type(exc).__name__}: {_first(exc)})", source=source
        ) from None
    if not model.graph.node:
        raise InputError("is not a valid ONNX model (its graph has no nodes)", source=source)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise InputError(f"is not a valid ONNX model (checker: {_first(exc)})", source=source) from None
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    if input_shapes:
        if len(input_shapes) != len(graph_inputs):
            raise InputError(
                f"the model has {len(graph_inputs)} input(s) ({', '.join(i.name for i in graph_inputs)}), "
                f"--input-shape gave {len(input_shapes)}",
                source=source,
                where="--input-shape",
            )
        for value, shape in zip(graph_inputs, input_shapes):
            dims = value.type.tensor_type.shape.dim
            if len(dims) != len(shape):
                raise InputError(
                    f"input {value.name!r} has rank {len(dims)}, --input-shape gave {'x'.join(map(str, shape))}",
                    source=source,
                    where="--input-shape",
                )
            if any(dim.HasField("dim_value") and dim.dim_value != size for dim, size in zip(dims, shape)):
                raise InputError(
                    f"input {value.name!r} has fixed shape {_dims(dims)}, --input-shape gave {'x'.join(map(str, shape))}",
                    source=source,
                    where="--input-shape",
                )
            for dim, size in zip(dims, shape):
                dim.Clear()
                dim.dim_value = size
    for value in graph_inputs:
        dims = value.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            raise InputError(
                f"input {value.name!r} has dynamic shape {_dims(dims)}; give its shape with --input-shape",
                source=source,
            )
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True), []
    except Exception as exc:
        strict_error = _first(exc)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:
        raise InputError(f"shape inference failed: {_first(exc)}", source=source) from None
    return inferred, [f"strict shape inference failed ({strict_error}); shapes are partial"]


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)[:300]


def _dims(dims: Any) -> str:
    return "x".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)


def capture_onnx(model: Any, name: str, notes: Sequence[str] = ()) -> CapturedModel:
    """Operator records of a shape-inferred ONNX model (see the module docstring)."""
    onnx = require("onnx")
    graph = model.graph
    shapes, itemsize, const_bytes, const_is_param = _tensor_tables(onnx, graph)
    tied = tied_initializers(graph.initializer)
    alias: dict[str, str] = {}  # constant value -> the initializer (or Constant output) it stands for

    def nbytes(tensor: str) -> int:
        shape = shapes.get(tensor)
        return 0 if shape is None else numel(shape) * itemsize.get(tensor, 4)

    ops: list[OpRecord] = []
    uses: list[TensorUse] = []
    producer: dict[str, str] = {}
    seen_state: set[str] = set()
    used_ids: set[str] = set()
    flops_by_kind = {"matmul": 0.0, "other": 0.0}
    unknown: set[str] = set()
    unknown_shape: set[str] = set()
    # A file with scope metadata may still have nodes without (made by the exporter's optimizer):
    # they take the module of the operator that produces their first input, else of the previous one.
    has_scopes = any(scope_path(n) is not None for n in graph.node)
    path_of_op: dict[str, str] = {}
    last_path = ""
    for index, node in enumerate(graph.node):
        real_inputs = [t for t in node.input if t]
        if _fold_constant(node, real_inputs, alias, const_bytes, const_is_param, nbytes):
            continue
        op_id = node.name or f"{node.op_type}_{index}"
        while op_id in used_ids:
            op_id += "_"
        used_ids.add(op_id)
        params, buffers, in_bytes = _count_inputs(
            op_id,
            real_inputs,
            alias,
            const_bytes,
            const_is_param,
            tied,
            seen_state,
            nbytes,
            shapes,
            producer,
            uses,
            unknown_shape,
        )
        out_bytes = sum(nbytes(t) for t in node.output if t)
        in_shapes = [shapes.get(alias.get(t, t)) if t else None for t in node.input]
        out_shapes = [shapes.get(t) for t in node.output]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        matmul, other = op_flops(node.op_type, in_shapes, out_shapes, attrs)
        flops_by_kind["matmul"] += matmul
        flops_by_kind["other"] += other
        counted = known_op(node.op_type)
        if not counted:
            unknown.add(node.op_type if not node.domain else f"{node.domain}.{node.op_type}")
        view = node.op_type in VIEWS
        path = scope_path(node) if has_scopes else module_path_from_name(node.name)
        if path is None:
            sources = [producer[t] for t in real_inputs if t in producer]
            path = path_of_op[sources[0]] if sources else last_path
        path_of_op[op_id] = last_path = path
        ops.append(
            OpRecord(
                id=op_id,
                op_type=node.op_type if not node.domain else f"{node.domain}.{node.op_type}",
                module_path=path,
                forward_flops=matmul + other,
                input_bytes=0 if view else in_bytes,
                output_bytes=0 if view else out_bytes,
                param_bytes=params,
                buffer_bytes=buffers,
                counted=counted,
            )
        )
        for t in node.output:
            if t:
                producer[t] = op_id
    notes = _capture_notes(notes, tied, unknown_shape)
    total_params = sum(
        numel(tuple(i.dims)) * _itemsize(onnx, i.data_type)
        for i in graph.initializer
        if i.data_type in _FLOAT_TYPES and i.name not in tied
    )
    return CapturedModel(
        name=name,
        framework="onnx",
        capture="onnx.shape_inference",
        ops=tuple(ops),
        uses=tuple(uses),
        total_param_bytes=total_params,
        flops_by_kind=flops_by_kind,
        unknown_ops=tuple(sorted(unknown)),
        notes=tuple(notes),
    )


def _fold_constant(
    node: Any,
    real_inputs: list[str],
    alias: dict[str, str],
    const_bytes: dict[str, int],
    const_is_param: dict[str, bool],
    nbytes: Callable[[str], int],
) -> bool:
    """A Constant, or a node of constants only: its outputs become constants (an Identity's an alias); True then."""
    if node.op_type == "Constant" or (real_inputs and all(t in const_bytes or t in alias for t in real_inputs)):
        for out in node.output:
            if node.op_type == "Identity" and real_inputs:
                alias[out] = alias.get(real_inputs[0], real_inputs[0])
            else:
                const_bytes[out] = nbytes(out)
                const_is_param[out] = False
        return True
    return False


def _capture_notes(notes: Sequence[str], tied: dict[str, str], unknown_shape: set[str]) -> list[str]:
    """``notes`` and what the capture found worth saying: tied initializers, tensors without a shape."""
    notes = list(notes)
    if tied:
        shown = ", ".join(f"{k} = {v}" for k, v in list(tied.items())[:3]) + (", ..." if len(tied) > 3 else "")
        notes.append(f"{len(tied)} initializer(s) hold the same weight as another (tied, counted once): {shown}")
    if unknown_shape:
        notes.append(f"{len(unknown_shape)} tensors without an inferred shape are costed as 0 bytes")
    return notes


def _tensor_tables(
    onnx: Any, graph: Any
) -> tuple[dict[str, tuple[int, ...] | None], dict[str, int], dict[str, int], dict[str, bool]]:
    """Shape (None: not inferred) and item size of every typed value and initializer; each initializer's bytes and
    whether it is a parameter (floating point)."""
    shapes: dict[str, tuple[int, ...] | None] = {}
    itemsize: dict[str, int] = {}

    def note_value(value: Any) -> None:
        ttype = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            return
        dims = ttype.shape.dim
        known = ttype.HasField("shape") and all(d.HasField("dim_value") for d in dims)
        shapes[value.name] = tuple(d.dim_value for d in dims) if known else None
        itemsize[value.name] = _itemsize(onnx, ttype.elem_type)

    for value in [*graph.input, *graph.value_info, *graph.output]:
        note_value(value)
    const_bytes: dict[str, int] = {}
    const_is_param: dict[str, bool] = {}
    for init in graph.initializer:
        shapes[init.name] = tuple(init.dims)
        itemsize[init.name] = _itemsize(onnx, init.data_type)
        const_bytes[init.name] = numel(tuple(init.dims)) * itemsize[init.name]
        const_is_param[init.name] = init.data_type in _FLOAT_TYPES
    return shapes, itemsize, const_bytes, const_is_param


def _count_inputs(
    op_id: str,
    real_inputs: list[str],
    alias: dict[str, str],
    const_bytes: dict[str, int],
    const_is_param: dict[str, bool],
    tied: dict[str, str],
    seen_state: set[str],
    nbytes: Callable[[str], int],
    shapes: dict[str, tuple[int, ...] | None],
    producer: dict[str, str],
    uses: list[TensorUse],
    unknown_shape: set[str],
) -> tuple[int, int, int]:
    """An operator's inputs: (parameter bytes, buffer bytes, input bytes).

    A constant's state counts once, at its first reader (``seen_state``; a tied one not at all);
    an activation from another operator is recorded in ``uses``, one without a shape in ``unknown_shape``.
    """
    params = buffers = in_bytes = 0
    for t in real_inputs:
        root = alias.get(t, t)
        if root in const_bytes:
            if root not in seen_state:
                seen_state.add(root)
                if root in tied:  # the same weight as another initializer, counted there
                    ...
                elif const_is_param[root]:
                    params += const_bytes[root]
                else:
                    buffers += const_bytes[root]
            in_bytes += const_bytes[root]
            continue
        in_bytes += nbytes(t)
        if shapes.get(t) is None:
            unknown_shape.add(t)
        if t in producer:
            uses.append(TensorUse(producer[t], op_id, t, nbytes(t)))
    return params, buffers, in_bytes


#: ONNX TensorProto element types that are floating point (FLOAT, FLOAT16, DOUBLE, BFLOAT16, FLOAT8 kinds).
_FLOAT_TYPES: frozenset[int] = frozenset({1, 10, 11, 16, 17, 18, 19, 20})


def _itemsize(onnx: Any, elem_type: int) -> int:
    try:
        return int(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except Exception:
        return 4


def import_onnx_model(
    path: str | Path, settings: ImportSettings | None = None, input_shapes: Sequence[tuple[int, ...]] | None = None
) -> ImportedGraph:
    """Load an ONNX file and build its graph, with records and metadata.

    Parameters
    ----------
    path
        The ``.onnx`` file.
    settings
        Granularity, training (backward by the documented ratios), profile.  ``measure`` is
        not supported for ONNX.
    input_shapes
        Shapes of the graph inputs (in order) for dynamic dimensions; ``None`` keeps the file's.

    Raises
    ------
    InputError
        On a missing or corrupt file, failed shape inference, a bad shape, or ``measure``.
    """
    settings = settings or ImportSettings()
    if settings.measure:
        raise InputError("--measure times PyTorch operators; for an ONNX model use --profile", where="--measure")
    model, notes = load_model(path, input_shapes)
    captured = capture_onnx(model, Path(path).stem, notes)
    captured = replace(captured, batch_size=_batch_size(model, input_shapes))
    return build_graph(captured, settings)


def _batch_size(model: Any, input_shapes: Sequence[tuple[int, ...]] | None) -> int | None:
    """The first dimension of the first input (given, else the file's when it is fixed), ``None`` if unknown."""
    if input_shapes and input_shapes[0]:
        return int(input_shapes[0][0])
    try:
        dim = model.graph.input[0].type.tensor_type.shape.dim[0].dim_value
    except (IndexError, AttributeError):
        return None
    return int(dim) if dim and dim > 0 else None


def import_onnx(
    path: str | Path, settings: ImportSettings | None = None, input_shapes: Sequence[tuple[int, ...]] | None = None
) -> Graph:
    """The graph of an ONNX file (see :func:`import_onnx_model`)."""
    return import_onnx_model(path, settings, input_shapes).graph
