r"""Tensor parallelism in the one cost model (see :mod:`milp_partition.costmodel`): plain data and arithmetic.

A layer ``v`` split over ``t`` ranks the way ``run`` splits it (:func:`milp_partition.run.engine.apply_tensor_parallel`:
``ColwiseParallel`` / ``RowwiseParallel`` on its linear and token-embedding modules, the roles of
:func:`milp_partition.joint.megatron.split_layer`), at micro-batch size ``b``::

    f_v(b, t) = f_v(b) (1 - phi_v + phi_v / t) + sum_{x in X^f_v} AR_t(b x) + n_v o_dt / 2
    g_v(b, t) = g_v(b) (1 - phi_v + phi_v / t) + sum_{x in X^g_v} AR_t(b x) + n_v o_dt / 2

* ``f_v(b)``, ``g_v(b)``: the layer's forward and backward seconds unsplit (timed, or from the operator coefficients);
  ``phi_v``: the share of its time in the operators the split divides by ``t`` (by the operators' roofline);
* ``X^f_v``, ``X^g_v``: the bytes per sample of each activation all-reduce of the split, forward (after a row-parallel
  module) and backward (the input gradient of a column-parallel one); ``AR_t(x) = alpha_ar + x beta_ar`` on ``t > 1``
  ranks (gloo's calibrated fit, :func:`.step.allreduce_s`);
* ``n_v``: the layer's split modules, ``o_dt``: DTensor's cost per split module, forward and backward together,
  measured in the same launch as ``E``: on the ``t``-rank mesh, the empty step with column / row pairs of tiny
  linear modules less the one without (:mod:`milp_partition.run.empty`); it then holds each pair's two all-reduces'
  latency, and ``AR_t`` is priced by its bytes only (:attr:`TensorParallelCoefficients.latency_in_module`).

Where the calibration timed the layer split as ``run`` splits it, on the ``t``-rank mesh at micro-batch size ``b``
(:mod:`milp_partition.run.tp_timed`: the layer timer's method, every rank computing at once, each pass by its slowest
rank), ``f_v(b, t)`` and ``g_v(b, t)`` are those measured seconds as they are (:attr:`SplitCost.forward_s_at`,
:attr:`SplitCost.backward_s_at`): they hold the split arithmetic, what stays whole, DTensor's dispatch and hooks and
the activation all-reduces with the ranks' waits, so none of the analytic terms above is added to them, and ``E`` of a
tensor-parallel shape has nothing split (nothing counted twice).  The formula above prices a layer at a size it was not
timed at (on 2 CPU ranks the split model's passes as run took 0.58-1.79x this price, per stage and micro-batch size,
and every ``t = 2`` plan had been under-estimated: docs/import.md, "Tensor parallelism priced as it runs").

A recomputed layer runs ``f_v(b, t)`` again in its backward.  Each rank of the stage keeps its share of the split
parameters: weights, gradients and optimizer state of ``W_v(t) = sum_{unsplit} w + sum_{split} w / t``; the optimizer
step pays ``o_dt,opt`` more per DTensor parameter.  Each rank of the stage saves ``a_v(t, b)`` per sample of layer
``v`` (:attr:`SplitCost.saved_bytes_per_sample_at`: a split module's input is replicated, its outputs and what its
inner operators save on them are shares), measured on the ``t``-rank mesh as ``run`` counts it, in the launch that
measures ``E`` (:mod:`milp_partition.run.tp_saved`); where it was not measured, ``a_v(b)`` at ``t = 1`` (an upper
bound).  ``a_v(t, b)`` stands for ``a_v`` in every memory term (saved activations, the temporaries, what recomputation
saves), and what a later stage keeps of what it receives is measured at ``t`` the same way.  With ``t > 1`` ``run`` all-reduces the
gradients over ``d`` by hand in DDP's buckets (no DDP: it takes no DTensor), so ``E`` of such a shape holds no
all-reduce latency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from milp_partition.costmodel.step import allreduce_s


@dataclass(frozen=True)
class SplitCost:
    """One layer at one tensor-parallel degree ``t`` as ``run`` splits it.

    Attributes
    ----------
    split_share
        ``phi_v``: the share of the layer's time in the operators divided by ``t``.
    param_bytes, param_tensors
        Each rank's parameter bytes (split ones divided by ``t``) and the layer's parameter tensors.
    split_tensors
        The parameter tensors that are DTensors (the split modules' weights and biases).
    split_modules
        ``n_v``: the split linear / embedding modules (each pays DTensor's hooks).
    allreduce_forward_bytes_per_sample, allreduce_backward_bytes_per_sample
        ``X^f_v``, ``X^g_v``: bytes per sample of each activation all-reduce, forward and backward.
    saved_bytes_per_sample_at
        Micro-batch size -> ``a_v(t)``: the bytes per sample the layer saves for the backward on one of the ``t`` ranks,
        measured as ``run`` counts them (:mod:`milp_partition.run.tp_saved`); a size not listed takes the layer's
        ``t = 1`` count (an upper bound: the split shrinks what a rank saves, it adds nothing it keeps).
    reused_from_at
        Micro-batch size -> earlier layer's id -> bytes per sample this layer saves again of what that layer saved
        first, on one of the ``t`` ranks (a stage starting between them keeps its own copy of what it receives); a size
        not listed takes the ``t = 1`` rule.
    """

    split_share: float
    param_bytes: float
    param_tensors: int
    split_tensors: int
    split_modules: int
    allreduce_forward_bytes_per_sample: tuple[float, ...] = ()
    allreduce_backward_bytes_per_sample: tuple[float, ...] = ()
    saved_bytes_per_sample_at: Mapping[int, float] = field(default_factory=dict)
    reused_from_at: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    #: Micro-batch size -> ``f_v(b, t)``: the layer's forward seconds on one micro-batch timed split over the ``t``-rank
    #: mesh as ``run`` splits it (:mod:`milp_partition.run.tp_timed`; everything the pass holds); a size not listed is
    #: priced by the formula of the module docstring.
    forward_s_at: Mapping[int, float] = field(default_factory=dict)
    #: Micro-batch size -> ``g_v(b, t)``, the backward, likewise.
    backward_s_at: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TensorParallelCoefficients:
    """DTensor's overheads as calibrated on the target (seconds): ``dtensor_module_s`` per split module and micro-batch,
    forward plus backward; ``dtensor_optimizer_tensor_s`` per DTensor parameter in the optimizer step."""

    dtensor_module_s: float = 0.0
    dtensor_optimizer_tensor_s: float = 0.0
    #: Whether ``dtensor_module_s`` was measured on the ``t``-rank mesh with the plan's pattern of column / row pairs (one
    #: forward and one backward all-reduce per pair, :func:`milp_partition.run.empty.empty_worker`): then it holds each
    #: activation all-reduce's latency, and the collectives are priced by their bytes only (as ``run``'s prediction
    #: prices them beside its ``E`` of the stage's pairs).
    latency_in_module: bool = False


def split_compute_s(seconds: float, split_share: float, t: int) -> float:
    """``s (1 - phi + phi / t)``: a pass of ``seconds`` with the share ``phi`` of it divided over ``t`` ranks."""
    return seconds * (1.0 - split_share + split_share / t) if t > 1 else seconds


def collectives_s(bytes_per_sample: Sequence[float], samples: int, t: int, alpha_s: float, beta_s_per_byte: float) -> float:
    """``sum_x AR_t(b x)``: the activation all-reduces of one pass of a micro-batch of ``samples`` samples."""
    return math.fsum(allreduce_s(samples * x, t, alpha_s, beta_s_per_byte) for x in bytes_per_sample)


def split_pass_s(
    seconds: float,
    split: SplitCost,
    t: int,
    samples: int,
    backward: bool,
    alpha_s: float,
    beta_s_per_byte: float,
    dtensor_module_s: float,
) -> float:
    """``f_v(b, t)`` (``backward`` false) or ``g_v(b, t)`` of the module docstring at ``b = samples``: the measured
    seconds where the split layer was timed at that size (:attr:`SplitCost.forward_s_at`), else the analytic price from
    ``seconds`` (the layer unsplit); ``seconds`` at ``t = 1`` unchanged."""
    if t <= 1:
        return seconds
    measured = split.backward_s_at if backward else split.forward_s_at
    if samples in measured:
        return measured[samples]
    moved = split.allreduce_backward_bytes_per_sample if backward else split.allreduce_forward_bytes_per_sample
    return (
        split_compute_s(seconds, split.split_share, t)
        + collectives_s(moved, samples, t, alpha_s, beta_s_per_byte)
        + split.split_modules * dtensor_module_s / 2.0
    )


def collective_alpha_s(coefficients: TensorParallelCoefficients, allreduce_alpha_s: float) -> float:
    """The latency an activation all-reduce adds: 0 where DTensor's per-module cost holds it, else ``alpha_ar``."""
    return 0.0 if coefficients.latency_in_module else allreduce_alpha_s
