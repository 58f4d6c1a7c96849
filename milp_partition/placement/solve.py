"""The placement problem's steps in the one solve chain (:mod:`milp_partition.chain`).

Bounds -> heuristics -> refinement (decompositions) -> formulation -> back-end -> decode -> verifier:
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
same way for a bound (the induced problem's optimum is at most the whole's); its
stitched schedule, extended to the whole graph (:mod:`milp_partition.placement.extend`)
and improved by a local search (:mod:`milp_partition.placement.local_search`), is a
schedule of the whole, verified like any other.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from milp_partition.backends.options import BackendOptions, CpSatOptions
from milp_partition.backends.registry import Capability, has
from milp_partition.chain import (
    Bound,
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
    say,
)
from milp_partition.errors import InputError
from milp_partition.formulations import placement as formulation
from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS
from milp_partition.placement.bounds import (
    TRANSFER_FLOW_MAX_VARS,
    BoundReport,
    best_bound,
    device_path,
    transfer_flow,
    transfer_flow_size,
)
from milp_partition.placement.decompose import Decomposition, decompose, solve_decomposed
from milp_partition.placement.extend import extend_schedule
from milp_partition.placement.local_search import LocalSearchSettings, improve_by_moves
from milp_partition.placement.problem import PlacementProblem, PlacementSolution
from milp_partition.placement.subgraph import MainLine, main_line
from milp_partition.result import Result, Status
from milp_partition.settings import CommonSettings
from milp_partition.verifiers.placement import simulate_placement, verify_placement

#: Share of the time limit the transfer-flow LP may take (GLOP stops there; the cheaper bounds stand).
FLOW_BOUND_SHARE = 0.2
#: Share of the time limit the search for a main line may take.
MAIN_LINE_SEARCH_SHARE = 0.1

#: CP-SAT parameters used by default for placement (chosen on the Moirai instances, see results/placement.md).
DEFAULT_CPSAT_PARAMETERS: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class PlacementSolveSettings(CommonSettings):
    """How to solve a placement problem: the common settings (:class:`~milp_partition.settings.CommonSettings`: ``solver``,
    ``time_limit_s``, ``threads``, ``seed``, ``warm_start``, ``progress_interval_s``) and its own.

    Attributes
    ----------
    heuristics
        Names of the placement heuristics to run (``None``: all of them).
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
    local_search_time_fraction
        With a main line: the share of the time left after its segments that the local search
        (:mod:`milp_partition.placement.local_search`) may take, improving the main line's stitched
        schedule extended to the whole problem (:mod:`milp_partition.placement.extend`); 0 turns it off.
        The whole model then runs from the better schedule for the rest.
    flow_bound
        Compute the transfer-flow LP bound (:func:`milp_partition.placement_bounds.transfer_flow`);
        segment solves turn it off (hundreds of small solves).
    backend_options
        Back-ends' own options (:mod:`milp_partition.backends.options`, one per back-end): the solving back-end
        gets its own; CP-SAT's parameters go in a :class:`~milp_partition.backends.options.CpSatOptions`.
    """

    heuristics: tuple[str, ...] | None = None
    symmetry_breaking: bool = True
    redundant: bool = True
    backend_options: tuple[BackendOptions, ...] = (CpSatOptions(parameters=DEFAULT_CPSAT_PARAMETERS),)
    decompose: bool = True
    decompose_time_fraction: float = 0.6
    quick_solve_s: float = 10.0
    main_line: bool = True
    local_search_time_fraction: float = 0.7
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


def placement_heuristic_outcomes(
    problem: PlacementProblem, settings: PlacementSolveSettings
) -> Iterator[Outcome[PlacementSolution]]:
    """Run the heuristics (and the single-device schedule); the chain verifies each schedule."""
    names = list(PLACEMENT_HEURISTICS) if settings.heuristics is None else list(settings.heuristics)
    for name in names:
        if name not in PLACEMENT_HEURISTICS and name != "single-device":
            raise InputError(
                f"unknown placement heuristic {name!r}; known: {', '.join(['single-device', *PLACEMENT_HEURISTICS])}",
                where="--heuristic",
            )
    jobs: list[tuple[str, Callable[[], PlacementSolution | None]]] = [("single-device", lambda: single_device_schedule(problem))]
    jobs += [(name, functools.partial(PLACEMENT_HEURISTICS[name], problem)) for name in names if name != "single-device"]
    for name, fn in jobs:
        t0 = time.monotonic()
        sol: PlacementSolution | None = None
        try:
            sol = fn()
            message = "" if sol is not None else "no single device holds every task"
        except Exception as exc:  # a heuristic that fails must not stop the exact solve
            message = f"failed: {exc}"
        yield Outcome(name, sol, time.monotonic() - t0, False, message)


def best_heuristic_schedule(
    problem: PlacementProblem, settings: PlacementSolveSettings
) -> tuple[float, PlacementSolution | None]:
    """The least verified makespan of the heuristics and its schedule (``inf`` and ``None`` when none finds one)."""
    best: tuple[float, PlacementSolution | None] = (math.inf, None)
    for out in placement_heuristic_outcomes(problem, settings):
        if out.solution is not None:
            report = verify_placement(problem, out.solution)
            if report.feasible and report.makespan < best[0]:
                best = (report.makespan, report.schedule or out.solution)
    return best


PlacementRun = Run[PlacementProblem, PlacementSolution]


@dataclass
class PlacementState:
    """What the placement steps hand on within one run: the bound step's report (its device path feeds the formulation)."""

    bounds: BoundReport | None = None


@dataclass(frozen=True)
class PlacementFormulation:
    """:mod:`milp_partition.formulations.placement` as a :class:`~milp_partition.chain.Formulation`."""

    settings: PlacementSolveSettings
    state: PlacementState

    def build(self, run: PlacementRun) -> Built[formulation.PlacementModel]:
        best = run.best
        cutoff = best.value if (best is not None and run.settings.warm_start) else None
        bounds = self.state.bounds
        pm = formulation.build(
            run.problem,
            lower_bound=run.lower if run.lower is not None else 0.0,
            upper_bound=cutoff,
            path=bounds.path if bounds is not None else None,
            settings=formulation.PlacementFormulationSettings(
                disjunctive=not has(run.settings.solver, Capability.CP),  # a MILP back-end gets the linear model
                symmetry_breaking=self.settings.symmetry_breaking,
                redundant=self.settings.redundant,
            ),
        )
        return Built(pm.model, pm, cutoff)

    def hint(self, built: Built[formulation.PlacementModel], run: PlacementRun, candidate: Candidate[PlacementSolution]) -> None:
        formulation.hint(built.state, candidate.solution, candidate.value)

    def decode(self, built: Built[formulation.PlacementModel], values: Sequence[float]) -> PlacementSolution:
        solution: PlacementSolution = formulation.decode(
            built.state, list(values)
        )  # (typed here: plain mypy sees formulations/ as Any)
        return solution


@dataclass(frozen=True)
class PlacementSteps(StepDefaults[PlacementProblem, PlacementSolution]):
    """The placement problem's steps for :func:`milp_partition.chain.run_chain` (one object per run: it owns the run's state)."""

    settings: PlacementSolveSettings
    name: str = "placement"
    state: PlacementState = field(default_factory=PlacementState, compare=False)

    @property
    def formulation(self) -> PlacementFormulation:
        return PlacementFormulation(self.settings, self.state)

    def new_result(self, problem: PlacementProblem, settings: ChainSettings) -> Result:
        return Result(
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
            settings={**asdict(problem.settings), **{f"solve.{k}": v for k, v in asdict(self.settings).items()}},
        )

    def verify(self, problem: PlacementProblem, solution: PlacementSolution) -> Evaluation[PlacementSolution]:
        report = verify_placement(problem, solution)
        return Evaluation(report.feasible, report.makespan, tuple(report.violations), report.schedule or solution, report)

    def bounds(self, run: PlacementRun) -> Iterable[Bound]:
        """The quick lower bounds of :mod:`milp_partition.placement.bounds` (critical path, device path, fractional
        load); the transfer-flow LP, which may take a fifth of the limit, runs after the heuristics
        (:meth:`heuristics`), so that an interrupt or a time limit during it keeps their schedules."""
        t0 = time.monotonic()
        bounds = best_bound(run.problem, flow=False)
        self.state.bounds = bounds
        run.result.solver_notes["bounds"] = dict(bounds.values)
        run.result.solver_notes["bounds_seconds"] = time.monotonic() - t0
        run.say("[bounds] " + ", ".join(f"{k} {v:.9g}" for k, v in bounds.values.items()))
        return [Bound(v, f"the {k} bound") for k, v in bounds.values.items() if math.isfinite(v)]

    def heuristics(self, run: PlacementRun) -> Iterable[Outcome[PlacementSolution]]:
        """The heuristics' schedules, then the transfer-flow bound (:meth:`_flow_bound`)."""
        yield from placement_heuristic_outcomes(run.problem, self.settings)
        self._flow_bound(run)

    def _flow_bound(self, run: PlacementRun) -> None:
        """The transfer-flow LP within its share of the run's budget (cut short, it adds no bound), added to the run's
        bounds and to the bound report the formulation reads."""
        quick = self.state.bounds
        left = run.budget.share(FLOW_BOUND_SHARE).left()
        if quick is None or not self.settings.flow_bound or left <= 0 or transfer_flow_size(run.problem) > TRANSFER_FLOW_MAX_VARS:
            return
        t0 = time.monotonic()
        value = transfer_flow(run.problem, time_limit_s=left)
        values = {**quick.values, "transfer_flow": value}
        best = max(values.values())
        self.state.bounds = BoundReport(values, best if math.isfinite(best) else 0.0, quick.path)
        run.result.solver_notes["bounds"] = dict(values)
        run.result.solver_notes["bounds_seconds"] = float(run.result.solver_notes.get("bounds_seconds", 0.0)) + (
            time.monotonic() - t0
        )
        run.say(f"[bounds] transfer_flow {value:.9g}")
        if math.isfinite(value):
            run.bounds.append(Bound(value, "the transfer_flow bound"))

    def refine(self, run: PlacementRun) -> Iterable[Outcome[PlacementSolution]]:
        """A quick whole solve, then the bottleneck decomposition or the main-line bound (CP-SAT only)."""
        settings = self.settings
        if not has(run.settings.solver, Capability.CP) or not settings.decompose:
            return
        problem: PlacementProblem = run.problem
        dec = decompose(problem)
        search_end = run.budget.capped(MAIN_LINE_SEARCH_SHARE * run.budget.limit_s).deadline()
        line = main_line(problem, deadline=search_end) if (not dec.useful and settings.main_line) else None
        if not dec.useful and line is None:
            return
        # a short solve of the whole model first: easy instances end here
        quick_s = min(settings.quick_solve_s, 0.1 * run.budget.limit_s)
        run.say(f"[cpsat] quick solve of the whole model ({quick_s:g}s) before the decomposition")
        # (the main-line path has computed the transfer-flow LP already: it is not re-run for the quick solve)
        # (it re-runs only the best heuristic, for its hint: the others have had their turn within the deadline)
        again = (
            (run.best.source,) if run.best is not None and run.best.source in (*PLACEMENT_HEURISTICS, "single-device") else None
        )
        quick = replace(
            settings,
            decompose=False,
            time_limit_s=quick_s,
            flow_bound=settings.flow_bound and dec.useful,
            heuristics=again or settings.heuristics,
            progress_interval_s=None,  # silent: its outcome line below is the one shown (its own bounds, heuristic,
            # back-end and [result] lines, mid-run, read as a second solve that had ended)
        )
        first = nested(solve_placement(problem, quick))
        run.result.solver_notes["quick_solve_s"] = quick_s
        for key, value in first.solver_notes.items():
            run.result.solver_notes.setdefault(key, value)
        run.result.solver_seconds += first.solver_seconds
        run.result.solver_log = first.solver_log
        yield Outcome(
            "cpsat (quick solve)",
            solution_of(problem, first) if first.objective is not None else None,
            first.solve_seconds,
            first.status == Status.OPTIMAL,
            first.message,
            bound=first.bound,
            infeasible=first.status == Status.INFEASIBLE,
        )
        if run.proven_optimal() or run.infeasible_proofs:
            return
        left = replace(settings, time_limit_s=max(1.0, run.budget.left()))
        if dec.useful:
            yield _run_decomposition(problem, left, run, dec)
        elif line is not None:
            yield _run_main_line(problem, left, run, line)

    def record(self, result: Result, problem: PlacementProblem, best: Candidate[PlacementSolution]) -> None:
        report = best.report or verify_placement(problem, best.solution)
        schedule = report.schedule or best.solution
        result.assignment = {t: problem.device_ids[int(schedule.device[i])] for i, t in enumerate(problem.task_ids)}
        result.starts = {t: float(schedule.start[i]) for i, t in enumerate(problem.task_ids)}
        result.transfer_starts = {}
        if problem.settings.link_contention and schedule.transfer_start is not None:
            result.transfer_starts = {
                edge_key(problem, e): float(x) for e, x in enumerate(schedule.transfer_start.tolist()) if math.isfinite(x)
            }
        result.loads = dict(report.device_load)
        result.memory_bytes = dict(report.peak_memory)


def solve_placement(problem: PlacementProblem, settings: PlacementSolveSettings = PlacementSolveSettings()) -> Result:
    """Solve ``problem`` through the one chain and return a verified :class:`Result`."""
    result = run_chain(PlacementSteps(settings), problem, chain_settings(settings))
    if result.status is Status.INFEASIBLE:
        result.message = "proven infeasible: no placement meets every constraint"
    return result


def _run_decomposition(
    problem: PlacementProblem, settings: PlacementSolveSettings, run: PlacementRun, dec: Decomposition
) -> Outcome[PlacementSolution]:
    """Solve the segments between bottleneck tasks: a proven bound and a stitched schedule (verified by the chain)."""
    result = run.result
    best = run.best
    solve_segment = _segment_solver(settings)

    say(
        settings.progress_interval_s,
        f"[decompose] {len(dec.bottlenecks)} bottleneck tasks, {len(dec.segments)} segments, "
        f"largest {max(len(s.inner) for s in dec.segments)} inner tasks",
    )
    say_fn = (lambda text: say(settings.progress_interval_s, text)) if settings.progress_interval_s else None
    out = solve_decomposed(
        problem,
        dec,
        solve_segment,
        max(1.0, run.budget.left()) * settings.decompose_time_fraction,  # a share of what is left of the one budget
        say_fn,
        upper_bound=best.value if best is not None else math.inf,
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
    result.solver_notes["decomposition"] = note
    result.solver_notes.setdefault("bounds", {})["decomposition"] = out.bound
    return Outcome(
        "decomposition",
        out.solution,
        out.seconds,
        False,
        f"bound {out.bound:.9g}, stitched schedule {out.value:.9g}",
        bound=out.bound if math.isfinite(out.bound) else None,
    )


def _segment_solver(
    settings: PlacementSolveSettings,
) -> Callable[[PlacementProblem, float], tuple[float, float, bool, PlacementSolution | None]]:
    """``(segment problem, limit) -> (bound, makespan, optimal, schedule)`` by the ordinary chain (no decomposition)."""
    sub_settings = replace(
        settings, decompose=False, main_line=False, flow_bound=False, heuristics=("heft",), progress_interval_s=None
    )

    def solve_segment(sub: PlacementProblem, limit_s: float) -> tuple[float, float, bool, PlacementSolution | None]:
        r = nested(solve_placement(sub, replace(sub_settings, time_limit_s=limit_s)))
        if r.status == "infeasible":
            return math.inf, math.inf, True, None
        if r.objective is None:
            return (r.bound or 0.0), math.inf, False, None
        return (r.bound if r.bound is not None else 0.0), r.objective, r.status == "optimal", solution_of(sub, r)

    return solve_segment


def _run_main_line(
    problem: PlacementProblem, settings: PlacementSolveSettings, run: PlacementRun, line: MainLine
) -> Outcome[PlacementSolution]:
    """Bound the whole problem by the decomposition of an induced subgraph; extend its schedule to the whole.

    ``OPT(induced) <= OPT(whole)`` (:mod:`milp_partition.placement.subgraph`), and the recursion's
    bound is at most ``OPT(induced)`` whatever upper bound prunes it (module docstring of
    :mod:`milp_partition.placement.decompose`), so its bound is one of the whole.
    """
    result = run.result
    _, sub, dec = line
    t0 = time.monotonic()
    best = run.best
    upper = best.value if best is not None else math.inf
    quiet = replace(settings, heuristics=("heft", "heft-iter"), progress_interval_s=None)
    sub_value, sub_schedule = best_heuristic_schedule(sub, quiet)
    upper = min(upper, sub_value)
    say(
        settings.progress_interval_s,
        f"[main line] induced subgraph of {sub.num_tasks} tasks: {len(dec.bottlenecks)} bottleneck tasks, "
        f"{len(dec.segments)} segments, largest {max(len(s.inner) for s in dec.segments)} inner tasks",
    )
    say_fn = (lambda text: say(settings.progress_interval_s, text)) if settings.progress_interval_s else None
    out = solve_decomposed(
        sub,
        dec,
        _segment_solver(settings),
        max(1.0, run.budget.left() * settings.decompose_time_fraction),  # a share of what is left of the one budget
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
    # (the recursion may prune every pair that cannot beat the heuristic's schedule of the main line: then that one)
    stitched = out.solution if out.solution is not None and out.value <= sub_value else sub_schedule
    whole = _main_line_schedule(problem, settings, run, line, stitched)
    return Outcome(
        "main_line",
        whole,
        time.monotonic() - t0,
        False,
        f"bound {out.bound:.9g} from an induced subgraph of {sub.num_tasks} tasks",
        bound=out.bound if math.isfinite(out.bound) else None,
    )


def _main_line_schedule(
    problem: PlacementProblem,
    settings: PlacementSolveSettings,
    run: PlacementRun,
    line: MainLine,
    sub_solution: PlacementSolution | None,
) -> PlacementSolution | None:
    """The main line's stitched schedule extended to the whole problem, improved by the local search.

    The search starts from the better (verified makespan) of the extension and the
    chain's incumbent and takes ``local_search_time_fraction`` of the time left.
    ``None`` when the search is off or there is nothing to start from.
    """
    if settings.local_search_time_fraction <= 0:
        return None
    t0 = time.monotonic()
    kept, _, _ = line
    best = run.best
    reference = best.solution if best is not None else None
    starts: list[tuple[float, str, PlacementSolution]] = []
    if sub_solution is not None:
        ext = extend_schedule(problem, kept, sub_solution, reference)
        if ext is not None:
            report = verify_placement(problem, ext)
            if report.feasible:
                starts.append((report.makespan, "main line extended", report.schedule or ext))
    if best is not None:
        starts.append((best.value, best.source, best.solution))
    if not starts:
        return None
    value, source, start = min(starts, key=lambda c: c[0])
    limit = max(0.0, run.budget.left()) * settings.local_search_time_fraction
    improved = improve_by_moves(problem, start, LocalSearchSettings(time_limit_s=limit))
    after = verify_placement(problem, improved)
    run.result.solver_notes["local_search"] = {
        "start": source,
        "start_makespan": value,
        "makespan": after.makespan if after.feasible else None,
        "seconds": time.monotonic() - t0,
    }
    say(
        settings.progress_interval_s,
        f"[local search] from {source} ({value:.9g}) to {after.makespan:.9g} in {time.monotonic() - t0:.1f}s",
    )
    return improved if after.feasible else None


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


def bound_report(problem: PlacementProblem) -> BoundReport:
    """The lower bounds of :mod:`milp_partition.placement.bounds` (re-exported for the CLI and benchmark)."""
    return best_bound(problem)
