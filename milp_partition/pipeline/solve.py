"""The pipeline problem's steps in the one solve chain (:mod:`milp_partition.chain`).

Heuristics: the chain DP and the ideal DP of :mod:`milp_partition.heuristics.pipeline_dp`
(neither is a proof: the ideal DP is exact only among splits whose stages form a
chain of ideals), which stop at :data:`DP_BUDGET_SHARE` of the time limit and refuse
graphs too large for their quadratic tables; then, when neither found a split, the
balanced split of :mod:`milp_partition.heuristics.pipeline_split` (seconds at 100,000
nodes).  Formulation: :mod:`milp_partition.formulations.pipeline`, with the
best verified heuristic value as a cutoff and its split as a warm start.
Verifier: :func:`milp_partition.verifiers.pipeline.verify_pipeline`, whose value is
the one reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from milp_partition.budget import Budget
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
    run_chain,
)
from milp_partition.formulations import pipeline as formulation
from milp_partition.heuristics.pipeline_dp import DPResult, IdealDPSettings, chain_dp, ideal_dp
from milp_partition.heuristics.pipeline_split import balanced_split
from milp_partition.io.native import cluster_to_dict
from milp_partition.pipeline.costs import colocation_classes, drop_relays, load_bound, per_edge_graph
from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution
from milp_partition.result import Result, Status
from milp_partition.settings import CommonSettings
from milp_partition.verifiers.pipeline import verify_pipeline


@dataclass(frozen=True)
class SolveSettings(CommonSettings):
    """How to solve: the common settings (:class:`~milp_partition.settings.CommonSettings`: ``solver``,
    ``time_limit_s``, ``threads``, ``seed``, ``warm_start``, ``progress_interval_s``) and the pipeline's own.

    Attributes
    ----------
    heuristics
        Run the DPs at all.
    max_ideals
        Cap of the ideal DP.
    symmetry_breaking, lower_bounds
        Formulation options (they never change the optimum).
    """

    heuristics: bool = True
    max_ideals: int = 20000
    symmetry_breaking: bool = True
    lower_bounds: bool = True


#: Share of the time limit the DPs may use; the rest is for the fallback split and the back-end.
DP_BUDGET_SHARE = 0.5


#: Past this many assignment variables (colocation classes x devices) the model is not built: 20,000 nodes on 4,096
#: devices would be 82 million, arrays of gigabytes before the first row (a 20,000-node chain on 8 devices, 160,000,
#: takes about 25 s to build and 75 s more to translate for CP-SAT on a shared 2-core machine).
MAX_ASSIGNMENT_VARIABLES = 4_000_000


PipelineRun = Run[PipelineProblem, PipelineSolution]


@dataclass(frozen=True)
class PipelineFormulation:
    """:mod:`milp_partition.formulations.pipeline` as a :class:`~milp_partition.chain.Formulation`."""

    settings: SolveSettings

    def build(self, run: PipelineRun) -> Built[formulation.PipelineModel] | None:
        """The model, or None when the budget ran out while it was built (the chain settles on what it verified)."""
        best = run.best
        cutoff = best.value if (best is not None and run.settings.warm_start) else None
        problem = run.work
        size = (int(colocation_classes(problem.graph).max(initial=-1)) + 1) * len(problem.device_ids)
        if size > MAX_ASSIGNMENT_VARIABLES:
            run.result.solver_notes["model_skipped"] = size
            run.say(
                f"[pipeline] the model would have {size:,} assignment variables (classes x devices), more than the "
                f"{MAX_ASSIGNMENT_VARIABLES:,} a solver takes: no exact solve, the heuristics' plan and the load bound stand"
            )
            return None
        try:
            pm = formulation.build(
                run.work,
                upper_bound=cutoff,
                settings=formulation.PipelineFormulationSettings(self.settings.symmetry_breaking, self.settings.lower_bounds),
                budget=run.budget,
            )
        except TimeoutError:
            run.stop("time_limit")
            run.say("[pipeline] the time limit ran out while the model was built: no exact solve")
            return None
        return Built(pm.model, pm, cutoff)

    def hint(self, built: Built[formulation.PipelineModel], run: PipelineRun, candidate: Candidate[PipelineSolution]) -> None:
        formulation.hint(built.state, candidate.solution, candidate.value)

    def decode(self, built: Built[formulation.PipelineModel], values: Sequence[float]) -> PipelineSolution:
        solution: PipelineSolution = formulation.decode(
            built.state, list(values)
        )  # (typed here: plain mypy sees formulations/ as Any)
        return solution


@dataclass(frozen=True)
class PerEdgeMessages:
    """``messages="per_edge"`` as the older per-source-node pricing of a graph with relay nodes
    (:func:`~milp_partition.pipeline.costs.per_edge_graph`), as a :class:`~milp_partition.chain.Reduction`: the
    searches run on that graph, every split is lifted back (relay nodes dropped) and verified per edge on the
    problem as given."""

    name: str = "per_edge_messages"

    def apply(self, problem: PipelineProblem) -> tuple[PipelineProblem, frozenset[str]]:
        return per_edge_graph(problem)

    def invert(self, solution: PipelineSolution, inverse_data: frozenset[str]) -> PipelineSolution:
        return drop_relays(solution, inverse_data)

    def notes(self, reduced: PipelineProblem) -> dict[str, Any]:
        return {"nodes with relays": len(reduced.graph.nodes), "edges with relays": len(reduced.graph.edges)}


@dataclass(frozen=True)
class PipelineSteps(StepDefaults[PipelineProblem, PipelineSolution]):
    """The pipeline problem's steps for :func:`milp_partition.chain.run_chain` (no state: no step hands anything on)."""

    settings: SolveSettings
    name: str = "pipeline"

    @property
    def formulation(self) -> PipelineFormulation:
        return PipelineFormulation(self.settings)

    def new_result(self, problem: PipelineProblem, settings: ChainSettings) -> Result:
        return Result(
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
                # the cluster solved for: `evaluate GRAPH RESULT` reads it where the graph carries none (issue 43 item 15)
                "cluster": cluster_to_dict(problem.cluster),
                # how the edges were priced: every transfer from the cluster's link, or some from the file's times
                "transfers": "link" if all(e.transfer_time is None for e in problem.graph.edges) else "file",
            },
            settings={**asdict(problem.settings), **{f"solve.{k}": v for k, v in asdict(self.settings).items()}},
        )

    def reductions(self, run: PipelineRun) -> Sequence[PerEdgeMessages]:
        """Per-edge messages (an imported graph) as relay nodes; none otherwise."""
        return (PerEdgeMessages(),) if run.problem.settings.messages == "per_edge" else ()

    def bounds(self, run: PipelineRun) -> Iterable[Bound]:
        """The time objective's load bound (:func:`~milp_partition.pipeline.costs.time_lower_bound`): it gives a gap
        when the time limit ends the run before a model is solved (a graph of many thousand nodes)."""
        if run.work.settings.objective != "time":
            return
        value = load_bound(run.work)
        if math.isfinite(value) and value > 0:
            yield Bound(value, "load_bound")

    def verify(self, problem: PipelineProblem, solution: PipelineSolution) -> Evaluation[PipelineSolution]:
        report = verify_pipeline(problem, solution)
        return Evaluation(report.feasible, report.objective, tuple(report.violations), report=report)

    def heuristics(self, run: PipelineRun) -> Iterable[Outcome[PipelineSolution]]:
        """The chain DP and the ideal DP (heuristics here: neither proves a bound of the problem), then the balanced
        split when neither found a split; the DPs within :data:`DP_BUDGET_SHARE` of the run's budget, the split within
        the whole of it."""
        if not self.settings.heuristics:
            return
        problem = run.work
        timed = problem.settings.objective == "time"
        # under the memory objective the split balances time all the same: the verifier scores its peak memory and
        # checks the time bound (a 20,000-node graph had no answer at all under --objective memory)
        split_problem = problem if timed else replace(problem, settings=replace(problem.settings, objective="time"))
        dp_deadline = run.budget.share(DP_BUDGET_SHARE).deadline()
        deadline = run.budget.deadline()
        found = False
        jobs: tuple[tuple[str, Callable[[], DPResult]], ...] = (
            ("chain_dp", lambda: chain_dp(problem, dp_deadline)),
            ("ideal_dp", lambda: ideal_dp(problem, IdealDPSettings(self.settings.max_ideals), dp_deadline)),
            ("balanced_split", lambda: balanced_split(split_problem, deadline)),
        )
        dp_budget = run.budget.share(DP_BUDGET_SHARE)
        for name, fn in jobs:
            if name == "balanced_split" and found:
                continue  # the fallback for graphs the DPs cannot take (or finish)
            if name != "balanced_split" and dp_budget.expired():  # its setup alone takes seconds on a large cluster
                yield Outcome(name, None, 0.0, False, "not run: the DPs' share of the time limit is spent")
                continue
            dp = fn()
            found = found or dp.solution is not None
            own_value = dp.solution is not None and (timed or name != "balanced_split")
            yield Outcome(name, dp.solution, dp.seconds, dp.exact, dp.message, value=dp.value if own_value else None)

    def record(self, result: Result, problem: PipelineProblem, best: Candidate[PipelineSolution]) -> None:
        report = best.report or verify_pipeline(problem, best.solution)
        result.assignment = dict(best.solution.assignment)
        result.time_per_sample = report.time_per_sample
        result.peak_memory_bytes = report.peak_memory_bytes
        result.loads = report.loads
        result.memory_bytes = report.memory_bytes


def solve_pipeline(problem: PipelineProblem, settings: SolveSettings = SolveSettings(), budget: Budget | None = None) -> Result:
    """Solve ``problem`` through the one chain and return a verified :class:`Result`.

    ``budget``: the run's time budget when it began before the solve (the command line starts it before it reads the
    instance, so reading and expanding a large file count against ``--time-limit``); by default
    ``settings.time_limit_s`` from now.
    """
    result = run_chain(PipelineSteps(settings), problem, chain_settings(settings), budget)
    if result.status is Status.INFEASIBLE:
        result.message = "proven infeasible: no assignment meets every constraint" + _infeasibility_hint(problem)
    skipped = result.solver_notes.get("model_skipped")
    if skipped and result.status is not Status.OPTIMAL:
        result.message += (
            f"; no exact solve: the model would have {skipped:,} assignment variables, over {MAX_ASSIGNMENT_VARIABLES:,}"
        )
    return result


def _infeasibility_hint(problem: PipelineProblem) -> str:
    """A reason a person can act on, when a simple one exists."""
    caps = [d.memory_bytes for d in problem.cluster.devices if d.memory_bytes is not None]
    if problem.cluster.host_cpu_cores != 0 or not caps or len(caps) != len(problem.cluster.devices):
        return ""
    if problem.settings.memory_model != "static":
        return ""
    need = {nd.id: nd.param_bytes + nd.activation_bytes + nd.other_bytes for nd in problem.graph.nodes}
    if sum(need.values()) > sum(caps):
        return f" (the graph needs {sum(need.values())} bytes in all, the accelerators hold {sum(caps)})"
    if need:
        biggest = max(need, key=lambda k: need[k])
        if need[biggest] > max(caps):
            return f" (node {biggest!r} alone needs {need[biggest]} bytes, more than any accelerator's {max(caps)})"
    return ""
