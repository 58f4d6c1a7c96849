"""The pooled relaxations solved (:mod:`milp_partition.hetero.pool` states them and proves the bound): a proven lower
bound of a setting's iteration seconds and the pooled plan lifted to the setting's zones."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from milp_partition.budget import Budget
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.pool import lift, pool_groups, pooled_problem, region_subsettings, rename
from milp_partition.hetero.problem import HeteroPlan, HeteroProblem
from milp_partition.hetero.search import search
from milp_partition.heuristics.hetero_even import best_even_plan


@dataclass
class PoolOutcome:
    """What the pooled relaxation gave: a proven lower bound on the setting's iteration seconds (``None``: none), the
    best lifted plan of the setting with its seconds, and the pooled search's counters."""

    bound_s: float | None = None
    plan: HeteroPlan | None = None
    value_s: float = math.inf
    complete: bool = False
    pooled_value_s: float = math.inf
    nodes: int = 0


def pooled_bound(
    problem: HeteroProblem,
    budget: Budget,
    groups: dict[tuple[str, str], str] | None = None,
    start: HeteroPlan | None = None,
) -> PoolOutcome:
    """Solve the pooled relaxation (:func:`pooled_problem` with ``groups``, default one pool per kind) within
    ``budget`` and lift its plan; ``start``: a plan of the setting whose renamed copy is the pooled search's first
    incumbent (it prunes; the bound stays a bound: every value the pooled search compares with is a pooled plan's),
    beside the Sailor-style even plan of the pooled problem (when time is left); the best lift of these and of the
    search's plan is returned (the search's first, the others while time is left).

    ``bound_s``: the pooled search's proven bound, a lower bound of the setting's iteration seconds (module docstring);
    ``None`` when it gave no finite positive bound."""
    groups = pool_groups(problem) if groups is None else groups
    pooled = pooled_problem(problem, groups)
    # pooled plans to start from (each a plan of the pooled problem, so the search's bound never exceeds its value):
    # the start renamed, and a Sailor-style even plan of the pools (its lift is a candidate too)
    starts: list[HeteroPlan] = [rename(start, groups)] if start is not None else []
    if not budget.expired():
        plan, _v = best_even_plan(pooled)
        if plan is not None:
            starts.append(plan)
    priced = sorted(((evaluate(pooled, p).iteration_s, i) for i, p in enumerate(starts)), key=lambda t: t[0])
    inc, inc_plan = (priced[0][0], starts[priced[0][1]]) if priced else (math.inf, None)
    got = search(pooled, budget, inc, inc_plan)
    out = PoolOutcome(complete=got.complete, pooled_value_s=got.value, nodes=got.nodes)
    if math.isfinite(got.bound) and got.bound > 0:
        out.bound_s = got.bound
    to_lift = [got.plan] if got.plan is not None and all(got.plan is not p for p in starts) else []
    to_lift += starts[1:] if start is not None else starts
    for plan in to_lift:  # the search's plan first; the others while time is left
        lifted, v = lift(problem, plan, groups)
        if lifted is not None and v < out.value_s:
            out.plan, out.value_s = lifted, v
        if budget.expired():
            break
    return out


@dataclass
class RegionalOutcome:
    """The best plan of the setting found in one region alone (:func:`regional_plan`), with its seconds, and per region
    what its pooled search gave (for the notes: these bounds cover only the plans that stay in the region)."""

    plan: HeteroPlan | None = None
    value_s: float = math.inf
    regions: list[dict[str, object]] = field(default_factory=list)


def regional_plan(problem: HeteroProblem, budget: Budget) -> RegionalOutcome:
    """Per region (:func:`milp_partition.hetero.pool.region_subsettings`, most devices first, while ``budget`` lasts):
    the setting restricted to the region, its kinds' zones pooled (:func:`pooled_bound`) and the pooled plan lifted to
    the region's zones.  A heuristic for the setting: each plan leaves the other regions unused and is a plan of the
    setting (the caller's verifier checks it); the slow links between regions make these plans good, and each region's
    pooled search is far smaller than the setting's."""
    out = RegionalOutcome()
    for sub in region_subsettings(problem):
        if budget.expired():
            break
        got = pooled_bound(sub, budget)
        out.regions.append(
            {
                "columns": [c.label for c in sub.cluster.columns],
                "complete": got.complete,
                "pooled_value_s": got.pooled_value_s if math.isfinite(got.pooled_value_s) else None,
                "lifted_s": got.value_s if got.plan is not None else None,
            }
        )
        if got.plan is not None and got.value_s < out.value_s:
            out.plan, out.value_s = got.plan, got.value_s
    return out
