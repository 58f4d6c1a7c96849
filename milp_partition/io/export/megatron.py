"""Export to Megatron-LM: a joint plan as Megatron-LM's parallelism, batch and recomputation arguments.

The fields are megatron-core's own names (``ModelParallelConfig`` / ``TransformerConfig`` and Megatron-LM's training
arguments, ``megatron/training/arguments.py``), given both as a mapping and as command-line arguments:

- ``tensor_model_parallel_size`` = t, ``pipeline_model_parallel_size`` = the number of stages; the data-parallel
  size d is not an argument (Megatron derives it as world size / (t * p)): ``data_parallel_size`` and ``world_size``
  say what to launch;
- ``micro_batch_size`` and ``global_batch_size`` (samples; N micro-batches per data-parallel replica and step);
- ``num_layers`` (the transformer blocks) and, for an uneven split, ``pipeline_model_parallel_layout``
  (``--pipeline-model-parallel-layout``, e.g. ``Et*3|t*5|t*4L``: embedding, blocks per stage, loss);
- recomputation: none; every block (``recompute_granularity`` full, ``recompute_method`` uniform,
  ``recompute_num_layers`` 1); or the first r blocks of every stage (method block, r); another pattern is refused;
- ``sequence_parallel``: False (the joint cost model prices Megatron tensor parallelism without it).

The precision (``--bf16``/``--fp16``, megatron-core's ``pipeline_dtype``) is not part of a plan: give it to Megatron.
"""

from __future__ import annotations

from typing import Any

from milp_partition.io.export.layout import EngineLayout, ExportRefused, engine_layout, micro_batch_size
from milp_partition.joint.problem import JointPlan, JointProblem

ENGINE = "megatron"


def _split(layout: EngineLayout) -> dict[str, str]:
    """Nothing for an even split; else the layout string (``E`` the embedding, ``t`` a block, ``L`` the loss)."""
    counts = layout.blocks_per_stage
    if len(set(counts)) == 1:
        return {}
    stages = [f"t*{n}" for n in counts]
    stages[0], stages[-1] = "E" + stages[0], stages[-1] + "L"
    return {"pipeline_model_parallel_layout": "|".join(stages)}


def _recompute(layout: EngineLayout) -> dict[str, Any]:
    flags = layout.recomputed_per_stage
    if not any(any(s) for s in flags):
        return {}
    if all(all(s) for s in flags):
        return {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
    heads = {s.index(False) if False in s else len(s) for s in flags}
    prefix = all(not any(s[s.index(False) :]) for s in flags if False in s)
    if len(heads) == 1 and prefix:
        (r,) = heads
        return {"recompute_granularity": "full", "recompute_method": "block", "recompute_num_layers": r}
    raise ExportRefused(
        f"{ENGINE} recomputes every block, or the first r blocks of every stage (the same r); this plan recomputes "
        + "; ".join(f"stage {q}: {[i for i, x in enumerate(s) if x]}" for q, s in enumerate(flags))
    )


def export_megatron(problem: JointProblem, plan: JointPlan, *, global_batch_size: int | None = None) -> dict[str, Any]:
    """The plan as Megatron-LM arguments (module docstring); ``ExportRefused`` with the reason outside its space."""
    layout = engine_layout(problem, plan, ENGINE)
    mbs, gbs = micro_batch_size(layout, global_batch_size, ENGINE)
    model_parallel = {
        "tensor_model_parallel_size": layout.tensor_parallel,
        "pipeline_model_parallel_size": layout.pipeline_parallel,
        "sequence_parallel": False,
    }
    transformer = {"num_layers": layout.num_layers, **_split(layout), **_recompute(layout)}
    training = {"micro_batch_size": mbs, "global_batch_size": gbs}
    args: list[str] = []
    for key, value in {**model_parallel, **transformer, **training}.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args += [flag] if value else []
        else:
            args += [flag, str(value)]
    return {
        "engine": ENGINE,
        "world_size": layout.devices,
        "data_parallel_size": layout.data_parallel,
        "model_parallel_config": model_parallel,
        "transformer_config": transformer,
        "training": training,
        "arguments": args,
    }
