"""Independent verifier of the joint problem (Piper's): checks a plan and computes its time per sample.

Shares no code with :mod:`milp_partition.formulations`, :mod:`milp_partition.heuristics`
or :mod:`milp_partition.joint.solve`; it reads only the problem's data model and
evaluates the definition of ``../shared/benchmarks/README.md`` (section ``joint/``)
term by term, summing with :func:`math.fsum`:

- every node is in exactly one stage; every edge ``(u, v)`` has ``stage(u) <= stage(v)``;
- ``d_i`` divides ``N``; ``sum_i d_i t_i <= k``; ``sum_i d_i <= N``;
- with ``s_i = d_i + ... + d_l`` and ``y_i = ceil(s_i / d_i)``, one device of stage ``i``
  holds ``sum_{v in S_i} (a_v y_i + b_v) <= M``;
- a forced shape (``problem.shape``): the number of stages and every ``d_i``;
- ``TPS_i = P_i / d_i + (E_i / d_i + sum_v 4 (d_i - 1) w_v / (d_i N)) / B``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from milp_partition.joint.problem import JointConfig, JointPlan, JointProblem

#: Relative slack on the memory limit (sums of large byte counts in floating point).
MEMORY_REL_TOL = 1e-12


@dataclass(frozen=True)
class JointStageReport:
    """One stage as the verifier evaluated it."""

    time_per_sample_s: float
    devices: int
    memory_bytes: float
    microbatches_in_flight: int
    compute_s: float
    communication_s: float


@dataclass(frozen=True)
class JointReport:
    """What the verifier found: feasibility, violations, the objective (max stage time per sample) and each stage."""

    feasible: bool
    violations: list[str] = field(default_factory=list)
    objective: float = math.inf
    stages: list[JointStageReport] = field(default_factory=list)
    devices: int = 0


def verify_joint(problem: JointProblem, plan: JointPlan) -> JointReport:
    """Check ``plan`` against ``problem`` and evaluate its time per sample (seconds)."""
    bad: list[str] = []
    cl = problem.cluster
    nodes = {n.id: n for n in problem.nodes}
    stage_of: dict[str, int] = {}
    chosen: dict[str, JointConfig] = {}
    for what, x in (("memory", problem.memory_bytes), ("bandwidth", cl.bandwidth_bytes_per_s)):
        if not math.isfinite(x):  # NaN compares false: no limit would ever be exceeded
            bad.append(f"the cluster's {what} {x!r} is not a finite number")
    if not plan.stages:
        bad.append("the plan has no stages")
    for i, st in enumerate(plan.stages):
        if not st.nodes:
            bad.append(f"stage {i + 1} has no nodes")
        if not isinstance(st.data_parallel, int) or st.data_parallel < 1:
            bad.append(f"stage {i + 1}: data_parallel {st.data_parallel!r} is not a positive integer")
            continue
        if problem.microbatches % st.data_parallel:
            bad.append(f"stage {i + 1}: data_parallel {st.data_parallel} does not divide N = {problem.microbatches}")
        for v in st.nodes:
            if v not in nodes:
                bad.append(f"stage {i + 1}: unknown node {v!r}")
                continue
            if v in stage_of:
                bad.append(f"node {v!r} is in stages {stage_of[v] + 1} and {i + 1}")
                continue
            stage_of[v] = i
            options = nodes[v].configs.get(st.tensor_parallel)
            if options is None:
                bad.append(f"stage {i + 1}: node {v!r} has no configurations for tensor_parallel {st.tensor_parallel}")
                continue
            name = st.configs.get(v)
            match = [c for c in options if c.id == name]
            if not match:
                bad.append(f"stage {i + 1}: node {v!r} has no configuration {name!r} for t = {st.tensor_parallel}")
                continue
            chosen[v] = match[0]
        extra = set(st.configs) - set(st.nodes)
        if extra:
            bad.append(f"stage {i + 1}: configurations given for nodes not in the stage: {sorted(extra)}")
    missing = [n.id for n in problem.nodes if n.id not in stage_of]
    if missing:
        bad.append(f"nodes in no stage: {missing[:10]}{' ...' if len(missing) > 10 else ''}")
    for e in problem.edges:
        if e.source in stage_of and e.target in stage_of and stage_of[e.source] > stage_of[e.target]:
            bad.append(
                f"edge {e.source}->{e.target} goes from stage {stage_of[e.source] + 1} back to stage {stage_of[e.target] + 1}"
            )
    if bad:
        return JointReport(False, bad)
    degrees = [(st.data_parallel, st.tensor_parallel) for st in plan.stages]
    devices = sum(d * t for d, t in degrees)
    if devices > cl.device_count:
        bad.append(f"the plan uses {devices} devices (sum of d*t); the cluster has {cl.device_count}")
    if problem.shape is not None:
        bad.extend(problem.shape.violations([d for d, _ in degrees], [t for _, t in degrees]))
    if sum(d for d, _ in degrees) > problem.microbatches:
        bad.append(f"sum of data-parallel degrees {sum(d for d, _ in degrees)} exceeds N = {problem.microbatches}")
    reports: list[JointStageReport] = []
    B, N = cl.bandwidth_bytes_per_s, problem.microbatches
    for i, st in enumerate(plan.stages):
        d = st.data_parallel
        s = sum(dd for dd, _ in degrees[i:])
        y = -(-s // d)
        members = set(st.nodes)
        mem = math.fsum(chosen[v].activation_bytes * y + chosen[v].fixed_bytes for v in st.nodes)
        if mem > problem.memory_bytes * (1 + MEMORY_REL_TOL):
            bad.append(f"stage {i + 1} needs {mem:.6g} bytes per device (y = {y}); the memory is {problem.memory_bytes:.6g}")
        crossing: list[float] = []
        for e in problem.edges:
            if e.target in members and e.source not in members:
                crossing.append(2.0 * (e.bytes + chosen[e.target].sync_fw_bytes.get(e.source, 0.0)))
            if e.source in members and e.target not in members:
                crossing.append(2.0 * (e.bytes + chosen[e.source].sync_bw_bytes.get(e.target, 0.0)))
        compute = math.fsum(chosen[v].time_per_sample_s for v in st.nodes) / d
        allreduce = math.fsum(4.0 * (d - 1) * chosen[v].parameter_bytes / (d * N) for v in st.nodes)
        comm = (math.fsum(crossing) / d + allreduce) / B
        reports.append(JointStageReport(compute + comm, d * st.tensor_parallel, mem, y, compute, comm))
    for i, r in enumerate(reports):  # NaN compares false: an instance's NaN or infinity must not pass as a plan's value
        if not (math.isfinite(r.time_per_sample_s) and math.isfinite(r.memory_bytes)):
            bad.append(
                f"stage {i + 1}: time per sample {r.time_per_sample_s!r}, memory {r.memory_bytes!r}: not finite numbers "
                "(the instance holds a NaN, an infinity or values whose products overflow)"
            )
    if bad:
        return JointReport(False, bad, stages=reports, devices=devices)
    return JointReport(True, [], max(r.time_per_sample_s for r in reports), reports, devices)
