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
import time
from collections.abc import Iterator

import numpy as np

from milp_partition.errors import MilpPartitionError
from milp_partition.galvatron.costs import Costs, evaluate, galvatron_estimate, sound_time
from milp_partition.galvatron.problem import GalvatronPlan, GalvatronProblem, Strategy, VocabStrategy, outer_choices


class DeadlineReached(MilpPartitionError):
    """The even-split search ran out of time before trying every setting: it has no answer to give as Galvatron's."""


def even_division(layers: int, pp: int) -> tuple[int, ...]:
    """Galvatron's ``pp_division_even``: L // pp per stage, the rest on the last."""
    avg = layers // pp
    return tuple([avg] * (pp - 1) + [layers - avg * (pp - 1)])


def _tasks(cm: Costs) -> list[int | None]:
    return [None] + [g for g in cm.degrees() if g > 1]


def _admitted(s: Strategy | VocabStrategy, task: int | None) -> bool:
    return (s.tp_sp == 1 or s.sp) if task is None else s.tp_sp <= task


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def _even_settings(problem: GalvatronProblem, layers: int) -> Iterator[tuple[int, int, Costs, tuple[int, ...], list[int]]]:
    """Every (pp, chunks) with its cost model, the even split of ``layers`` and each stage's first layer."""
    for pp, m in outer_choices(problem):
        div = even_division(layers, pp)
        yield pp, m, Costs(problem, pp, m), div, [sum(div[:i]) for i in range(pp)]


def best_uniform(problem: GalvatronProblem, deadline: float | None = None) -> tuple[GalvatronPlan | None, float]:
    """The best plan with one strategy for all layers on the even split (sound time), or (None, inf).

    At ``deadline`` (``time.monotonic()``) it stops and returns the best plan tried so far."""
    types = problem.type_of()
    usable = problem.usable_mb()
    best, best_plan = math.inf, None
    for pp, m, cm, div, starts in _even_settings(problem, len(types)):
        for s in cm.strategies():
            if _past(deadline):
                return best_plan, best
            per = [cm.layer(t, s) for t in range(len(problem.layer_types))]
            c = [sum(per[types[k]].c for k in range(a, a + n)) for a, n in zip(starts, div)]
            r = [sum(per[types[k]].r for k in range(a, a + n)) for a, n in zip(starts, div)]
            mem = [sum(cm.layer_mem(types[k], s, i) for k in range(a, a + n)) for i, (a, n) in enumerate(zip(starts, div))]
            for v in cm.vocab_strategies():
                gm = cm.global_buffer_mb(cm.buffer_degree([s], v))
                if any(mem[i] + cm.vocab_mem(v, i) + gm > usable for i in range(pp)):
                    continue
                vc = cm.vocab(v)
                t = sound_time([c[i] + vc.c[i] for i in range(pp)], r, m)
                if t < best:
                    best, best_plan = t, GalvatronPlan(pp, m, div, tuple([s] * len(types)), v)
    return best_plan, best


class _StageDP:
    """Galvatron's per-stage DP for stage i (layers a..a+n-1), run once up to the largest memory budget: per degree of
    the last layer, the Pareto set of (memory, proxy = synced time + re-layout) as numpy arrays.  A budget's answer is
    the least proxy among the final points within it (memory only grows along the layers, so a point within the
    budget had every prefix within it, and a dominated point is never the only one within a budget)."""

    def __init__(self, cm: Costs, strats: list[Strategy], types: tuple[int, ...], a: int, n: int, i: int, cap: int) -> None:
        self.strats = strats
        self.steps: list[dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]] = []  # g -> (opt, parent g, parent idx)
        states: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for layer in range(a, a + n):
            t = types[layer]
            parts: dict[int, list[tuple[np.ndarray, ...]]] = {}
            for k, s in enumerate(strats):
                mem, r = cm.layer_mem(t, s, i), cm.layer(t, s).r
                bucket = parts.setdefault(s.tp_sp, [])
                if layer == a:
                    bucket.append((np.array([mem]), np.array([r]), np.array([k]), np.array([-1]), np.array([-1])))
                    continue
                for g, (pm, pv) in states.items():
                    x = cm.relayout(t, g, s.tp_sp)
                    sz = len(pm)
                    bucket.append((pm + mem, pv + (r + x), np.full(sz, k), np.full(sz, g), np.arange(sz)))
            states, step = {}, {}
            for g, bl in parts.items():
                if not bl:
                    continue
                mem_a, val, opt, pg, pi = (np.concatenate([q[j] for q in bl]) for j in range(5))
                ok = np.flatnonzero(mem_a <= cap)
                o = ok[np.lexsort((val[ok], mem_a[ok]))]
                v2 = val[o]
                keep = np.ones(len(o), dtype=bool)
                if len(o) > 1:
                    keep[1:] = v2[1:] < np.minimum.accumulate(v2)[:-1]
                o = o[keep]
                if len(o):
                    states[g] = (mem_a[o], val[o])
                    step[g] = (opt[o], pg[o], pi[o])
            self.steps.append(step)
        self.final = states

    def best(self, cap: int) -> tuple[float, list[Strategy]] | None:
        """The least proxy within ``cap`` MB and its strategies, or None."""
        arg, val = None, math.inf
        for g, (mem, v) in self.final.items():
            ok = np.flatnonzero(mem <= cap)
            if len(ok):
                j = ok[np.argmin(v[ok])]
                if v[j] < val:
                    val, arg = float(v[j]), (g, int(j))
        if arg is None:
            return None
        out: list[Strategy] = []
        g, j = arg
        for step in reversed(self.steps):
            opt, pg, pi = step[g]
            out.append(self.strats[int(opt[j])])
            g, j = int(pg[j]), int(pi[j])
        return val, out[::-1]


def galvatron_even_split(problem: GalvatronProblem, deadline: float | None = None) -> tuple[GalvatronPlan | None, float, float]:
    """Galvatron's search re-implemented: (plan, its pipeline estimate, sound time) or (None, inf, inf).

    Raises :class:`DeadlineReached` at ``deadline`` (``time.monotonic()``): a partial search is not Galvatron's answer."""
    types = problem.type_of()
    usable = problem.usable_mb()
    best, best_plan = math.inf, None
    for pp, m, cm, div, starts in _even_settings(problem, len(types)):
        for task in _tasks(cm):
            if _past(deadline):
                raise DeadlineReached("the even-split search reached its time limit before trying every setting")
            strats = [s for s in cm.strategies() if _admitted(s, task)]
            gm = cm.global_buffer_mb(task)
            vocabs = [v for v in cm.vocab_strategies() if _admitted(v, task)]
            if not strats or not vocabs:
                continue
            dps = [
                _StageDP(cm, strats, types, starts[i], div[i], i, max(usable - gm - cm.vocab_mem(v, i) for v in vocabs))
                for i in range(pp)
            ]
            for v in vocabs:
                layers: list[Strategy] = []
                for i in range(pp):
                    got = dps[i].best(usable - gm - cm.vocab_mem(v, i))
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
        cg.append(vc.c[i] + sum(cm.layer(types[k], plan.layers[k]).c for k in range(a, a + n)))
        r.append(sum(cm.layer(types[k], plan.layers[k]).r for k in range(a, a + n)))
        a += n
    return galvatron_estimate(cg, r, plan.chunks, plan.pp)


def sound(problem: GalvatronProblem, plan: GalvatronPlan) -> float:
    return evaluate(problem, plan).sound_s
