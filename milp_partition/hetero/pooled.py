"""The pooled relaxations solved (:mod:`milp_partition.hetero.pool` states them and proves the bound): a proven lower
bound of a setting's iteration seconds and the pooled plan lifted to the setting's zones.

**The split by devices** (:func:`split_bound`, one kind in two regions or more, N_A the larger region's devices):

* every plan of at most N_A devices is bounded by the capped pool (:func:`milp_partition.hetero.pool.capped_pool_problem`:
  all zones in one pool of N_A devices);
* every plan of more than N_A devices is bounded by the pooled search per region (the pools per kind and region)
  restricted to the triples (mbs, D, P) with D P tp_max > N_A (``search(..., min_devices=N_A + 1)``; tp_max the
  largest tp of the micro-batch size, so a triple left out holds no plan of more than N_A devices);

so the least of the two bounds is a bound of the setting.  **Proof.**  Let pi be a plan of the setting and v its
iteration seconds.  If pi has at most N_A devices, the capped bound is at most v (its claim).  Else pi renamed to the
region pools is a plan pi' of the region-pooled problem of at most v seconds (the pooled claim) with the same devices,
more than N_A, so its triple is listed.  The restricted search's bound covers every plan of a listed triple except
where its degree rule left out the triple (mbs, d, P) because a plan pi'' of (mbs, d - 1, P) with the same stages, one
replica fewer per stage, is no slower (``search._Search.dominated_by_fewer``): pi'' has fewer devices, so either at most
N_A (and the capped bound covers it: every region-pooled plan renamed to the one pool is a plan of the capped pool no
slower, since the one pool's links take the least over a superset of fits) or more than N_A (its triple is listed and
the argument repeats with d - 1, ending at d = 1).  Every other rule of the search is within one triple.  So
min(capped bound, restricted bound) <= v.  Where the capped search gives no bound, the region search runs on every
triple (its bound alone covers every plan).

**The bar, not more.**  With ``stop_gap`` (the solve's ``pool_stop_gap``, 1 % by default) the region search prunes at the
ceiling v (1 - 0.999 stop_gap), v the better of the capped pool's lifted plan and the start: its incumbent is that threshold,
with no plan behind it, so a complete search proves every plan of more than N_A devices at least min(ceiling, the best
pooled plan it found), and the setting's bound min(capped bound, that) is within the gap of v (or the capped bound,
where lower).  Every rule of the search compares bounds with its incumbent only, so a threshold is as sound as a plan's
seconds there.

**The crossing.**  The region search is given each pool's region (:func:`pool_regions`): a plan of more than N_A devices
cannot stay in one region, so the search drops the plans that do and bounds a partial plan that has not left its region
yet with the crossing its completion must make (:mod:`milp_partition.hetero.search`, "Plans that span regions").  On the
five-zone settings this cut the region search's nodes by a third (gptneo-a32x5-b1024 1.79 M -> 1.20 M, opt350-a80x5-b2048
170 k -> 113 k).

On gptneo-a128x5-b2048 the capped pool's optimum is 4.5550 s (complete in ~2 CPU s), the us-central1 pooled optimum:
the region search then leaves out the triples of that optimum (D = 32, P = 4, tp 4: 512 devices).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from milp_partition.budget import Budget
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.pool import (
    capped_pool_problem,
    lift,
    pool_groups,
    pooled_problem,
    region_groups,
    region_of,
    region_subsettings,
    rename,
)
from milp_partition.hetero.problem import HeteroPlan, HeteroProblem
from milp_partition.hetero.search import search
from milp_partition.heuristics.hetero_even import best_even_plan, best_uniform_plan

#: The region search's ceiling (``split_bound``'s ``stop_gap``) sits this share of the gap above the bar's line, so that
#: the gap read back from the bound is below ``stop_gap``, not equal to it up to rounding.
CEILING_MARGIN = 1e-3


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
    min_devices: int = 0,
    cap: int | None = None,
    ceiling_s: float = math.inf,
) -> PoolOutcome:
    """Solve the pooled relaxation (:func:`pooled_problem` with ``groups``, default one pool per kind) within
    ``budget`` and lift its plan; ``start``: a plan of the setting whose renamed copy is the pooled search's first
    incumbent (it prunes; the bound stays a bound: every value the pooled search compares with is a pooled plan's),
    beside the Sailor-style even plan of the pooled problem (when time is left; the best uniform plan for a ``cap``);
    the best lift of these and of the search's plan is returned (the search's first, the others while time is left).

    ``bound_s``: the pooled search's proven bound, a lower bound of the setting's iteration seconds (module docstring);
    ``None`` when it gave no finite positive bound.  ``min_devices``: the search's triples restricted as
    :func:`split_bound` states (then ``bound_s`` covers only the plans of at least that many devices).  ``cap``: the
    capped pool of the plans of at most ``cap`` devices (:func:`capped_pool_problem`; ``groups`` and ``start`` are not
    read: the start might not fit the cap), whose ``bound_s`` covers only those plans.  ``ceiling_s``: the search prunes
    at most there even where no plan is that fast (its incumbent is the least of the starts' seconds and this; a
    threshold, not a plan): a complete search then proves every pooled plan at least min(``ceiling_s``, the best
    pooled plan it found), which is all a caller that only needs the bound up to ``ceiling_s`` asks for, in fewer
    nodes (``pooled_value_s`` stays a plan's seconds, inf when none was below the ceiling); with a finite ceiling no
    Sailor-style even plan is built."""
    if cap is not None:
        groups, start = pool_groups(problem), None
        pooled = capped_pool_problem(problem, cap)
    else:
        groups = pool_groups(problem) if groups is None else groups
        pooled = pooled_problem(problem, groups)
    # pooled plans to start from (each a plan of the pooled problem, so the search's bound never exceeds its value):
    # the start renamed, and a Sailor-style even (or uniform) plan of the pools (its lift is a candidate too)
    starts: list[HeteroPlan] = [rename(start, groups)] if start is not None else []
    # under a ceiling (the caller's plan is good to within its stop gap) no even plan: it would have to be below the
    # ceiling to prune or to lift to a better plan (on the five-zone settings the region pools' even plan is 0.3-1.4 %
    # above the caller's plan, and it cost 0.05-0.18 CPU s).  The capped pool (one column) starts from the best
    # uniform plan instead: on the five-zone settings it is as fast as the even plan (the same seconds, the same
    # nodes after it) in a sixth of the time; it is built even on a spent budget (its first plan), since the split's
    # caller runs no heuristics of its own (:meth:`milp_partition.hetero.solve.HeteroSteps.heuristics`)
    if (cap is not None or not budget.expired()) and not math.isfinite(ceiling_s):
        plan, _v = (best_uniform_plan if cap is not None else best_even_plan)(pooled, budget=budget)
        if plan is not None:
            starts.append(plan)
    priced = sorted(((evaluate(pooled, p).iteration_s, i) for i, p in enumerate(starts)), key=lambda t: t[0])
    inc, inc_plan = (priced[0][0], starts[priced[0][1]]) if priced else (math.inf, None)
    if ceiling_s < inc:  # prune at the ceiling: the search's incumbent is a threshold with no plan
        inc, inc_plan = ceiling_s, None
    got = search(pooled, budget, inc, inc_plan, min_devices, pool_regions(groups) if min_devices > 0 else None)
    out = PoolOutcome(complete=got.complete, pooled_value_s=got.value if got.plan is not None else math.inf, nodes=got.nodes)
    if math.isfinite(got.bound) and got.bound > 0:
        out.bound_s = got.bound
    # each with its pooled seconds (priced above; the search's plan at its value)
    start_s = dict((i, v) for v, i in priced)
    to_lift = [(got.plan, got.value)] if got.plan is not None and all(got.plan is not p for p in starts) else []
    to_lift += [(p, start_s[i]) for i, p in enumerate(starts) if start is None or i > 0]
    for plan, pooled_s in to_lift:  # the search's plan first; the others while time is left
        if out.plan is not None and pooled_s >= out.value_s:
            continue  # a lift keeps each replica's place, kind and tp: renamed back it is this plan, no slower pooled
        lifted, v = lift(problem, plan, groups)
        if lifted is not None and v < out.value_s:
            out.plan, out.value_s = lifted, v
        if budget.expired():
            break
    return out


def pool_regions(groups: dict[tuple[str, str], str]) -> dict[str, str] | None:
    """Pool -> its region, where every pool of ``groups`` lies in one region (:func:`region_groups`'s pools); else None."""
    out: dict[str, str] = {}
    for (_kind, zone), pool in groups.items():
        if out.setdefault(pool, region_of(zone)) != region_of(zone):
            return None
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


@dataclass
class SplitOutcome:
    """What :func:`split_bound` gave: the setting's proven bound (``None``: none), the best plan lifted from either
    search with its seconds, and each search's outcome (``big`` is None when the budget ran out before it)."""

    bound_s: float | None
    plan: HeteroPlan | None
    value_s: float
    small: PoolOutcome
    big: PoolOutcome | None


def split_bound(
    problem: HeteroProblem,
    split: int,
    small_budget: Budget,
    budget: Budget,
    start: HeteroPlan | None = None,
    stop_gap: float = 0.0,
) -> SplitOutcome:
    """The split by devices (module docstring) of a setting with one kind in two regions or more, ``split`` = N_A
    (:func:`milp_partition.hetero.pool.device_split`): the capped pool within ``small_budget`` (its plan lifted: a plan of
    the setting), then the region pools' search restricted to more than N_A devices within ``budget``, started from the
    better of ``start`` and the capped pool's plan.

    ``stop_gap`` > 0: the region search prunes at the ceiling v (1 - ``stop_gap`` (1 - :data:`CEILING_MARGIN`)), v the
    better of the two plans' seconds (:func:`pooled_bound`'s ``ceiling_s``): complete, it proves the plans of more
    than N_A devices at least min(ceiling, the best it found), so the setting's bound, the least of that and the capped
    bound, is within ``stop_gap`` of v unless the capped bound is lower still; in fewer nodes than the proof up to v."""
    small = pooled_bound(problem, small_budget, cap=split)
    plan, value = small.plan, small.value_s
    if budget.expired():
        return SplitOutcome(None, plan, value, small, None)
    start_s = evaluate(problem, start).iteration_s if start is not None else math.inf
    if start is not None and plan is not None and value < start_s:
        start = plan
    elif start is None:
        start = plan
    min_devices = split + 1 if small.bound_s is not None else 0
    v = min(value, start_s)
    ceiling = v * (1 - stop_gap * (1 - CEILING_MARGIN)) if stop_gap > 0 and min_devices > 0 else math.inf
    big = pooled_bound(problem, budget, region_groups(problem), start, min_devices, ceiling_s=ceiling)
    if big.plan is not None and big.value_s < value:
        plan, value = big.plan, big.value_s
    bound = None
    if big.bound_s is not None and (small.bound_s is not None or min_devices == 0):
        bound = big.bound_s if min_devices == 0 else min(big.bound_s, small.bound_s or math.inf)
    return SplitOutcome(bound, plan, value, small, big)
