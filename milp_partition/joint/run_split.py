"""The tensor-parallel degrees ``run`` can split an imported model at, and each layer's :class:`SplitCost` there.

``run`` splits a stage (:func:`milp_partition.run.engine.tp_roles`, :func:`~milp_partition.run.engine.apply_tensor_parallel`)
by the roles of :func:`milp_partition.joint.megatron.split_layer`: ``ColwiseParallel`` / ``RowwiseParallel`` on the
linear and token-embedding modules those roles name (a column module with no row partner gathers its output), a fused
attention on its share of the heads.  So a degree ``t > 1`` is offered for a model when every layer splits at ``t``
(no :class:`~milp_partition.joint.megatron.DegreeRefused`: heads divisible by ``t``), every parameterised operator it
splits sits in a ``Linear`` or ``Embedding`` module (the only ones ``run`` splits), and at least one module is split
(else ``t`` ranks would only repeat the same work).  Per layer, as :mod:`milp_partition.run.predict` prices a run:

* ``phi_v``: the share of the layer's forward plus backward time in its split operators (column, row, and the inner ones
  between them, which run on their share of the heads or hidden width), by the operators' roofline on the device profile (:func:`milp_partition.importers.timing.op_times`, one sample);
* the activation all-reduces of the split, forward and backward, per sample (the import's bytes over its batch), and
  the gather of a column module's output where no row module follows it in the layer (the LM head);
* each rank's parameter bytes (a split operator's over ``t``, but a row module's bias whole: ``RowwiseParallel``
  replicates it), its DTensor parameters (weight and bias; an embedding: its table) and split modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from milp_partition.costmodel.tensor import SplitCost
from milp_partition.importers.timing import op_times
from milp_partition.joint.megatron import DegreeRefused, split_layer

#: The module types ``run`` splits (:func:`milp_partition.run.engine.tp_roles`).
SPLIT_TYPES = ("Linear", "Embedding")


def _tensors(op: Any) -> int:
    return 1 if "embedding" in op.op_type.lower() else 2


def layer_split(ops: Sequence[Any], model: Any, t: int, last_layer: bool, profile: Any, batch: float) -> SplitCost:
    """One layer's :class:`SplitCost` at degree ``t``.

    Raises
    ------
    DegreeRefused
        When ``run`` cannot split it so (heads not divisible, a split operator outside a linear or embedding module).
    """
    split = split_layer(ops, model.modules, t, last_layer=last_layer)
    total = share = params = 0.0
    tensors = dtensors = modules = 0
    for op, role in zip(ops, split.roles, strict=True):
        times = op_times(op, model.settings, profile)
        total += times.forward_s + times.backward_s
        cut = role in ("column", "row")
        if cut or role == "inner":  # (inner: attention on its share of the heads, the activation on its share)
            share += times.forward_s + times.backward_s
        if op.param_bytes > 0:
            kind = model.modules.get(op.module_path, {}).get("type")
            if cut and kind not in SPLIT_TYPES:
                raise DegreeRefused(f"{op.module_path} ({kind}) would be split; run splits only {' and '.join(SPLIT_TYPES)}")
            tensors += _tensors(op)
            dtensors += _tensors(op) if cut else 0
            modules += 1 if cut else 0
            if cut:  # a row module's bias is replicated: each rank holds all of it (RowwiseParallel)
                whole = _replicated_bias_bytes(op, model.modules.get(op.module_path, {})) if role == "row" else 0.0
                params += whole + (op.param_bytes - whole) / t
            else:
                params += op.param_bytes
    return SplitCost(
        split_share=share / total if total > 0 else 0.0,
        param_bytes=params,
        param_tensors=tensors,
        split_tensors=dtensors,
        split_modules=modules,
        allreduce_forward_bytes_per_sample=tuple(
            x / batch for x in (*split.allreduce_fw_bytes, *_gathered(ops, split.roles, model))
        ),
        allreduce_backward_bytes_per_sample=tuple(x / batch for x in split.allreduce_bw_bytes),
    )


def _replicated_bias_bytes(op: Any, module: Any) -> float:
    """The bias bytes of a row-parallel linear module's operator (``RowwiseParallel`` keeps the bias whole on every rank):
    ``out`` elements when its parameter bytes are ``(in out + out) e`` for an element size ``e``, else 0 (no bias).  Where
    both readings fit, the bias (each rank then counts more, never less)."""
    n_in, n_out = int(module.get("in_features") or 0), int(module.get("out_features") or 0)
    if module.get("type") != "Linear" or n_in <= 0 or n_out <= 0:
        return 0.0
    nbytes = int(op.param_bytes)
    if nbytes % (n_in * n_out + n_out):
        return 0.0
    return float(nbytes // (n_in * n_out + n_out) * n_out)


def _gathered(ops: Sequence[Any], roles: Sequence[str], model: Any) -> list[float]:
    """The output bytes of each column module with no row module after it in the layer (the LM head): ``run`` gathers
    its output (``ColwiseParallel(output_layouts=Replicate())``), priced as an all-reduce of those bytes (above the
    all-gather's cost)."""
    found: list[tuple[str, str, float]] = []
    for op, role in zip(ops, roles, strict=True):
        if role in ("column", "row") and model.modules.get(op.module_path, {}).get("type") in SPLIT_TYPES:
            if found and found[-1][0] == op.module_path:
                found[-1] = (op.module_path, role, float(op.output_bytes))
            else:
                found.append((op.module_path, role, float(op.output_bytes)))
    return [x for q, (_, role, x) in enumerate(found) if role == "column" and not any(r == "row" for _, r, _ in found[q + 1 :])]


def model_splits(model: Any, order: Sequence[str], t: int, profile: Any) -> dict[str, SplitCost]:
    """Every layer of ``order`` at degree ``t`` (see the module docstring).

    Raises
    ------
    DegreeRefused
        Naming why ``run`` cannot split the model at ``t``.
    """
    successors = {u for u, _, _ in model.edges}
    batch = float(model.batch_size or 1)
    out = {v: layer_split(model.layers[v][1], model, t, v not in successors, profile, batch) for v in order}
    if not any(s.split_modules for s in out.values()):
        raise DegreeRefused(
            "no linear module pair splits inside one graph node (import with a coarser --layer-depth so that a block's "
            "modules share a node)"
        )
    return out


def offered_degrees(model: Any, degrees: Sequence[int], profile: Any) -> tuple[dict[int, dict[str, SplitCost]], dict[int, str]]:
    """The degrees ``t > 1`` of ``degrees`` ``run`` can split ``model`` (a :func:`~milp_partition.io.imported_layers.read_layers`
    result) at, each with its layers' :class:`SplitCost`; and for each other degree, why not."""
    splits: dict[int, dict[str, SplitCost]] = {}
    refused: dict[int, str] = {}
    for t in sorted({t for t in degrees if t > 1}):
        try:
            splits[t] = model_splits(model, list(model.layers), t, profile)
        except DegreeRefused as exc:
            refused[t] = str(exc)
    return splits, refused
