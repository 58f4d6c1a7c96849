"""The solve steps of the joint problem on a cluster of kinds: the exact DP, the verifier, the status.

1. :func:`milp_partition.joint.mixed_dp.solve_mixed_dp` runs to its end (the optimum, proven by exhaustion, or
   infeasibility) or, at the time limit, leaves its best single-stage plan and the work bound.
2. The plan is re-checked by :func:`milp_partition.verifiers.joint_mixed.verify_joint_mixed`; the objective
   reported is the verifier's time per sample (seconds), the bound the DP's (never above the verified value: the DP's
   and the verifier's sums may differ in the last bits, and the bound is then the smaller).
3. Status: ``optimal`` when the DP completed and the verifier's value agrees with it (relative
   :data:`~milp_partition.chain.PROOF_REL_TOL`); ``infeasible`` when the completed DP found no plan; ``feasible`` or
   ``unknown`` when stopped; ``error`` when the verifier rejects the DP's plan (a bug).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from milp_partition.budget import Budget
from milp_partition.chain import PROOF_REL_TOL
from milp_partition.joint.mixed_dp import solve_mixed_dp
from milp_partition.joint.mixed_problem import MixedJointProblem, MixedPlan, mixed_plan_to_dict
from milp_partition.result import Result, Status
from milp_partition.settings import CommonSettings
from milp_partition.verifiers.joint_mixed import MixedReport, verify_joint_mixed


@dataclass
class MixedJointResult(Result):
    """A :class:`Result` with the plan's stages (each with its kind and evaluated figures) and the global batch's step.

    ``step_s``: ``N`` times the time per sample (Piper's steady state), ``step_bound_s`` ``N`` times the bound.
    """

    stages: list[dict[str, Any]] = field(default_factory=list)
    step_s: float | None = None
    step_bound_s: float | None = None


def mixed_stage_rows(plan: MixedPlan, report: MixedReport) -> list[dict[str, Any]]:
    """The ``stages`` list of the result JSON: the plan plus each stage's verified time, devices and memory."""
    rows = mixed_plan_to_dict(plan)
    for row, st in zip(rows, report.stages, strict=False):
        row["time_per_sample_s"] = st.time_per_sample_s
        row["devices"] = st.devices
        row["memory_bytes"] = st.memory_bytes
        row["memory_limit_bytes"] = st.memory_limit_bytes
        row["microbatches_in_flight"] = st.microbatches_in_flight
    return rows


def solve_mixed(problem: MixedJointProblem, settings: CommonSettings | None = None) -> MixedJointResult:
    """Solve ``problem`` (:mod:`milp_partition.joint.mixed_dp`) and verify the answer (see the module docstring)."""
    settings = settings or CommonSettings()
    started = time.perf_counter()
    budget = Budget.starting_now(settings.time_limit_s)
    dp = solve_mixed_dp(problem, budget)
    N = problem.microbatches
    result = MixedJointResult(problem="joint", solver="mixed-dp", time_unit="s", objective_name="time_per_sample")
    result.instance = {
        "source": problem.source,
        "name": problem.name,
        "nodes": len(problem.graph.nodes),
        "microbatches": N,
        "kinds": [
            {
                "name": k.name,
                "count": k.count,
                "memory_bytes": k.memory_bytes,
                "devices_per_node": k.devices_per_node,
                "bandwidth_bytes_per_s": k.bandwidth_bytes_per_s,
                "profile": k.profile,
                "tensor_parallel_degrees": list(problem.degrees(k.name)),
            }
            for k in problem.kinds
        ],
        "notes": list(problem.notes),
    }
    result.settings = {"time_limit_s": settings.time_limit_s}
    result.solver_notes = {"ideals": dp.ideals, "knapsacks": dp.knapsacks, "complete": dp.complete, "notes": dp.notes}
    bound = dp.bound
    if dp.plan is not None:
        report = verify_joint_mixed(problem, dp.plan)
        if not report.feasible:
            result.status = Status.ERROR
            result.message = "the verifier rejected the DP's plan (a bug): " + "; ".join(report.violations[:5])
            result.solve_seconds = time.perf_counter() - started
            return result
        value = report.objective
        result.objective = result.time_per_sample = value
        result.stages = mixed_stage_rows(dp.plan, report)
        result.assignment = {v: f"stage{q + 1}:{st.kind}" for q, st in enumerate(dp.plan.stages) for v in st.nodes}
        result.memory_bytes = {f"stage{q + 1}": r.memory_bytes for q, r in enumerate(report.stages)}
        result.peak_memory_bytes = max(r.memory_bytes for r in report.stages)
        bound = min(bound, value)
        if dp.complete and abs(value - dp.value) <= PROOF_REL_TOL * max(abs(value), 1e-300):
            result.status = Status.OPTIMAL
            result.message = f"proven optimal by the exhaustive DP over {dp.ideals} ideals"
        elif dp.complete:
            result.status = Status.ERROR
            result.message = f"the DP's value {dp.value!r} and the verifier's {value!r} disagree (a bug)"
        else:
            result.status = Status.FEASIBLE
            result.stopped_by = "time_limit"
            result.message = "stopped by the time limit: " + "; ".join(dp.notes)
        result.bound = bound
        result.gap = (value - bound) / value if value > 0 else 0.0
        result.step_s = N * value
        result.step_bound_s = N * bound
    elif dp.complete:
        result.status = Status.INFEASIBLE
        result.message = "proven infeasible: no plan fits the kinds' memory and counts (the DP is exhaustive)"
    else:
        result.status = Status.UNKNOWN
        result.stopped_by = "time_limit"
        result.bound = bound if math.isfinite(bound) else None
        result.step_bound_s = N * bound if math.isfinite(bound) else None
        result.message = "stopped by the time limit with no plan: " + "; ".join(dp.notes)
    result.solve_seconds = time.perf_counter() - started
    return result
