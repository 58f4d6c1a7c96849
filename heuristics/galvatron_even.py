"""Baselines for Galvatron's problem: its own even-split search (re-implemented) and uniform plans (a quick incumbent).

:func:`galvatron_even_split` follows Galvatron's search (``search_engine.py``, ``dynamic_programming.py``): for every
pp, chunks, global-buffer task and vocabulary strategy, the even split (``pp_division_even``), per stage a DP
minimising its proxy (sum of layer times with gradient sync + re-layout costs + the vocabulary's synced time)
under its memory rule, and the plan of the least *Galvatron pipeline estimate* is kept.  Ties and its tiny
tie-breaking costs (1e-10..3e-9 s) aside, it is the plan Galvatron returns.

:func:`best_uniform` tries one strategy for every layer, on the even split, for every outer choice: cheap, and
a verified incumbent for the exact search's pruning.
"""

from __future__ import annotations

import math

from milp_partition.galvatron.costs import Costs, evaluate, galvatron_estimate, sound_time
from milp_partition.galvatron.problem import GalvatronPlan, GalvatronProblem, Strategy, VocabStrategy


def even_division(layers: int, pp: int) -> tuple[int, ...]:
    """Galvatron's ``pp_division_even``: L // pp per stage, the rest on the last."""
    avg = layers // pp
    return tuple([avg] * (pp - 1) + [layers - avg * (pp - 1)])


def _outer(problem: GalvatronProblem) -> list[tuple[int, int]]:
    out = []
    pp = 1
    while pp <= min(problem.max_pp, problem.layers, problem.devices):
        out += [(pp, m) for m in range(1, problem.global_batch + 1) if problem.global_batch % m == 0 and m >= pp]
        pp *= 2
    return out


def _tasks(cm: Costs) -> list[int | None]:
    return [None] + [g for g in cm.degrees() if g > 1]


def _admitted(s: Strategy | VocabStrategy, task: int | None) -> bool:
    return (s.tp_sp == 1 or s.sp) if task is None else s.tp_sp <= task


def best_uniform(problem: GalvatronProblem) -> tuple[GalvatronPlan | None, float]:
    """The best plan with one strategy for all layers on the even split (sound time), or (None, inf)."""
    types = problem.type_of()
    usable = problem.usable_mb()
    best, best_plan = math.inf, None
    for pp, m in _outer(problem):
        cm = Costs(problem, pp, m)
        div = even_division(len(types), pp)
        starts = [sum(div[:i]) for i in range(pp)]
        for s in cm.strategies():
            per = [cm.layer(t, s) for t in range(len(problem.layer_types))]
            c = [sum(per[types[l]].c for l in range(a, a + n)) for a, n in zip(starts, div)]
            r = [sum(per[types[l]].r for l in range(a, a + n)) for a, n in zip(starts, div)]
            mem = [sum(cm.layer_mem(types[l], s, i) for l in range(a, a + n)) for i, (a, n) in enumerate(zip(starts, div))]
            for v in cm.vocab_strategies():
                gm = cm.global_buffer_mb(cm.buffer_degree([s], v))
                if any(mem[i] + cm.vocab_mem(v, i) + gm > usable for i in range(pp)):
                    continue
                vc = cm.vocab(v)
                t = sound_time([c[i] + vc.c[i] for i in range(pp)], r, m)
                if t < best:
                    best, best_plan = t, GalvatronPlan(pp, m, div, tuple([s] * len(types)), v)
    return best_plan, best


def _stage_dp(cm: Costs, strats: list[Strategy], types: tuple[int, ...], a: int, n: int, i: int, cap: int) -> tuple[float, list[Strategy]] | None:
    """Least proxy (synced time + re-layout) of stage i (layers a..a+n-1) within ``cap`` MB: DP over (degree, memory)
    keeping the Pareto set of (memory, proxy)."""
    states: dict[int, list[tuple[int, float, object]]] = {}
    for l in range(a, a + n):
        t = types[l]
        new: dict[int, list[tuple[int, float, object]]] = {}
        for s in strats:
            mem, r = cm.layer_mem(t, s, i), cm.layer(t, s).r
            bucket = new.setdefault(s.tp_sp, [])
            if l == a:
                if mem <= cap:
                    bucket.append((mem, r, (s, None)))
                continue
            for g, pts in states.items():
                x = cm.relayout(t, g, s.tp_sp)
                for pm, pr, back in pts:
                    if pm + mem <= cap:
                        bucket.append((pm + mem, pr + r + x, (s, back)))
        states = {}
        for g, pts in new.items():
            pts.sort(key=lambda p: (p[0], p[1]))
            keep, best = [], math.inf
            for p in pts:
                if p[1] < best:
                    keep.append(p)
                    best = p[1]
            states[g] = keep
    cands = [p for pts in states.values() for p in pts]
    if not cands:
        return None
    mem, val, back = min(cands, key=lambda p: p[1])
    out: list[Strategy] = []
    node = back
    while node is not None:
        s, node = node  # type: ignore[misc]
        out.append(s)
    return val, out[::-1]


def galvatron_even_split(problem: GalvatronProblem) -> tuple[GalvatronPlan | None, float, float]:
    """Galvatron's search re-implemented: (plan, its pipeline estimate, sound time) or (None, inf, inf)."""
    types = problem.type_of()
    usable = problem.usable_mb()
    best, best_plan = math.inf, None
    for pp, m in _outer(problem):
        cm = Costs(problem, pp, m)
        div = even_division(len(types), pp)
        starts = [sum(div[:i]) for i in range(pp)]
        for task in _tasks(cm):
            strats = [s for s in cm.strategies() if _admitted(s, task)]
            gm = cm.global_buffer_mb(task)
            memo: dict[tuple[int, int], tuple[float, list[Strategy]] | None] = {}
            for v in [v for v in cm.vocab_strategies() if _admitted(v, task)]:
                layers: list[Strategy] = []
                for i in range(pp):
                    cap = usable - gm - cm.vocab_mem(v, i)
                    key = (i, cap)
                    if key not in memo:
                        memo[key] = _stage_dp(cm, strats, types, starts[i], div[i], i, cap)
                    got = memo[key]
                    if got is None:
                        break
                    layers += got[1]
                else:
                    plan = GalvatronPlan(pp, m, div, tuple(layers), v)
                    est = estimate(problem, plan, cm)
                    if est < best:
                        best, best_plan = est, plan
    if best_plan is None:
        return None, math.inf, math.inf
    return best_plan, best, sound(problem, best_plan)


def estimate(problem: GalvatronProblem, plan: GalvatronPlan, cm: Costs | None = None) -> float:
    cm = cm or Costs(problem, plan.pp, plan.chunks)
    types = problem.type_of()
    vc = cm.vocab(plan.vocab)
    cg, r, a = [], [], 0
    for i, n in enumerate(plan.division):
        cg.append(vc.c[i] + sum(cm.layer(types[l], plan.layers[l]).c for l in range(a, a + n)))
        r.append(sum(cm.layer(types[l], plan.layers[l]).r for l in range(a, a + n)))
        a += n
    return galvatron_estimate(cg, r, plan.chunks, plan.pp)


def sound(problem: GalvatronProblem, plan: GalvatronPlan) -> float:
    return evaluate(problem, plan).sound_s
