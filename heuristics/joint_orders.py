r"""A heuristic for the joint problem on graphs with too many ideals: the exact DP along one topological order.

Fixing a topological order of the nodes (zero-byte edges between consecutive nodes) leaves ``n + 1``
ideals, the order's prefixes, so the exact DP of :mod:`milp_partition.joint.dp` runs in seconds and
returns the best plan whose stages are runs of that order.  Every such plan is a plan of the problem:
the added edges carry no bytes, so a stage's time is the same, and the chain's verifier scores it on
the original problem.  Orders that finish one chain before the next (Kahn's algorithm taking the
latest ready node first) give stages that cut few chains, so little boundary traffic: on wide graphs
(parallel chains) that is where good plans are.  The first order takes ready nodes in file order, the
others in a seeded random order.  A heuristic: its plans prove nothing about the optimum.

Orders of groups (:func:`grouped_order_dp`): one order forces every stage to be a run of it, and the
best plans of wide graphs cut several chains at once, in different places.  Splitting the graph's
chains (:func:`~milp_partition.joint.segment_bound.chains`) into ``g`` groups and chaining each group's
nodes in the order (zero-byte edges between consecutive nodes of one group only) keeps about
:math:`\prod_g (n_g + 1)` ideals: every plan whose stages interleave the groups freely but each group
along the order.  Two or three groups cost a fraction of a second to seconds a try (four parallel chains
of ten layers: the optimum in twelve tries of three groups, 1% above it with two; one group: 5.4%).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

from milp_partition.budget import Budget
from milp_partition.joint.dp import TooManyIdeals, joint_data, search
from milp_partition.joint.problem import JointEdge, JointPlan, JointProblem
from milp_partition.joint.segment_bound import chains

#: a grouped order whose problem has more ideals than this is skipped (the DP's passes would take seconds each)
MAX_GROUPED_IDEALS = 6_000


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


def order_dp(
    problem: JointProblem,
    budget: Budget,
    orders: int = 200,
    seed: int = 0,
    pool: list[tuple[JointPlan, float]] | None = None,
) -> tuple[JointPlan | None, float]:
    """The best plan of the exact DP along up to ``orders`` depth-first orders (module docstring), within ``budget``.

    Returns ``(plan, its DP value)`` or ``(None, inf)``; ``pool`` gets every plan that beat the best so far (the best
    last).  An interrupt (Ctrl-C) is raised again once the search it stopped has kept its plan in ``pool``.
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
            if pool is not None:
                pool.append(best)
        if found.interrupted:  # the search kept its plan; the interrupt goes on to the caller
            raise KeyboardInterrupt
    return best


def along_groups(problem: JointProblem, order: list[str], groups: list[int]) -> JointProblem:
    """The problem with a zero-byte edge between consecutive nodes of ``order`` that are in the same group.

    ``groups``: per node (in ``problem.nodes`` order) its group.  The added edges follow ``order``, so the
    graph stays acyclic; its plans are plans of ``problem`` with the same times (the edges carry no bytes).
    """
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    last: dict[int, str] = {}
    extra = []
    for v in order:
        g = groups[index[v]]
        if g in last:
            extra.append(JointEdge(last[g], v, 0.0))
        last[g] = v
    return replace(problem, edges=problem.edges + tuple(extra))


def chain_groups(problem: JointProblem, count: int, rng: random.Random) -> list[int]:
    """Each node's group: the graph's chains, shuffled, each to the group with the fewest nodes so far."""
    found = [nodes for nodes, _ in chains(problem)]
    rng.shuffle(found)
    found.sort(key=len, reverse=True)  # long chains first (a stable sort keeps the shuffle among equals)
    sizes = [0] * count
    groups = [0] * len(problem.nodes)
    for nodes in found:
        g = min(range(count), key=lambda q: (sizes[q], q))
        sizes[g] += len(nodes)
        for v in nodes:
            groups[v] = g
    return groups


def grouped_order_dp(
    problem: JointProblem,
    budget: Budget,
    groups: tuple[int, ...] = (1, 2, 3),
    tries: int = 200,
    seed: int = 0,
    upper: tuple[JointPlan | None, float] = (None, math.inf),
    found: list[tuple[JointPlan, float]] | None = None,
) -> tuple[JointPlan | None, float]:
    """The best plan of the exact DP along orders of ``g`` groups of chains (module docstring), within ``budget``.

    For each ``g`` in ``groups`` (one group: :func:`order_dp`), up to ``tries`` seeded depth-first orders and
    groupings; each ``g`` but the last gets at most half of the time left.  A grouped problem with more than
    :data:`MAX_GROUPED_IDEALS` ideals is skipped.  ``upper``: a plan already known and its value.  ``found``: where
    given, each plan that beat the best so far is appended with its DP value (in the order found: the best last;
    starts for a local search, :mod:`milp_partition.heuristics.joint_polish`).  Returns ``(plan, its DP value)`` or
    ``(None, inf)``.
    """
    rng = random.Random(seed)
    best = upper
    for q_g, count in enumerate(groups):
        share = budget if q_g == len(groups) - 1 else budget.capped(budget.left() / 2)
        if count <= 1:
            improving: list[tuple[JointPlan, float]] = []
            try:
                order_dp(problem, share, orders=tries, seed=seed, pool=improving)
            finally:  # its best (the last improving plan), on an interrupt too
                if improving and improving[-1][1] < best[1]:
                    best = improving[-1]
                    if found is not None:
                        found.append(best)
            continue
        seen: set[tuple[tuple[str, ...], tuple[int, ...]]] = set()
        for q in range(tries):
            if share.expired():
                break
            order = depth_first_order(problem, None if q == 0 else rng)
            grouping = chain_groups(problem, count, rng)
            if (tuple(order), tuple(grouping)) in seen:
                continue
            seen.add((tuple(order), tuple(grouping)))
            try:
                data = joint_data(along_groups(problem, order, grouping), MAX_GROUPED_IDEALS)
            except TooManyIdeals:
                continue
            result = search(data, budget=share, upper_s=best[1] * (1 + 1e-9))
            if result.plan is not None and result.value < best[1]:
                best = (result.plan, result.value)
                if found is not None:
                    found.append((result.plan, result.value))
            if result.interrupted:  # its plan is kept in ``found``; the interrupt goes on to the caller
                raise KeyboardInterrupt
    return best
