"""The solve steps of the joint problem on a cluster of kinds, plugged into :func:`milp_partition.chain.run_chain`.

1. Heuristics (unless ``heuristics`` is off): the best one-stage plan (every layer on one kind, its best d and t,
   :func:`milp_partition.joint.mixed_dp.best_one_stage`), then the homogeneous planner
   (:func:`milp_partition.joint.solve.solve_joint`) on each kind alone (:func:`kind_alone`; a tenth of the budget
   left, at most 10 s each): verified incumbents, the best of them what a time-limited solve reports.
2. Refine: the exact DP (:func:`milp_partition.joint.mixed_dp.solve_mixed_dp`) under the run's budget: run to its end
   it proves optimality (bound = its value) or infeasibility; stopped, it proves the work bound only.  No back-end
   runs (``solver`` stays ``"none"``).
3. Every plan is re-checked by :func:`milp_partition.verifiers.joint_mixed.verify_joint_mixed`; the objective is the
   verifier's time per sample (seconds) and the chain's policy (:func:`milp_partition.chain.settle`) decides the
   status (a bound is never reported above the verified value).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from milp_partition.chain import Candidate, ChainSettings, Evaluation, Outcome, Run, StepDefaults, chain_settings, run_chain
from milp_partition.joint.mixed_dp import TooManyIdeals, best_one_stage, solve_mixed_dp
from milp_partition.joint.mixed_problem import MixedJointProblem, MixedPlan, MixedStage, mixed_plan_to_dict
from milp_partition.joint.problem import JointProblem, JointSolveSettings, joint_cluster
from milp_partition.joint.solve import solve_joint
from milp_partition.result import Result
from milp_partition.settings import SearchOnlySettings
from milp_partition.verifiers.joint_mixed import MixedReport, verify_joint_mixed


@dataclass
class MixedJointResult(Result):
    """A :class:`Result` with the plan's stages (each with its kind and evaluated figures) and the global batch's step.

    ``step_s``: ``N`` times the time per sample (Piper's steady state), ``step_bound_s`` ``N`` times the bound.
    """

    stages: list[dict[str, Any]] = field(default_factory=list)
    step_s: float | None = None
    step_bound_s: float | None = None


@dataclass(frozen=True)
class MixedSolveSettings(SearchOnlySettings):
    """How :func:`solve_mixed` works: the common settings (of them the DP reads ``time_limit_s``; ``solver`` stays
    ``"none"``) and ``heuristics`` (the one-stage plan first)."""


MixedRun = Run[MixedJointProblem, MixedPlan]

#: The homogeneous planner's share of what is left of the budget, per kind, and its cap in seconds (a first incumbent)
HOMOGENEOUS_SHARE, HOMOGENEOUS_MAX_S = 0.1, 10.0


def kind_alone(problem: MixedJointProblem, name: str) -> JointProblem:
    """The homogeneous joint problem of kind ``name`` alone: its table on its count, memory, bandwidth and ``N``, the
    degrees it offers (at most its devices per node) only."""
    kind = problem.kind(name)
    table = problem.tables[name]
    degrees = problem.degrees(name)
    nodes = tuple(replace(n, configs={t: n.configs[t] for t in degrees}) for n in table.nodes)
    cluster = joint_cluster(kind.count, kind.memory_bytes, kind.bandwidth_bytes_per_s)
    return replace(table, nodes=nodes, cluster=cluster, microbatches=problem.microbatches, shape=None)


def mixed_stage_rows(plan: MixedPlan, report: MixedReport) -> list[dict[str, Any]]:
    """The ``stages`` list of the result JSON: the plan plus each stage's verified time, devices and memory."""
    rows = mixed_plan_to_dict(plan)
    for row, st in zip(rows, report.stages, strict=True):
        row["time_per_sample_s"] = st.time_per_sample_s
        row["devices"] = st.devices
        row["memory_bytes"] = st.memory_bytes
        row["memory_limit_bytes"] = st.memory_limit_bytes
        row["microbatches_in_flight"] = st.microbatches_in_flight
    return rows


@dataclass(frozen=True)
class MixedSteps(StepDefaults[MixedJointProblem, MixedPlan]):
    """The steps for :func:`milp_partition.chain.run_chain` (no formulation: the exact DP proves)."""

    settings: MixedSolveSettings = field(default_factory=MixedSolveSettings)
    name: str = "joint-kinds"

    @property
    def formulation(self) -> None:
        return None

    def new_result(self, problem: MixedJointProblem, settings: ChainSettings) -> Result:
        r = MixedJointResult(problem="joint", solver="mixed-dp", objective_name="time_per_sample", time_unit="s")
        r.instance = {
            "source": problem.source,
            "name": problem.name,
            "nodes": len(problem.graph.nodes),
            "microbatches": problem.microbatches,
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
        return r

    def verify(self, problem: MixedJointProblem, solution: MixedPlan) -> Evaluation[MixedPlan]:
        rep = verify_joint_mixed(problem, solution)
        return Evaluation(rep.feasible, rep.objective, tuple(rep.violations), solution, rep)

    def heuristics(self, run: MixedRun) -> Iterable[Outcome[MixedPlan]]:
        if not self.settings.heuristics:
            return
        t0 = time.monotonic()
        _, plan = best_one_stage(run.problem)
        yield Outcome("one-stage", plan, time.monotonic() - t0, False, "" if plan else "no single stage fits")
        for kind in run.problem.kinds:  # the homogeneous planner on each kind alone: a strong first incumbent
            if run.budget.expired():
                return
            if not run.problem.degrees(kind.name):  # no degree fits this kind: nothing to plan on it alone
                continue
            t0 = time.monotonic()
            found = solve_joint(
                kind_alone(run.problem, kind.name),
                JointSolveSettings(
                    time_limit_s=max(0.0, min(HOMOGENEOUS_SHARE * run.budget.left(), HOMOGENEOUS_MAX_S)), threads=1
                ),
            )
            plan = None
            if found.stages:
                plan = MixedPlan(
                    tuple(
                        MixedStage(tuple(st["nodes"]), kind.name, st["data_parallel"], st["tensor_parallel"], dict(st["configs"]))
                        for st in found.stages
                    )
                )
            yield Outcome(f"{kind.name} alone", plan, time.monotonic() - t0, False, f"homogeneous planner: {found.status}")

    def refine(self, run: MixedRun) -> Iterable[Outcome[MixedPlan]]:
        t0 = time.monotonic()
        try:
            best = run.best
            dp = solve_mixed_dp(run.problem, run.budget, upper=best.value if best is not None else math.inf)
        except TooManyIdeals as exc:  # a graph far from a chain: no proof, the heuristic's plan stands
            yield Outcome("mixed-dp", None, time.monotonic() - t0, True, str(exc))
            return
        secs = time.monotonic() - t0
        run.result.solver_seconds = secs
        run.result.solver_notes.update({"ideals": dp.ideals, "knapsacks": dp.knapsacks, "complete": dp.complete})
        yield Outcome(
            "mixed-dp",
            dp.plan if dp.complete else None,  # stopped, its plan is the one-stage heuristic's
            secs,
            True,
            f"exhaustive over {dp.ideals} ideals" if dp.complete else "time limit reached: " + "; ".join(dp.notes),
            bound=dp.bound if math.isfinite(dp.bound) and (dp.plan is not None or not dp.complete) else None,
            infeasible=dp.complete and dp.plan is None,
            value=dp.value if dp.complete and dp.plan is not None else None,
            stopped_by=None if dp.complete else "time_limit",
        )

    def record(self, result: Result, problem: MixedJointProblem, best: Candidate[MixedPlan]) -> None:
        assert isinstance(result, MixedJointResult)
        rep = best.report if isinstance(best.report, MixedReport) else verify_joint_mixed(problem, best.solution)
        result.stages = mixed_stage_rows(best.solution, rep)
        result.time_per_sample = rep.objective
        result.assignment = {v: f"stage{q + 1}:{st.kind}" for q, st in enumerate(best.solution.stages) for v in st.nodes}
        result.memory_bytes = {f"stage{q + 1}": r.memory_bytes for q, r in enumerate(rep.stages)}
        result.peak_memory_bytes = max(r.memory_bytes for r in rep.stages)


def solve_mixed(problem: MixedJointProblem, settings: MixedSolveSettings | None = None) -> MixedJointResult:
    """Solve through the one chain: proven optimal, proven infeasible, or the best verified plan with a proven bound."""
    settings = settings or MixedSolveSettings()
    result = run_chain(MixedSteps(settings), problem, chain_settings(settings))
    assert isinstance(result, MixedJointResult)
    N = problem.microbatches
    result.step_s = None if result.objective is None else N * result.objective
    result.step_bound_s = None if result.bound is None else N * result.bound
    return result
