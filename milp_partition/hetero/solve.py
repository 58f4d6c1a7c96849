"""The solve steps of the heterogeneous problem, plugged into :func:`milp_partition.chain.run_chain`.

1. Heuristics: uniform plans (one replica configuration for every replica, even split) and Sailor-style plans
   (even split, one configuration per stage, :mod:`milp_partition.heuristics.hetero_even`), verified.
2. Refine: the exact branch and bound (:func:`milp_partition.hetero.search.search`): its plan, and a proven
   bound (equal to the plan's value when the search ran to the end with no unresolved leaf).
3. Every plan is re-checked by :func:`milp_partition.verifiers.hetero.verify_hetero` on its Sailor-format dict.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from milp_partition.chain import (
    Candidate,
    ChainSettings,
    Evaluation,
    Outcome,
    Run,
    StepDefaults,
    chain_settings,
    gap_of,
    run_chain,
)
from milp_partition.hetero.pool import device_split, groupings, poolable
from milp_partition.hetero.pooled import pooled_bound, regional_plan, split_bound
from milp_partition.hetero.problem import HeteroPlan, HeteroProblem, plan_to_sailor
from milp_partition.hetero.search import search
from milp_partition.heuristics.hetero_even import best_even_plan, best_uniform_plan
from milp_partition.result import Result
from milp_partition.settings import SearchOnlySettings
from milp_partition.verifiers.hetero import verify_hetero


@dataclass
class HeteroResult(Result):
    sailor_plan: dict[str, Any] = field(default_factory=dict)
    throughput_it_s: float | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)


HeteroRun = Run[HeteroProblem, HeteroPlan]

#: Share of the time limit the pooled relaxations may use together (their searches stop there; the exact search has
#: the rest: on the four- and five-column settings it never improved the plan or the bound in the time left, while
#: gptneo-a128x2-v128x2-b2048's pooled search needs ~50 CPU s to finish).
POOL_SHARE = 0.9
#: Where the pooled steps leave less than this share of the limit (and the plan is not within the stop gap), the exact
#: search over the zones is not started.
EXACT_MIN_SHARE = 0.2
#: Within the stop gap, the exact search's short try (``pool_stop_search_s``) runs only on settings of at most this many
#: devices: on tiny ones it proves the optimum in milliseconds; on the held-back settings of 32-640 devices over four or
#: five columns it never finished (on opt350-a8x2-v8x2-b512 its 0.2 s only listed the triples, no node: a fifth of the
#: solve).
STOP_SEARCH_MAX_DEVICES = 16
#: Share of the time limit of the regional plans (each region alone, pooled and lifted) before the pooled relaxations,
#: where the columns span two regions or more.
REGIONAL_SHARE = 0.15


@dataclass(frozen=True)
class HeteroSolveSettings(SearchOnlySettings):
    """How :func:`solve_hetero` works: the common settings (:class:`~milp_partition.settings.CommonSettings`; of them
    the search reads ``time_limit_s`` and ``progress_interval_s``: ``solver`` must stay ``"none"``) and its own.

    Attributes
    ----------
    heuristics
        Run the uniform plans and the Sailor-style even split first (their best is the branch and bound's first
        incumbent).
    pool
        Where a kind has devices in several zones, solve the pooled relaxation first (:mod:`milp_partition.hetero.pool`,
        at most :data:`POOL_SHARE` of the time limit together): its plan lifted to the zones joins the incumbents, its proven
        bound the bounds.
    pool_stop_gap
        Once the best verified plan is within this relative gap of the best proven bound after a pooled relaxation,
        ``(value - bound) / value <= pool_stop_gap`` (issue 40's bar: optimal or within 1 %), no further pooled
        relaxation runs and the exact search gets at most ``pool_stop_search_s`` (a small setting's full proof; else
        the answer is ``feasible`` with the pooled bound and its gap).  With one kind in two regions or more, the
        region search of the plans of more devices than the larger region's prunes at this gap below the best plan
        (:func:`milp_partition.hetero.pooled.split_bound`): it proves the bar, not the closest bound.  ``0``: the
        exact search gets the rest of the time limit (and the region search proves the bound up to the best plan).
    pool_stop_search_s
        The exact search's seconds after the pooled relaxations reached ``pool_stop_gap`` (at least 0; 0: no exact
        search), on settings of at most :data:`STOP_SEARCH_MAX_DEVICES` devices (none on larger ones).
    """

    pool: bool = True
    pool_stop_gap: float = 0.01
    pool_stop_search_s: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.pool_stop_gap, (int, float)) and 0 <= self.pool_stop_gap < 1):
            raise ValueError(f"pool_stop_gap must be at least 0 and below 1, got {self.pool_stop_gap!r}")
        if not (isinstance(self.pool_stop_search_s, (int, float)) and self.pool_stop_search_s >= 0):
            raise ValueError(f"pool_stop_search_s must be 0 or more seconds, got {self.pool_stop_search_s!r}")


def _heuristic_note(run: HeteroRun, plan: HeteroPlan | None, name: str) -> str:
    """The outcome's message of a heuristic: why it has no plan, or that the time limit cut it short."""
    if run.budget.expired():
        return "time limit reached"
    return "" if plan is not None else f"no {name} plan fits"


@dataclass(frozen=True)
class HeteroSteps(StepDefaults[HeteroProblem, HeteroPlan]):
    """Steps for :func:`milp_partition.chain.run_chain` (no formulation: the branch and bound proves)."""

    settings: HeteroSolveSettings = field(default_factory=HeteroSolveSettings)
    name: str = "hetero"

    @property
    def formulation(self) -> None:
        return None

    def new_result(self, problem: HeteroProblem, settings: ChainSettings) -> Result:
        r = HeteroResult(problem="hetero", solver="hetero-bnb", objective_name="iteration_time", time_unit="s")
        r.instance = {
            "setting": problem.setting,
            "source": problem.source,
            "model": problem.model.name,
            "global_batch": problem.global_batch,
            "objective": problem.objective,
            "gpus": {c.label: c.count for c in problem.cluster.columns},
        }
        return r

    def verify(self, problem: HeteroProblem, solution: HeteroPlan) -> Evaluation[HeteroPlan]:
        rep = verify_hetero(problem, plan_to_sailor(solution))
        return Evaluation(
            rep.feasible, rep.iteration_s if rep.iteration_s is not None else math.inf, tuple(rep.violations), solution, rep
        )

    def heuristics(self, run: HeteroRun) -> Iterable[Outcome[HeteroPlan]]:
        if not self.settings.heuristics:
            return
        if self.settings.pool and poolable(run.problem) and device_split(run.problem) is not None:
            # the split by devices (:meth:`split_step`) starts its capped pool from its own uniform plan (built even with
            # no time left) and lifts the pool's optimum: on the five-zone settings the heuristics over every zone gave
            # plans 3-12 % slower than that lift, in 0.07-0.25 CPU s, a quarter of the whole solve
            run.result.solver_notes["heuristics"] = "not run: the split by devices plans from its capped pool"
            return
        t0 = time.monotonic()
        best, best_v = best_uniform_plan(run.problem, budget=run.budget)
        yield Outcome(
            "uniform", best, time.monotonic() - t0, False, _heuristic_note(run, best, "uniform"), value=best_v if best else None
        )
        t0 = time.monotonic()
        even, v = best_even_plan(run.problem, budget=run.budget)
        yield Outcome(
            "sailor-even", even, time.monotonic() - t0, False, _heuristic_note(run, even, "even"), value=v if even else None
        )

    def refine(self, run: HeteroRun) -> Iterable[Outcome[HeteroPlan]]:
        if self.settings.pool and poolable(run.problem):
            yield from self.pool_step(run)
            if run.proven_optimal():
                return
        budget = run.budget
        if self.settings.pool and poolable(run.problem) and run.budget.left() < EXACT_MIN_SHARE * run.budget.limit_s:
            # the pooled steps used their share without the gap: the exact search over the zones would only list its
            # triples (seconds on 400-640 devices, past the limit) and never improved plan or bound there
            run.result.solver_notes["stopped"] = (
                f"exact search skipped: {run.budget.left():.1f} s left, under {EXACT_MIN_SHARE:.0%} of the limit"
            )
            return
        if self.settings.pool and poolable(run.problem) and self.within_stop_gap(run):
            devices = sum(c.count for c in run.problem.cluster.columns)
            if self.settings.pool_stop_search_s <= 0 or devices > STOP_SEARCH_MAX_DEVICES:
                run.result.solver_notes["stopped"] = (
                    f"within pool_stop_gap {self.settings.pool_stop_gap} after the pooled relaxations: exact search "
                    f"skipped ({devices} devices; it gets its short try on at most {STOP_SEARCH_MAX_DEVICES})"
                )
                return
            # within the gap already: the exact search only gets a short try at the full proof (small settings finish)
            budget = run.budget.capped(self.settings.pool_stop_search_s)
            run.result.solver_notes["stopped"] = (
                f"within pool_stop_gap {self.settings.pool_stop_gap} after the pooled relaxations: exact search capped "
                f"at {self.settings.pool_stop_search_s} s"
            )
        best = run.best
        t0 = time.monotonic()
        inc = best.value * (1 + 1e-9) if best is not None else math.inf
        got = search(run.problem, budget, inc, best.solution if best else None)
        secs = time.monotonic() - t0
        run.result.solver_seconds = secs
        run.result.solver_notes.update(
            {
                "nodes": got.nodes,
                "leaves": got.leaves,
                "outer_triples": got.triples,
                "unresolved_leaves": len(got.unresolved),
                "complete": got.complete,
            }
        )
        plan = got.plan if got.plan is not None and (best is None or got.plan is not best.solution) else None
        bound = got.bound * (1 - 1e-12) if math.isfinite(got.bound) and got.bound > 0 else None
        if got.complete and got.plan is None:
            bound = None
        yield Outcome(
            "hetero-bnb",
            plan,
            secs,
            True,
            "complete" if got.complete else "time limit reached",
            bound=bound,
            infeasible=got.complete and got.plan is None and best is None,
            stopped_by="time_limit" if got.stopped_by else None,
        )

    def pool_step(self, run: HeteroRun) -> Iterable[Outcome[HeteroPlan]]:
        """Where the columns span regions, the regional plans first (each region alone, pooled and lifted: plans of
        the setting, no bound; within :data:`REGIONAL_SHARE` of the limit); then the finest pooled relaxation
        (:mod:`milp_partition.hetero.pool`: per kind and region where that differs from per kind), within
        :data:`POOL_SHARE` of the limit with the regional plans: its plan lifted to the zones (a heuristic) and its
        proven bound (a lower bound of the setting's iteration seconds)."""
        split = device_split(run.problem)
        if split is not None:
            yield from self.split_step(run, split)
            return
        notes = run.result.solver_notes.setdefault("pooled", [])
        t_start, limit = run.budget.elapsed(), run.budget.limit_s
        t0 = time.monotonic()
        regional = regional_plan(run.problem, run.budget.capped(REGIONAL_SHARE * limit))
        if regional.regions:
            run.result.solver_notes["regional"] = {"seconds": time.monotonic() - t0, "regions": regional.regions}
        if regional.plan is not None:
            yield Outcome("regional-lift", regional.plan, time.monotonic() - t0, False, "", value=regional.value_s)
        # the pools per kind and region refine the pool per kind (their optimum lies between it and the setting's):
        # only the finest grouping is solved
        gs = groupings(run.problem)
        if not gs or run.proven_optimal() or self.within_stop_gap(run) or run.budget.expired():
            return
        groups = gs[-1]
        t0 = time.monotonic()
        best = run.best
        got = pooled_bound(
            run.problem,
            run.budget.capped(POOL_SHARE * limit - (run.budget.elapsed() - t_start)),
            groups,
            best.solution if best is not None else None,
        )
        secs = time.monotonic() - t0
        notes.append(
            {
                "pools": sorted(set(groups.values())),
                "seconds": secs,
                "complete": got.complete,
                "nodes": got.nodes,
                "pooled_value_s": got.pooled_value_s if math.isfinite(got.pooled_value_s) else None,
                "bound_s": got.bound_s,
                "lifted_s": got.value_s if got.plan else None,
            }
        )
        if got.plan is not None:
            yield Outcome("pooled-lift", got.plan, secs, False, "", value=got.value_s)
        if got.bound_s is not None:
            yield Outcome("pooled-bound", None, 0.0, True, "pooled relaxation", bound=got.bound_s * (1 - 1e-12))

    def split_step(self, run: HeteroRun, split: int) -> Iterable[Outcome[HeteroPlan]]:
        """One kind in two regions or more (:func:`milp_partition.hetero.pooled.split_bound`): the capped pool of the
        plans of at most ``split`` devices (the larger region's; within :data:`REGIONAL_SHARE` of the limit: its lifted
        plan), then the region pools' search of the plans of more (within :data:`POOL_SHARE` with it), pruning at
        ``pool_stop_gap`` below the best plan's seconds (its ``stop_gap``: the bar it must reach, no more); the least
        of the two bounds is a proven bound of the setting."""
        limit, t0 = run.budget.limit_s, time.monotonic()
        best = run.best
        got = split_bound(
            run.problem,
            split,
            run.budget.capped(REGIONAL_SHARE * limit),
            run.budget.capped(POOL_SHARE * limit - run.budget.elapsed()),
            best.solution if best is not None else None,
            stop_gap=self.settings.pool_stop_gap,
        )
        secs = time.monotonic() - t0
        parts = [("capped", got.small)] + ([("regions", got.big)] if got.big is not None else [])
        run.result.solver_notes["pooled"] = [
            {
                "pools": name,
                "devices": f"<= {split}" if name == "capped" else f"> {split}",
                "complete": out.complete,
                "nodes": out.nodes,
                "pooled_value_s": out.pooled_value_s if math.isfinite(out.pooled_value_s) else None,
                "bound_s": out.bound_s,
                "lifted_s": out.value_s if out.plan is not None else None,
            }
            for name, out in parts
        ]
        run.result.solver_notes["split_seconds"] = secs
        if got.plan is not None:
            yield Outcome("pooled-lift", got.plan, secs, False, "", value=got.value_s)
        if got.bound_s is not None:
            yield Outcome("pooled-bound", None, 0.0, True, "split by devices", bound=got.bound_s * (1 - 1e-12))

    def within_stop_gap(self, run: HeteroRun) -> bool:
        """Whether the best verified plan is within :attr:`HeteroSolveSettings.pool_stop_gap` of the best proven bound."""
        best, lower = run.best, run.lower
        if best is None or lower is None or self.settings.pool_stop_gap <= 0:
            return False
        gap = gap_of(best.value, lower)
        return gap is not None and gap <= self.settings.pool_stop_gap

    def record(self, result: Result, problem: HeteroProblem, best: Candidate[HeteroPlan]) -> None:
        assert isinstance(result, HeteroResult)
        rep = best.report or verify_hetero(problem, plan_to_sailor(best.solution))
        result.sailor_plan = plan_to_sailor(best.solution)
        result.throughput_it_s = rep.throughput_it_s
        result.stages = []
        mbs = best.solution.mbs
        for i, ((s, e), row) in enumerate(zip(best.solution.stages, best.solution.replicas)):
            kinds: dict[str, int] = {}
            groups: dict[str, dict[str, Any]] = {}
            for r_idx, r in enumerate(row):
                key = f"{r.kind}_{r.zone} tp{r.tp}"
                kinds[key] = kinds.get(key, 0) + 1
                if key not in groups:
                    t = problem.model.times[(r.kind, mbs, r.tp)]
                    groups[key] = {
                        "kind": r.kind,
                        "zone": r.zone,
                        "tp": r.tp,
                        "replicas": 0,
                        "compute_s": sum(t[ly][0] + t[ly][1] for ly in range(s, e)),
                        "memory_bytes": rep.memory_bytes[i][r_idx],
                        "memory_limit_bytes": problem.cluster.memory_of(r.kind),
                    }
                groups[key]["replicas"] += 1
            result.stages.append(
                {
                    "layers": [s, e],
                    "replicas": kinds,
                    "groups": list(groups.values()),
                    "compute_s": rep.compute_s[i],
                    "sends_s": rep.sends_s[i],
                    "allreduce_s": rep.allreduce_s[i],
                    "memory_bytes": max(rep.memory_bytes[i]),
                }
            )
        result.peak_memory_bytes = max(max(r) for r in rep.memory_bytes)


#: The cyclic garbage collector's first threshold during a solve (Python's default is 700): the search allocates
#: millions of small tuples and lists, few in cycles, and a collection every 700 of them walks every tracked object;
#: on gptneo-a128x5-b2048 the default costs about 2 % of the solve.  Restored when the solve ends.
GC_THRESHOLD0 = 20_000


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Raise the collector's first threshold to at least :data:`GC_THRESHOLD0` for the block (the others as they
    are), then put back the thresholds found (collections still run, less often).  Where nothing is frozen, the
    objects that exist before the block (modules, the problem) are frozen for it (``gc.freeze``: the block's full
    collections do not walk them; about 2 % of the CLI's solve of gptneo-a128x5-b2048) and unfrozen after."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], GC_THRESHOLD0), *old[1:])
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()
        gc.set_threshold(*old)


def solve_hetero(problem: HeteroProblem, settings: HeteroSolveSettings | None = None) -> HeteroResult:
    """Solve one setting: verified plan, proven bound, gap (:class:`HeteroResult`, with ``sailor_plan``)."""
    settings = settings or HeteroSolveSettings()
    with _fewer_collections():
        result = run_chain(HeteroSteps(settings), problem, chain_settings(settings))
    assert isinstance(result, HeteroResult)
    return result
