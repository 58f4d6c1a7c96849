"""The activations each layer saves at tensor-parallel degree ``t > 1``, counted as ``run`` counts them on one rank.

``run`` splits a stage's linear and token-embedding modules over its ``t``-rank mesh with DTensor
(:func:`milp_partition.run.engine.apply_tensor_parallel`, the roles of :func:`milp_partition.run.engine.tp_roles`) and
counts each rank's saved activations with ``saved_tensors_hooks``, a DTensor by its local shard, each storage once
(:class:`milp_partition.run.engine.SavedActivations`; run.json's ``memory.tensors.saved_activations_peak``).  At ``t > 1``
a split module's outputs are shares: a column module's output and whatever its inner operators save on it (the
attention on its share of the heads, the activation on its share of the width) are ``1 / t`` of the unsplit layer's,
while a row module's input gradient path and the replicated activations stay whole.

:func:`saved_at_degree` builds the model as the layer timer does (:class:`milp_partition.run.predict.LayerTimer`, one
micro-batch of ``b`` samples), splits the whole model over the given ``t``-rank mesh with ``run``'s own roles, and
counts per node, at each micro-batch size, the bytes per sample saved on this rank (and the bytes a node saves again of
an earlier node's, what a later stage keeps of what it receives), exactly as the ``t = 1`` count
(:func:`milp_partition.run.predict.time_layers_by_size`).  Collective over the mesh: every rank of it calls it with
the same sizes.  The calibration launch that measures ``E`` and DTensor's cost per module runs it
(:mod:`milp_partition.run.empty`); the cost model reads it as :attr:`milp_partition.costmodel.tensor.SplitCost.
saved_bytes_per_sample_at`.

Torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from milp_partition.run.engine import apply_tensor_parallel, tp_roles
from milp_partition.run.predict import LayerTimer, layer_spec


@dataclass(frozen=True)
class SavedAtDegree:
    """What :func:`saved_at_degree` counted on one rank at degree ``t``.

    Attributes
    ----------
    saved_bytes_per_sample
        Size -> node -> bytes per sample the node saves for the backward on this rank.
    reused_bytes_per_sample
        Size -> node -> earlier node -> bytes per sample the node saves of storages the earlier node saved first.
    """

    saved_bytes_per_sample: dict[int, dict[str, float]]
    reused_bytes_per_sample: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)


def saved_at_degree(
    data: dict[str, Any], graph_path: str, sizes: Sequence[int], t: int, tp_mesh: Any, threads: int = 1, seed: int = 0
) -> SavedAtDegree:
    """The imported model split over ``tp_mesh`` (``t`` ranks) as ``run`` splits it, its saved bytes per sample counted
    per node on this rank at each micro-batch size of ``sizes`` (see the module docstring); collective over the mesh."""
    spec = layer_spec(data, graph_path, sizes)
    roles = tp_roles(spec, spec.node_order, t)

    def split(model: Any) -> None:
        apply_tensor_parallel(model, roles, tp_mesh, t)

    saved: dict[int, dict[str, float]] = {}
    reused: dict[int, dict[str, dict[str, float]]] = {}
    for b in sorted(set(sizes)):
        timer = LayerTimer(spec, threads, seed, samples=b, count_saved=True, prepare=split)
        timer.sample(record=False)  # the warm-up pass counted; one more, as the t = 1 count takes its last pass
        saved[b] = {v: nbytes / b for v, nbytes in timer.saved_bytes.items()}
        reused[b] = {v: {u: x / b for u, x in by.items()} for v, by in timer.reused_bytes.items()}
    return SavedAtDegree(saved, reused)
