"""The solve steps of the joint problem: baselines, the exact DP, the verifier, the status.

1. Index the problem and enumerate its ideals (:func:`~milp_partition.joint.dp.joint_data`).
2. Baselines (optional): all-data-parallel, PipeDream-2BW style, Piper style; each plan is verified.
3. The exact search (:func:`~milp_partition.joint.dp.search`): an exhaustive feasibility DP
   bisected on the target time per sample; it proves optimality (or infeasibility) or, at the time
   limit, leaves its best plan and a proven lower bound.
4. Every plan is re-checked by :func:`~milp_partition.verifiers.joint.verify_joint`; the objective
   reported is the verifier's time per sample (seconds); the steps run in the one chain,
   :func:`milp_partition.chain.run_chain`, whose policy :func:`milp_partition.chain.settle` decides the status (the exhaustive DP is an exact method: it proves optimality
   through its bound, or infeasibility, and no back-end runs).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from milp_partition.chain import (
    PROOF_REL_TOL,
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
from milp_partition.formulations import joint as formulation
from milp_partition.heuristics.joint_baselines import all_data_parallel, pipedream_2bw_style, piper_style
from milp_partition.heuristics.joint_orders import grouped_order_dp
from milp_partition.heuristics.joint_polish import polish_starts
from milp_partition.joint import beside, native
from milp_partition.joint.column_bound import ALL_STATES, PoolColumn, column_bound_report
from milp_partition.joint.dp import JointData, TooManyIdeals, joint_data, search
from milp_partition.joint.problem import JointPlan, JointProblem, JointShape, JointSolveSettings, plan_to_dict
from milp_partition.joint.segment_bound import segment_bound
from milp_partition.joint.stage_bound import sequences, stage_bound
from milp_partition.result import Result, Status, StopReason
from milp_partition.verifiers.joint import JointReport, verify_joint


@dataclass
class JointResult(Result):
    """A :class:`Result` with the plan's stages (pipeline order), each with its evaluated figures."""

    stages: list[dict[str, Any]] = field(default_factory=list)


#: the polisher's starts past the DP's cap: the best plan and the orders' last ones before it
POLISH_STARTS = 3

#: the starts of the polisher beside the column bound: the last plans of the orders' DP with every stage on one device.
#: Which plans those are depends on how many that DP finds in its seconds: on seven of seven at k = 16 the start that
#: polishes to 0.0090295 was third in some runs and fourth in others (one more plan found), whose three starts gave
#: 0.0091265 (2.13% above the bound, 1.08% with it).  From the same one-device plans, 35 s each, a fourth start
#: changed no result on nine k = 16 graphs (seven of seven among them) and recovers 0.0090295 where the plan that
#: gives it comes fourth; each start then has a quarter of the time, not a third (8.8 s on seven of seven), and in
#: the whole chain nine of five (seed 0) ended at 1.34% or 0.54% with four starts, 0.29% or 0.54% with three
BESIDE_STARTS = 4

#: where the stage bound cannot run (k = 16): the column bound's seconds from which the master with a row per state
#: runs after the all-states one (their columns handed over).  Its relaxation is tighter and slow: on seven branches of
#: six (seed 0, 2 GiB) it proved 0.0073548 after 181 s where the all-states one converges at 0.0073150 in 5 s (the
#: chain's plan 0.0074972: a gap of 1.9% against 2.4%); on eight of six it proved nothing more in 290 s.  Shorter
#: shares: bands of four (below), or the all-states master alone and then the polisher on the main process
#: (:meth:`JointSteps._polish_rest`).
ROW_PER_STATE_FROM_S = 240.0
#: ... and from which, in a shorter share, the master with a (link) row per band of four states runs after the
#: all-states one: on seven of six it converges at 0.0073523 after 43 s (one process, 0.0073398 with bands of eight
#: after 21 s, 0.0073579 with bands of two after 141 s).  A 60 s solve's share is about 35 s there: the chain at 60 s
#: proves 0.0073515 (gap 1.94% against 2.43% with the all-states master and the polisher after it); ten of four
#: (seed 1) 1.56% against 1.87%; on eight of six (seeds 0 and 2) and ten of four (seed 0) it proves no more than
#: the all-states master (2.21%, 1.75%, 0.95% against 2.21%, 1.69%, 0.96%: the main process's polishing it displaces
#: found nothing there either, the plans differ by the polisher's draw).
BANDS_OF_FOUR_FROM_S = 25.0

#: the shape of the second orders' DP past the DP's cap (:meth:`JointSteps._one_device_orders`): every stage on one
#: device; its plans are plans of the unforced problem
ONE_DEVICE = JointShape(data_parallel=1, tensor_parallel=1)

#: from this many ideals the exact DP's passes take seconds: the DP along topological orders runs first
ORDER_DP_FROM_IDEALS = 5_000


def stage_rows(plan: JointPlan, report: JointReport) -> list[dict[str, Any]]:
    """The ``stages`` list of the result JSON: the plan plus each stage's verified time, devices and memory."""
    rows = plan_to_dict(plan)
    for row, st in zip(rows, report.stages):
        row["time_per_sample_s"] = st.time_per_sample_s
        row["devices"] = st.devices
        row["memory_bytes"] = st.memory_bytes
        row["microbatches_in_flight"] = st.microbatches_in_flight
    return rows


JointRun = Run[JointProblem, JointPlan]


@dataclass
class JointState:
    """What the joint steps hand on within one run.

    ``data``: the indexed problem and its ideals (the baselines' and the exact search's input);
    ``too_many_ideals``: why it could not be built (the slot formulation runs instead).
    """

    data: JointData | None = None
    too_many_ideals: str | None = None
    #: every plan the orders' DP found that beat its best so far (the best last): starts of the polisher
    order_plans: list[tuple[JointPlan, float]] = field(default_factory=list)
    #: the same for the orders' DP with every stage on one device (:meth:`JointSteps._one_device_orders`): starts of
    #: the polisher beside the column bound
    one_device_plans: list[tuple[JointPlan, float]] = field(default_factory=list)
    #: whether the stage bound can run: the problem's stage sequences are few enough (:meth:`JointSteps._sequenced`)
    sequenced: bool | None = None
    #: past the DP's cap with two threads: the bounds computed beside the heuristics
    bounds_beside: beside.Beside[BesideBounds] | None = None
    #: whether they were started in this run (once a run)
    bounds_beside_started: bool = False
    #: past the DP's cap with two threads, where the stage bound cannot run: the polisher beside the column bound
    polish_beside: beside.Beside[tuple[JointPlan, float]] | None = None
    #: the best value when that polisher started (what its plan must beat)
    polish_beside_from: float = math.inf


@dataclass(frozen=True)
class BesideBounds:
    """The bounds computed beside the heuristics (:meth:`JointSteps._start_bounds_beside`): values and seconds.

    ``stage``: the stage bound, ``None`` where it cannot run (too many stage sequences); there ``column``: the
    column bound's master with one row for all states after the segment bound (``None``: not run), its seconds and
    its columns (the start of the column bound's master here).
    """

    segment: float
    segment_s: float
    stage: float | None = None
    stage_s: float = 0.0
    column: float | None = None
    column_s: float = 0.0
    columns: tuple[PoolColumn, ...] = ()


@dataclass(frozen=True)
class JointFormulation:
    """:mod:`milp_partition.formulations.joint` (the slot model) as a :class:`~milp_partition.chain.Formulation`."""

    settings: JointSolveSettings
    state: JointState

    def build(self, run: JointRun) -> Built[formulation.JointModel] | None:
        """The slot formulation, when asked for (``method="milp"``) or when the DP could not run."""
        if self.settings.method == "dp" and self.state.too_many_ideals is None:
            return None  # the DP ran: it is the exact method
        best = run.best
        cutoff = best.value if (best is not None and run.settings.warm_start) else None
        try:
            jm = formulation.build(run.work, upper_bound_s=None if cutoff is None else cutoff * (1 + 1e-9))
        except formulation.ModelTooLarge as exc:
            run.result.solver_notes["formulation"] = str(exc)
            run.say(f"[joint] {exc}")
            return None
        run.result.solver = f"joint-milp/{run.settings.solver}"
        return Built(jm.model, jm, None if cutoff is None else cutoff * (1 + 1e-9))

    def hint(self, built: Built[formulation.JointModel], run: JointRun, candidate: Candidate[JointPlan]) -> None:
        formulation.hint(built.state, candidate.solution, candidate.value)

    def decode(self, built: Built[formulation.JointModel], values: Sequence[float]) -> JointPlan:
        solution: JointPlan = formulation.decode(built.state, list(values))  # (typed here: plain mypy sees formulations/ as Any)
        return solution


@dataclass(frozen=True)
class JointSteps(StepDefaults[JointProblem, JointPlan]):
    """The joint problem's steps for :func:`milp_partition.chain.run_chain` (one object per run: it owns the run's state).

    Heuristics are the baselines; the refinement is the exhaustive DP search, an exact method
    (its bound is proven, its "no plan at any target" a proof of infeasibility); the slot
    formulation runs only with ``method="milp"`` or when the DP cannot.
    """

    settings: JointSolveSettings
    name: str = "joint"
    state: JointState = field(default_factory=JointState, compare=False)

    @property
    def formulation(self) -> JointFormulation:
        return JointFormulation(self.settings, self.state)

    def new_result(self, problem: JointProblem, settings: ChainSettings) -> Result:
        cl = problem.cluster
        result = JointResult(problem="joint", solver="joint-dp", objective_name="time_per_sample", time_unit="s")
        result.instance = {
            "source": problem.source,
            "nodes": len(problem.nodes),
            "edges": len(problem.edges),
            "degrees": list(problem.degrees),
            "devices": cl.device_count,
            "memory_bytes": problem.memory_bytes,
            "bandwidth_bytes_per_s": cl.bandwidth_bytes_per_s,
            "microbatches": problem.microbatches,
        }
        if problem.shape is not None:
            result.instance["shape"] = {
                "stages": problem.shape.stages,
                "data_parallel": problem.shape.data_parallel,
                "tensor_parallel": problem.shape.tensor_parallel,
            }
        result.settings = {
            "time_limit_s": settings.time_limit_s,
            "threads": settings.threads,
            "seed": settings.seed,
            "warm_start": settings.warm_start,
            "solver": settings.solver,
            "baselines": self.settings.baselines,
            "schedule": self.settings.schedule.as_dict(),
        }
        return result

    def verify(self, problem: JointProblem, solution: JointPlan) -> Evaluation[JointPlan]:
        rep = verify_joint(problem, solution)
        return Evaluation(rep.feasible, rep.objective, tuple(rep.violations), solution, rep)

    def heuristics(self, run: JointRun) -> Iterable[Outcome[JointPlan]]:
        """Index the problem (ideals), then the baselines: the cheap two always, Piper-style with ``baselines``.

        A forced shape that no plan can have is proven infeasible first, at once (:func:`shape_infeasibility`).
        """
        reason = shape_infeasibility(run.problem)
        if reason is not None:
            yield Outcome("forced-shape", None, 0.0, True, reason, infeasible=True)
            return
        try:
            data = joint_data(run.problem, self.settings.max_ideals)
            if self.settings.method == "dp" and native.too_large(data):
                raise TooManyIdeals(
                    f"the graph has {len(data.ideals):,} ideals, more than the DP's compiled passes take (at most "
                    f"{native.MAX_IDEALS:,}, with at most {native.MAX_PAIRS:,} pairs of ideals times degrees)"
                )
        except TooManyIdeals as exc:
            self.state.too_many_ideals = run.result.solver_notes["too_many_ideals"] = str(exc)
            run.say(f"[joint] {exc}: the exact DP cannot run; the slot formulation will")
            # the cheap baselines cut one topological order: its prefixes are all they need (never the search)
            data = joint_data(run.problem, prefixes_only=True)
        else:
            self.state.data = data
            run.result.solver_notes["ideals"] = len(data.ideals)
        jobs: list[tuple[str, Callable[[], tuple[JointPlan | None, float]]]] = [
            ("all-data-parallel", lambda: all_data_parallel(data, run.budget)),
            ("pipedream-2bw", lambda: pipedream_2bw_style(data, run.budget)),
        ]
        # the Piper-style warm start earns its time only where the exact passes run in numpy: the C passes
        # (milp_partition.joint.native) prove the optimum faster than it converges
        exact_in_c = self.settings.method == "dp" and native.applies(data)
        schedule = self.settings.schedule
        if self.settings.baselines and schedule.piper_style.runs and not data.prefixes_only and not exact_in_c:
            cap = schedule.piper_style.seconds(run.budget)
            jobs.append(("piper-style", lambda: piper_style(data, budget=run.budget.capped(cap))))
        # past the DP's cap, or where its passes are long (many pairs of ideals): the DP along topological orders
        # of one, then two (and three) groups of chains (heuristics/joint_orders.py) gives a plan near the
        # optimum: past the cap it warm-starts the slot formulation, below it the exact passes start close to it
        long_passes = not data.prefixes_only and len(data.ideals) >= ORDER_DP_FROM_IDEALS
        orders = schedule.orders if data.prefixes_only else schedule.orders_below_cap
        if (data.prefixes_only or long_passes) and orders.runs:
            order_cap = orders.seconds(run.budget)
            groups = (1, 2, 3) if data.prefixes_only else (1, 2)
            pool, single = self.state.order_plans, self.state.one_device_plans
            one_device = data.prefixes_only and self._one_device_orders(run)
            if one_device:  # half the orders' time each
                order_cap /= 2
            jobs.append(("order-dp", lambda: grouped_order_dp(run.problem, run.budget.capped(order_cap), groups, found=pool)))
            if one_device:
                forced = replace(run.problem, shape=ONE_DEVICE)
                jobs.append(
                    ("order-dp-one-device", lambda: grouped_order_dp(forced, run.budget.capped(order_cap), groups, found=single))
                )
        for name, fn in jobs:
            if name not in ("all-data-parallel", "pipedream-2bw"):
                self._start_bounds_beside(run, data)  # after the cheap plans: their best is the bounds' reference
            t0 = time.monotonic()
            try:
                plan, _ = fn()
            except KeyboardInterrupt:  # the orders' best so far counts; the chain settles on what it has
                found = {"order-dp": self.state.order_plans, "order-dp-one-device": self.state.one_device_plans}.get(name)
                kept = found[-1][0] if found else None
                yield Outcome(name, kept, time.monotonic() - t0, False, "interrupted", stopped_by="interrupt")
                return
            yield Outcome(name, plan, time.monotonic() - t0, False, "" if plan is not None else "no plan")
        self._start_bounds_beside(run, data)
        yield from self._polish(run, data)

    def _one_device_orders(self, run: JointRun) -> bool:
        """Past the DP's cap, where the polisher will run beside the column bound (:meth:`_start_polish_beside`: two
        threads, the stage bound cannot run) and no shape is forced: the orders' DP runs a second time, half the orders'
        time each, with every stage on one device (``d = t = 1``, :data:`ONE_DEVICE`), for the polisher beside to start
        from.  Those plans have many small stages and use every device without tensor parallelism, as the column
        bound's relaxation does; the polisher merges stages and re-chooses degrees, while from the orders' usual plans
        (fewer, larger stages) no move splits a stage that is not the slowest.  Offline, the chain's time split (orders,
        10 s polish, 35 s polish beside) on ten wide graphs at k = 16, the beside's starts from these orders instead of
        the usual ones: a better plan on eight, the same on one, 0.13% worse on one (eight of six seed 0: 0.0089731 ->
        0.0089392; seven of six 0.0074972 -> 0.0074698; eight of six seed 2 0.0088004 -> 0.0087180)."""
        return (
            run.problem.shape is None
            and self.settings.threads >= 2
            and self.settings.schedule.polish.runs
            and self.settings.schedule.column_bound.runs
            and beside.available()
            and not self._sequenced(run.problem)
        )

    def _sequenced(self, problem: JointProblem) -> bool:
        """Whether the stage bound can run on ``problem`` (at most its limit of stage sequences), counted once a run."""
        if self.state.sequenced is None:
            self.state.sequenced = sequences(problem) is not None
        return self.state.sequenced

    def _heuristics_s(self, run: JointRun) -> float:
        """The seconds the orders' DP and the polisher may take past the DP's cap (their caps together)."""
        schedule = self.settings.schedule
        return schedule.orders.seconds(run.budget) + schedule.polish.seconds(run.budget)

    def _start_bounds_beside(self, run: JointRun, data: JointData) -> None:
        """Past the DP's cap with two threads or more: the segment bound, then the stage bound, in a second process
        (:mod:`~milp_partition.joint.beside`) while the orders' DP and the polisher run here, for as long as they may
        take (at least the bounds' own cap).  Once per run; :meth:`_segment_bound` takes the values."""
        schedule = self.settings.schedule
        cap = schedule.bounds_seconds(run.budget)
        if (
            self.state.bounds_beside is not None
            or self.state.bounds_beside_started
            or not data.prefixes_only
            or self.settings.threads < 2
            or cap <= 0
            or not beside.available()
        ):
            return
        run.result.solver_notes["bounds_beside"] = True
        self.state.bounds_beside_started = True
        problem = run.problem
        budget = run.budget.capped(max(cap, self._heuristics_s(run)))
        lower = formulation.work_lower_bound_s(problem)
        upper = run.best.value if run.best is not None else math.inf
        staged = self._sequenced(problem)
        # where the stage bound cannot run, the column bound's all-states master has the rest (its columns start the
        # master after the heuristics: on eight of six at k = 16 it needs about 50 s to converge, more than its share)
        column = not staged and schedule.column_bound.runs and math.isfinite(upper)
        segment_s = schedule.segment_bound.seconds(run.budget)

        def both() -> BesideBounds:
            t0 = time.monotonic()
            seg = segment_bound(problem, lower, upper, budget.capped(segment_s) if staged or column else budget)
            t1 = time.monotonic()
            if column:
                report = column_bound_report(problem, seg, upper, budget, bands=(ALL_STATES,), keep_columns=True)
                return BesideBounds(seg, t1 - t0, column=report.bound, column_s=time.monotonic() - t1, columns=tuple(report.pool))
            if not staged:
                return BesideBounds(seg, t1 - t0)
            return BesideBounds(seg, t1 - t0, stage_bound(problem, seg, upper, budget), time.monotonic() - t1)

        self.state.bounds_beside = beside.Beside(both)

    def _polish(self, run: JointRun, data: JointData) -> Iterable[Outcome[JointPlan]]:
        """Past the DP's cap: local search (heuristics/joint_polish.py) from the best plan so far, then from the orders'
        last few before their best (local optima differ by start), within ``schedule.polish``.

        The chain adds the plans above one by one, so ``run.best`` is the best verified one when this runs.
        """
        best = run.best
        if not data.prefixes_only or best is None or not self.settings.schedule.polish.runs:
            return
        starts = [best.solution]
        for plan, _ in reversed(self.state.order_plans):
            if len(starts) < POLISH_STARTS and all(plan != other for other in starts):
                starts.append(plan)
        cap = self.settings.schedule.polish.seconds(run.budget)
        yield from self._polished(run, "polish", starts, cap, 0, f", the best from {best.source}")

    def _polished(
        self, run: JointRun, name: str, starts: list[JointPlan], seconds: float, seed: int, what: str
    ) -> Iterable[Outcome[JointPlan]]:
        """:func:`~milp_partition.heuristics.joint_polish.polish_starts` here for ``seconds``: its plan where better
        than the best so far (an outcome ``name``, its figures in the notes under ``name`` with ``_``)."""
        best = run.best
        assert best is not None, "polishing needs a plan"
        t0 = time.monotonic()
        plan, value = polish_starts(run.problem, starts, run.budget.capped(seconds), seed)
        better = value < best.value
        note = f"{len(starts)} starts{what}" + ("" if better else ": no better plan found")
        run.result.solver_notes[name.replace("-", "_")] = {
            "from": best.value,
            "to": value,
            "starts": len(starts),
            "seconds": time.monotonic() - t0,
        }
        yield Outcome(name, plan if better else None, time.monotonic() - t0, False, note)

    def _start_polish_beside(self, run: JointRun, seconds: float) -> bool:
        """With two threads or more, where the stage bound cannot run (k = 16 and the like): the polisher again, in a
        second process for the ``seconds`` the column bound takes here, from the last few plans of the orders' DP with
        every stage on one device (:meth:`_one_device_orders`), or where it found none the orders' usual last few (the
        polisher's starts but the best: its kicks from the polished best found nothing better in 35 s on eight of six
        and ten of four at k = 16, from the orders' plans they found 0.4% and 0.7%).  There the bound's masters gain
        little from a pricing partner, and a better plan narrows the gap as much as a better bound.  ``False``: not
        started."""
        best = run.best
        if self.settings.threads < 2 or not self.settings.schedule.polish.runs or best is None or not beside.available():
            return False
        one_device = [plan for plan, _ in reversed(self.state.one_device_plans)][:BESIDE_STARTS]
        starts = one_device or self._order_starts(best.solution)
        problem, budget = run.problem, run.budget.capped(seconds)
        self.state.polish_beside = beside.Beside(lambda: polish_starts(problem, starts, budget))
        run.result.solver_notes["polish_beside"] = {"from": best.value, "starts": len(starts), "one_device": bool(one_device)}
        self.state.polish_beside_from = best.value
        return True

    def _order_starts(self, best: JointPlan) -> list[JointPlan]:
        """The orders' last :data:`POLISH_STARTS` plans (their best first), or ``best`` where they found none."""
        return [plan for plan, _ in reversed(self.state.order_plans)][:POLISH_STARTS] or [best]

    def _polish_rest(self, run: JointRun, until: float) -> Iterable[Outcome[JointPlan]]:
        """Where the stage bound cannot run: once the column bound's master has converged, the polisher here until
        ``until`` (monotonic seconds, the end of the column bound's share), from the orders' last few plans with other
        kicks than the first polish's and the one beside (seed 1; the results of one start vary by seed: on ten of
        four 0.0071223 or 0.0071717, 0.0074453 or 0.0073533)."""
        best = run.best
        seconds = min(until - time.monotonic(), run.budget.left())
        if best is None or not self.settings.schedule.polish.runs or seconds < 1.0:
            return
        yield from self._polished(run, "polish-rest", self._order_starts(best.solution), seconds, 1, " after the column bound")

    def _take_polish_beside(self, run: JointRun) -> Iterable[Outcome[JointPlan]]:
        """The plan of :meth:`_start_polish_beside` (its budget ended with the column bound's), for the chain to verify."""
        side, self.state.polish_beside = self.state.polish_beside, None
        if side is None:
            return
        t0 = time.monotonic()
        got = side.result(max(1.0, min(5.0, run.budget.left())))
        if got is None:
            run.result.solver_notes["polish_beside"]["to"] = "no answer in time"
            return
        plan, value = got
        run.result.solver_notes["polish_beside"]["to"] = value
        better = value < self.state.polish_beside_from
        note = "polished beside the column bound" + ("" if better else ": no better plan found")
        yield Outcome("polish-beside", plan if better else None, time.monotonic() - t0, False, note)

    def refine(self, run: JointRun) -> Iterable[Outcome[JointPlan]]:
        """The exact search: an exhaustive feasibility DP bisected on the target time per sample, within what is left.

        Where the graph has too many ideals for the DP, the segment bound instead (a proven bound, no plan).
        """
        if self.state.too_many_ideals is not None:
            yield from self._segment_bound(run)
        data = self.state.data
        if data is None or self.settings.method == "milp":
            return
        best = run.best
        upper = best.value if best is not None else math.inf
        t0 = time.monotonic()
        # the verifier's value may differ from the DP's arithmetic in the last bits: start a hair above it
        found = search(data, budget=run.budget, upper_s=upper * (1 + 1e-9), progress=_say(self.settings))
        seconds = time.monotonic() - t0
        run.result.solver_seconds = seconds
        run.result.solver_notes.update(
            {
                "passes": found.passes,
                "timed_out": found.timed_out and not found.interrupted,
                "dp_value": found.value,
                "dp_pass": "c" if native.applies(data) else "numpy",
            }
        )
        stopped: StopReason | None = None
        if found.interrupted:  # the chain takes the plan and the bound, then settles on them
            stopped = "interrupt"
        elif found.timed_out:
            stopped = "time_limit"
        yield Outcome(
            "joint-dp",
            found.plan,
            seconds,
            True,
            "exhaustive" if not found.timed_out else ("interrupted" if found.interrupted else "time limit reached"),
            bound=found.bound if math.isfinite(found.bound) else None,  # 0 too: an optimum of 0 is proven like any other
            infeasible=found.infeasible,
            stopped_by=stopped,
        )

    def _segment_bound(self, run: JointRun) -> Iterable[Outcome[JointPlan]]:
        """Proven bounds from the work bound up to the best plan's value, past the DP's cap, each from the last.

        Each within its phase of ``settings.schedule`` (:class:`~milp_partition.joint.schedule.JointSchedule`):
        :func:`~milp_partition.joint.segment_bound.segment_bound` first (``segment_bound``), then, with a plan to
        start from, :func:`~milp_partition.joint.column_bound.column_bound` (``column_bound``, a share of what is
        left: the slot formulation has the rest; where it proves no target within that share of what is left less
        the stage bound's it stops there), whose integer paths may be better plans, then, where the column bound
        proved no target, :func:`~milp_partition.joint.stage_bound.stage_bound` (``stage_bound``; its share goes to
        the segment bound where the problem has more stage sequences than
        :data:`~milp_partition.joint.stage_bound.MAX_SEQUENCES`: the stage bound cannot run there).

        With two threads or more (``threads``) the segment and stage bounds have run beside the heuristics instead
        (:meth:`_start_bounds_beside`; their values are taken here), and the column bound prices with a second
        process (``workers=2`` of :func:`~milp_partition.joint.column_bound.column_bound_report`); where no stage
        bound follows it, it has ``column_bound_last_share`` of what is left.
        """
        schedule = self.settings.schedule
        lower = formulation.work_lower_bound_s(run.problem)
        upper = run.best.value if run.best is not None else math.inf
        bound = lower
        sequenced = self._sequenced(run.problem)
        staged = schedule.stage_bound.runs and sequenced
        column = schedule.column_bound.runs and math.isfinite(upper)
        workers = 2 if self.settings.threads >= 2 else 1
        got = None
        if self.state.bounds_beside is not None:
            side, self.state.bounds_beside = self.state.bounds_beside, None
            # its budget ends with the heuristics' caps: a wait here only where they ended early
            got = side.result(run.budget.left())
            if got is None:
                run.result.solver_notes["bounds_beside"] = "no answer in time"
        if got is not None:
            note = "a proven bound, no plan (computed beside the heuristics)"
            bound = max(bound, got.segment)
            run.result.solver_notes["segment_bound"] = got.segment
            yield Outcome("segment-bound", None, got.segment_s, False, note, bound=got.segment)
            if got.column is not None:
                bound = max(bound, got.column)
                run.result.solver_notes["column_bound_beside"] = {"bound": got.column, "columns": len(got.columns)}
                yield Outcome("column-bound-beside", None, got.column_s, False, note, bound=got.column)
            if got.stage is None:
                run.result.solver_notes["stage_bound"] = "not run: too many stage sequences"
            else:
                bound = max(bound, got.stage)
                run.result.solver_notes["stage_bound"] = got.stage
                yield Outcome("stage-bound", None, got.stage_s, False, note, bound=got.stage)
            staged = False  # done
        elif schedule.segment_bound.runs:
            t0 = time.monotonic()
            # where the stage bound cannot run, the segment bound has its share too
            seconds = schedule.segment_bound.seconds(run.budget) if staged else schedule.bounds_seconds(run.budget)
            bound = segment_bound(run.problem, lower, upper, run.budget.capped(seconds))
            run.result.solver_notes["segment_bound"] = bound
            yield Outcome("segment-bound", None, time.monotonic() - t0, False, "a proven bound, no plan", bound=bound)
            if not staged:
                run.result.solver_notes["stage_bound"] = "not run: too many stage sequences"
        stage_share = schedule.stage_bound.seconds(run.budget) if staged else 0.0
        proven = math.isfinite(upper) and bound >= upper * (1 - PROOF_REL_TOL)  # the chain calls that optimal
        if column and not proven:
            t1 = time.monotonic()
            # (the slot formulation has the rest; more of what is left goes to the column bound where no stage bound follows)
            seconds = schedule.column_bound.seconds(run.budget, None if staged else schedule.column_bound_last_share)
            if not sequenced and self._start_polish_beside(run, seconds):
                workers = 1  # the second core polishes
            # it gives the stage bound's share back where it proves no target in the rest of its own
            give_up = min(seconds, schedule.column_bound.share * max(0.0, run.budget.left() - stage_share)) if staged else seconds
            report = column_bound_report(
                run.problem,
                bound,
                upper,
                run.budget.capped(seconds),
                progress=_say(self.settings),
                give_up_s=give_up,
                workers=workers,
                bands=_bands(sequenced, seconds),
                columns=got.columns if got is not None else (),
            )
            run.result.solver_notes["column_bound"] = report.bound
            run.result.solver_notes["column_bound_targets"] = {"proven": len(report.proven), "refuted": len(report.refuted)}
            run.result.solver_notes["column_bound_bands"] = [list(x) for x in report.by_band]
            for plan in report.plans:  # integer paths of its columns (the chain verifies them)
                yield Outcome("column-path", plan, time.monotonic() - t1, False, "a path of the column bound's stages")
            unproven = run.best is not None and report.bound < run.best.value * (1 - PROOF_REL_TOL)
            if not sequenced and unproven:
                yield from self._polish_rest(run, t1 + seconds)  # the rest of the column bound's time polishes here
            yield from self._take_polish_beside(run)
            yield Outcome("column-bound", None, time.monotonic() - t1, False, "a proven bound, no plan", bound=report.bound)
            if report.proven:
                return  # the stage bound's relaxation is weaker
            bound = max(bound, report.bound)
        if staged:
            t2 = time.monotonic()
            upper = run.best.value if run.best is not None else math.inf
            value = stage_bound(run.problem, bound, upper, run.budget.capped(stage_share))
            run.result.solver_notes["stage_bound"] = value
            yield Outcome("stage-bound", None, time.monotonic() - t2, False, "a proven bound, no plan", bound=value)

    def record(self, result: Result, problem: JointProblem, best: Candidate[JointPlan]) -> None:
        rep = best.report or verify_joint(problem, best.solution)
        assert isinstance(result, JointResult)
        result.stages = stage_rows(best.solution, rep)
        result.time_per_sample = best.value
        result.memory_bytes = {f"stage {q + 1}": st.memory_bytes for q, st in enumerate(rep.stages)}
        result.loads = {f"stage {q + 1}": st.time_per_sample_s for q, st in enumerate(rep.stages)}
        result.peak_memory_bytes = max(st.memory_bytes for st in rep.stages)


def _bands(sequenced: bool, seconds: float) -> tuple[int, ...]:
    """The column bound's masters (:func:`~milp_partition.joint.column_bound.column_bound_report`'s ``bands``) for a
    share of ``seconds``: a row per state where the stage bound can run; where it cannot (k = 16), the master with one
    row for all states (it converges in seconds there), then the one with a row per state where the share is at least
    :data:`ROW_PER_STATE_FROM_S`, else the one with a row per band of four states where it is at least
    :data:`BANDS_OF_FOUR_FROM_S` (docs/joint.md, "Bands of states")."""
    if sequenced:
        return (1,)
    if seconds >= ROW_PER_STATE_FROM_S:
        return (ALL_STATES, 1)
    return (ALL_STATES, 4) if seconds >= BANDS_OF_FOUR_FROM_S else (ALL_STATES,)


def _say(settings: JointSolveSettings) -> Callable[[str], None] | None:
    if settings.progress_interval_s is None:
        return None
    return lambda text: print(text, file=sys.stderr, flush=True)


def shape_infeasibility(problem: JointProblem) -> str | None:
    """Why no plan has the forced shape, when counting alone proves it (``None``: counting proves nothing).

    A plan has at least one node in each stage, uses ``sum d*t`` devices (at most the cluster's) and ``sum d``
    micro-batch slots (at most N), and each d divides N (the verifier's rules); a forced shape fixes the number of
    stages and, where given, every stage's d and t, so each stage needs at least ``d*t`` devices (1 when free).
    """
    shape = problem.shape
    if shape is None:
        return None
    cl = problem.cluster
    d = shape.data_parallel or 1
    t = shape.tensor_parallel or 1
    if shape.data_parallel is not None and problem.microbatches % shape.data_parallel:
        return f"the forced data-parallel degree {shape.data_parallel} does not divide the {problem.microbatches} micro-batches"
    if shape.stages is None:
        if d * t > cl.device_count:
            return f"the forced degrees d*t = {d * t} need more than the cluster's {cl.device_count} devices"
        return None
    if shape.stages > len(problem.nodes):
        return f"{shape.stages} forced stages need at least as many layers; the graph has {len(problem.nodes)}"
    if shape.stages * d * t > cl.device_count:
        return f"{shape.stages} forced stages of d*t = {d * t} need {shape.stages * d * t} devices; the cluster has {cl.device_count}"
    if shape.stages * d > problem.microbatches:
        return f"{shape.stages} forced stages of d = {d} need {shape.stages * d} micro-batches; there are {problem.microbatches}"
    return None


def solve_joint(problem: JointProblem, settings: JointSolveSettings | None = None) -> JointResult:
    """Solve the joint problem through the one chain: proven optimal, proven infeasible, or the best verified plan with a proven bound."""
    settings = settings or JointSolveSettings()
    steps = JointSteps(settings)
    try:
        result = run_chain(steps, problem, chain_settings(settings))
    finally:
        for side in (steps.state.bounds_beside, steps.state.polish_beside):
            if side is not None:  # the run ended before it took the answer (an interrupt, an error)
                side.stop()
    assert isinstance(result, JointResult)
    if not result.solver.startswith("joint-milp"):
        # past the DP's cap a plan proven before the formulation ran: the orders' plan, the bounds' proof
        result.solver = "joint-wide" if steps.state.too_many_ideals is not None else "joint-dp"
    if result.status is Status.UNKNOWN and steps.state.too_many_ideals is not None:
        result.message = (
            "the graph has more ideals than --max-ideals allows, the baselines found no plan and the formulation found "
            "none; raise --max-ideals"
        )
    return result
