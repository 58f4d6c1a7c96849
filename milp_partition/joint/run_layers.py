"""The run-objective planning problem (:mod:`milp_partition.costmodel.plan`) of an imported graph.

Input: a graph written by ``milp-partition import torch ... --training --granularity layer`` (its ``layers``
object: every operator with its layer, FLOPs and bytes) and the coefficients of the machine it runs on.  The
layers are the graph's forward nodes in its order (the order ``run`` executes them).  Per sample (the import's
figures divided by its batch):

* a layer's forward and backward seconds at micro-batch size ``b``: either measured on the device at that size
  (``times``: size -> node -> (forward, backward)), or from :class:`OperatorCoefficients`, operator by
  operator, ``o + max(b F / R_mm, b X beta_mem)`` (:func:`milp_partition.costmodel.step.operator_s`), the
  backward only for operators with one;
* ``a_v`` = the saved activations (the import's count, or ``saved_bytes_per_sample`` measured on the device as
  the run counts them: the import's count misses some of what autograd keeps), ``in_v`` = the bytes of its incoming edges (its input, what a recomputed
  layer keeps); the cut after position ``i`` carries the edges from layers ``0..i`` to later ones;
* parameters and their tensors (weight and bias; an embedding: its table); optimizer state ``f - 1`` per
  parameter byte (``f``: the import's gradients + state factor);
* at each tensor-parallel degree ``t > 1`` ``run`` can split the model at (``splits``, from
  :func:`milp_partition.joint.run_split.offered_degrees`): each layer's :class:`~milp_partition.costmodel.tensor.SplitCost`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from milp_partition.calibration.torch_ops import OperatorCoefficients
from milp_partition.costmodel.plan import RunCoefficients, RunLayer, RunPlanProblem, RunShape
from milp_partition.costmodel.step import operator_s
from milp_partition.costmodel.tensor import SplitCost
from milp_partition.errors import InputError
from milp_partition.importers.timing import backward_flops
from milp_partition.importers.torch_import import parse_input_shape
from milp_partition.io.imported_layers import read_layers
from milp_partition.joint.megatron import input_activation_bytes


def run_problem_from_imported(
    data: Any,
    source: str,
    *,
    devices: int,
    memory_bytes: float,
    global_batch: int,
    sizes: Sequence[int],
    coefficients: RunCoefficients,
    operators: OperatorCoefficients | None = None,
    times: Mapping[int, Mapping[str, tuple[float, float]]] | None = None,
    saved_bytes_per_sample: Mapping[str, float] | None = None,
    saved_bytes_per_sample_at: Mapping[int, Mapping[str, float]] | None = None,
    reused_bytes_per_sample_at: Mapping[int, Mapping[str, Mapping[str, float]]] | None = None,
    recompute: bool = True,
    shape: RunShape | None = None,
    splits: Mapping[int, Mapping[str, SplitCost]] | None = None,
) -> RunPlanProblem:
    """The :class:`RunPlanProblem` of an imported graph (parsed JSON); see the module docstring.

    ``saved_bytes_per_sample_at``: size -> node -> ``a_v`` measured at that size (each size's own, used at that size;
    ``saved_bytes_per_sample``, or the import's count, at the others).  ``reused_bytes_per_sample_at``: size -> node ->
    earlier node -> bytes the node saves of what the earlier one saved first (measured at every size: a later stage
    keeps those of what it receives; else the whole cut).  ``splits``: degree ``t > 1`` -> node -> its split (the
    problem offers those degrees besides 1).

    Raises
    ------
    InputError
        On a malformed file, a forward-only import, or neither ``operators`` nor ``times`` for a size.
    """
    model = read_layers(data, source)
    if not model.settings.training:
        raise InputError("a forward-only import: import the model again with --training", source=source)
    batch = float(model.batch_size or 1)
    order = [str(n["id"]) for n in data.get("nodes", []) if not str(n["id"]).endswith(":bwd")]
    order = [v for v in order if v in model.layers] or list(model.layers)
    position = {v: i for i, v in enumerate(order)}
    incoming = {v: 0.0 for v in order}
    cuts = [0.0] * max(len(order) - 1, 0)
    for u, w, nbytes in model.edges:
        if u in position and w in position:
            incoming[w] += nbytes / batch
            for i in range(position[u], position[w]):
                cuts[i] += nbytes / batch
    k_opt = max(model.settings.optimizer_state_bytes_per_param_byte - 1.0, 0.0)
    layers = []
    model_inputs = 0.0
    given = _input_spec_bytes_per_sample(data)
    for v in order:
        _, ops = model.layers[v]
        if not any(w == v for _, w, _ in model.edges):  # a layer reading the model's inputs keeps them
            incoming[v] = input_activation_bytes(ops[0]) / batch
            if v == order[0] and incoming[v] == 0.0:  # its first operator a view of them (recorded with no bytes)
                incoming[v] = given
            model_inputs += incoming[v]
        fwd: dict[int, float] = {}
        bwd: dict[int, float] = {}
        for b in sizes:
            if times is not None and b in times and v in times[b]:
                fwd[b], bwd[b] = times[b][v]
                continue
            if operators is None:
                raise InputError(
                    f"no time for layer {v!r} at micro-batch size {b}: give timed layers or coefficients", source=source
                )
            fwd[b] = bwd[b] = 0.0
            for op in ops:
                scale = b / batch
                moved = (op.input_bytes + op.output_bytes) * scale
                o = operators
                fwd[b] += operator_s(
                    op.forward_flops * scale, moved, o.forward_overhead_s, o.matmul_flops_per_s, o.memory_s_per_byte
                )
                g = backward_flops(op, model.settings) * scale
                if g > 0 or op.param_bytes > 0:
                    bwd[b] += operator_s(g, 2 * moved, o.backward_overhead_s, o.matmul_flops_per_s, o.memory_s_per_byte)
        saved = sum(op.output_bytes if op.saved_bytes is None else op.saved_bytes for op in ops) / batch
        if saved_bytes_per_sample is not None:  # measured as the run counts them
            saved = saved_bytes_per_sample.get(v, 0.0)
        layers.append(
            RunLayer(
                v,
                fwd,
                bwd,
                param_bytes=float(sum(op.param_bytes for op in ops)),
                param_tensors=sum((1 if "embedding" in op.op_type.lower() else 2) for op in ops if op.param_bytes > 0),
                buffer_bytes=float(sum(op.buffer_bytes for op in ops)),
                saved_bytes_per_sample=float(saved),
                input_bytes_per_sample=float(incoming[v]),
                saved_bytes_per_sample_at={
                    b: float(at.get(v, 0.0)) for b, at in (saved_bytes_per_sample_at or {}).items() if b in fwd
                },
                reused_from_at={
                    b: {str(u): float(x) for u, x in at.get(v, {}).items()}
                    for b, at in (reused_bytes_per_sample_at or {}).items()
                    if b in fwd
                },
                splits={t: by_node[v] for t, by_node in (splits or {}).items()},
            )
        )
    model_inputs = max(model_inputs, given)
    memory = replace(coefficients.memory, optimizer_state_bytes_per_param_byte=k_opt)
    coefficients = replace(coefficients, memory=memory)
    name = str(data.get("name", "")) if isinstance(data, Mapping) else ""
    return RunPlanProblem(
        tuple(layers),
        tuple(cuts),
        global_batch,
        devices,
        float(memory_bytes),
        coefficients,
        recompute,
        shape or RunShape(),
        name,
        input_bytes_per_sample=model_inputs,
        received_measured=reused_bytes_per_sample_at is not None and all(b in reused_bytes_per_sample_at for b in sizes),
        tensor_degrees=(1, *sorted(splits or {})),
    )


#: Bytes per element of the dtypes an import's inputs name (``8x32:int64``); a float input takes the import's dtype.
_DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1}
_DTYPE_BYTES.update(uint8=1, bool=1, long=8, int=4, float=4, half=2, double=8)


def _input_spec_bytes_per_sample(data: Any) -> float:
    """The model's inputs per sample from the import's example inputs (``layers.model.inputs``, e.g. ``8x16x64``; the
    first dimension the batch), in the import's dtype unless named; 0 where the import records none or a dtype is
    unknown.  The first operators' input bytes miss them when the model first takes a view of its input (torch's
    ``TransformerEncoder`` transposes it: a view, recorded with no bytes), yet ``run`` keeps the batch they view."""
    layers = data.get("layers") if isinstance(data, Mapping) else None
    if not isinstance(layers, Mapping):
        return 0.0
    spec = layers.get("model")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("inputs"), list):
        return 0.0
    total = 0.0
    for text in spec["inputs"]:
        try:
            parsed = parse_input_shape(str(text))
        except InputError:
            return 0.0
        size = _DTYPE_BYTES.get(str(parsed.dtype or layers.get("dtype") or "float32").replace("torch.", ""))
        if size is None or len(parsed.shape) < 1:
            return 0.0
        total += size * math.prod(parsed.shape[1:])
    return total


def with_busy_times(
    problem: RunPlanProblem, busy: Mapping[int, Mapping[int, Mapping[str, tuple[float, float]]]]
) -> RunPlanProblem:
    """``problem`` with its layers' passes timed with several ranks at once: ranks -> size -> node -> (forward,
    backward) seconds (:attr:`RunLayer.busy_forward_s`; a plan of ``p d`` ranks is priced with those of ``p d``)."""
    if not busy:
        return problem
    layers = []
    for v in problem.layers:
        fwd = {(r, b): t[v.id][0] for r, by_size in busy.items() for b, t in by_size.items() if v.id in t}
        bwd = {(r, b): t[v.id][1] for r, by_size in busy.items() for b, t in by_size.items() if v.id in t}
        layers.append(replace(v, busy_forward_s={**v.busy_forward_s, **fwd}, busy_backward_s={**v.busy_backward_s, **bwd}))
    return replace(problem, layers=tuple(layers))


def with_saved_at_degree(
    problem: RunPlanProblem,
    saved: Mapping[int, Mapping[int, Mapping[str, float]]],
    reused: Mapping[int, Mapping[int, Mapping[str, Mapping[str, float]]]] | None = None,
) -> RunPlanProblem:
    """``problem`` with each layer's saved bytes per sample on one rank at degree ``t > 1`` as measured on the ``t``-rank
    mesh (``saved``: ``t`` -> size -> node -> bytes; :mod:`milp_partition.run.tp_saved`), and what a layer saves again of
    an earlier one's there (``reused``: ``t`` -> size -> node -> earlier node -> bytes; at a size every layer gets its
    entry, empty where it saves nothing again), in its :attr:`~milp_partition.costmodel.plan.RunLayer.splits`; a degree
    the problem does not offer, or a size it does not time, is left out (the ``t = 1`` count stays there)."""
    sizes = set(problem.sizes)
    layers = []
    for v in problem.layers:
        splits = dict(v.splits)
        for t, split in v.splits.items():
            at = {b: float(by.get(v.id, 0.0)) for b, by in saved.get(t, {}).items() if b in sizes}  # (absent: saved none)
            again = {
                b: {str(u): float(x) for u, x in by.get(v.id, {}).items()}
                for b, by in (reused or {}).get(t, {}).items()
                if b in sizes and b in saved.get(t, {})
            }
            splits[t] = replace(
                split,
                saved_bytes_per_sample_at={**split.saved_bytes_per_sample_at, **at},
                reused_from_at={**split.reused_from_at, **again},
            )
        layers.append(replace(v, splits=splits))
    return replace(problem, layers=tuple(layers))


def with_split_times(
    problem: RunPlanProblem, times: Mapping[int, Mapping[int, Mapping[str, tuple[float, float]]]]
) -> RunPlanProblem:
    """``problem`` with each layer's passes at degree ``t > 1`` as timed split on the ``t``-rank mesh (``times``: ``t`` ->
    size -> node -> (forward, backward) seconds; :mod:`milp_partition.run.tp_timed`), in its
    :attr:`~milp_partition.costmodel.plan.RunLayer.splits` (:attr:`~milp_partition.costmodel.tensor.SplitCost.
    forward_s_at`); a degree the problem does not offer, or a size it does not time, is left out (the analytic price
    stays there), and a node the timing did not stamp takes 0 at that size (it ran inside another node's time)."""
    sizes = set(problem.sizes)
    layers = []
    for v in problem.layers:
        splits = dict(v.splits)
        for t, split in v.splits.items():
            at = {b: by.get(v.id, (0.0, 0.0)) for b, by in times.get(t, {}).items() if b in sizes}
            splits[t] = replace(
                split,
                forward_s_at={**split.forward_s_at, **{b: float(fg[0]) for b, fg in at.items()}},
                backward_s_at={**split.backward_s_at, **{b: float(fg[1]) for b, fg in at.items()}},
            )
        layers.append(replace(v, splits=splits))
    return replace(problem, layers=tuple(layers))
