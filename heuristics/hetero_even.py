"""Sailor-style and uniform plans for the heterogeneous problem: an even split, one configuration per stage or one for
all replicas (warm starts of the exact search, and ``gap``'s baselines).

Sailor-style (:func:`best_even_plan`): for every micro-batch size, stage count P and data-parallel degree D: the even split (Sailor's: layers // P per
stage, the extra layers in the last stages), then the least bottleneck compute theta (bisection over the stages'
compute values) for which every stage can take a configuration whose compute is at most theta with the devices of
each column holding all of them (exactly for two columns, greedily for more).
Each such plan is priced exactly; the best is returned.  Uniform (:func:`best_uniform_plan`): one configuration
(column, tp) for every replica of every stage, an even split and the most replicas that fit.  Heuristics: they prove
nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from milp_partition.hetero.cost import evaluate, memory_bytes
from milp_partition.hetero.problem import HeteroPlan, HeteroProblem, Replica


def even_split(layers: int, p: int) -> tuple[tuple[int, int], ...]:
    """layers // p per stage, the extra layers in the last stages (Sailor's split)."""
    base, extra = divmod(layers, p)
    out, a = [], 0
    for i in range(p):
        n = base + (1 if i >= p - extra else 0)
        out.append((a, a + n))
        a += n
    return tuple(out)


def _assign(options: list[list[tuple[float, int, int, int]]], caps: list[int], theta: float, d: int) -> list[int] | None:
    """Per stage an option (compute, column, tp, index) with compute <= theta within the columns' devices, or None.

    Two columns: exactly (a DP over stages on column-0 devices keeping the least column-1 devices); more: greedily.
    """
    if len(caps) == 2:
        states: dict[int, tuple[int, list[int]]] = {0: (0, [])}
        for row in options:
            nxt: dict[int, tuple[int, list[int]]] = {}
            for a, (v, path) in states.items():
                for k, (comp, col, tp, _idx) in enumerate(row):
                    if comp > theta:
                        continue
                    na, nv = (a + d * tp, v) if col == 0 else (a, v + d * tp)
                    if na > caps[0] or nv > caps[1]:
                        continue
                    old = nxt.get(na)
                    if old is None or nv < old[0]:
                        nxt[na] = (nv, [*path, k])
            states = nxt
            if not states:
                return None
        return next(iter(states.values()))[1]
    left = list(caps)
    choice: list[int] = []
    # stages with the fewest allowed options first; per stage the option that uses the fewest devices of the
    # column with most devices left (relative)
    order = sorted(range(len(options)), key=lambda i: sum(1 for o in options[i] if o[0] <= theta))
    picked: dict[int, int] = {}
    for i in order:
        best = None
        for k, (comp, col, tp, _idx) in enumerate(options[i]):
            if comp > theta or d * tp > left[col]:
                continue
            score = d * tp / max(1, left[col])
            if best is None or score < best[0]:
                best = (score, k)
        if best is None:
            return None
        k = best[1]
        picked[i] = k
        left[options[i][k][1]] -= d * options[i][k][2]
    for i in range(len(options)):
        choice.append(picked[i])
    return choice


def best_even_plan(problem: HeteroProblem, max_stages: int = 12) -> tuple[HeteroPlan | None, float]:
    """The best even-split, one-configuration-per-stage plan found (and its iteration seconds; inf when none)."""
    mod = problem.model
    cols = [c for c in problem.cluster.columns if c.count > 0]
    caps = [c.count for c in cols]
    total = sum(caps)
    best: HeteroPlan | None = None
    best_v = math.inf
    for mbs in problem.micro_batches():
        cfgs = [(j, tp) for j, c in enumerate(cols) for tp in (1, 2, 4) if problem.replica_valid(c.kind, mbs, tp)]
        if not cfgs:
            continue
        for p in range(1, min(max_stages, mod.layers) + 1):
            stages = even_split(mod.layers, p)
            options: list[list[tuple[float, int, int, int]]] = []
            for i, (s, e) in enumerate(stages):
                row = []
                for idx, (j, tp) in enumerate(cfgs):
                    kind = cols[j].kind
                    if memory_bytes(problem, mbs, tp, s, e, p - i) > problem.cluster.memory_of(kind):
                        continue
                    t = mod.times[(kind, mbs, tp)]
                    row.append((sum(t[ly][0] + t[ly][1] for ly in range(s, e)), j, tp, idx))
                options.append(row)
            if any(not r for r in options):
                continue
            values = sorted({o[0] for r in options for o in r})
            for d in range(1, total // p + 1):
                lo, hi = 0, len(values) - 1
                if _assign(options, caps, values[hi], d) is None:
                    break  # more replicas fit even less
                while lo < hi:
                    mid = (lo + hi) // 2
                    if _assign(options, caps, values[mid], d) is None:
                        lo = mid + 1
                    else:
                        hi = mid
                choice = _assign(options, caps, values[lo], d)
                if choice is None:
                    continue
                reps = []
                for i, k in enumerate(choice):
                    _c, j, tp, _idx = options[i][k]
                    reps.append(tuple([Replica(cols[j].kind, cols[j].zone, tp)] * d))
                plan = HeteroPlan(mbs, stages, tuple(reps))
                v = evaluate(problem, plan).iteration_s
                if v < best_v:
                    best, best_v = plan, v
    return best, best_v


def uniform_plans(problem: HeteroProblem) -> Iterator[HeteroPlan]:
    """Every plan with one configuration (column, tp) for all replicas, an even split and the most replicas that fit."""
    mod = problem.model
    for mbs in problem.micro_batches():
        for col in problem.cluster.columns:
            for tp in (1, 2, 4):
                if col.count == 0 or not problem.replica_valid(col.kind, mbs, tp):
                    continue
                cap = problem.cluster.memory_of(col.kind)
                for p in range(1, mod.layers + 1):
                    d = col.count // (tp * p)
                    if d < 1:
                        break
                    st = even_split(mod.layers, p)
                    if all(memory_bytes(problem, mbs, tp, s, e, p - i) <= cap for i, (s, e) in enumerate(st)):
                        yield HeteroPlan(mbs, st, tuple(tuple([Replica(col.kind, col.zone, tp)] * d) for _ in st))


def best_uniform_plan(problem: HeteroProblem) -> tuple[HeteroPlan | None, float]:
    """The best uniform plan (:func:`uniform_plans`) and its iteration seconds (inf when none fits)."""
    best: HeteroPlan | None = None
    best_v = math.inf
    for plan in uniform_plans(problem):
        v = evaluate(problem, plan).iteration_s
        if v < best_v:
            best, best_v = plan, v
    return best, best_v
