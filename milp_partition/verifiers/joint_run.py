"""Independent verifier of the run-objective plan (:mod:`milp_partition.costmodel.plan`): checks it and prices it.

Shares no code with :mod:`milp_partition.joint.run_dp` (the planner's DP): it reads the problem's data and the
formulas of :mod:`milp_partition.costmodel` (plain arithmetic) and evaluates the plan stage by stage:

- the stages are contiguous, non-empty and cover the layers in order; ``p d t <= k`` devices, ``t`` among the
  problem's tensor-parallel degrees; ``m >= p`` micro-batches
  per replica (torch's ``Schedule1F1B``, which ``run`` executes, needs one per stage);
- ``d m`` divides the global batch ``G`` and every layer is timed at ``b = G / (d m)``;
- only layers whose recomputation saves memory are recomputed, and only when the problem allows it;
- a forced shape (stages, ``d``, ``m``, ``t``) holds;
- at ``t > 1`` each layer is priced split as ``run`` splits it (:mod:`milp_partition.costmodel.tensor`: its passes as
  timed split on the ``t``-rank mesh at ``b`` where they were, else its split share over ``t``, its activation
  all-reduces, DTensor's hooks; each rank's share of the parameters; each rank's saved activations ``a_v(t, b)`` where
  measured on the ``t``-rank mesh, else the ``t = 1`` count);
- every stage's memory bound (:func:`milp_partition.costmodel.memory.stage_memory`) is at most the device's;
- the step is :func:`milp_partition.costmodel.step.step_time` over the stages' :class:`StageTimes`, with the shape's
  ``E``; where ``E`` was measured it holds the messages' latency and one bucket's all-reduce latency, which the stages
  then leave out (``latencies_in_empty``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from milp_partition.costmodel.memory import StageMemory, stage_memory
from milp_partition.costmodel.plan import RunLayer, RunPlan, RunPlanProblem
from milp_partition.costmodel.step import (
    StageTimes,
    StepPrediction,
    ddp_allreduce_s,
    in_flight,
    message_s,
    optimizer_step_s,
    step_time,
)
from milp_partition.costmodel.tensor import collectives_s, split_compute_s

#: Relative slack on the memory limit (sums of large byte counts in floating point).
MEMORY_REL_TOL = 1e-12


@dataclass(frozen=True)
class RunPlanReport:
    """The verdict: ``feasible``, the reasons it is not, the step (seconds, global batch) and each stage's memory."""

    feasible: bool
    violations: tuple[str, ...] = ()
    step_s: float = math.inf
    prediction: StepPrediction | None = None
    memory: tuple[StageMemory, ...] = field(default_factory=tuple)
    microbatch_size: int = 0


def _saved(layer: RunLayer, b: int, t: int) -> float:
    """``a_v`` of ``layer`` on one rank at micro-batch size ``b`` and degree ``t``: at ``t > 1`` as measured on the
    ``t``-rank mesh where it was; else the ``t = 1`` count at ``b`` where measured, else the layer's one figure."""
    if t > 1 and b in layer.splits[t].saved_bytes_per_sample_at:
        return layer.splits[t].saved_bytes_per_sample_at[b]
    if b in layer.saved_bytes_per_sample_at:
        return layer.saved_bytes_per_sample_at[b]
    return layer.saved_bytes_per_sample


def _plan_violations(problem: RunPlanProblem, plan: RunPlan) -> list[str]:
    """What makes ``plan`` not a plan of ``problem``: its stages, degrees, devices, 1F1B, batch split, recomputation
    and forced shape (empty when it is one)."""
    bad: list[str] = []
    n = len(problem.layers)
    p, d, m, t = len(plan.stages), plan.data_parallel, plan.microbatches, plan.tensor_parallel
    position = 0
    for q, (first, end) in enumerate(plan.stages):
        if first != position or end <= first:
            bad.append(f"stage {q + 1} covers layers {first}..{end - 1}; it must start at {position} and be non-empty")
        position = max(end, position)
    if position != n:
        bad.append(f"the stages cover {position} of {n} layers")
    if d < 1 or m < 1 or p < 1 or t < 1:
        bad.append(f"degrees must be positive: {p} stages, d = {d}, m = {m}, t = {t}")
        return bad
    if p * d * t > problem.devices:
        bad.append(f"{p} stages x d = {d} x t = {t} need {p * d * t} devices; the cluster has {problem.devices}")
    if t not in problem.tensor_degrees:
        bad.append(f"tensor-parallel degree {t} is not offered (the problem's degrees: {list(problem.tensor_degrees)})")
    if m < p:  # (c) 1F1B: torch's Schedule1F1B, which run executes, needs a micro-batch per stage on each replica
        bad.append(f"{m} micro-batches per replica on {p} stages: 1F1B as run executes it needs at least {p}")
    if m == p >= 2 and d >= 2 and t == 1:  # (c) DDP inside torch's Schedule1F1B fails at m = p (its reducer asserts)
        bad.append(f"{m} micro-batches per replica on {p} stages under DDP (d = {d}): run cannot execute m = p there")
    if problem.global_batch % (d * m):
        bad.append(f"d m = {d * m} does not divide the global batch {problem.global_batch}")
    b = problem.global_batch // (d * m)
    ids = {v.id for v in problem.layers}
    for name in sorted(plan.recomputed - ids):
        bad.append(f"recomputed layer {name!r} is not a layer of the problem")
    for v in problem.layers:
        if b not in v.forward_s or b not in v.backward_s:
            bad.append(f"layer {v.id!r} has no time at micro-batch size {b}")
        elif v.id in plan.recomputed and (not problem.recompute or not v.input_bytes_per_sample < _saved(v, b, t)):
            bad.append(f"layer {v.id!r} is recomputed but recomputation is not offered for it")
    shape = problem.shape
    for name, want, have in (
        ("stages", shape.stages, p),
        ("data-parallel", shape.data_parallel, d),
        ("micro-batches", shape.microbatches, m),
        ("tensor-parallel", shape.tensor_parallel, t),
    ):
        if want is not None and want != have:
            bad.append(f"the plan has {name} {have}; the forced shape has {want}")
    return bad


def verify_run_plan(problem: RunPlanProblem, plan: RunPlan) -> RunPlanReport:
    """Check ``plan`` against ``problem`` and compute its step time and memory (see the module docstring)."""
    bad = _plan_violations(problem, plan)
    if bad:
        return RunPlanReport(False, tuple(bad))
    p, d, m, t = len(plan.stages), plan.data_parallel, plan.microbatches, plan.tensor_parallel
    b = problem.global_batch // (d * m)
    c = problem.coefficients
    lat = c.latencies_in_empty(p, d, m, t)  # a measured E holds every message's latency (t = 1: one bucket's all-reduce)
    dt = c.tensor.dtensor_module_s
    tp_alpha = 0.0 if c.tensor.latency_in_module else c.allreduce_alpha_s  # o_dt measured with the pairs holds it
    k_opt = c.memory.optimizer_state_bytes_per_param_byte
    times: list[StageTimes] = []
    memory: list[StageMemory] = []
    for q, (first, end) in enumerate(plan.stages):
        layers = problem.layers[first:end]
        recomputed = [v for v in layers if v.id in plan.recomputed]
        ranks = p * d * t  # every layer timed with this many processes at once where that was measured
        fwd_v: dict[str, float] = {}
        bwd_v: dict[str, float] = {}
        for v in layers:
            f_v, g_v = v.forward_at(b, ranks), v.backward_at(b, ranks)
            if t > 1:  # split as run splits it: timed so at b where it was, else the split share over t, the
                sp = v.splits[t]  # all-reduces and DTensor's hooks both ways
                if b in sp.forward_s_at:
                    f_v = sp.forward_s_at[b]
                else:
                    f_v = split_compute_s(f_v, sp.split_share, t) + dt * sp.split_modules / 2.0
                    f_v += collectives_s(sp.allreduce_forward_bytes_per_sample, b, t, tp_alpha, c.allreduce_beta_s_per_byte)
                if b in sp.backward_s_at:
                    g_v = sp.backward_s_at[b]
                else:
                    g_v = split_compute_s(g_v, sp.split_share, t) + dt * sp.split_modules / 2.0
                    g_v += collectives_s(sp.allreduce_backward_bytes_per_sample, b, t, tp_alpha, c.allreduce_beta_s_per_byte)
            fwd_v[v.id], bwd_v[v.id] = f_v, g_v
        fwd = math.fsum(fwd_v.values())
        bwd = math.fsum(bwd_v.values()) + math.fsum(fwd_v[v.id] for v in recomputed)
        alpha = 0.0 if lat else c.p2p_alpha_s
        send = message_s(b * problem.cut_bytes_per_sample[end - 1], alpha, c.p2p_beta_s_per_byte) if q < p - 1 else 0.0
        if t > 1:
            weights = math.fsum(v.splits[t].param_bytes for v in layers)
            dtensors = sum(v.splits[t].split_tensors for v in layers)
        else:
            weights, dtensors = math.fsum(v.param_bytes for v in layers), 0
        tensors = sum(v.param_tensors for v in layers)
        in_e = int(lat and t == 1)  # run all-reduces by hand at t > 1: no DDP bucket in E, and no rho (DDP's)
        rho = c.ddp_in_step_for(d, b) if t == 1 else 0.0
        ar = ddp_allreduce_s(weights, d, c.allreduce_alpha_s, c.allreduce_beta_s_per_byte, c.ddp_bucket_bytes, in_e, rho)
        opt = optimizer_step_s(tensors, weights, c.optimizer_s_per_param_tensor, c.optimizer_s_per_param_byte)
        opt += dtensors * c.tensor.dtensor_optimizer_tensor_s
        times.append(StageTimes(fwd, bwd, send, ar, opt))
        flight = in_flight(q, p, m, c.memory.first_stage_extra_microbatches)
        kept = math.fsum(v.input_bytes_per_sample if v.id in plan.recomputed else _saved(v, b, t) for v in layers)
        if q > 0:  # what the stage receives and its layers save, their own copy (the sender's count has the other)
            before = {v.id for v in problem.layers[:first]}
            if t > 1 and all(b in v.splits[t].reused_from_at for v in problem.layers):  # measured on the t-rank mesh
                kept += math.fsum(x for v in layers for u, x in v.splits[t].reused_from_at[b].items() if u in before)
            elif problem.received_measured:
                kept += math.fsum(x for v in layers for u, x in v.reused_from_at.get(b, {}).items() if u in before)
            else:  # not measured: the whole cut
                kept += problem.cut_bytes_per_sample[first - 1]
        mem = stage_memory(
            weights,
            math.fsum(v.buffer_bytes for v in layers),
            kept,
            max((_saved(v, b, t) for v in recomputed), default=0.0),
            max(_saved(v, b, t) for v in layers),
            b,
            flight,
            tensors * (2 + math.ceil(k_opt)),
            c.memory,
            # the first stage's saved input is a view of the global batch (two steps' batches live at once)
            max(2 * problem.global_batch - flight * b, 0) * problem.input_bytes_per_sample if q == 0 else 0.0,
        )
        memory.append(mem)
        if mem.total_bytes > problem.memory_bytes * (1 + MEMORY_REL_TOL):
            bad.append(
                f"stage {q + 1} needs {mem.total_bytes:.0f} bytes per device, over the limit of {problem.memory_bytes:.0f}"
            )
    pred = step_time(times, m, c.fixed_for(p, d, m, t))
    return RunPlanReport(not bad, tuple(bad), pred.step_s, pred, tuple(memory), b)
