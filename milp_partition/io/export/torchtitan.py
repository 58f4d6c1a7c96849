"""Export to torchtitan: a joint plan as the ``parallelism``, ``training`` and ``activation_checkpoint`` sections of
torchtitan's job config (torchtitan 0.3: ``torchtitan.config.ParallelismConfig``, ``TrainingConfig`` and the trainer's
``activation_checkpoint`` choice).

- ``parallelism``: ``data_parallel_replicate_degree`` = d (DDP: the joint model replicates parameters and all-reduces
  gradients), ``data_parallel_shard_degree`` = 1, ``tensor_parallel_degree`` = t with ``enable_sequence_parallel``
  False (the joint cost model prices tensor parallelism without it), ``pipeline_parallel_degree`` = the stages,
  ``pipeline_parallel_schedule`` 1F1B, ``pipeline_parallel_microbatch_size`` and ``module_fqns_per_model_part``: the
  plan's split in torchtitan's decoder names (``tok_embeddings`` first, ``layers.i``, ``norm`` and ``output`` last),
  any split (uneven ones too);
- ``training``: ``local_batch_size`` (samples per data-parallel replica and step) and ``global_batch_size``;
- ``activation_checkpoint``: ``none`` or ``full`` (every block); torchtitan has no per-block choice (its ``selective``
  is per operator), so a plan recomputing some blocks only is refused.
"""

from __future__ import annotations

from typing import Any

from milp_partition.io.export.layout import ExportRefused, engine_layout, micro_batch_size
from milp_partition.joint.problem import JointPlan, JointProblem

ENGINE = "torchtitan"


def export_torchtitan(problem: JointProblem, plan: JointPlan, *, global_batch_size: int | None = None) -> dict[str, Any]:
    """The plan as torchtitan job-config sections (module docstring); ``ExportRefused`` with the reason outside its space."""
    layout = engine_layout(problem, plan, ENGINE)
    flags = [x for s in layout.recomputed_per_stage for x in s]
    if any(flags) and not all(flags):
        raise ExportRefused(
            f"{ENGINE} checkpoints every block or none (its selective mode is per operator); this plan recomputes "
            f"{sum(flags)} of {len(flags)} blocks"
        )
    mbs, gbs = micro_batch_size(layout, global_batch_size, ENGINE)
    parts: list[list[str]] = []
    i = 0
    for q, n in enumerate(layout.blocks_per_stage):
        part = [f"layers.{j}" for j in range(i, i + n)]
        i += n
        if q == 0:
            part.insert(0, "tok_embeddings")
        if q == layout.pipeline_parallel - 1:
            part += ["norm", "output"]
        parts.append(part)
    parallelism: dict[str, Any] = {
        "data_parallel_replicate_degree": layout.data_parallel,
        "data_parallel_shard_degree": 1,
        "tensor_parallel_degree": layout.tensor_parallel,
        "enable_sequence_parallel": False,
        "pipeline_parallel_degree": layout.pipeline_parallel,
        "pipeline_parallel_schedule": "1F1B",
        "pipeline_parallel_microbatch_size": mbs,
        "module_fqns_per_model_part": parts,
    }
    return {
        "engine": ENGINE,
        "world_size": layout.devices,
        "parallelism": parallelism,
        "training": {"local_batch_size": gbs // layout.data_parallel, "global_batch_size": gbs},
        "activation_checkpoint": "full" if all(flags) else "none",
    }
