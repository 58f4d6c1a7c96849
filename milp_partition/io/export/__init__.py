"""Exporters: a plan in the configuration a training engine reads, in one place (``solve --export ENGINE``).

========== ========= ===========================================================================================
engine     problem   what
========== ========= ===========================================================================================
galvatron  galvatron Galvatron's runtime config (:mod:`.galvatron`)
torchtitan joint     torchtitan's parallelism, training and activation-checkpoint sections (:mod:`.torchtitan`)
megatron   joint     Megatron-LM's parallel sizes, batch sizes, recomputation and sequence parallelism (:mod:`.megatron`)
========== ========= ===========================================================================================

A plan outside an engine's space (stages of different degrees, a recomputation pattern it cannot state, ...) is
refused with the reason (:class:`~milp_partition.io.export.layout.ExportRefused`, an :class:`InputError`: exit 2).
"""

from __future__ import annotations

from typing import Any

from milp_partition.errors import InputError
from milp_partition.galvatron.problem import GalvatronPlan, GalvatronProblem
from milp_partition.io.export.galvatron import plan_to_config
from milp_partition.io.export.layout import ExportRefused
from milp_partition.io.export.megatron import export_megatron
from milp_partition.io.export.torchtitan import export_torchtitan
from milp_partition.joint.problem import JointPlan, JointProblem

#: Engine -> the problem whose plans it takes.
EXPORTS: dict[str, str] = {"galvatron": "galvatron", "torchtitan": "joint", "megatron": "joint"}


def export(engine: str, problem: Any, plan: Any, *, global_batch_size: int | None = None) -> dict[str, Any]:
    """``plan`` of ``problem`` in ``engine``'s configuration (a JSON-able mapping)."""
    if engine not in EXPORTS:
        raise InputError(f"unknown export {engine!r}; known: {', '.join(EXPORTS)}", where="--export")
    if engine == "galvatron" and isinstance(problem, GalvatronProblem) and isinstance(plan, GalvatronPlan):
        return plan_to_config(problem, plan)
    if isinstance(problem, JointProblem) and isinstance(plan, JointPlan):
        if engine == "torchtitan":
            return export_torchtitan(problem, plan, global_batch_size=global_batch_size)
        if engine == "megatron":
            return export_megatron(problem, plan, global_batch_size=global_batch_size)
    raise ExportRefused(f"--export {engine} takes a {EXPORTS[engine]} plan; this is a {type(plan).__name__}")


__all__ = ["EXPORTS", "ExportRefused", "export"]
