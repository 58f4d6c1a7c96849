"""The strategy problem's steps in the one solve chain (:mod:`milp_partition.chain`).

1. Reduction: :func:`milp_partition.strategy.reductions.reduce` drops dominated
   configurations and (without a memory limit) eliminates single-input
   single-output layers; the optimum is unchanged and solutions lift back.
2. Heuristics: the DPs of :mod:`milp_partition.strategy.dp` on the
   reduced problem.  Without a memory limit the PaSE DP is exact and proves the
   optimum alone (no solver starts); with one, the DP's unconstrained optimum is
   still a proven lower bound (a relaxation) and its choice, when it fits, an
   incumbent.  Under a static limit the Lagrangian bound
   (:mod:`milp_partition.heuristics.strategy_lagrangian`) follows.
3. Refinement under a static limit: the Pareto DP at growing targets (exact,
   :mod:`milp_partition.strategy.pareto_dp`) and min-marginal fixing at
   the incumbent's cost (every solution at most that cost survives).  With
   ``tie_blocks`` the tied quotient problem is solved instead of the whole one
   (an approximation: its bound is never reported).
4. Formulation :mod:`milp_partition.formulations.strategy`, warm-started; the
   back-end's solution is lifted and scored by
   :func:`milp_partition.verifiers.strategy.verify_strategy`, whose value is the
   one reported.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from milp_partition.backends.registry import Capability, has
from milp_partition.chain import (
    Built,
    Candidate,
    ChainSettings,
    Evaluation,
    Outcome,
    Run,
    StepDefaults,
    chain_settings,
    nested,
    run_chain,
)
from milp_partition.formulations import strategy as formulation
from milp_partition.heuristics.strategy_lagrangian import LagrangianResult, LagrangianSettings, lagrangian_memory_bound
from milp_partition.heuristics.strategy_marginals import MarginalSettings, marginal_masks, restrict
from milp_partition.result import Result
from milp_partition.settings import CommonSettings
from milp_partition.strategy.dp import StrategyDPResult, StrategyDPSettings, chain_dp, pase_dp
from milp_partition.strategy.pareto_dp import MemorySearchSettings, ParetoDPSettings, memory_search
from milp_partition.strategy.problem import StrategyProblem, StrategySolution
from milp_partition.strategy.reductions import Reduced
from milp_partition.strategy.reductions import reduce as reduce_problem
from milp_partition.strategy.ties import TieSettings, find_ties, quotient
from milp_partition.verifiers.strategy import verify_strategy


@dataclass(frozen=True)
class StrategySolveSettings(CommonSettings):
    """How to solve a strategy problem: the common settings (:class:`~milp_partition.settings.CommonSettings`: ``solver``,
    ``time_limit_s``, ``threads``, ``seed``, ``warm_start``, ``progress_interval_s``) and its own.

    Attributes
    ----------
    reduce
        Apply the exact reductions first.
    heuristics
        Run the DPs.
    cutoff
        Bound the objective above by the DP solution's value (a row over the whole
        objective; on the PaSE instances it slows CP-SAT down, so it is off by default).
    dp_bound
        Bound the objective below by the DP's proven value (the optimum without a memory
        limit; the unconstrained optimum, a relaxation, with one).  Off by default for the
        same reason: without it the solver's proof stands on its own.
    max_table_entries
        Cap of the PaSE DP's tables.
    tie_blocks
        An approximation, off by default: layers of identical repeated blocks
        (:func:`milp_partition.strategy_ties.find_ties`, ``tie_rounds`` rounds of colour
        refinement) must take one configuration.  The answer is then reported as
        feasible, with the untied problem's proven bound (DP or Lagrangian), never as optimal.
    memory_dp
        Under a static memory limit (with ``heuristics``, without ``tie_blocks``): after the
        Lagrangian bound, prove the optimum by the Pareto DP at growing targets
        (:func:`milp_partition.strategy.pareto_dp.memory_search`, exact); the back-end runs only
        when it does not finish within ``memory_dp_share`` of the time limit, and then gets
        the time that is left.
    marginal_fixing
        Under a static memory limit: remove configurations whose Lagrangian min-marginal
        exceeds the target (:mod:`milp_partition.heuristics.strategy_marginals`, exact), before each
        Pareto DP run and, at the incumbent's cost, before the back-end.
    """

    reduce: bool = True
    heuristics: bool = True
    cutoff: bool = False
    dp_bound: bool = False
    max_table_entries: int = 50_000_000
    tie_blocks: bool = False
    tie_rounds: int = 2
    memory_dp: bool = True
    memory_dp_share: float = 0.5
    marginal_fixing: bool = True


StrategyRun = Run[StrategyProblem, StrategySolution]
Ties = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class ExactReductions:
    """The exact reductions (:func:`milp_partition.strategy.reductions.reduce`) as one
    :class:`~milp_partition.chain.Reduction`: the inverse data is the :class:`Reduced` record."""

    name: str = "reduction"

    def apply(self, problem: StrategyProblem) -> tuple[StrategyProblem, Reduced]:
        reduced = reduce_problem(problem)
        return reduced.problem, reduced

    def invert(self, solution: StrategySolution, inverse_data: Reduced) -> StrategySolution:
        return inverse_data.lift(solution)

    def notes(self, reduced: StrategyProblem) -> dict[str, Any]:
        return {"layers": len(reduced.nodes), "edges": len(reduced.edges), "configurations": reduced.total_configs}


@dataclass
class StrategyState:
    """What the strategy steps hand on within one run.

    ``lagrangian``: the Lagrangian bound's result (the refinement starts from its multipliers);
    ``ties``: the tied groups of layers (the formulation ties their configurations).
    """

    lagrangian: LagrangianResult | None = None
    ties: Ties = ()


@dataclass(frozen=True)
class StrategyFormulation:
    """:mod:`milp_partition.formulations.strategy` as a :class:`~milp_partition.chain.Formulation`."""

    settings: StrategySolveSettings
    state: StrategyState

    def build(self, run: StrategyRun) -> Built[formulation.StrategyModel]:
        settings = self.settings
        best, lower = run.best, run.lower
        ties = self.state.ties
        cutoff = best.value if (best is not None and settings.cutoff and not ties) else None
        sm = formulation.build(
            run.work,
            ties=ties,
            upper_bound=cutoff * (1 + 1e-12) if cutoff is not None else None,
            lower_bound=lower * (1 - 1e-12) if (lower is not None and settings.dp_bound and not ties) else None,
            settings=formulation.StrategyFormulationSettings(integer_edge_variables=has(run.settings.solver, Capability.CP)),
        )
        # a tied model's answers bound only the tied problem: its solution counts, its proof does not
        return Built(sm.model, sm, cutoff, proves=not ties)

    def hint(self, built: Built[formulation.StrategyModel], run: StrategyRun, candidate: Candidate[StrategySolution]) -> None:
        formulation.hint(built.state, _restrict(run.work, candidate.solution))

    def decode(self, built: Built[formulation.StrategyModel], values: Sequence[float]) -> StrategySolution:
        solution: StrategySolution = formulation.decode(
            built.state, list(values)
        )  # (typed here: plain mypy sees formulations/ as Any)
        return solution


@dataclass(frozen=True)
class StrategySteps(StepDefaults[StrategyProblem, StrategySolution]):
    """The strategy problem's steps for :func:`milp_partition.chain.run_chain` (one object per run: it owns the run's state)."""

    settings: StrategySolveSettings
    name: str = "strategy"
    state: StrategyState = field(default_factory=StrategyState, compare=False)

    @property
    def formulation(self) -> StrategyFormulation:
        return StrategyFormulation(self.settings, self.state)

    def new_result(self, problem: StrategyProblem, settings: ChainSettings) -> Result:
        return Result(
            problem="strategy",
            solver=settings.solver,
            objective_name="cost",
            time_unit=problem.cost_unit,
            instance={
                "source": problem.source,
                "name": problem.name,
                "layers": len(problem.nodes),
                "edges": len(problem.edges),
                "configurations": problem.total_configs,
                "devices": problem.devices,
                "memory_limit_bytes": problem.memory_limit_bytes,
                "memory_model": problem.memory_model,
            },
            settings={f"solve.{k}": v for k, v in asdict(self.settings).items()},
        )

    def verify(self, problem: StrategyProblem, solution: StrategySolution) -> Evaluation[StrategySolution]:
        report = verify_strategy(problem, solution)
        return Evaluation(report.feasible, report.objective, tuple(report.violations), report=report)

    def reductions(self, run: StrategyRun) -> Sequence[ExactReductions]:
        return (ExactReductions(),) if self.settings.reduce else ()

    def heuristics(self, run: StrategyRun) -> Iterable[Outcome[StrategySolution]]:
        """The DPs (exact without a memory limit, a relaxation bound under one), then the Lagrangian bound."""
        if not self.settings.heuristics:
            return
        work: StrategyProblem = run.work
        jobs: tuple[tuple[str, Callable[[], StrategyDPResult]], ...] = (
            ("chain_dp", lambda: chain_dp(work)),
            ("pase_dp", lambda: pase_dp(work, StrategyDPSettings(self.settings.max_table_entries))),
        )
        for name, fn in jobs:
            dp = fn()
            # the DP minimizes the cost ignoring memory: its value is the optimum without a limit and,
            # under one, a proven lower bound (a relaxation), whichever memory model is in force
            bound = dp.value if (dp.exact or dp.solution is not None) and math.isfinite(dp.value) else None
            message = dp.message
            if dp.solution is None and name == "chain_dp" and "not a chain" in message:
                message = "skipped: " + message
            yield Outcome(name, dp.solution, dp.seconds, dp.exact, message, bound=bound)
        problem: StrategyProblem = run.problem
        if problem.memory_limit_bytes is not None and problem.memory_model == "static":
            lag = lagrangian_memory_bound(problem, LagrangianSettings(max_table_entries=self.settings.max_table_entries))
            self.state.lagrangian = lag
            # the Lagrangian works on the original problem: its choice needs no lift
            yield Outcome(
                "lagrangian",
                lag.solution,
                lag.seconds,
                False,
                lag.message,
                bound=lag.bound if math.isfinite(lag.bound) else None,
                original=True,
            )

    def refine(self, run: StrategyRun) -> Iterable[Outcome[StrategySolution]]:
        """Pareto DP and min-marginal fixing under a static limit; the tied quotient with ``tie_blocks``."""
        lag = self.state.lagrangian
        if lag is not None and math.isfinite(lag.bound) and lag.evaluated and not self.settings.tie_blocks:
            yield from self._memory_exact(run, lag)
        if self.settings.tie_blocks:
            yield from self._ties(run)

    def _memory_exact(self, run: StrategyRun, lag: LagrangianResult) -> Iterable[Outcome[StrategySolution]]:
        settings = self.settings
        lams = [lam for lam, _ in sorted(lag.evaluated, key=lambda t: -t[1])]
        if settings.memory_dp:
            best = run.best
            left = run.budget.share(settings.memory_dp_share).left()
            search = memory_search(
                run.work,
                lag.bound,
                lams,
                (best.value, _restrict(run.work, best.solution)) if best is not None else None,
                MemorySearchSettings(
                    fixing=settings.marginal_fixing,
                    time_limit_s=left,
                    dp=ParetoDPSettings(max_table_entries=min(settings.max_table_entries, ParetoDPSettings().max_table_entries)),
                ),
            )
            run.result.solver_notes["memory_search"] = {
                "seconds": search.seconds,
                "optimal": search.optimal,
                "targets": search.targets,
                "configurations_after_fixing": search.configs,
            }
            # when optimal, the search's bound is its solution's value: an exact method's proof
            yield Outcome(
                "pareto_dp",
                search.solution,
                search.seconds,
                search.optimal,
                search.message,
                bound=search.bound if math.isfinite(search.bound) else None,
                value=search.value if search.solution is not None else None,
            )
            if run.proven_optimal():
                return
        best = run.best
        if settings.marginal_fixing and best is not None:
            t0 = time.monotonic()
            keep, _ = marginal_masks(
                run.work,
                best.value,
                lams[:8],
                _restrict(run.work, best.solution),
                MarginalSettings(max_table_entries=settings.max_table_entries),
            )
            before = run.work.total_configs
            run.work = restrict(run.work, keep)
            run.result.solver_notes["marginal_fixing"] = {
                "configurations": [before, run.work.total_configs],
                "at": best.value,
                "seconds": time.monotonic() - t0,
            }
            run.say(f"[fixing] {before} -> {run.work.total_configs} configurations at {best.value:.12g}")

    def _ties(self, run: StrategyRun) -> Iterable[Outcome[StrategySolution]]:
        settings = self.settings
        ties = find_ties(run.work, TieSettings(rounds=settings.tie_rounds))
        self.state.ties = ties
        run.result.solver_notes["ties"] = {"groups": len(ties), "layers": sum(len(g) for g in ties)}
        run.say(f"[ties] {len(ties)} groups of identical layers, {sum(len(g) for g in ties)} layers tied")
        work: StrategyProblem = run.work
        if not ties or not (work.memory_limit_bytes is None or work.memory_model == "static"):
            return
        # the quotient's optimum is the best *tied* solution, not the problem's optimum: its bound is never used
        q = quotient(work, ties)
        run.say(f"[ties] solving the tied problem: {len(q.problem.nodes)} layers, {q.problem.total_configs} configurations")
        # the tied problem's chain runs under this run's deadline (the one budget), not a fresh limit
        inner = nested(solve_strategy(q.problem, replace(settings, tie_blocks=False, budget=run.budget)))
        run.result.solver_notes["ties"].update(
            {"tied_layers": len(q.problem.nodes), "tied_status": str(inner.status), "tied_objective": inner.objective}
        )
        run.result.solver_seconds += inner.solver_seconds
        run.skip_solver = "the tied problem was solved instead of the whole one"
        solution = q.lift(StrategySolution(inner.assignment)) if inner.assignment else None
        yield Outcome(f"{settings.solver} on the tied problem", solution, inner.solve_seconds, False, inner.message)

    def record(self, result: Result, problem: StrategyProblem, best: Candidate[StrategySolution]) -> None:
        report = best.report or verify_strategy(problem, best.solution)
        result.assignment = dict(best.solution.choice)
        result.memory_bytes = {"per_device": report.memory_bytes}


def solve_strategy(problem: StrategyProblem, settings: StrategySolveSettings = StrategySolveSettings()) -> Result:
    """Solve ``problem`` through the one chain and return a verified :class:`Result` (``assignment``: layer -> configuration)."""
    return run_chain(StrategySteps(settings), problem, chain_settings(settings))


def _restrict(reduced: StrategyProblem, solution: StrategySolution) -> StrategySolution:
    """A solution of the original problem seen on a problem reduced by dominance (every kept layer keeps its id).

    A configuration that dominance dropped is replaced by the cheapest kept one; the
    result is then only a hint, and the verifier re-checks whatever comes back.
    """
    return StrategySolution({n.id: _kept(n, solution.choice[n.id]) for n in reduced.nodes})


def _kept(node: Any, config: str) -> str:
    return config if config in node.configs else node.configs[int(np.argmin(node.cost))]
