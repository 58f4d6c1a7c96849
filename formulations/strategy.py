r"""Layer-wise parallelization strategies as an integer program (Alpa's encoding).

Layers :math:`v` with configurations :math:`C_v`, node costs :math:`a_{vc}`, edge
matrices :math:`E^{uv}_{ij}`, optional per-device memory :math:`m_{vc}` and limit
:math:`M`.  Variables :math:`x_{vc} \in \{0,1\}` (layer v takes configuration c)
and :math:`y^{uv}_{ij} \in [0,1]` (edge (u,v) takes the pair (i,j)).

.. math::

    \min \sum_{v,c} a_{vc} x_{vc} + \sum_{(u,v)} \sum_{i,j} E^{uv}_{ij} y^{uv}_{ij}
    \quad \text{s.t.}

    \text{(a) one-hot:}\quad & \textstyle\sum_{c} x_{vc} = 1 & \forall v \\
    \text{(b) row marginal:}\quad & \textstyle\sum_{j} y^{uv}_{ij} = x_{ui} & \forall (u,v), i \\
    \text{(c) column marginal:}\quad & \textstyle\sum_{i} y^{uv}_{ij} = x_{vj} & \forall (u,v), j \\
    \text{(d) memory:}\quad & \textstyle\sum_{v,c} m_{vc} x_{vc} \le M & \text{static model, when a limit is set} \\
    \text{(d') live memory:}\quad & \textstyle\sum_{v,c} (m_{vc} - g_{vc}) x_{vc}
        + \sum_{u \in L_t} \sum_c g_{uc} x_{uc} \le M & \forall t, \text{ liveness model} \\
    \text{(e) bounds:}\quad & L \le \text{objective} \le U & \text{when given} \\
    \text{(f) ties:}\quad & x_{vc} = x_{wc} & \forall \{v, w\} \text{ tied}, c \text{ (opt-in)}

Under the liveness model (:class:`~milp_partition.strategy.StrategyProblem`),
:math:`g_{vc}` is the activation part of :math:`m_{vc}` and :math:`L_t` the layers
whose output is alive at step t of the schedule: those at or before t in the schedule
whose last consumer is at or after t (a layer with no consumer: only its own step).
Ties (f) force layers of identical repeated blocks to one configuration: an
approximation that can only raise the optimum, used only when asked for.

With x integral, (b) and (c) leave exactly one feasible y per edge, the indicator of
the chosen pair (a transportation polytope whose margins are unit vectors), so y may
be continuous: CBC gets continuous y, CP-SAT (integers only) gets Boolean y, the same
set of solutions.  Alpa (Zheng et al., OSDI 2022) uses this encoding; PaSE (Elango,
IPDPS 2021) solves the unconstrained case by dynamic programming.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from milp_partition.backends.model import Model, Sense, Var, VarKind
from milp_partition.errors import ModelError
from milp_partition.strategy.problem import StrategyProblem, StrategySolution


@dataclass(frozen=True)
class StrategyFormulationSettings:
    """Options that never change the optimum.

    Attributes
    ----------
    integer_edge_variables
        Declare y Boolean (CP-SAT needs it) instead of continuous (enough for a MIP solver).
    """

    integer_edge_variables: bool = True


@dataclass
class StrategyModel:
    """A built model with the handles :func:`hint` and :func:`decode` need."""

    problem: StrategyProblem
    model: Model
    x: list[list[Var]]
    y: list[np.ndarray] = field(default_factory=list)  # per edge, an object array of Var, shape (|C_u|, |C_v|)
    objective_terms: int = 0


def build(
    problem: StrategyProblem,
    *,
    upper_bound: float | None = None,
    lower_bound: float | None = None,
    settings: StrategyFormulationSettings = StrategyFormulationSettings(),
    ties: Sequence[Sequence[int]] = (),
) -> StrategyModel:
    """Build the integer program of ``problem`` (see the module docstring).

    ``ties`` lists groups of layer indices with the same configuration list that
    must take the same configuration (constraint (f)).
    """
    model = Model(name=f"strategy_{problem.name or 'graph'}")
    index = problem.index
    x = [[model.add_var(f"x[{v},{c}]") for c in range(len(node.configs))] for v, node in enumerate(problem.nodes)]
    sm = StrategyModel(problem, model, x)
    objective: list[tuple[Var, float]] = []

    for v, node in enumerate(problem.nodes):  # (a) one-hot
        model.add_constraint([(var, 1.0) for var in x[v]], Sense.EQ, 1.0, f"onehot[{node.id}]")
        objective.extend((x[v][c], float(a)) for c, a in enumerate(node.cost) if a != 0)

    kind = VarKind.BINARY if settings.integer_edge_variables else VarKind.CONTINUOUS
    for k, edge in enumerate(problem.edges):
        u, v = index[edge.source], index[edge.target]
        rows, cols = edge.cost.shape
        y = np.empty((rows, cols), dtype=object)
        for i in range(rows):
            for j in range(cols):
                y[i, j] = model.add_var(f"y[{k},{i},{j}]", kind, 0.0, 1.0)
        sm.y.append(y)
        for i in range(rows):  # (b) row marginal
            model.add_constraint([*((y[i, j], 1.0) for j in range(cols)), (x[u][i], -1.0)], Sense.EQ, 0.0, f"row[{k},{i}]")
        for j in range(cols):  # (c) column marginal
            model.add_constraint([*((y[i, j], 1.0) for i in range(rows)), (x[v][j], -1.0)], Sense.EQ, 0.0, f"col[{k},{j}]")
        nz = np.nonzero(edge.cost)
        objective.extend((y[i, j], float(edge.cost[i, j])) for i, j in zip(*nz))

    if problem.memory_limit_bytes is not None and problem.memory_model == "static":  # (d) memory
        terms = [
            (x[v][c], float(node.memory_bytes[c]))  # type: ignore[index]
            for v, node in enumerate(problem.nodes)
            for c in range(len(node.configs))
            if node.memory_bytes is not None and node.memory_bytes[c] != 0
        ]
        model.add_constraint(terms, Sense.LE, float(problem.memory_limit_bytes), "memory")

    if problem.memory_limit_bytes is not None and problem.memory_model == "liveness":  # (d') live memory
        for t, live in enumerate(live_sets(problem)):
            terms = []
            for v, node in enumerate(problem.nodes):
                mem = node.memory_bytes if node.memory_bytes is not None else np.zeros(len(node.configs))
                act = node.activation_bytes if node.activation_bytes is not None else np.zeros_like(mem)
                part = mem if v in live else mem - act
                terms.extend((x[v][c], float(part[c])) for c in range(len(node.configs)) if part[c] != 0)
            model.add_constraint(terms, Sense.LE, float(problem.memory_limit_bytes), f"live_memory[{t}]")

    for group in ties:  # (f) ties
        first = group[0]
        for w in group[1:]:
            for c in range(len(x[first])):
                model.add_constraint([(x[first][c], 1.0), (x[w][c], -1.0)], Sense.EQ, 0.0, f"tie[{first},{w},{c}]")

    if upper_bound is not None:  # (e) bounds
        model.add_constraint(objective, Sense.LE, float(upper_bound), "upper_bound")
    if lower_bound is not None:
        model.add_constraint(objective, Sense.GE, float(lower_bound), "lower_bound")
    model.minimize(objective)
    sm.objective_terms = len(objective)
    return sm


def live_sets(problem: StrategyProblem) -> list[set[int]]:
    """For each step t of the schedule, the layers whose output activation is alive (set :math:`L_t`)."""
    index = problem.index
    n = len(problem.nodes)
    succ: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for e in problem.edges:
        succ[index[e.source]].append(index[e.target])
        indegree[index[e.target]] += 1
    ready = [v for v in range(n) if indegree[v] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for w in succ[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                heapq.heappush(ready, w)
    if len(order) != n:
        raise ModelError("the liveness memory model needs an acyclic layer graph; this one has a cycle")
    step = {v: t for t, v in enumerate(order)}
    last = [max((step[w] for w in succ[v]), default=step[v]) for v in range(n)]
    return [{v for v in range(n) if step[v] <= t <= last[v]} for t in range(n)]


def hint(sm: StrategyModel, solution: StrategySolution) -> None:
    """A complete warm start from ``solution``."""
    picked = _picked(sm.problem, solution)
    for v, xs in enumerate(sm.x):
        for c, var in enumerate(xs):
            sm.model.set_hint(var, 1.0 if picked[v] == c else 0.0)
    index = sm.problem.index
    for edge, y in zip(sm.problem.edges, sm.y):
        i0, j0 = picked[index[edge.source]], picked[index[edge.target]]
        for (i, j), var in np.ndenumerate(y):
            sm.model.set_hint(var, 1.0 if (i, j) == (i0, j0) else 0.0)


def _picked(problem: StrategyProblem, solution: StrategySolution) -> list[int]:
    return [list(node.configs).index(solution.choice[node.id]) for node in problem.nodes]


def decode(sm: StrategyModel, values: list[float]) -> StrategySolution:
    """The configuration of every layer in ``values``."""
    choice = {}
    for node, xs in zip(sm.problem.nodes, sm.x):
        c = int(np.argmax([values[var.index] for var in xs]))
        choice[node.id] = node.configs[c]
    return StrategySolution(choice)
