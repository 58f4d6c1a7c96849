"""Baselines for the joint problem that the gap tool measures against the optimum.

- :func:`piper_style`: the ideal DP with Piper's greedy configuration choice (:func:`~milp_partition.joint.dp.search` with ``greedy=True``).
- :func:`pipedream_2bw_style`: ``l`` stages cut along one topological order with equal numbers of the repeated block
  (the most frequent node name; every node when no name repeats) per stage, one ``d`` and one ``t`` for all stages;
  the best such plan over ``l``, ``d``, ``t`` with the exact per-stage configuration choice.
- :func:`all_data_parallel`: one stage holding every node, the best ``d``, ``t``.
"""

from __future__ import annotations

import math
from collections import Counter

from milp_partition.budget import Budget
from milp_partition.joint.dp import JointData, JointDP, search
from milp_partition.joint.problem import JointPlan, JointStage


def piper_style(data: JointData, time_limit_s: float = math.inf, budget: Budget | None = None) -> tuple[JointPlan | None, float]:
    """Piper's planner as described: DP over ideals, greedy choice of configurations (best ratio first).

    It stops when ``budget`` (capped at ``time_limit_s``) is spent, with the best plan it had (or none).
    """
    r = search(data, greedy=True, time_limit_s=time_limit_s, budget=budget)
    return r.plan, r.value


def _topological(data: JointData) -> list[int]:
    n = len(data.ids)
    indeg = [len(data.preds[v]) for v in range(n)]
    ready = [v for v in range(n) if indeg[v] == 0]
    order: list[int] = []
    while ready:
        v = ready.pop(0)
        order.append(v)
        for u, _ in data.succs[v]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    return order


def _uniform_plans(data: JointData, stage_counts: list[int], budget: Budget | None = None) -> tuple[JointPlan | None, float]:
    """Best plan over ``l`` in ``stage_counts`` equal-block stages and one (d, t) for all (exact configurations).

    Once ``budget`` is spent (checked per ``l``) it returns the best plan so far, once it has one (the cheap
    baselines always give the chain a plan to settle on).
    """
    order = _topological(data)
    names = Counter(data.problem.nodes[v].name for v in order)
    block, reps = names.most_common(1)[0] if names else ("", 0)
    is_block = [data.problem.nodes[v].name == block for v in order] if reps >= 2 else [True] * len(order)
    total = sum(is_block)
    dp = JointDP(data)
    cl = data.problem.cluster
    best: tuple[JointPlan | None, float] = (None, math.inf)
    for stages in stage_counts:
        if stages < 1 or total % stages:
            continue
        if best[0] is not None and budget is not None and budget.expired():
            break
        per = total // stages
        cuts, seen = [], 0
        for pos in range(len(order)):
            seen += is_block[pos]
            if is_block[pos] and seen % per == 0 and seen < total:
                cuts.append(pos + 1)
        bounds = [0, *cuts, len(order)]
        masks = []
        for q in range(len(bounds)):
            masks.append(sum(1 << v for v in order[: bounds[q]]))
        if any(m not in data.ideal_index for m in masks):
            continue
        idx = [data.ideal_index[m] for m in masks]
        for t in data.degrees:
            for d in data.divisors:
                if stages * d * t > cl.device_count or stages * d > data.problem.microbatches:
                    continue
                worst, plan_stages = 0.0, []
                for q in range(stages):
                    i, j = idx[q + 1], idx[q]
                    tab = dp.table(i, j, t)
                    y = stages - q  # s = (stages - q) d, y = ceil(s / d)
                    val = dp.value(tab, d, y)
                    worst = max(worst, val)
                    if not math.isfinite(worst) or worst >= best[1]:
                        break
                    pick = dp.choice(tab, d, y)
                    cfg = {data.ids[v]: data.problem.nodes[v].configs[t][o].id for v, o in zip(tab.nodes, pick)}
                    plan_stages.append(JointStage(tuple(data.ids[v] for v in tab.nodes), d, t, cfg))
                if len(plan_stages) == stages and worst < best[1]:
                    best = (JointPlan(tuple(plan_stages)), worst)
    return best


def pipedream_2bw_style(data: JointData, budget: Budget | None = None) -> tuple[JointPlan | None, float]:
    """PipeDream-2BW style: equal numbers of repeated blocks per stage, one d and t everywhere; the best such plan."""
    return _uniform_plans(data, list(range(1, data.problem.cluster.device_count + 1)), budget)


def all_data_parallel(data: JointData, budget: Budget | None = None) -> tuple[JointPlan | None, float]:
    """One stage with every node; the best data- and tensor-parallel degrees."""
    return _uniform_plans(data, [1], budget)
