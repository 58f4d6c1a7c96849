"""Each layer's forward and backward at tensor-parallel degree ``t > 1``, timed as ``run`` executes them on a ``t``-rank mesh.

``run`` splits a stage's linear and token-embedding modules over its ``t``-rank mesh with DTensor
(:func:`milp_partition.run.engine.apply_tensor_parallel`, the roles of :func:`milp_partition.run.engine.tp_roles`).  A
split layer's pass then holds more than its share of the arithmetic: DTensor's dispatch and its ``ColwiseParallel`` /
``RowwiseParallel`` hooks on every split module (the input redistributed to a replicated DTensor, the output turned
back into a local tensor), the activation all-reduces (after a row module in the forward, on a column module's input
gradient in the backward) with each rank waiting for the slower one there, and the operators that stay whole on every
rank.  The analytic price of :mod:`milp_partition.costmodel.tensor` (``f_v(b)(1 - phi + phi / t)`` plus the collectives
plus ``o_dt`` per module, ``o_dt`` measured on pairs of 8 x 8 linear modules) under-counted these on the CPU (issue 42:
every ``t = 2`` plan of the five models under-estimated by 20-63%; docs/import.md, "Tensor parallelism priced as it
runs").

:func:`time_split_layers_in_lockstep` measures them instead, the way the ``t = 1`` layers are measured
(:class:`milp_partition.run.predict.LayerTimer`: a pass with a timestamp at each node and the same pass without, the
hooks' cost removed as :func:`milp_partition.run.predict.hooks_removed` does): the whole imported model built as the
layer timer builds it, split over the given ``t``-rank mesh with ``run``'s own roles, every pass started at a barrier of
the calibration's whole group (all ranks compute at once, as a plan's ranks do).  Each rank returns its own passes; the
calibration prices each pass by its slowest rank (:func:`milp_partition.run.empty.slowest_rank_layers`), as a step
waits for it.  What the timed passes hold (DTensor's hooks, the collectives) is therefore not priced again: the cost
model reads the measured ``f_v(b, t)``, ``g_v(b, t)`` as they are (:attr:`milp_partition.costmodel.tensor.SplitCost.
forward_s_at`), and the empty step ``E`` of a tensor-parallel shape has nothing split.

Collective over the mesh (and over the group ``barrier`` synchronises): every rank calls it with the same sizes.
Torch is imported inside the functions (by the layer timer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from milp_partition.run.engine import apply_tensor_parallel, tp_roles
from milp_partition.run.interleave import interleaved_rounds, model_bytes, size_groups
from milp_partition.run.predict import LayerTimer, layer_spec

#: Per micro-batch size, per node: (forward seconds per pass, backward seconds per pass), in pass order.
PassTimes = dict[int, dict[str, tuple[list[float], list[float]]]]


@dataclass(frozen=True)
class SplitTimings:
    """What :func:`time_split_layers_in_lockstep` measured on one rank.

    Attributes
    ----------
    layers
        Size -> node -> (forward seconds per pass, backward seconds per pass).
    optimizer_s
        Size -> the optimizer's step on the split model's parameters after each pass (seconds, in pass order): what the
        calibration turns into DTensor's optimizer overhead per DTensor parameter on the model itself.
    param_tensors, dtensor_params
        The split model's parameter tensors on this rank, and how many of them are DTensors.
    """

    layers: PassTimes
    optimizer_s: dict[int, list[float]] = field(default_factory=dict)
    param_tensors: int = 0
    dtensor_params: int = 0


def time_split_layers_in_lockstep(
    data: dict[str, Any],
    graph_path: str,
    sizes: Sequence[int],
    t: int,
    tp_mesh: Any,
    barrier: Callable[[], None],
    threads: int = 1,
    repeats: int = 7,
    seed: int = 0,
    min_seconds: float = 0.0,
    agree_max: Callable[[float], float] | None = None,
) -> SplitTimings:
    """The imported model split over ``tp_mesh`` (``t`` ranks) as ``run`` splits it, its layers timed on this rank at each
    micro-batch size of ``sizes``, every pass started at ``barrier`` (see the module docstring): size -> node ->
    (forward seconds, backward seconds), one entry per pass, and the optimizer's step after each pass.  The pass after the
    timer's own warm-up is one more warm-up, in step.  ``repeats`` passes at least, the sizes in turn pass by pass, for
    at least ``min_seconds`` (:func:`milp_partition.run.interleave.interleaved_rounds`, the count agreed over the ranks
    by ``agree_max``; sizes too large to hold at once one after another)."""
    spec = layer_spec(data, graph_path, sizes)
    roles = tp_roles(spec, spec.node_order, t)

    def split(model: Any) -> None:
        apply_tensor_parallel(model, roles, tp_mesh, t)

    def one_pass(timer: LayerTimer, record: bool) -> None:
        barrier()
        timer.sample(record=record)

    out: PassTimes = {}
    opt: dict[int, list[float]] = {}
    params = dtensors = 0
    for group in size_groups(sizes, model_bytes(data) / t, min_seconds):
        timers: list[LayerTimer] = []
        for b in group.sizes:
            barrier()
            timers.append(LayerTimer(spec, threads, seed, samples=b, prepare=split))
        barrier()
        interleaved_rounds(timers, one_pass, repeats, group.seconds, agree_max)
        for b, timer in zip(group.sizes, timers, strict=True):
            out[b] = {v: (list(timer.fwd[v]), list(timer.bwd[v])) for v in timer.points}
            opt[b] = list(timer.opt_times)
            every = list(timer.model.parameters())
            params, dtensors = len(every), sum(1 for x in every if hasattr(x, "to_local"))
        del timers
    return SplitTimings(out, opt, params, dtensors)
