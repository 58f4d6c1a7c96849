"""Independent verifier of the joint problem on a cluster of kinds: checks a plan and computes its time per sample.

Shares no code with :mod:`milp_partition.joint.mixed_dp` or the solve path; it reads only the data model
(:mod:`milp_partition.joint.mixed_problem`) and evaluates the definition term by term, summing with
:func:`math.fsum`:

- every node is in exactly one stage; every edge ``(u, v)`` has ``stage(u) <= stage(v)``;
- each stage's kind is a kind of the cluster; ``t_i`` is offered by the kind's table and at most its devices per
  node; each node's configuration is one of the kind's table for ``t_i``;
- ``d_i`` divides ``N``; ``sum_i d_i <= N``; per kind ``sum_{i: k_i = k} d_i t_i <= K_k``;
- with ``s_i = d_i + ... + d_l`` and ``y_i = ceil(s_i / d_i)``, one device of stage ``i`` holds
  ``sum_{v in S_i} (a_v y_i + b_v) <= M_{k_i}``;
- ``TPS_i = P_i / d_i + (E_i / d_i + sum_v 4 (d_i - 1) w_v / (d_i N)) / B_{k_i}``; the objective is ``max_i TPS_i``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from milp_partition.joint.mixed_problem import MixedJointProblem, MixedPlan
from milp_partition.joint.problem import JointConfig

#: Relative slack on the memory limit (sums of large byte counts in floating point).
MEMORY_REL_TOL = 1e-12


@dataclass(frozen=True)
class MixedStageReport:
    """One stage as the verifier evaluated it."""

    kind: str
    time_per_sample_s: float
    devices: int
    memory_bytes: float
    memory_limit_bytes: float
    microbatches_in_flight: int
    compute_s: float
    communication_s: float


@dataclass(frozen=True)
class MixedReport:
    """Feasibility, violations, the objective (max stage time per sample, seconds), each stage, devices per kind."""

    feasible: bool
    violations: list[str] = field(default_factory=list)
    objective: float = math.inf
    stages: list[MixedStageReport] = field(default_factory=list)
    devices: dict[str, int] = field(default_factory=dict)


def verify_joint_mixed(problem: MixedJointProblem, plan: MixedPlan) -> MixedReport:
    """Check ``plan`` against ``problem`` and evaluate its time per sample (seconds)."""
    bad: list[str] = []
    kinds = {k.name: k for k in problem.kinds}
    N = problem.microbatches
    if not plan.stages:
        bad.append("the plan has no stages")
    ids = [n.id for n in problem.tables[problem.kinds[0].name].nodes] if problem.kinds else []
    stage_of: dict[str, int] = {}
    chosen: dict[str, JointConfig] = {}
    for i, st in enumerate(plan.stages):
        where = f"stage {i + 1}"
        if st.kind not in kinds:
            bad.append(f"{where}: unknown kind {st.kind!r} (the cluster has {sorted(kinds)})")
            continue
        kind = kinds[st.kind]
        if not isinstance(st.data_parallel, int) or isinstance(st.data_parallel, bool) or st.data_parallel < 1:
            bad.append(f"{where}: data_parallel {st.data_parallel!r} is not a positive integer")
            continue
        if not isinstance(st.tensor_parallel, int) or isinstance(st.tensor_parallel, bool) or st.tensor_parallel < 1:
            bad.append(f"{where}: tensor_parallel {st.tensor_parallel!r} is not a positive integer")
            continue
        if N % st.data_parallel:
            bad.append(f"{where}: data_parallel {st.data_parallel} does not divide N = {N}")
        if st.tensor_parallel > kind.devices_per_node:
            bad.append(
                f"{where}: tensor_parallel {st.tensor_parallel} exceeds {st.kind}'s {kind.devices_per_node} devices per node"
            )
        if not st.nodes:
            bad.append(f"{where} has no nodes")
        table = {n.id: n for n in problem.tables[st.kind].nodes}
        for v in st.nodes:
            if v not in table:
                bad.append(f"{where}: unknown node {v!r}")
                continue
            if v in stage_of:
                bad.append(f"node {v!r} is in stages {stage_of[v] + 1} and {i + 1}")
                continue
            stage_of[v] = i
            options = table[v].configs.get(st.tensor_parallel)
            if options is None:
                bad.append(f"{where}: node {v!r} has no configurations for tensor_parallel {st.tensor_parallel} on {st.kind}")
                continue
            match = [c for c in options if c.id == st.configs.get(v)]
            if not match:
                bad.append(f"{where}: node {v!r} has no configuration {st.configs.get(v)!r} for t = {st.tensor_parallel}")
                continue
            chosen[v] = match[0]
        extra = set(st.configs) - set(st.nodes)
        if extra:
            bad.append(f"{where}: configurations given for nodes not in the stage: {sorted(extra)}")
    missing = [v for v in ids if v not in stage_of]
    if missing:
        bad.append(f"nodes in no stage: {missing[:10]}{' ...' if len(missing) > 10 else ''}")
    edges = problem.tables[problem.kinds[0].name].edges if problem.kinds else ()
    for e in edges:
        if e.source in stage_of and e.target in stage_of and stage_of[e.source] > stage_of[e.target]:
            bad.append(
                f"edge {e.source}->{e.target} goes from stage {stage_of[e.source] + 1} back to stage {stage_of[e.target] + 1}"
            )
    if bad:
        return MixedReport(False, bad)
    used = {name: 0 for name in kinds}
    for st in plan.stages:
        used[st.kind] += st.data_parallel * st.tensor_parallel
    for name, n in used.items():
        if n > kinds[name].count:
            bad.append(f"the plan uses {n} {name} devices (sum of d*t over its stages); the cluster has {kinds[name].count}")
    total_d = sum(st.data_parallel for st in plan.stages)
    if total_d > N:
        bad.append(f"sum of data-parallel degrees {total_d} exceeds N = {N}")
    reports: list[MixedStageReport] = []
    for i, st in enumerate(plan.stages):
        kind = kinds[st.kind]
        d = st.data_parallel
        s = sum(x.data_parallel for x in plan.stages[i:])
        y = -(-s // d)
        members = set(st.nodes)
        mem = math.fsum(chosen[v].activation_bytes * y + chosen[v].fixed_bytes for v in st.nodes)
        if not mem <= kind.memory_bytes * (1 + MEMORY_REL_TOL):
            bad.append(
                f"stage {i + 1} ({st.kind}) needs {mem:.6g} bytes per device (y = {y}); its memory is {kind.memory_bytes:.6g}"
            )
        crossing: list[float] = []
        for e in problem.tables[st.kind].edges:  # the kind's own message bytes (its link's latency folded in)
            if e.target in members and e.source not in members:
                crossing.append(2.0 * (e.bytes + chosen[e.target].sync_fw_bytes.get(e.source, 0.0)))
            if e.source in members and e.target not in members:
                crossing.append(2.0 * (e.bytes + chosen[e.source].sync_bw_bytes.get(e.target, 0.0)))
        compute = math.fsum(chosen[v].time_per_sample_s for v in st.nodes) / d
        allreduce = math.fsum(4.0 * (d - 1) * chosen[v].parameter_bytes / (d * N) for v in st.nodes)
        comm = (math.fsum(crossing) / d + allreduce) / kind.bandwidth_bytes_per_s
        tps = compute + comm
        if not (math.isfinite(tps) and math.isfinite(mem)):
            bad.append(f"stage {i + 1}: time per sample {tps!r}, memory {mem!r}: not finite numbers")
        reports.append(MixedStageReport(st.kind, tps, d * st.tensor_parallel, mem, kind.memory_bytes, y, compute, comm))
    if bad:
        return MixedReport(False, bad, stages=reports, devices=used)
    return MixedReport(True, [], max(r.time_per_sample_s for r in reports), reports, used)
