"""A joint plan as the training engines see it: one data- and tensor-parallel degree, stages of transformer blocks.

Megatron-LM and torchtitan run a model whose repeated blocks (the transformer layers) are split into pipeline stages
of the same degrees: every stage has the same data-parallel degree ``d`` and tensor-parallel degree ``t``, and the
pipeline degree is the number of stages.  Layers that are not blocks (the embedding before the first block, the head
after the last) go with the first and the last stage.  :func:`engine_layout` reads that from a joint plan, or refuses
the plan with the reason (:class:`ExportRefused`): stages of different degrees, a stage without a block, a layer before
the first block outside the first stage, or a plan whose stages are not in the blocks' order.

Which nodes are blocks: the nodes of the most repeated ``name`` (the repeated layer type, e.g.
``ParallelTransformerLayer`` in Piper's BERT file, beside its embedding, pooler and input tensors); with no repeated
name, every node.  Which layers recompute: configuration
``activation recomp`` (:data:`RECOMPUTE`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from milp_partition.errors import InputError
from milp_partition.joint.problem import JointPlan, JointProblem

#: The configuration id of a recomputed layer (milp_partition.joint.layers, Piper's files).
RECOMPUTE = "activation recomp"


class ExportRefused(InputError):
    """A plan outside an engine's space: the message says why (exit 2 at the command line)."""


@dataclass(frozen=True)
class EngineLayout:
    """A joint plan within the engines' space.

    Attributes
    ----------
    data_parallel, tensor_parallel, pipeline_parallel
        The degrees (the same on every stage; ``pipeline_parallel`` is the number of stages).
    blocks_per_stage
        Transformer blocks per stage, first stage first.
    recomputed_per_stage
        Per stage, for each of its blocks in order, whether it recomputes its activations.
    microbatches
        Micro-batches per batch (the cluster's ``N``).
    """

    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    blocks_per_stage: tuple[int, ...]
    recomputed_per_stage: tuple[tuple[bool, ...], ...]
    microbatches: int

    @property
    def devices(self) -> int:
        return self.data_parallel * self.tensor_parallel * self.pipeline_parallel

    @property
    def num_layers(self) -> int:
        return sum(self.blocks_per_stage)


def block_ids(problem: JointProblem) -> list[str]:
    """The ids of the repeated blocks, in the order of the problem's nodes (module docstring)."""
    names = Counter(n.name for n in problem.nodes)
    if not names:
        return []
    block, count = names.most_common(1)[0]
    return [n.id for n in problem.nodes if n.name == block] if count > 1 else [n.id for n in problem.nodes]


def engine_layout(problem: JointProblem, plan: JointPlan, engine: str) -> EngineLayout:
    """The plan as degrees, blocks per stage and recomputation (``ExportRefused`` naming ``engine`` and the reason)."""
    if not plan.stages:
        raise ExportRefused(f"{engine}: the plan has no stage")
    degrees = {(st.data_parallel, st.tensor_parallel) for st in plan.stages}
    if len(degrees) > 1:
        listed = ", ".join(f"(d={st.data_parallel}, t={st.tensor_parallel})" for st in plan.stages)
        raise ExportRefused(
            f"{engine} runs every pipeline stage with the same data- and tensor-parallel degrees; "
            f"this plan's stages have {listed} (solve with --space {engine} for its best plan within them)"
        )
    ((d, t),) = degrees
    blocks = block_ids(problem)
    order = {v: i for i, v in enumerate(blocks)}
    per_stage: list[list[str]] = [[v for v in st.nodes if v in order] for st in plan.stages]
    flat = [v for stage in per_stage for v in stage]
    if sorted(flat, key=order.__getitem__) != flat or any(sorted(s, key=order.__getitem__) != s for s in per_stage):
        raise ExportRefused(f"{engine} splits the blocks in their order; this plan's stages do not follow it")
    empty = [q for q, s in enumerate(per_stage) if not s]
    if empty:
        raise ExportRefused(f"{engine} needs at least one transformer block per stage; stage {empty[0]} has none")
    first, last = order[flat[0]], order[flat[-1]]
    index = {n.id: i for i, n in enumerate(problem.nodes)}
    first_at, last_at = index[blocks[first]], index[blocks[last]]
    for q, st in enumerate(plan.stages):
        for v in st.nodes:
            if v in order:
                continue
            if index[v] < first_at and q != 0:
                raise ExportRefused(f"{engine} keeps the layers before the first block in the first stage; {v!r} is in stage {q}")
            if index[v] > last_at and q != len(plan.stages) - 1:
                raise ExportRefused(f"{engine} keeps the layers after the last block in the last stage; {v!r} is in stage {q}")
    recomputed = tuple(tuple(plan.stages[q].configs.get(v) == RECOMPUTE for v in s) for q, s in enumerate(per_stage))
    return EngineLayout(d, t, len(plan.stages), tuple(len(s) for s in per_stage), recomputed, problem.microbatches)


def micro_batch_size(layout: EngineLayout, global_batch_size: int | None, engine: str) -> tuple[int, int]:
    """``(micro-batch size, global batch size)`` in samples: ``global / (d * N)`` per micro-batch (one sample per
    micro-batch when no global batch size is given)."""
    per_step = layout.data_parallel * layout.microbatches
    if global_batch_size is None:
        return 1, per_step
    if global_batch_size < 1 or global_batch_size % per_step:
        raise ExportRefused(
            f"{engine}: the global batch size {global_batch_size} is not a multiple of data-parallel degree "
            f"{layout.data_parallel} times {layout.microbatches} micro-batches"
        )
    return global_batch_size // per_step, global_batch_size
