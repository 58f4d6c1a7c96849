"""Step-time formulas of the one cost model (see :mod:`milp_partition.costmodel`): plain data and arithmetic."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: DDP's default bucket size (``bucket_cap_mb=25``).
DDP_BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class StageTimes:
    """One pipeline stage's figures per micro-batch (``forward_s``, ``backward_s``, ``send_s``), and its tail."""

    forward_s: float
    backward_s: float
    send_s: float = 0.0
    allreduce_s: float = 0.0
    optimizer_s: float = 0.0

    @property
    def unit_s(self) -> float:
        """``u_q = F_q + B_q + 2 c_q``: one micro-batch through the stage, its message both ways."""
        return self.forward_s + self.backward_s + 2.0 * self.send_s

    @property
    def tail_s(self) -> float:
        """``AR_q + O_q``: the gradient all-reduce and the optimizer step after the last micro-batch."""
        return self.allreduce_s + self.optimizer_s


@dataclass(frozen=True)
class StepPrediction:
    """The step and its parts (seconds)."""

    step_s: float
    pipeline_s: float
    bottleneck_stage: int
    stages: tuple[StageTimes, ...]
    microbatches_per_replica: int
    costs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_s": self.step_s,
            "pipeline_s": self.pipeline_s,
            "bottleneck_stage": self.bottleneck_stage + 1,
            "microbatches_per_replica": self.microbatches_per_replica,
            "stages": [asdict(s) for s in self.stages],
            "costs": self.costs,
        }


def step_time(stages: Sequence[StageTimes], microbatches: int, fixed_s: float = 0.0) -> StepPrediction:
    """1F1B's step: ``sum_q u_q + (m - 1) max_q u_q + E``, then the slowest stage tail ``max_q (AR_q + O_q)``.

    ``microbatches`` is ``m``, the micro-batches of one data-parallel replica; ``fixed_s`` is ``E``, the
    step of the same schedule with nothing to compute (the runtime's own cost: the schedule, the messages'
    latency, waking the other rank).
    """
    if not stages or microbatches < 1:
        raise ValueError("need at least one stage and one micro-batch")
    units = [s.unit_s for s in stages]
    slowest = max(range(len(units)), key=units.__getitem__)
    pipeline = math.fsum(units) + (microbatches - 1) * units[slowest] + fixed_s
    step = pipeline + max(s.tail_s for s in stages)
    return StepPrediction(step, pipeline, slowest, tuple(stages), microbatches)


def operator_s(flops: float, moved_bytes: float, overhead_s: float, rate_flops_per_s: float, beta_s_per_byte: float) -> float:
    """One operator's pass: ``o + max(flops / R_mm, bytes * beta_mem)`` (the per-operator overhead does not scale)."""
    compute = flops / rate_flops_per_s if rate_flops_per_s > 0 else 0.0
    return overhead_s + max(compute, moved_bytes * beta_s_per_byte)


def message_s(nbytes: float, alpha_s: float, beta_s_per_byte: float) -> float:
    """A point-to-point message: ``alpha + bytes * beta`` (a stage boundary sends its output even when it is tiny)."""
    return alpha_s + max(nbytes, 0.0) * beta_s_per_byte


def allreduce_s(nbytes: float, ranks: int, alpha_s: float, beta_s_per_byte: float) -> float:
    """One all-reduce over ``ranks`` ranks as fitted on the backend (``alpha + bytes * beta``); 0 on one rank."""
    return 0.0 if ranks <= 1 or nbytes <= 0 else alpha_s + nbytes * beta_s_per_byte


def ddp_allreduce_s(
    param_bytes: float,
    ranks: int,
    alpha_s: float,
    beta_s_per_byte: float,
    bucket_bytes: float = DDP_BUCKET_BYTES,
    latencies_in_fixed: int = 0,
    in_step_s_per_byte: float = 0.0,
) -> float:
    """DDP's bucketed gradient all-reduce: ``ceil(W / bucket) alpha + W beta + W rho`` when ``ranks > 1``.

    ``latencies_in_fixed``: bucket latencies already counted in ``E`` (the empty plan's DDP all-reduces one bucket);
    ``in_step_s_per_byte``: ``rho``, what the all-reduce costs inside a step beyond the idle fit, per byte (the ranks'
    compute on the same cores; ``RunCoefficients.ddp_in_step_s_per_byte``).
    """
    if ranks <= 1:
        return 0.0
    buckets = max(1, math.ceil(param_bytes / bucket_bytes))
    return max(buckets - latencies_in_fixed, 0) * alpha_s + param_bytes * (beta_s_per_byte + in_step_s_per_byte)


def optimizer_step_s(param_tensors: int, param_bytes: float, per_tensor_s: float, per_byte_s: float = 0.0) -> float:
    """The optimizer step on a stage's parameters: ``n o_opt + W k beta_mem`` (``per_byte_s = k beta_mem``)."""
    return param_tensors * per_tensor_s + param_bytes * per_byte_s


def in_flight(stage: int, stages: int, microbatches: int, first_stage_extra: int = 0) -> int:
    """Micro-batches whose activations stage ``stage`` (0-based) of ``stages`` holds at once under 1F1B: ``min(m, p - q)``,
    plus ``first_stage_extra`` on the first stage (what torch's schedule was measured to hold beyond it: its first step
    runs a shape-inference forward whose saved tensors live beside the first micro-batch's, even with ``m = 1``)."""
    if not 0 <= stage < stages or microbatches < 1:
        raise ValueError(f"stage {stage} of {stages} with {microbatches} micro-batches")
    return min(microbatches, stages - stage) + (first_stage_extra if stage == 0 else 0)
