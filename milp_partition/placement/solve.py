"""The solve chain of the placement problem: bounds -> heuristics -> formulation -> back-end -> decode -> verifier.

``solve_placement`` computes the lower bounds of :mod:`milp_partition.placement.bounds`,
runs the placement heuristics (each scored by :func:`verify_placement`; plus the
best single device), builds :mod:`milp_partition.formulations.placement` with the best bound as
``L`` and the best heuristic makespan as ``U`` and its schedule as a hint, solves
it, decodes, verifies and returns a :class:`~milp_partition.result.Result` whose
objective is always the simulator's makespan (real units) and whose bound is the
larger of the solver's (already lowered for any rounding) and ours.

When the graph splits at bottleneck tasks (:mod:`milp_partition.placement.decompose`)
and a short solve of the whole model proves nothing, the segments are solved per
device pair first; their recursion gives a bound and a stitched schedule (verified
like any other), and the whole model then runs with both for the time left.  When
the whole graph does not split but a large induced subgraph does (a side branch
beside a main line, as the transformer's encoder beside its decoder:
:mod:`milp_partition.placement.subgraph`), that subgraph's segments are solved the
same way for a bound only (the induced problem's optimum is at most the whole's).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from milp_partition.backends import SolveStatus, relative_gap
from milp_partition.chain import run_backend, say
from milp_partition.placement.bounds import BoundReport, best_bound
from milp_partition.placement.problem import PlacementProblem, PlacementSolution
from milp_partition.result import HeuristicRun, Result
from milp_partition.verifiers.placement import simulate_placement, verify_placement

#: Relative slack between the solver's makespan and the simulator's before a mismatch is an error.
MAKESPAN_MATCH_REL_TOL = 1e-6
#: A heuristic makespan within this relative distance of the bound is proven optimal without a solver.
OPTIMAL_REL_TOL = 1e-9

#: Share of the time limit the transfer-flow LP may take (GLOP stops there; the cheaper bounds stand).
FLOW_BOUND_SHARE = 0.2
#: Share of the time limit the search for a main line may take.
MAIN_LINE_SEARCH_SHARE = 0.1

#: CP-SAT parameters used by default for placement (chosen on the Moirai instances, see results/placement.md).
DEFAULT_CPSAT_PARAMETERS: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class PlacementSolveSettings:
    """How to solve a placement problem.

    Attributes
    ----------
    solver
        ``"cpsat"``, ``"cbc"`` (disjunctive model; small instances only) or ``"none"`` (heuristics only).
    time_limit_s, threads, seed
        Passed to the back-end.
    warm_start
        Hint the best heuristic schedule and bound the makespan above by its value.
    heuristics
        Names of the placement heuristics to run (``None``: all of them).
    progress_interval_s
        Progress line period on stderr; ``None`` for silence.
    symmetry_breaking, redundant
        Formulation options (they never change the optimum).
    decompose, decompose_time_fraction, quick_solve_s
        When the problem splits at bottleneck tasks (:mod:`milp_partition.placement.decompose`):
        solve the whole model for ``min(quick_solve_s, 10% of the limit)``; if that proves
        nothing, solve the segments within this fraction of the time left, then the whole
        model again with the decomposition's bound and schedule (CP-SAT only).
    main_line
        When the whole graph has no useful decomposition, look for a large induced subgraph
        that has one (:func:`milp_partition.placement_subgraph.main_line`) and solve its
        segments for a lower bound (the induced problem's optimum is at most the whole's).
    flow_bound
        Compute the transfer-flow LP bound (:func:`milp_partition.placement_bounds.transfer_flow`);
        segment solves turn it off (hundreds of small solves).
    cpsat_parameters
        Extra CP-SAT parameters, ``(name, value)`` pairs.
    """

    solver: str = "cpsat"
    time_limit_s: float = 60.0
    threads: int = 2
    seed: int = 0
    warm_start: bool = True
    heuristics: tuple[str, ...] | None = None
    progress_interval_s: float | None = None
    symmetry_breaking: bool = True
    redundant: bool = True
    cpsat_parameters: tuple[tuple[str, object], ...] = DEFAULT_CPSAT_PARAMETERS
    decompose: bool = True
    decompose_time_fraction: float = 0.6
    quick_solve_s: float = 10.0
    main_line: bool = True
    flow_bound: bool = True


def single_device_schedule(problem: PlacementProblem) -> PlacementSolution | None:
    """The best schedule with every task on one device (among devices that can hold them all), or ``None``."""
    best: tuple[float, PlacementSolution] | None = None
    for k in range(problem.num_devices):
        if not np.isfinite(problem.time[:, k]).all():
            continue
        device = np.full(problem.num_tasks, k, dtype=np.int64)
        sol = simulate_placement(problem, device)
        report = verify_placement(problem, sol)
        if report.feasible and (best is None or report.makespan < best[0]):
            best = (report.makespan, report.schedule or sol)
    return best[1] if best else None


def run_placement_heuristics(
    problem: PlacementProblem, settings: PlacementSolveSettings
) -> list[tuple[HeuristicRun, PlacementSolution | None]]:
    """Run the heuristics (and the single-device schedule); score each with the verifier."""
    from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS

    names = list(PLACEMENT_HEURISTICS) if settings.heuristics is None else list(settings.heuristics)
    for name in names:
        if name not in PLACEMENT_HEURISTICS and name != "single-device":
            from milp_partition.errors import InputError

            raise InputError(
                f"unknown placement heuristic {name!r}; known: {', '.join(['single-device', *PLACEMENT_HEURISTICS])}",
                where="--heuristic",
            )
    jobs = [("single-device", lambda: single_device_schedule(problem))]
    jobs += [(name, (lambda fn=PLACEMENT_HEURISTICS[name]: fn(problem))) for name in names if name != "single-device"]
    runs: list[tuple[HeuristicRun, PlacementSolution | None]] = []
    for name, fn in jobs:
        t0 = time.monotonic()
        sol: PlacementSolution | None = None
        value: float | None = None
        try:
            sol = fn()
            message = "" if sol is not None else "no single device holds every task"
        except Exception as exc:  # a heuristic that fails must not stop the exact solve
            message = f"failed: {exc}"
        seconds = time.monotonic() - t0
        if sol is not None:
            report = verify_placement(problem, sol)
            if report.feasible:
                value = report.makespan
                sol = report.schedule or sol
            else:
                message = "verifier rejected it: " + "; ".join(report.violations[:3])
                sol = None
        runs.append((HeuristicRun(name, value, seconds, False, message), sol))
        say(
            settings.progress_interval_s,
            f"[{name}] {'makespan ' + format(value, '.9g') if value is not None else 'no schedule'} in {seconds:.2f}s"
            + (f": {message}" if message else ""),
        )
    return runs


def solve_placement(problem: PlacementProblem, settings: PlacementSolveSettings = PlacementSolveSettings()) -> Result:
    """Solve ``problem`` and return a verified :class:`Result`."""
    from milp_partition.formulations import placement as formulation

    start = time.monotonic()
    result = Result(
        problem="placement",
        solver=settings.solver,
        objective_name="makespan",
        time_unit=problem.time_unit,
        instance={
            "name": problem.name,
            "tasks": problem.num_tasks,
            "edges": problem.num_edges,
            "devices": list(problem.device_ids),
            "memory_unit": problem.memory_unit,
        },
        settings={**asdict(problem.settings), **{f"solve.{k}": v for k, v in asdict(settings).items()}},
    )
    t0 = time.monotonic()
    # deadline: every phase (bounds, decomposition, main line, back-end) shares the one time limit
    bounds = best_bound(problem, flow=settings.flow_bound, flow_time_limit_s=FLOW_BOUND_SHARE * settings.time_limit_s)
    result.solver_notes["bounds"] = dict(bounds.values)
    result.solver_notes["bounds_seconds"] = time.monotonic() - t0
    say(settings.progress_interval_s, "[bounds] " + ", ".join(f"{k} {v:.9g}" for k, v in bounds.values.items()))

    best: tuple[float, PlacementSolution, str] | None = None
    for run, sol in run_placement_heuristics(problem, settings):
        result.heuristics.append(run)
        if sol is not None and run.objective is not None and (best is None or run.objective < best[0]):
            best = (run.objective, sol, run.name)

    lower = bounds.best
    if settings.solver == "cpsat" and settings.decompose and not (best is not None and best[0] <= lower * (1 + OPTIMAL_REL_TOL)):
        from dataclasses import replace

        from milp_partition.placement.decompose import decompose

        dec = decompose(problem)
        line = None
        if not dec.useful and settings.main_line:
            from milp_partition.placement.subgraph import main_line

            line = main_line(problem, deadline=time.monotonic() + MAIN_LINE_SEARCH_SHARE * settings.time_limit_s)
        if dec.useful or line is not None:
            # a short solve of the whole model first: easy instances end here
            quick_s = min(settings.quick_solve_s, 0.1 * settings.time_limit_s)
            say(settings.progress_interval_s, f"[cpsat] quick solve of the whole model ({quick_s:g}s) before the decomposition")
            # (the main-line path has computed the transfer-flow LP already: it is not re-run for the quick solve)
            # (it re-runs only the best heuristic, for its hint: the others have had their turn, within the deadline)
            first = solve_placement(
                problem,
                replace(
                    settings, decompose=False, time_limit_s=quick_s, flow_bound=settings.flow_bound and dec.useful,
                    heuristics=(best[2],) if best is not None else settings.heuristics,
                ),
            )  # fmt: skip
            if first.status in ("optimal", "error", "infeasible"):
                first.heuristics = result.heuristics  # every heuristic's run, not only the re-run one
                first.solver_notes["quick_solve_s"] = quick_s
                first.solve_seconds = time.monotonic() - start
                return first
            if first.objective is not None and (best is None or first.objective < best[0]):
                best = (first.objective, solution_of(problem, first), "cpsat (quick solve)")
            lower = max(lower, first.bound if first.bound is not None else 0.0)
            left = settings.time_limit_s - (time.monotonic() - start)
            if dec.useful:
                lower, best = _run_decomposition(
                    problem, replace(settings, time_limit_s=max(1.0, left)), result, lower, best, dec
                )
            else:
                lower = _run_main_line(problem, replace(settings, time_limit_s=max(1.0, left)), result, lower, best, line)

    if settings.solver == "none" or (best is not None and best[0] <= lower * (1 + OPTIMAL_REL_TOL)):
        _finish(result, problem, best, lower)
        if best is not None and best[0] <= lower * (1 + OPTIMAL_REL_TOL):
            result.status, result.message = "optimal", f"{best[2]} meets the lower bound"
        result.solve_seconds = time.monotonic() - start
        return result
    remaining = settings.time_limit_s - (time.monotonic() - start)
    if remaining < settings.time_limit_s:
        from dataclasses import replace

        settings = replace(settings, time_limit_s=max(1.0, remaining))

    pm = formulation.build(
        problem,
        lower_bound=lower,
        upper_bound=best[0] if (best and settings.warm_start) else None,
        path=bounds.path,
        settings=formulation.PlacementFormulationSettings(
            disjunctive=settings.solver == "cbc", symmetry_breaking=settings.symmetry_breaking, redundant=settings.redundant
        ),
    )
    if best is not None and settings.warm_start:
        formulation.hint(pm, best[1], best[0])
        result.warm_start = {"source": best[2], "objective": best[0]}
    out = run_backend(result, settings, pm.model)
    solver_bound = out.bound if math.isfinite(out.bound) else -math.inf
    bound = max(lower, solver_bound)

    if out.status is SolveStatus.INFEASIBLE:
        if best is not None and settings.warm_start:
            # the model was bounded by U = best: infeasible means nothing beats the heuristic
            _finish(result, problem, best, best[0])
            result.status, result.message = "optimal", f"the solver proved nothing beats {best[2]}'s makespan"
        elif best is not None:
            result.status = "error"
            result.message = f"the solver says infeasible but {best[2]} found a verified schedule of makespan {best[0]!r}: a bug"
        else:
            result.status, result.message = "infeasible", "proven infeasible: no placement meets every constraint"
    elif out.values is not None:
        solution = formulation.decode(pm, out.values)
        report = verify_placement(problem, solution)
        slack = 1e-9 * max(1.0, abs(out.objective)) + float(out.notes.get("rounding_error", 0.0))  # type: ignore[arg-type]
        if not report.feasible:
            result.status = "error"
            result.message = "the verifier rejected the solver's schedule: " + "; ".join(report.violations[:5])
        elif report.makespan > out.objective * (1 + MAKESPAN_MATCH_REL_TOL) + slack:
            result.status = "error"
            result.message = f"the simulator's makespan {report.makespan!r} exceeds the solver's {out.objective!r}: a bug"
        else:
            candidate = (report.makespan, report.schedule or solution, settings.solver)
            if best is not None and best[0] < report.makespan:
                candidate = best
            if out.status is SolveStatus.OPTIMAL:
                bound = max(bound, min(solver_bound, candidate[0]))
            _finish(result, problem, candidate, bound)
            if out.status is SolveStatus.OPTIMAL or candidate[0] <= bound * (1 + OPTIMAL_REL_TOL):
                result.status, result.message = "optimal", "proven optimal"
            else:
                result.message = "time limit reached; incumbent and bound"
    else:
        _finish(result, problem, best, bound)
        if out.status is SolveStatus.ERROR:
            result.message = (result.message + "; " if result.message else "") + "the solver failed (see solver_log)"
    if result.bound is not None and result.objective is not None and result.bound > result.objective * (1 + 1e-9) + 1e-12:
        result.status, result.message = "error", f"bound {result.bound!r} above makespan {result.objective!r}: a bug"
    result.solve_seconds = time.monotonic() - start
    return result


def _run_decomposition(
    problem: PlacementProblem,
    settings: PlacementSolveSettings,
    result: Result,
    lower: float,
    best: tuple[float, PlacementSolution, str] | None,
    dec: object,
) -> tuple[float, tuple[float, PlacementSolution, str] | None]:
    """Solve the segments between bottleneck tasks; return the improved lower bound and best schedule."""
    from milp_partition.placement.decompose import Decomposition, solve_decomposed

    assert isinstance(dec, Decomposition)
    solve_segment = _segment_solver(settings)

    say(
        settings.progress_interval_s,
        f"[decompose] {len(dec.bottlenecks)} bottleneck tasks, {len(dec.segments)} segments, "
        f"largest {max(len(s.inner) for s in dec.segments)} inner tasks",
    )
    say_fn = (lambda text: say(settings.progress_interval_s, text)) if settings.progress_interval_s else None
    from milp_partition.placement.bounds import device_path

    out = solve_decomposed(
        problem,
        dec,
        solve_segment,
        settings.time_limit_s * settings.decompose_time_fraction,
        say_fn,
        upper_bound=best[0] if best is not None else math.inf,
        tails=device_path(problem).tail,
    )
    note: dict[str, object] = {
        "bottlenecks": len(dec.bottlenecks),
        "segments": len(dec.segments),
        "segment_solves": out.solves,
        "bound": out.bound,
        "value": out.value,
        "all_segments_optimal": out.all_optimal,
        "pruned_pairs": out.notes.get("pruned_pairs", 0),
        "seconds": out.seconds,
    }
    lower = max(lower, out.bound)
    if out.solution is not None:
        report = verify_placement(problem, out.solution)
        note["verified_makespan"] = report.makespan if report.feasible else None
        if report.feasible and (best is None or report.makespan < best[0]):
            best = (report.makespan, report.schedule or out.solution, "decomposition")
        elif not report.feasible:
            note["violations"] = list(report.violations[:3])
    result.solver_notes["decomposition"] = note
    result.solver_notes.setdefault("bounds", {})["decomposition"] = out.bound
    say(settings.progress_interval_s, f"[decompose] bound {out.bound:.9g}, schedule {out.value:.9g} in {out.seconds:.1f}s")
    return lower, best


def _segment_solver(settings: PlacementSolveSettings):  # type: ignore[no-untyped-def]
    """``(segment problem, limit) -> (bound, makespan, optimal, schedule)`` by the ordinary chain (no decomposition)."""
    from dataclasses import replace

    sub_settings = replace(
        settings, decompose=False, main_line=False, flow_bound=False, heuristics=("heft",), progress_interval_s=None
    )

    def solve_segment(sub: PlacementProblem, limit_s: float) -> tuple[float, float, bool, PlacementSolution | None]:
        r = solve_placement(sub, replace(sub_settings, time_limit_s=limit_s))
        if r.status == "infeasible":
            return math.inf, math.inf, True, None
        if r.objective is None:
            return (r.bound or 0.0), math.inf, False, None
        return (r.bound if r.bound is not None else 0.0), r.objective, r.status == "optimal", solution_of(sub, r)

    return solve_segment


def _run_main_line(
    problem: PlacementProblem,
    settings: PlacementSolveSettings,
    result: Result,
    lower: float,
    best: tuple[float, PlacementSolution, str] | None,
    line: object,
) -> float:
    """Bound the whole problem by the decomposition of an induced subgraph (its schedule is not one of the whole).

    ``OPT(induced) <= OPT(whole)`` (:mod:`milp_partition.placement.subgraph`), and the recursion's
    bound is at most ``OPT(induced)`` whatever upper bound prunes it (module docstring of
    :mod:`milp_partition.placement.decompose`), so its bound is one of the whole.
    """
    from dataclasses import replace

    from milp_partition.placement.bounds import device_path
    from milp_partition.placement.decompose import Decomposition, solve_decomposed

    assert isinstance(line, tuple)
    sub: PlacementProblem = line[1]
    dec = line[2]
    assert isinstance(dec, Decomposition)
    t0 = time.monotonic()
    upper = best[0] if best is not None else math.inf
    quiet = replace(settings, heuristics=("heft", "heft-iter"), progress_interval_s=None)
    for run, _sol in run_placement_heuristics(sub, quiet):
        if run.objective is not None:
            upper = min(upper, run.objective)
    say(
        settings.progress_interval_s,
        f"[main line] induced subgraph of {sub.num_tasks} tasks: {len(dec.bottlenecks)} bottleneck tasks, "
        f"{len(dec.segments)} segments, largest {max(len(s.inner) for s in dec.segments)} inner tasks",
    )
    say_fn = (lambda text: say(settings.progress_interval_s, text)) if settings.progress_interval_s else None
    left = settings.time_limit_s - (time.monotonic() - t0)
    out = solve_decomposed(
        sub,
        dec,
        _segment_solver(settings),
        max(1.0, left * settings.decompose_time_fraction),
        say_fn,
        upper_bound=upper,
        tails=device_path(sub).tail,
    )
    result.solver_notes["main_line"] = {
        "tasks": sub.num_tasks,
        "bottlenecks": len(dec.bottlenecks),
        "segments": len(dec.segments),
        "segment_solves": out.solves,
        "bound": out.bound,
        "induced_schedule": out.value,
        "all_segments_optimal": out.all_optimal,
        "seconds": time.monotonic() - t0,
    }
    result.solver_notes.setdefault("bounds", {})["main_line"] = out.bound
    say(
        settings.progress_interval_s,
        f"[main line] bound {out.bound:.9g} (induced schedule {out.value:.9g}) in {time.monotonic() - t0:.1f}s",
    )
    return max(lower, out.bound) if math.isfinite(out.bound) else lower


def edge_key(problem: PlacementProblem, e: int) -> str:
    """``"source->target"``: how a result names edge e."""
    return f"{problem.task_ids[int(problem.edge_source[e])]}->{problem.task_ids[int(problem.edge_target[e])]}"


def solution_of(problem: PlacementProblem, result: Result) -> PlacementSolution:
    """The schedule of a result (its ``assignment``, ``starts`` and, with contention, ``transfer_starts``)."""
    device = np.array([problem.device_index[result.assignment[t]] for t in problem.task_ids], dtype=np.int64)
    tstart = None
    if result.transfer_starts:
        tstart = np.array([result.transfer_starts.get(edge_key(problem, e), math.nan) for e in range(problem.num_edges)])
    return PlacementSolution(device, np.array([result.starts[t] for t in problem.task_ids], dtype=np.float64), tstart)


def _finish(
    result: Result, problem: PlacementProblem, best: tuple[float, PlacementSolution, str] | None, bound: float | None
) -> None:
    """Fill makespan, schedule, bound and gap from a verified schedule (or mark none found)."""
    if best is None:
        result.status = "unknown"
        result.bound = bound
        result.message = result.message or "no feasible schedule found within the limits"
        return
    report = verify_placement(problem, best[1])
    schedule = report.schedule or best[1]
    result.status = "feasible"
    result.objective = report.makespan
    result.assignment = {t: problem.device_ids[int(schedule.device[i])] for i, t in enumerate(problem.task_ids)}
    result.starts = {t: float(schedule.start[i]) for i, t in enumerate(problem.task_ids)}
    result.transfer_starts = {}
    if problem.settings.link_contention and schedule.transfer_start is not None:
        result.transfer_starts = {
            edge_key(problem, e): float(x) for e, x in enumerate(schedule.transfer_start.tolist()) if math.isfinite(x)
        }
    result.loads = dict(report.device_load)
    result.memory_bytes = dict(report.peak_memory)
    if bound is not None and math.isfinite(bound):
        result.bound = min(bound, report.makespan) if bound <= report.makespan * (1 + 1e-9) + 1e-12 else bound
        result.gap = relative_gap(report.makespan, result.bound)
    result.message = result.message or f"best schedule from {best[2]}"


def bound_report(problem: PlacementProblem) -> BoundReport:
    """The lower bounds of :mod:`milp_partition.placement.bounds` (re-exported for the CLI and benchmark)."""
    return best_bound(problem)
