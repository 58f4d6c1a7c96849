"""Every plan of a small leaf of the hetero search, priced: the leaf's exact optimum instead of a bound.

A leaf of :mod:`milp_partition.hetero.search` fixes the micro-batch size, D, the stages and, per stage, a reduced
set q (per column of the setting at most one member: the least tp of that column in the stage).  The plans that
reduce to it are exactly those whose stage i lists D replicas, each on a column of q_i with tp at least q_i's member
of that column, every column of q_i present with its member's tp at least once (so that the least tp per column is
the member's).  When there are few such lists (:func:`leaf_size` at most a limit), :func:`best_of_leaf` prices every
one that fits the columns' counts and the memory rule with :func:`milp_partition.hetero.cost.evaluate`: its minimum
is the leaf's optimum, so the leaf needs no bound of its own.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from milp_partition.hetero.cost import evaluate, memory_bytes
from milp_partition.hetero.problem import HeteroPlan, HeteroProblem, Replica

#: Configuration = (column index, tp); a leaf stage = (first layer, end layer, reduced set of configuration indices).
Config = tuple[int, int]
LeafStage = tuple[int, int, tuple[int, ...]]


def _stage_configs(cfgs: Sequence[Config], caps: Sequence[int], q: tuple[int, ...]) -> list[int]:
    """Configurations a replica of a stage with reduced set q may take: a column of q, tp at least q's member's and at
    most the column's count (a larger tp never fits)."""
    least = {cfgs[k][0]: cfgs[k][1] for k in q}
    return [k for k, (j, tp) in enumerate(cfgs) if j in least and least[j] <= tp <= caps[j]]


def leaf_size(cfgs: Sequence[Config], caps: Sequence[int], d: int, chosen: Sequence[LeafStage]) -> int:
    """An upper bound on the replica lists of the leaf: per stage (allowed configurations)^D, multiplied."""
    return math.prod(len(_stage_configs(cfgs, caps, q)) ** d for _s, _e, q in chosen)


def _stage_lists(cfgs: Sequence[Config], caps: Sequence[int], d: int, q: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every list of D configurations of a stage that reduces to q."""
    allowed = _stage_configs(cfgs, caps, q)
    out = []
    for lst in itertools.product(allowed, repeat=d):
        least: dict[int, int] = {}
        for k in lst:
            j, tp = cfgs[k]
            least[j] = min(least.get(j, tp), tp)
        if least == {cfgs[k][0]: cfgs[k][1] for k in q}:
            out.append(lst)
    return out


def best_of_leaf(
    problem: HeteroProblem,
    columns: Sequence[tuple[str, str, int]],
    cfgs: Sequence[Config],
    mbs: int,
    d: int,
    chosen: Sequence[LeafStage],
) -> tuple[float, HeteroPlan | None]:
    """The least iteration seconds over every plan reducing to the leaf (module docstring) and a plan that has it
    (``inf``, None: none fits).  ``columns``: (kind, zone, count) per column index."""
    p = len(chosen)
    per_stage = []
    for i, (s, e, q) in enumerate(chosen):
        lists = []
        for lst in _stage_lists(cfgs, [c[2] for c in columns], d, q):
            kinds_tps = {(columns[cfgs[k][0]][0], cfgs[k][1]) for k in lst}
            if all(memory_bytes(problem, mbs, tp, s, e, p - i) <= problem.cluster.memory_of(g) for g, tp in kinds_tps):
                lists.append(lst)
        if not lists:
            return math.inf, None
        per_stage.append(lists)
    best, best_plan = math.inf, None
    for combo in itertools.product(*per_stage):
        used = [0] * len(columns)
        for lst in combo:
            for k in lst:
                used[cfgs[k][0]] += cfgs[k][1]
        if any(u > c[2] for u, c in zip(used, columns)):
            continue
        reps = tuple(tuple(Replica(columns[cfgs[k][0]][0], columns[cfgs[k][0]][1], cfgs[k][1]) for k in lst) for lst in combo)
        plan = HeteroPlan(mbs, tuple((s, e) for s, e, _q in chosen), reps)
        v = evaluate(problem, plan).iteration_s
        if v < best:
            best, best_plan = v, plan
    return best, best_plan
