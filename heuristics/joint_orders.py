"""A heuristic for the joint problem on graphs with too many ideals: the exact DP along one topological order.

Fixing a topological order of the nodes (zero-byte edges between consecutive nodes) leaves ``n + 1``
ideals, the order's prefixes, so the exact DP of :mod:`milp_partition.joint.dp` runs in seconds and
returns the best plan whose stages are runs of that order.  Every such plan is a plan of the problem:
the added edges carry no bytes, so a stage's time is the same, and the chain's verifier scores it on
the original problem.  Orders that finish one chain before the next (Kahn's algorithm taking the
latest ready node first) give stages that cut few chains, so little boundary traffic: on wide graphs
(parallel chains) that is where good plans are.  The first order takes ready nodes in file order, the
others in a seeded random order.  A heuristic: its plans prove nothing about the optimum.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

from milp_partition.budget import Budget
from milp_partition.joint.dp import joint_data, search
from milp_partition.joint.problem import JointEdge, JointPlan, JointProblem


def depth_first_order(problem: JointProblem, rng: random.Random | None = None) -> list[str]:
    """A topological order taking the latest ready node first (one chain to its end, then the next).

    ``rng``: shuffle the nodes that become ready together (``None``: file order, the first listed first).
    """
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    succs: list[list[int]] = [[] for _ in problem.nodes]
    indeg = [0] * len(problem.nodes)
    for e in problem.edges:
        succs[index[e.source]].append(index[e.target])
        indeg[index[e.target]] += 1
    stack = [v for v in range(len(problem.nodes)) if indeg[v] == 0][::-1]
    order: list[str] = []
    while stack:
        v = stack.pop()
        order.append(problem.nodes[v].id)
        ready = []
        for u in succs[v]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
        if rng is not None:
            rng.shuffle(ready)
        stack.extend(ready[::-1])
    if len(order) != len(problem.nodes):
        raise ValueError("the graph is not a DAG")
    return order


def along_order(problem: JointProblem, order: list[str]) -> JointProblem:
    """The problem with a zero-byte edge between consecutive nodes of ``order``: its ideals are the order's prefixes."""
    extra = tuple(JointEdge(u, v, 0.0) for u, v in itertools.pairwise(order))
    return replace(problem, edges=problem.edges + extra)


def order_dp(problem: JointProblem, budget: Budget, orders: int = 200, seed: int = 0) -> tuple[JointPlan | None, float]:
    """The best plan of the exact DP along up to ``orders`` depth-first orders (module docstring), within ``budget``.

    Returns ``(plan, its DP value)`` or ``(None, inf)``.
    """
    rng = random.Random(seed)
    best: tuple[JointPlan | None, float] = (None, math.inf)
    seen: set[tuple[str, ...]] = set()
    for q in range(orders):
        if budget.expired():
            break
        order = depth_first_order(problem, None if q == 0 else rng)
        if tuple(order) in seen:
            continue
        seen.add(tuple(order))
        found = search(joint_data(along_order(problem, order)), budget=budget, upper_s=best[1] * (1 + 1e-9))
        if found.plan is not None and found.value < best[1]:
            best = (found.plan, found.value)
    return best
