"""Finding layers of identical repeated blocks, to tie their configurations (an opt-in approximation).

Transformer stacks repeat one block many times; giving every copy of a layer the
same configuration shrinks the search a lot.  It is an approximation: the tied
optimum can only be worse than or equal to the exact one (the first and last
blocks see different neighbours), so the solve chain reports it as a feasible
answer with the untied problem's proven bound, never as an optimum.

Layers are grouped by colour refinement (1-dimensional Weisfeiler-Lehman,
Weisfeiler and Leman 1968; Shervashidze et al., JMLR 2011): a layer's first
colour is its configuration list, node costs and memory; each round adds the
multiset of (direction, edge matrix, neighbour colour) over its edges.  After
``rounds`` rounds, layers of one colour have identical tables up to that radius.
Groups need at least two layers and one configuration list.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, StrategySolution


@dataclass(frozen=True)
class TieSettings:
    """Attributes
    ----------
    rounds
        Colour-refinement rounds: the radius (in edges) within which tied layers look alike.
    """

    rounds: int = 2


def _digest(*parts: object) -> str:
    h = hashlib.blake2b(digest_size=12)
    for part in parts:
        if isinstance(part, np.ndarray):
            h.update(str(part.shape).encode())
            h.update(np.ascontiguousarray(part, dtype=np.float64).tobytes())
        else:
            h.update(repr(part).encode())
        h.update(b"|")
    return h.hexdigest()


def find_ties(problem: StrategyProblem, settings: TieSettings = TieSettings()) -> tuple[tuple[int, ...], ...]:
    """Groups of layer indices (each sorted, at least two) whose layers look identical within ``rounds`` edges."""
    index = problem.index
    colour = [
        _digest(
            node.configs,
            np.asarray(node.cost),
            np.asarray(node.memory_bytes) if node.memory_bytes is not None else None,
            np.asarray(node.activation_bytes) if node.activation_bytes is not None else None,
        )
        for node in problem.nodes
    ]
    incident: list[list[tuple[str, str, int]]] = [[] for _ in problem.nodes]
    for e in problem.edges:
        u, v = index[e.source], index[e.target]
        m = np.asarray(e.cost)
        incident[u].append(("out", _digest(m), v))
        incident[v].append(("in", _digest(m.T), u))
    for _ in range(settings.rounds):
        colour = [_digest(colour[v], sorted((d, m, colour[w]) for d, m, w in incident[v])) for v in range(len(problem.nodes))]
    groups: dict[tuple[str, tuple[str, ...]], list[int]] = defaultdict(list)
    for v, c in enumerate(colour):
        groups[(c, problem.nodes[v].configs)].append(v)
    return tuple(tuple(g) for g in groups.values() if len(g) > 1)


@dataclass(frozen=True)
class Quotient:
    """A tied problem as a smaller strategy problem: one layer per tie group.

    Attributes
    ----------
    problem
        One layer per group (named after its first member) and one per untied layer;
        node costs and memory summed over members, edges between the same two
        layers summed, edges inside a group folded into its node cost (both ends
        take the same configuration, so only the diagonal counts).
    members
        For each quotient layer id, the original layer ids it stands for.
    """

    problem: StrategyProblem
    members: dict[str, tuple[str, ...]]

    def lift(self, solution: StrategySolution) -> StrategySolution:
        """The original problem's solution: every member takes its group's configuration."""
        return StrategySolution({m: solution.choice[q] for q, ms in self.members.items() for m in ms})


def quotient(problem: StrategyProblem, ties: tuple[tuple[int, ...], ...]) -> Quotient:
    """The problem whose solutions are exactly the tied solutions of ``problem`` (static or no memory model).

    Raises
    ------
    ValueError
        Under the liveness memory model, whose per-step memory does not sum over a group.
    """
    from dataclasses import replace

    if problem.memory_model != "static" and problem.memory_limit_bytes is not None:
        raise ValueError("tying by quotient needs the static memory model")
    index = problem.index
    rep = list(range(len(problem.nodes)))
    for group in ties:
        for v in group:
            rep[v] = group[0]
    members: dict[str, list[str]] = defaultdict(list)
    cost: dict[int, np.ndarray] = {}
    memory: dict[int, np.ndarray | None] = {}
    for v, node in enumerate(problem.nodes):
        r = rep[v]
        members[problem.nodes[r].id].append(node.id)
        if r not in cost:
            cost[r] = np.asarray(node.cost, dtype=np.float64).copy()
            memory[r] = None if node.memory_bytes is None else np.asarray(node.memory_bytes, dtype=np.int64).copy()
        else:
            cost[r] += node.cost
            held = memory[r]
            if held is not None:
                memory[r] = held + np.asarray(node.memory_bytes, dtype=np.int64)
    edges: dict[tuple[int, int], np.ndarray] = {}
    for e in problem.edges:
        a, b = rep[index[e.source]], rep[index[e.target]]
        m = np.asarray(e.cost, dtype=np.float64)
        if a == b:
            cost[a] = cost[a] + np.diagonal(m)
        elif (b, a) in edges:
            edges[(b, a)] = edges[(b, a)] + m.T
        else:
            edges[(a, b)] = edges.get((a, b), 0) + m
    nodes = tuple(
        StrategyNode(problem.nodes[r].id, problem.nodes[r].name, problem.nodes[r].configs, cost[r], memory[r])
        for r in sorted(cost)
    )
    new_edges = tuple(StrategyEdge(problem.nodes[a].id, problem.nodes[b].id, m) for (a, b), m in edges.items())
    tied = replace(problem, nodes=nodes, edges=new_edges, name=f"{problem.name} (tied)")
    return Quotient(tied, {k: tuple(v) for k, v in members.items()})
