"""Sailor-style and uniform plans for the heterogeneous problem: an even split, one configuration per stage or one for
all replicas (warm starts of the exact search, and ``gap``'s baselines).

Sailor-style (:func:`best_even_plan`): for every micro-batch size, stage count P and data-parallel degree D: the even split (Sailor's: layers // P per
stage, the extra layers in the last stages), then the least bottleneck compute theta (bisection over the stages'
compute values) for which every stage can take a configuration whose compute is at most theta with the devices of
each column holding all of them (exactly for two columns, greedily for more).
Each such plan is priced exactly; the best is returned.  Uniform (:func:`best_uniform_plan`): one configuration
(column, tp) for every replica of every stage, an even split and the most replicas that fit.  Heuristics: they prove
nothing.

A plan is priced only when its compute floor (:func:`compute_floor`: the iteration time with every send, the update
and the all-reduce at 0) is below the best plan's seconds so far: the others cannot replace it, so the plan returned
is the same as pricing every one (on opt350-a32-v96 the uniform plans priced fall from 330 to 22 and the even ones
from 772 to 174: 0.103 -> 0.060 CPU s for both heuristics).

Both take an optional :class:`~milp_partition.budget.Budget`: once it is spent they stop and return the best plan
priced so far, at least the first one they find (on a setting of 20,000 devices the even split's D loop alone ran 40 s past a 5 s limit before).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator

from milp_partition.budget import Budget
from milp_partition.hetero.cost import evaluate, memory_bytes
from milp_partition.hetero.problem import HeteroPlan, HeteroProblem, Replica


def compute_floor(m: int, compute_s: list[float]) -> float:
    """(m - 1) max_i C_i + sum_i C_i: at most the iteration seconds of every plan of m micro-batches whose stages'
    compute is C_i (the formula's T_pp = (m - 1) max_i (C_i + X_i) + sum_i X_i + sum_i C_i + U with X_i, U, T_sync
    >= 0, the same products and sums in the same order, and floating-point sums and products monotone in each
    argument)."""
    return (m - 1) * max(compute_s) + sum(compute_s)


def even_split(layers: int, p: int) -> tuple[tuple[int, int], ...]:
    """layers // p per stage, the extra layers in the last stages (Sailor's split)."""
    base, extra = divmod(layers, p)
    out, a = [], 0
    for i in range(p):
        n = base + (1 if i >= p - extra else 0)
        out.append((a, a + n))
        a += n
    return tuple(out)


def _assign(
    options: list[list[tuple[float, int, int, int]]],
    caps: list[int],
    theta: float,
    d: int,
    sorted_comps: list[list[float]] | None = None,
) -> list[int] | None:
    """Per stage an option (compute, column, tp, index) with compute <= theta within the columns' devices, or None.

    Two columns: exactly (a DP over stages on column-0 devices keeping the least column-1 devices); more: greedily.
    ``sorted_comps``: per stage its options' computes in increasing order (the greedy's count of allowed options by
    bisection: the same counts), built here when not given.
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
    comps = sorted_comps if sorted_comps is not None else [sorted(o[0] for o in row) for row in options]
    order = sorted(range(len(options)), key=lambda i: bisect.bisect_right(comps[i], theta))
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


class _TwoColumnOracle:
    """Whether :func:`_assign` finds an assignment on two columns, answered for every d from one table per theta.

    With two columns, stage options use d tp devices of their column: an assignment fits when (sum of the column-0
    options' tp) <= cap0 // d and (the column-1 sum) <= cap1 // d.  Per theta (an index into the sorted compute
    values), ``least[a]`` is the least column-1 tp sum over the assignments with column-0 tp sum at most a (a dynamic
    program over stages, built once per theta and shared by every d), so the test is one lookup: the same answer as
    :func:`_assign` is None or not (its partial sums only grow, so its caps on partial states drop no completion)."""

    def __init__(self, options: list[list[tuple[float, int, int, int]]]) -> None:
        self.options = options
        self.tables: dict[float, list[float]] = {}

    def least(self, theta: float) -> list[float]:
        got = self.tables.get(theta)
        if got is None:
            states: dict[int, int] = {0: 0}
            for row in self.options:
                nxt: dict[int, int] = {}
                for a, v in states.items():
                    for comp, col, tp, _idx in row:
                        if comp > theta:
                            continue
                        na, nv = (a + tp, v) if col == 0 else (a, v + tp)
                        old = nxt.get(na)
                        if old is None or nv < old:
                            nxt[na] = nv
                states = nxt
            width = max(states, default=-1) + 1
            got = [math.inf] * width
            for a, v in states.items():
                got[a] = v
            for a in range(1, width):  # at most a: a running minimum
                got[a] = min(got[a], got[a - 1])
            self.tables[theta] = got
        return got

    def feasible(self, caps: list[int], theta: float, d: int) -> bool:
        row = self.least(theta)
        if not row:
            return False
        return row[min(caps[0] // d, len(row) - 1)] <= caps[1] // d


class _OneColumnOracle:
    """Whether :func:`_assign` finds an assignment on one column, for every theta index and d at once.

    On one column the greedy gives each stage its least tp among the options with compute <= theta (the least score
    d tp / left), so it fits exactly when d times the sum of those least tps is at most the count (every partial sum is
    then within it too): one sum per theta index, built once (``sums[k]``, inf when some stage has no option), and the
    test is one product and comparison.  The assignment it finds reads theta alone (each stage's first option of least
    tp), so it is kept per theta index."""

    def __init__(self, options: list[list[tuple[float, int, int, int]]], values: list[float]) -> None:
        self.sums: list[float] = []
        for theta in values:
            least = [min((tp for comp, _c, tp, _i in row if comp <= theta), default=None) for row in options]
            self.sums.append(math.inf if any(t is None for t in least) else float(sum(t for t in least if t is not None)))
        self.choices: dict[int, list[int] | None] = {}

    def feasible(self, caps: list[int], k: int, d: int) -> bool:
        return d * self.sums[k] <= caps[0]


def _feasible(
    oracle: _TwoColumnOracle | None,
    options: list[list[tuple[float, int, int, int]]],
    caps: list[int],
    values: list[float],
    k: int,
    d: int,
    sorted_comps: list[list[float]] | None = None,
) -> bool:
    """Whether :func:`_assign` (options, caps, values[k], d) finds an assignment (through the oracle on two columns)."""
    if oracle is not None:
        return oracle.feasible(caps, values[k], d)
    return _assign(options, caps, values[k], d, sorted_comps) is not None


def best_even_plan(problem: HeteroProblem, max_stages: int = 12, budget: Budget | None = None) -> tuple[HeteroPlan | None, float]:
    """The best even-split, one-configuration-per-stage plan found (and its iteration seconds; inf when none); with a
    ``budget``, the best found before it was spent (the clock is read once per data-parallel degree once a plan is
    priced: a spent budget still gets the first plan)."""
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
            comps = [sorted(o[0] for o in row) for row in options]
            # two columns: the least theta index for every d by a pointer that only moves up (a theta feasible for d
            # is feasible for d - 1, and a larger theta allows more options: the same index as a bisection per d),
            # each test one lookup in :class:`_TwoColumnOracle`'s table of the theta (the same answers as _assign)
            oracle = _TwoColumnOracle(options) if len(caps) == 2 else None
            one = _OneColumnOracle(options, values) if len(caps) == 1 else None
            lo = 0
            for d in range(1, total // p + 1):
                if best is not None and budget is not None and budget.expired():
                    return best, best_v
                top = len(values) - 1
                if not (
                    one.feasible(caps, top, d) if one is not None else _feasible(oracle, options, caps, values, top, d, comps)
                ):
                    break  # more replicas fit even less
                if oracle is not None:
                    while not oracle.feasible(caps, values[lo], d):
                        lo += 1
                elif one is not None:  # one column: the greedy takes each stage's least tp, so it fits exactly
                    # when d sum_i tp_i(theta) <= the count, monotone in theta and in d: the pointer finds the bisection's
                    # index, each test one product (:class:`_OneColumnOracle`)
                    while not one.feasible(caps, lo, d):
                        lo += 1
                else:  # more columns: the greedy is not monotone in theta; a bisection per d, as it always was
                    lo, hi = 0, len(values) - 1
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if _assign(options, caps, values[mid], d, comps) is None:
                            lo = mid + 1
                        else:
                            hi = mid
                if one is not None:  # (the same assignment for every d that fits: it reads theta alone)
                    if lo not in one.choices:
                        one.choices[lo] = _assign(options, caps, values[lo], d, comps)
                    choice = one.choices[lo]
                else:
                    choice = _assign(options, caps, values[lo], d, comps)
                if choice is None:
                    continue
                m = math.ceil(problem.global_batch / (mbs * d))
                if compute_floor(m, [options[i][k][0] for i, k in enumerate(choice)]) >= best_v:
                    continue  # no better than the best so far (its C_i are the formula's: the same sums)
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


def best_uniform_plan(problem: HeteroProblem, budget: Budget | None = None) -> tuple[HeteroPlan | None, float]:
    """The best uniform plan (:func:`uniform_plans`) and its iteration seconds (inf when none fits); with a ``budget``,
    the best found before it was spent (the clock is read once per plan once one is priced: a spent budget still gets
    the first plan)."""
    best: HeteroPlan | None = None
    best_v = math.inf
    for plan in uniform_plans(problem):
        if best is not None and budget is not None and budget.expired():
            break
        r = plan.replicas[0][0]
        t = problem.model.times[(r.kind, plan.mbs, r.tp)]
        m = math.ceil(problem.global_batch / (plan.mbs * len(plan.replicas[0])))
        if compute_floor(m, [sum(t[ly][0] + t[ly][1] for ly in range(s, e)) for s, e in plan.stages]) >= best_v:
            continue  # no better than the best so far (the formula's C_i: the same sums)
        v = evaluate(problem, plan).iteration_s
        if v < best_v:
            best, best_v = plan, v
    return best, best_v
