"""The solve steps of the joint problem: baselines, the exact DP, the verifier, the status.

1. Index the problem and enumerate its ideals (:func:`~milp_partition.heuristics.joint_dp.joint_data`).
2. Baselines (optional): all-data-parallel, PipeDream-2BW style, Piper style; each plan is verified.
3. The exact search (:func:`~milp_partition.heuristics.joint_dp.search`): an exhaustive feasibility DP
   bisected on the target time per sample; it proves optimality (or infeasibility) or, at the time
   limit, leaves its best plan and a proven lower bound.
4. Every plan is re-checked by :func:`~milp_partition.verifiers.joint.verify_joint`; the objective
   reported is the verifier's time per sample (seconds), the status comes from the one policy,
   :func:`milp_partition.chain.settle` (the exhaustive DP is an exact method: it proves optimality
   through its bound, or infeasibility, and no back-end runs).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from milp_partition.chain import Bound, Candidate, settle
from milp_partition.heuristics.joint_baselines import all_data_parallel, pipedream_2bw_style, piper_style
from milp_partition.heuristics.joint_dp import TooManyIdeals, joint_data, search
from milp_partition.joint.problem import JointPlan, JointProblem, JointSolveSettings, plan_to_dict
from milp_partition.result import HeuristicRun, Result, Status
from milp_partition.verifiers.joint import JointReport, verify_joint


@dataclass
class JointResult(Result):
    """A :class:`Result` with the plan's stages (pipeline order), each with its evaluated figures."""

    stages: list[dict[str, Any]] = field(default_factory=list)


def stage_rows(plan: JointPlan, report: JointReport) -> list[dict[str, Any]]:
    """The ``stages`` list of the result JSON: the plan plus each stage's verified time, devices and memory."""
    rows = plan_to_dict(plan)
    for row, st in zip(rows, report.stages):
        row["time_per_sample_s"] = st.time_per_sample_s
        row["devices"] = st.devices
        row["memory_bytes"] = st.memory_bytes
        row["microbatches_in_flight"] = st.microbatches_in_flight
    return rows


def _say(settings: JointSolveSettings) -> Callable[[str], None] | None:
    if settings.progress_interval_s is None:
        return None
    return lambda text: print(text, file=sys.stderr, flush=True)


def solve_joint(problem: JointProblem, settings: JointSolveSettings | None = None) -> JointResult:
    """Solve the joint problem: proven optimal, proven infeasible, or the best verified plan with a proven bound."""
    settings = settings or JointSolveSettings()
    start = time.monotonic()
    cl = problem.cluster
    result = JointResult(problem="joint", solver="joint-dp", objective_name="time_per_sample", time_unit="s")
    result.instance = {
        "source": problem.source,
        "nodes": len(problem.nodes),
        "edges": len(problem.edges),
        "degrees": list(problem.degrees),
        "devices": cl.devices,
        "memory_bytes": cl.memory_bytes,
        "bandwidth_bytes_per_s": cl.bandwidth_bytes_per_s,
        "microbatches": cl.microbatches,
    }
    result.settings = {"time_limit_s": settings.time_limit_s, "baselines": settings.baselines}
    try:
        data = joint_data(problem, settings.max_ideals)
    except TooManyIdeals as exc:
        result.status, result.message = Status.UNKNOWN, f"{exc}; raise --max-ideals"
        result.solve_seconds = time.monotonic() - start
        return result
    result.solver_notes["ideals"] = len(data.ideals)
    plans: list[tuple[float, JointPlan, JointReport, str]] = []
    say = _say(settings)

    def consider(name: str, plan: JointPlan | None, seconds: float, exact: bool) -> None:
        if plan is None:
            result.heuristics.append(HeuristicRun(name, None, seconds, exact, "no plan"))
            return
        rep = verify_joint(problem, plan)
        if not rep.feasible:
            result.heuristics.append(HeuristicRun(name, None, seconds, exact, "rejected: " + "; ".join(rep.violations[:3])))
            return
        result.heuristics.append(HeuristicRun(name, rep.objective, seconds, exact, "verified"))
        plans.append((rep.objective, plan, rep, name))

    # the cheap baselines always run: the best one's value is the exact search's first target
    for name, fn in (("all-data-parallel", all_data_parallel), ("pipedream-2bw", pipedream_2bw_style)):
        t0 = time.monotonic()
        plan, _ = fn(data)
        consider(name, plan, time.monotonic() - t0, False)
    upper = min((p[0] for p in plans), default=math.inf)
    if settings.baselines:
        t0 = time.monotonic()
        plan, _ = piper_style(data, time_limit_s=max(1.0, settings.time_limit_s / 4))
        consider("piper-style", plan, time.monotonic() - t0, False)
    remaining = settings.time_limit_s - (time.monotonic() - start)
    t0 = time.monotonic()
    # the verifier's value may differ from the DP's arithmetic in the last bits: start a hair above it
    found = search(data, time_limit_s=max(0.0, remaining), upper_s=upper * (1 + 1e-9), progress=say)
    result.solver_seconds = time.monotonic() - t0
    result.solver_notes.update({"passes": found.passes, "timed_out": found.timed_out, "dp_value": found.value})
    consider("joint-dp", found.plan, result.solver_seconds, True)
    bounds = [Bound(found.bound, "joint-dp")] if math.isfinite(found.bound) and found.bound > 0 else []
    verdict = settle(
        [Candidate(value, (plan, rep), name) for value, plan, rep, name in plans],
        bounds,
        infeasible_proofs=["joint-dp (exhaustive)"] if found.infeasible else [],
    )
    result.status, result.bound, result.gap = verdict.status, verdict.bound, verdict.gap
    result.message = verdict.message + (f"; time limit {settings.time_limit_s:g}s reached" if found.timed_out else "")
    result.discarded = list(verdict.discarded)
    if verdict.best is not None:
        value = verdict.best.value
        plan, rep = verdict.best.solution
        result.objective = value
        result.stages = stage_rows(plan, rep)
        result.time_per_sample = value
        result.memory_bytes = {f"stage {q + 1}": st.memory_bytes for q, st in enumerate(rep.stages)}
        result.loads = {f"stage {q + 1}": st.time_per_sample_s for q, st in enumerate(rep.stages)}
        result.peak_memory_bytes = max(st.memory_bytes for st in rep.stages)
    result.solve_seconds = time.monotonic() - start
    return result
