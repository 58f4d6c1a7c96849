"""The solve steps of Galvatron's problem, plugged into :func:`milp_partition.chain.run_chain`.

1. Heuristic (unless ``heuristics`` is off): the best uniform plan (one strategy for all layers, even split): a
   verified incumbent.
2. Refine: the exact search (:func:`milp_partition.galvatron.dp.search`), until the run's deadline, starting from that
   incumbent (unless ``warm_start`` is off): proves optimality (bound = its value) or infeasibility; no back-end
   runs, so the problem takes no ``solver`` other than ``"none"`` and no ``threads`` or ``seed`` of its own
   (its registry entry's ``common``; the command line refuses those flags).
3. Every plan is re-checked by :func:`milp_partition.verifiers.galvatron.verify_galvatron`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from milp_partition.chain import Candidate, ChainSettings, Evaluation, Outcome, Run, StepDefaults, chain_settings, run_chain
from milp_partition.galvatron.dp import search
from milp_partition.galvatron.problem import GalvatronPlan, GalvatronProblem, stage_rows
from milp_partition.heuristics.galvatron_even import best_uniform
from milp_partition.io.export.galvatron import plan_to_config
from milp_partition.result import Result
from milp_partition.settings import SearchOnlySettings
from milp_partition.verifiers.galvatron import verify_galvatron


@dataclass
class GalvatronResult(Result):
    galvatron_config: dict[str, Any] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)
    galvatron_estimate_s: float | None = None


GalvatronRun = Run[GalvatronProblem, GalvatronPlan]


@dataclass(frozen=True)
class GalvatronSolveSettings(SearchOnlySettings):
    """How :func:`solve_galvatron` works: the common settings (:class:`~milp_partition.settings.CommonSettings`; of
    them the search reads ``time_limit_s``, ``warm_start`` and ``progress_interval_s``: ``solver`` must stay ``"none"``)
    and its own.

    Attributes
    ----------
    heuristics
        Run the uniform plan first (its value is the exact search's first incumbent when ``warm_start`` is on).
    """


@dataclass(frozen=True)
class GalvatronSteps(StepDefaults[GalvatronProblem, GalvatronPlan]):
    """Galvatron's steps for :func:`milp_partition.chain.run_chain` (no formulation: the exact search proves)."""

    settings: GalvatronSolveSettings = field(default_factory=GalvatronSolveSettings)
    name: str = "galvatron"

    @property
    def formulation(self) -> None:
        return None

    def new_result(self, problem: GalvatronProblem, settings: ChainSettings) -> Result:
        r = GalvatronResult(problem="galvatron", solver="galvatron-dp", objective_name="iteration_time", time_unit="s")
        r.instance = {
            "source": problem.source,
            "model": problem.model,
            "layers": [t.count for t in problem.layer_types],
            "devices": problem.devices,
            "memory_mb": problem.memory_mb,
            "global_batch": problem.global_batch,
        }
        return r

    def verify(self, problem: GalvatronProblem, solution: GalvatronPlan) -> Evaluation[GalvatronPlan]:
        rep = verify_galvatron(problem, solution)
        return Evaluation(rep.feasible, rep.objective, tuple(rep.violations), solution, rep)

    def heuristics(self, run: GalvatronRun) -> Iterable[Outcome[GalvatronPlan]]:
        if not self.settings.heuristics:
            return
        t0 = time.monotonic()
        plan, _ = best_uniform(run.problem, run.budget.deadline())
        yield Outcome("uniform-even", plan, time.monotonic() - t0, False, "" if plan else "no plan")

    def refine(self, run: GalvatronRun) -> Iterable[Outcome[GalvatronPlan]]:
        best = run.best if self.settings.warm_start else None
        t0 = time.monotonic()
        inc = best.value * (1 + 1e-9) if best is not None else float("inf")
        got = search(run.problem, inc, best.solution if best else None, deadline=run.budget.deadline())
        secs = time.monotonic() - t0
        run.result.solver_seconds = secs
        run.result.solver_notes.update({"outer_choices": got.outer, "timed_out": got.timed_out})
        plan = got.plan if got.plan is not None and (best is None or got.plan is not best.solution) else None
        yield Outcome(
            "galvatron-dp",
            plan,
            secs,
            True,
            "exhaustive" if not got.timed_out else "time limit reached",
            bound=got.bound if 0 < got.bound < float("inf") else None,
            infeasible=got.infeasible,
            stopped_by="time_limit" if got.timed_out else None,
        )

    def record(self, result: Result, problem: GalvatronProblem, best: Candidate[GalvatronPlan]) -> None:
        assert isinstance(result, GalvatronResult)
        rep = best.report or verify_galvatron(problem, best.solution)
        result.galvatron_config = plan_to_config(problem, best.solution)
        result.galvatron_estimate_s = rep.galvatron_estimate_s
        result.stages = stage_rows(problem, best.solution, rep.stage_compute_s, rep.stage_sync_s, rep.stage_memory_mb)
        result.peak_memory_bytes = max(rep.stage_memory_mb) * 1048576


def best_solution(best: Candidate[GalvatronPlan] | None) -> GalvatronPlan | None:
    return best.solution if best is not None else None


def solve_galvatron(problem: GalvatronProblem, settings: GalvatronSolveSettings | None = None) -> GalvatronResult:
    """Solve Galvatron's problem through the one chain: proven optimal, proven infeasible, or the best verified plan."""
    settings = settings or GalvatronSolveSettings()
    result = run_chain(GalvatronSteps(settings), problem, chain_settings(settings))
    assert isinstance(result, GalvatronResult)
    return result
