"""Ctrl-C and SIGTERM during a solve (issue 43 item 8): the answer found so far is kept, and a long phase is heard.

``solve transformer.json --time-limit 300`` held a SIGTERM for 35 s (the transfer-flow LP, a fifth of the limit,
ran in the main thread before any heuristic) and wrote no schedule; ``--progress 5`` printed nothing until the
back-end began.  No wall-clock assertions: interrupts are raised by the code under test's own calls.
"""

from __future__ import annotations

import _thread
import math
import threading

import pytest

from milp_partition.budget import Budget
from milp_partition.chain import PhaseTicker, Run
from milp_partition.io.placement_instance import read_placement_instance
from milp_partition.placement import solve as placement_solve
from milp_partition.placement.bounds import solve_interruptibly
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement
from milp_partition.result import Result
from milp_partition.verifiers.placement import verify_placement


class BlockingLP:
    """A stand-in for a ``pywraplp`` solver: ``Solve`` interrupts the main thread, then blocks until stopped."""

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def Solve(self) -> int:
        _thread.interrupt_main()
        self.stopped.wait(120.0)  # generous: InterruptSolve ends it at once
        return 7

    def InterruptSolve(self) -> bool:
        self.stopped.set()
        return True


def test_an_interrupt_stops_a_long_lp_and_goes_on() -> None:
    lp = BlockingLP()
    with pytest.raises(KeyboardInterrupt):
        solve_interruptibly(lp)
    assert lp.stopped.is_set()  # the LP was asked to stop, not left running while the process exits


def test_an_interrupt_during_the_transfer_flow_bound_keeps_the_heuristics_schedules(
    shared_benchmarks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow LP runs after the heuristics: interrupted there, the best schedule is verified and written, with the
    quick bounds (the run stops as interrupted, the status is feasible, not unknown)."""
    problem = read_placement_instance(shared_benchmarks / "placement" / "GoogLeNet.json")
    calls: list[float | None] = []

    def interrupted_flow(problem: object, upper: object = None, time_limit_s: float | None = None) -> float:
        calls.append(time_limit_s)
        raise KeyboardInterrupt

    monkeypatch.setattr(placement_solve, "transfer_flow", interrupted_flow)
    result = solve_placement(problem, PlacementSolveSettings(time_limit_s=300.0, threads=1))
    assert calls, "the transfer-flow bound did not run"
    assert result.stopped_by == "interrupt" and result.status == "feasible"
    assert result.objective is not None and result.bound is not None and 0 < result.bound <= result.objective
    assert "transfer_flow" not in result.solver_notes["bounds"]
    assert [h.name for h in result.heuristics][:2] == ["single-device", "heft"]
    report = verify_placement(problem, placement_solve.solution_of(problem, result))
    assert report.feasible and math.isclose(report.makespan, result.objective, rel_tol=1e-9)


def test_the_progress_line_names_the_phase_the_best_value_and_the_bound() -> None:
    from milp_partition.chain import Bound, Candidate

    budget = Budget(math.inf, 0.0, lambda: 12.5)
    run: Run[object, object] = Run(object(), object(), None, Result(problem="x", solver="cpsat"), budget)  # type: ignore[arg-type]
    ticker = PhaseTicker(run, "pipeline")
    assert ticker.line() is None  # no phase of the chain's own: the back-end prints
    run.phase = "model build"
    assert ticker.line() == "[pipeline]    12.5s  model build; no verified solution yet"
    run.candidates += [Candidate(7.0, object(), "a"), Candidate(5.0, object(), "b")]
    run.bounds.append(Bound(4.0, "load"))
    assert ticker.line() == "[pipeline]    12.5s  model build; best verified 5, bound 4"


def test_the_chain_names_each_phase_while_it_runs() -> None:
    """The phases the progress lines report are the ones running: bounds, heuristics, the model build."""
    from milp_partition.cluster import homogeneous_cluster
    from milp_partition.pipeline import solve as pipeline_solve
    from milp_partition.pipeline.generators import InceptionLikeSettings, inception_like
    from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings

    seen: list[str] = []

    class Watching(pipeline_solve.PipelineSteps):
        def bounds(self, run):  # type: ignore[no-untyped-def]
            seen.append(run.phase)
            return super().bounds(run)

        def heuristics(self, run):  # type: ignore[no-untyped-def]
            seen.append(run.phase)
            return super().heuristics(run)

        @property
        def formulation(self):  # type: ignore[no-untyped-def]
            outer = super().formulation

            class Build:
                def build(self, run):  # type: ignore[no-untyped-def]
                    seen.append(run.phase)
                    return outer.build(run)

                hint, decode = outer.hint, outer.decode

            return Build()

    from milp_partition.chain import chain_settings, run_chain

    problem = PipelineProblem(
        inception_like(1, InceptionLikeSettings(blocks=3)), homogeneous_cluster(2, None), PipelineSettings()
    )
    settings = pipeline_solve.SolveSettings(time_limit_s=30.0, threads=1)
    result = run_chain(Watching(settings), problem, chain_settings(settings))
    assert result.status == "optimal"
    assert seen == ["bounds", "heuristics", "model build"]
