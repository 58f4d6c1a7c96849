"""The solve chain of the strategy problem: reduce, DP, exact model, lift, verify.

1. :func:`milp_partition.strategy_reductions.reduce` drops dominated configurations
   and (without a memory limit) eliminates single-input single-output layers; the
   optimum is unchanged and solutions lift back.
2. The DPs of :mod:`milp_partition.heuristics.strategy_dp` run on the reduced problem.  Without a
   memory limit the PaSE DP is exact; with one, the DP's unconstrained optimum is still
   a valid lower bound (a relaxation) and its solution, when it fits, an incumbent.
3. :mod:`milp_partition.formulations.strategy` is solved by a back-end, warm-started with the DP's
   solution and, with ``dp_bound``, bounded below by the DP's proven value.
4. The solution is lifted to the original problem and checked by the verifier, whose
   objective is the one reported.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from milp_partition.backends import SolveStatus, relative_gap
from milp_partition.chain import answer_error, run_backend, say
from milp_partition.result import HeuristicRun, Result
from milp_partition.strategy.problem import StrategyProblem, StrategySolution
from milp_partition.verifiers.strategy import verify_strategy


@dataclass(frozen=True)
class StrategySolveSettings:
    """How to solve a strategy problem.

    Attributes
    ----------
    solver
        ``"cpsat"``, ``"cbc"`` or ``"none"`` (DP only).
    time_limit_s, threads, seed
        Passed to the back-end.
    reduce
        Apply the exact reductions first.
    heuristics
        Run the DPs.
    warm_start
        Hint the DP's solution.
    cutoff
        Bound the objective above by the DP solution's value (a row over the whole
        objective; on the PaSE instances it slows CP-SAT down, so it is off by default).
    dp_bound
        Bound the objective below by the DP's proven value (the optimum without a memory
        limit; the unconstrained optimum, a relaxation, with one).  Off by default for the
        same reason: without it the solver's proof stands on its own.
    max_table_entries
        Cap of the PaSE DP's tables.
    progress_interval_s
        Progress lines on stderr; ``None`` for silence.
    tie_blocks
        An approximation, off by default: layers of identical repeated blocks
        (:func:`milp_partition.strategy_ties.find_ties`, ``tie_rounds`` rounds of colour
        refinement) must take one configuration.  The answer is then reported as
        feasible, with the untied problem's proven bound (DP or Lagrangian), never as optimal.
    memory_dp
        Under a static memory limit (with ``heuristics``, without ``tie_blocks``): after the
        Lagrangian bound, prove the optimum by the Pareto DP at growing targets
        (:func:`milp_partition.heuristics.strategy_pareto_dp.memory_search`, exact); the back-end runs only
        when it does not finish within ``memory_dp_share`` of the time limit, and then gets
        the time that is left.
    marginal_fixing
        Under a static memory limit: remove configurations whose Lagrangian min-marginal
        exceeds the target (:mod:`milp_partition.heuristics.strategy_marginals`, exact), before each
        Pareto DP run and, at the incumbent's cost, before the back-end.
    """

    solver: str = "cpsat"
    time_limit_s: float = 60.0
    threads: int = 2
    seed: int = 0
    reduce: bool = True
    heuristics: bool = True
    warm_start: bool = True
    cutoff: bool = False
    dp_bound: bool = False
    max_table_entries: int = 50_000_000
    progress_interval_s: float | None = None
    tie_blocks: bool = False
    tie_rounds: int = 2
    memory_dp: bool = True
    memory_dp_share: float = 0.5
    marginal_fixing: bool = True


def solve_strategy(problem: StrategyProblem, settings: StrategySolveSettings = StrategySolveSettings()) -> Result:
    """Solve ``problem`` and return a verified :class:`Result` (``assignment`` maps layer -> configuration)."""
    from milp_partition.formulations import strategy as formulation
    from milp_partition.heuristics.strategy_dp import StrategyDPSettings, chain_dp, pase_dp
    from milp_partition.strategy.reductions import reduce as reduce_problem

    start = time.monotonic()
    result = Result(
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
        settings={f"solve.{k}": v for k, v in asdict(settings).items()},
    )

    if settings.reduce:
        t0 = time.monotonic()
        reduced = reduce_problem(problem)
        work = reduced.problem
        result.solver_notes["reduction"] = {
            "seconds": time.monotonic() - t0,
            "layers": len(work.nodes),
            "edges": len(work.edges),
            "configurations": work.total_configs,
        }
        lift = reduced.lift
        say(
            settings.progress_interval_s,
            f"[reduce] {len(problem.nodes)} -> {len(work.nodes)} layers, {problem.total_configs} -> {work.total_configs} configurations",
        )
    else:
        work, lift = problem, (lambda s: s)

    incumbent: tuple[float, StrategySolution, str] | None = None
    lower: float | None = None
    if settings.heuristics:
        for name, fn in (
            ("chain_dp", lambda: chain_dp(work)),
            ("pase_dp", lambda: pase_dp(work, StrategyDPSettings(settings.max_table_entries))),
        ):
            dp = fn()
            value = None
            message = dp.message
            if dp.solution is not None:
                report = verify_strategy(problem, lift(dp.solution))
                if report.feasible:
                    value = report.objective
                    if incumbent is None or value < incumbent[0]:
                        incumbent = (value, dp.solution, name)
                elif problem.memory_limit_bytes is None:
                    message += "; verifier rejected it: " + "; ".join(report.violations[:3])
                if dp.exact or dp.solution is not None:
                    # the DP minimizes the cost ignoring memory: its value is the optimum without a limit and,
                    # under one, a proven lower bound (a relaxation), whichever memory model is in force
                    unconstrained = dp.value
                    lower = unconstrained if lower is None else max(lower, unconstrained)
            result.heuristics.append(HeuristicRun(name, value, dp.seconds, dp.exact, message))
            say(
                settings.progress_interval_s,
                f"[{name}] {'value ' + format(value, '.12g') if value is not None else ('does not apply' if dp.solution is None and math.isinf(dp.value) else 'no feasible solution')} in {dp.seconds:.2f}s: {message}",
            )

    if settings.heuristics and problem.memory_limit_bytes is not None and problem.memory_model == "static":
        from milp_partition.heuristics.strategy_lagrangian import LagrangianSettings, lagrangian_memory_bound

        lag = lagrangian_memory_bound(problem, LagrangianSettings(max_table_entries=settings.max_table_entries))
        value = None
        if lag.solution is not None:
            report = verify_strategy(problem, lag.solution)
            if report.feasible:
                value = report.objective
                if incumbent is None or value < incumbent[0]:
                    # the Lagrangian works on the original problem: map its choice onto the reduced one
                    incumbent = (value, _restrict(work, lag.solution), "lagrangian")
        if math.isfinite(lag.bound):
            lower = lag.bound if lower is None else max(lower, lag.bound)
        result.heuristics.append(HeuristicRun("lagrangian", value, lag.seconds, False, lag.message))
        say(settings.progress_interval_s, f"[lagrangian] {lag.message} in {lag.seconds:.2f}s")
        if math.isfinite(lag.bound) and lag.evaluated and not settings.tie_blocks:
            done, work, incumbent, lower = _memory_exact(result, problem, work, lift, lag, incumbent, lower, settings, start)
            if done:
                return result
            left_s = max(1.0, settings.time_limit_s - (time.monotonic() - start))
            settings = dataclasses.replace(settings, time_limit_s=left_s)  # the back-end gets what is left

    # under a memory limit, a DP solution that fits and meets the DP's bound needs no solver (without a limit the
    # solver still runs, warm-started, so that its proof stands beside the DP's)
    proven_by_dp = (
        problem.memory_limit_bytes is not None and incumbent is not None and lower is not None and incumbent[0] <= lower
    )
    if settings.solver == "none" or proven_by_dp:
        _finish(result, problem, incumbent, lift, lower)
        if incumbent is not None and lower is not None and result.gap == 0.0:
            result.status = "optimal"
            result.message = (
                "proven by the exact DP"
                if problem.memory_limit_bytes is None
                else "the cheapest choice without a memory limit fits the limit: optimal, proven by the DP"
            )
        result.solve_seconds = time.monotonic() - start
        return result

    ties: tuple[tuple[int, ...], ...] = ()
    if settings.tie_blocks:
        from milp_partition.strategy.ties import TieSettings, find_ties

        ties = find_ties(work, TieSettings(rounds=settings.tie_rounds))
        result.solver_notes["ties"] = {"groups": len(ties), "layers": sum(len(g) for g in ties)}
        say(
            settings.progress_interval_s,
            f"[ties] {len(ties)} groups of identical layers, {sum(len(g) for g in ties)} layers tied",
        )
        if ties and (work.memory_limit_bytes is None or work.memory_model == "static"):
            return _solve_quotient(result, problem, work, lift, ties, incumbent, lower, settings, start)
    sm = formulation.build(
        work,
        ties=ties,
        upper_bound=incumbent[0] * (1 + 1e-12) if (incumbent and settings.cutoff) else None,
        lower_bound=lower * (1 - 1e-12) if (lower is not None and settings.dp_bound) else None,
        settings=formulation.StrategyFormulationSettings(integer_edge_variables=settings.solver == "cpsat"),
    )
    if incumbent is not None and settings.warm_start:
        formulation.hint(sm, incumbent[1])
        result.warm_start = {"source": incumbent[2], "objective": incumbent[0]}
    out = run_backend(result, settings, sm.model)
    # a tied model's bound bounds only the tied problem: never report it
    bound = out.bound if (math.isfinite(out.bound) and not ties) else None

    if out.status is SolveStatus.INFEASIBLE and ties:
        _finish(result, problem, incumbent, lift, None)
        result.message = "no solution with tied blocks fits the memory limit; solve without tying for an exact answer"
    elif out.status is SolveStatus.INFEASIBLE:
        if incumbent is not None:
            result.status, result.message = (
                "error",
                f"the solver says infeasible but {incumbent[2]} found a verified solution: a bug",
            )
        else:
            result.status = "infeasible"
            result.message = "proven infeasible: no choice of configurations fits the memory limit"
    elif out.values is not None:
        solution = formulation.decode(sm, out.values)
        report = verify_strategy(problem, lift(solution))
        error = answer_error(report.feasible, report.violations, report.objective, out)
        if error is not None:
            result.status, result.message = "error", error
        else:
            candidate = (report.objective, solution, settings.solver)
            if incumbent is not None and incumbent[0] < report.objective:
                candidate = incumbent
            _finish(result, problem, candidate, lift, bound)
            if ties and out.status is SolveStatus.OPTIMAL:
                result.message = (
                    f"optimal among solutions with tied blocks ({report.objective:.12g}); an approximation: "
                    "the bound is the untied problem's"
                )
                result.bound = lower
                result.gap = relative_gap(result.objective, lower) if lower is not None else None
            elif out.status is SolveStatus.OPTIMAL and candidate[2] == settings.solver:
                result.status = "optimal"
                result.message = "proven optimal" + (
                    " (with the exact DP's value as a lower bound)" if lower is not None and settings.dp_bound else ""
                )
    else:
        _finish(result, problem, incumbent, lift, bound)
    if lower is not None and result.objective is not None and result.status == "feasible":
        # the DP / Lagrangian bound is proven too: report the better of the two bounds
        result.bound = min(max(result.bound if result.bound is not None else -math.inf, lower), result.objective)
        result.gap = relative_gap(result.objective, result.bound)
        if ties and result.gap == 0.0:
            result.status, result.message = "optimal", "the tied solution meets the untied problem's proven bound: optimal"
    result.solve_seconds = time.monotonic() - start
    return result


def _solve_quotient(
    result: Result,
    problem: StrategyProblem,
    work: StrategyProblem,
    lift,
    ties: tuple[tuple[int, ...], ...],
    incumbent: tuple[float, StrategySolution, str] | None,
    lower: float | None,
    settings: StrategySolveSettings,
    start: float,
) -> Result:
    """Tied blocks under the static (or no) memory model: solve the quotient problem, lift, verify.

    The quotient's optimum is the best *tied* solution, not the problem's optimum; the
    bound reported is the untied problem's (the DP's or the Lagrangian's), so the gap
    shows what tying may have cost, and only a zero gap makes the answer optimal.
    """
    from dataclasses import replace

    from milp_partition.strategy.ties import quotient

    q = quotient(work, ties)
    say(
        settings.progress_interval_s,
        f"[ties] solving the tied problem: {len(q.problem.nodes)} layers, {q.problem.total_configs} configurations",
    )
    remaining = max(1.0, settings.time_limit_s - (time.monotonic() - start))
    inner = solve_strategy(q.problem, replace(settings, tie_blocks=False, time_limit_s=remaining))
    result.solver_notes["ties"].update(
        {"tied_layers": len(q.problem.nodes), "tied_status": inner.status, "tied_objective": inner.objective}
    )
    result.solver_seconds = inner.solver_seconds
    candidate = incumbent
    if inner.assignment:
        solution = q.lift(StrategySolution(inner.assignment))
        report = verify_strategy(problem, lift(solution))
        if not report.feasible:
            result.status, result.message = (
                "error",
                "the lifted tied solution fails the verifier: " + "; ".join(report.violations[:3]),
            )
            result.solve_seconds = time.monotonic() - start
            return result
        if candidate is None or report.objective <= candidate[0]:
            candidate = (report.objective, solution, f"{settings.solver} on the tied problem")
    _finish(result, problem, candidate, lift, lower)
    if inner.status == "optimal":
        result.message = f"best tied solution proven by {settings.solver} on the tied problem; tying is an approximation"
    if candidate is None:
        result.message = "no solution found" + (" (the tied problem is infeasible)" if inner.status == "infeasible" else "")
    if result.gap == 0.0:
        result.status, result.message = "optimal", "the tied solution meets the untied problem's proven bound: optimal"
    result.solve_seconds = time.monotonic() - start
    return result


def _memory_exact(
    result: Result,
    problem: StrategyProblem,
    work: StrategyProblem,
    lift,
    lag,
    incumbent: tuple[float, StrategySolution, str] | None,
    lower: float | None,
    settings: StrategySolveSettings,
    start: float,
) -> tuple[bool, StrategyProblem, tuple[float, StrategySolution, str] | None, float | None]:
    """Pareto DP (``memory_dp``) and min-marginal fixing (``marginal_fixing``) under a static memory limit.

    Returns ``(done, work, incumbent, lower)``: ``done`` when ``result`` is finished with the
    proven optimum; otherwise ``work`` is fixed at the incumbent's verified cost (every
    solution costing at most that survives, so the back-end's optimum is the problem's) and
    the incumbent and bound are improved, for the back-end.
    """
    from milp_partition.heuristics.strategy_marginals import MarginalSettings, marginal_masks, restrict
    from milp_partition.heuristics.strategy_pareto_dp import MemorySearchSettings, ParetoDPSettings, memory_search

    lams = [lam for lam, _ in sorted(lag.evaluated, key=lambda t: -t[1])]
    if settings.memory_dp:
        left = max(0.0, settings.memory_dp_share * settings.time_limit_s - (time.monotonic() - start))
        search = memory_search(
            work,
            lag.bound,
            lams,
            (incumbent[0], incumbent[1]) if incumbent is not None else None,
            MemorySearchSettings(
                fixing=settings.marginal_fixing,
                time_limit_s=left,
                dp=ParetoDPSettings(max_table_entries=min(settings.max_table_entries, ParetoDPSettings().max_table_entries)),
            ),
        )
        value = None
        if search.solution is not None:
            report = verify_strategy(problem, lift(search.solution))
            if report.feasible:
                value = report.objective
                if incumbent is None or value < incumbent[0]:
                    incumbent = (value, search.solution, "pareto_dp")
        lower = search.bound if lower is None else max(lower, search.bound)
        result.heuristics.append(HeuristicRun("pareto_dp", value, search.seconds, search.optimal, search.message))
        result.solver_notes["memory_search"] = {
            "seconds": search.seconds,
            "optimal": search.optimal,
            "targets": search.targets,
            "configurations_after_fixing": search.configs,
        }
        say(settings.progress_interval_s, f"[pareto_dp] {search.message}")
        if search.optimal and incumbent is not None and value is not None and value <= incumbent[0]:
            _finish(result, problem, incumbent, lift, value)
            result.status = "optimal"
            result.message = "proven optimal by the Pareto DP with Lagrangian pruning (heuristics/strategy_pareto_dp.py)"
            result.solve_seconds = time.monotonic() - start
            return True, work, incumbent, lower
    if settings.marginal_fixing and incumbent is not None:
        keep, _ = marginal_masks(
            work, incumbent[0], lams[:8], incumbent[1], MarginalSettings(max_table_entries=settings.max_table_entries)
        )
        before = work.total_configs
        work = restrict(work, keep)
        result.solver_notes["marginal_fixing"] = {"configurations": [before, work.total_configs], "at": incumbent[0]}
        say(settings.progress_interval_s, f"[fixing] {before} -> {work.total_configs} configurations at {incumbent[0]:.12g}")
    return False, work, incumbent, lower


def _restrict(reduced: StrategyProblem, solution: StrategySolution) -> StrategySolution:
    """An original solution seen on a problem reduced by dominance alone (every kept layer keeps its id).

    A configuration that dominance dropped is replaced by one that dominates it
    (never worse); the hint is then only a hint, and the verifier re-checks the answer.
    """
    return StrategySolution({n.id: _kept(n, solution.choice[n.id]) for n in reduced.nodes})


def _kept(node, config: str) -> str:
    return config if config in node.configs else node.configs[int(np.argmin(node.cost))]


def _finish(
    result: Result, problem: StrategyProblem, best: tuple[float, StrategySolution, str] | None, lift, bound: float | None
) -> None:
    if best is None:
        result.status = "unknown"
        result.bound = bound
        result.message = result.message or "no feasible solution found within the limits"
        return
    solution = lift(best[1])
    report = verify_strategy(problem, solution)
    result.status = "feasible"
    result.objective = report.objective
    result.assignment = dict(solution.choice)
    result.memory_bytes = {"per_device": report.memory_bytes}
    if bound is not None:
        result.bound = min(bound, report.objective)
        result.gap = relative_gap(report.objective, result.bound)
    result.message = result.message or f"best solution from {best[2]}"
