"""The one place that chains heuristics, formulation, back-end and verifier.

``solve_pipeline`` runs the DPs of :mod:`milp_partition.heuristics.pipeline_dp` (each scored by
the verifier), builds :mod:`milp_partition.formulations.pipeline` with the best heuristic value as
an upper bound and its solution as a warm start, solves it with a back-end,
decodes, verifies and returns a :class:`~milp_partition.result.Result` whose
objective is always the verifier's.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace

from milp_partition.backends import SolveStatus, relative_gap
from milp_partition.chain import answer_error, run_backend, say
from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution
from milp_partition.result import HeuristicRun, Result
from milp_partition.verifiers.pipeline import verify_pipeline


@dataclass(frozen=True)
class SolveSettings:
    """How to solve.

    Attributes
    ----------
    solver
        ``"cpsat"`` or ``"cbc"``; ``"none"`` runs the heuristics only.
    time_limit_s, threads, seed
        Passed to the back-end.
    warm_start
        Hint the best heuristic solution and bound the objective by its value.
    heuristics
        Run the DPs at all.
    max_ideals
        Cap of the ideal DP.
    progress_interval_s
        Progress line period on stderr; ``None`` for silence.
    symmetry_breaking, lower_bounds
        Formulation options (they never change the optimum).
    """

    solver: str = "cpsat"
    time_limit_s: float = 60.0
    threads: int = 2
    seed: int = 0
    warm_start: bool = True
    heuristics: bool = True
    max_ideals: int = 20000
    progress_interval_s: float | None = None
    symmetry_breaking: bool = True
    lower_bounds: bool = True


#: Message of a heuristic run cut short by an interrupt (the chain then stops with the best answer so far).
INTERRUPTED = "interrupted"
#: Share of the time limit the DPs may use; the rest is for the fallback split and the back-end.
DP_BUDGET_SHARE = 0.5


def run_pipeline_heuristics(
    problem: PipelineProblem, settings: SolveSettings, start: float | None = None
) -> list[tuple[HeuristicRun, PipelineSolution | None]]:
    """Run the chain DP and the ideal DP, and the balanced split when neither found a split; score each with the verifier.

    The time limit counts from ``start`` (a ``time.monotonic()`` value; now when ``None``): the DPs stop at
    :data:`DP_BUDGET_SHARE` of it, the balanced split (seconds at 100,000 nodes) at all of it.
    """
    from milp_partition.heuristics.pipeline_dp import IdealDPSettings, chain_dp, ideal_dp
    from milp_partition.heuristics.pipeline_split import balanced_split

    start = time.monotonic() if start is None else start
    dp_deadline = start + DP_BUDGET_SHARE * settings.time_limit_s
    deadline = start + settings.time_limit_s
    runs: list[tuple[HeuristicRun, PipelineSolution | None]] = []
    for name, fn in (
        ("chain_dp", lambda: chain_dp(problem, dp_deadline)),
        ("ideal_dp", lambda: ideal_dp(problem, IdealDPSettings(settings.max_ideals), dp_deadline)),
        ("balanced_split", lambda: balanced_split(problem, deadline)),
    ):
        if name == "balanced_split" and any(sol is not None for _, sol in runs):
            continue  # the fallback for graphs the DPs cannot take (or finish)
        try:
            dp = fn()
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: keep what the earlier heuristics found
            runs.append((HeuristicRun(name, None, 0.0, False, INTERRUPTED), None))
            break
        value: float | None = None
        message = dp.message
        if dp.solution is not None:
            report = verify_pipeline(problem, dp.solution)
            if report.feasible:
                value = report.objective
                if not math.isclose(value, dp.value, rel_tol=1e-9, abs_tol=1e-12):
                    message += f" (verifier value {value!r} differs from the DP's {dp.value!r})"
            else:
                message += "; verifier rejected it: " + "; ".join(report.violations[:3])
        runs.append((HeuristicRun(name, value, dp.seconds, dp.exact, message), dp.solution if value is not None else None))
        say(
            settings.progress_interval_s,
            f"[{name}] {'value ' + format(value, '.9g') if value is not None else 'no solution'} in {dp.seconds:.2f}s: {dp.message}",
        )
    return runs


def solve_pipeline(problem: PipelineProblem, settings: SolveSettings = SolveSettings()) -> Result:
    """Solve ``problem`` and return a verified :class:`Result`."""
    from milp_partition.formulations import pipeline as formulation

    start = time.monotonic()
    result = Result(
        problem="pipeline",
        solver=settings.solver,
        objective_name="time_per_sample" if problem.settings.objective == "time" else "peak_memory_bytes",
        time_unit=problem.graph.time_unit,
        instance={
            "source": problem.source,
            "name": problem.graph.name,
            "nodes": len(problem.graph.nodes),
            "edges": len(problem.graph.edges),
            "devices": problem.device_ids,
        },
        settings={**asdict(problem.settings), **{f"solve.{k}": v for k, v in asdict(settings).items()}},
    )

    best: tuple[float, PipelineSolution, str] | None = None
    if settings.heuristics:
        for run, sol in run_pipeline_heuristics(problem, settings, start):
            result.heuristics.append(run)
            if sol is not None and run.objective is not None and (best is None or run.objective < best[0]):
                best = (run.objective, sol, run.name)

    if any(run.message == INTERRUPTED for run in result.heuristics):
        result.solver_notes["interrupted"] = True
        result.message = "interrupted; " + (
            "the best verified solution found before the interrupt" if best is not None else "no solution found before it"
        )
    if settings.solver == "none" or result.solver_notes.get("interrupted"):
        _finish_from_heuristic(result, problem, best, bound=None)
        result.solve_seconds = time.monotonic() - start
        return result

    pm = formulation.build(
        problem,
        upper_bound=best[0] if (best and settings.warm_start) else None,
        settings=formulation.PipelineFormulationSettings(settings.symmetry_breaking, settings.lower_bounds),
    )
    if best is not None and settings.warm_start:
        formulation.hint(pm, best[1], best[0])
        result.warm_start = {"source": best[2], "objective": best[0]}
    remaining_s = settings.time_limit_s - (time.monotonic() - start)  # one budget: heuristics and model count too
    if remaining_s <= 0.0:
        result.message = "the time limit ran out before the solver started"
        _finish_from_heuristic(result, problem, best, bound=None)
        result.solve_seconds = time.monotonic() - start
        return result
    out = run_backend(result, replace(settings, time_limit_s=remaining_s), pm.model)
    bound = out.bound if math.isfinite(out.bound) else None

    if out.status is SolveStatus.INFEASIBLE:
        if best is not None:
            result.status = "error"
            result.message = f"the solver says infeasible but {best[2]} found a verified solution of value {best[0]!r}: a bug"
        else:
            result.status = "infeasible"
            result.message = "proven infeasible: no assignment meets every constraint" + _infeasibility_hint(problem)
    elif out.values is not None:
        solution = formulation.decode(pm, out.values)
        report = verify_pipeline(problem, solution)
        error = answer_error(report.feasible, report.violations, report.objective, out)
        if error is not None:
            result.status, result.message = "error", error
        else:
            candidate = (report.objective, solution, settings.solver)
            if best is not None and best[0] < report.objective:
                candidate = best  # the warm start stayed better (time limit before the solver matched it)
            _finish_from_heuristic(result, problem, candidate, bound=bound)
            if candidate[2] == settings.solver:
                result.message = (
                    "proven optimal" if out.status is SolveStatus.OPTIMAL else "time limit reached; incumbent and bound"
                )
                if out.status is SolveStatus.OPTIMAL:
                    result.status = "optimal"
    else:
        _finish_from_heuristic(result, problem, best, bound=bound)
        if out.status is SolveStatus.ERROR:
            result.message = (result.message + "; " if result.message else "") + "the solver failed (see solver_log)"
    if result.status == "optimal" and result.bound is not None and result.objective is not None:
        if result.bound > result.objective * (1 + 1e-9) + 1e-12:
            result.status, result.message = "error", f"bound {result.bound!r} above objective {result.objective!r}: a bug"
    result.solve_seconds = time.monotonic() - start
    return result


def _finish_from_heuristic(
    result: Result, problem: PipelineProblem, best: tuple[float, PipelineSolution, str] | None, bound: float | None
) -> None:
    """Fill objective, assignment, bound and gap from a verified solution (or mark none found)."""
    if best is None:
        result.status = "unknown"
        result.bound = bound
        result.message = result.message or "no feasible solution found within the limits"
        return
    report = verify_pipeline(problem, best[1])
    result.status = "feasible"
    result.objective = report.objective
    result.assignment = dict(best[1].assignment)
    result.time_per_sample = report.time_per_sample
    result.peak_memory_bytes = report.peak_memory_bytes
    result.loads = report.loads
    result.memory_bytes = report.memory_bytes
    if bound is not None:
        result.bound = min(bound, report.objective) if bound <= report.objective * (1 + 1e-9) + 1e-12 else bound
        result.gap = relative_gap(report.objective, result.bound)
    result.message = result.message or f"best solution from {best[2]}"


def _infeasibility_hint(problem: PipelineProblem) -> str:
    """A reason a person can act on, when a simple one exists."""
    caps = [d.memory_bytes for d in problem.cluster.devices]
    if problem.cluster.host_cpu_cores == 0 and caps and all(c is not None for c in caps):
        total = sum(nd.param_bytes + nd.activation_bytes + nd.other_bytes for nd in problem.graph.nodes)
        biggest = max(problem.graph.nodes, key=lambda nd: nd.param_bytes + nd.activation_bytes + nd.other_bytes, default=None)
        if problem.settings.memory_model == "static" and total > sum(caps):  # type: ignore[arg-type]
            return f" (the graph needs {total} bytes in all, the accelerators hold {sum(caps)})"  # type: ignore[arg-type]
        if biggest is not None:
            need = biggest.param_bytes + biggest.activation_bytes + biggest.other_bytes
            if problem.settings.memory_model == "static" and need > max(caps):  # type: ignore[type-var]
                return f" (node {biggest.id!r} alone needs {need} bytes, more than any accelerator's {max(caps)})"  # type: ignore[type-var]
    return ""
