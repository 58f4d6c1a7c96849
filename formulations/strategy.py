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
    \text{(d) memory:}\quad & \textstyle\sum_{v,c} m_{vc} x_{vc} \le M & \text{when a limit is set} \\
    \text{(e) bounds:}\quad & L \le \text{objective} \le U & \text{when given}

With x integral, (b) and (c) leave exactly one feasible y per edge, the indicator of
the chosen pair (a transportation polytope whose margins are unit vectors), so y may
be continuous: CBC gets continuous y, CP-SAT (integers only) gets Boolean y, the same
set of solutions.  Alpa (Zheng et al., OSDI 2022) uses this encoding; PaSE (Elango,
IPDPS 2021) solves the unconstrained case by dynamic programming.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from milp_partition.backends.model import Model, Sense, Var, VarKind
from milp_partition.strategy import StrategyProblem, StrategySolution


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
) -> StrategyModel:
    """Build the integer program of ``problem`` (see the module docstring)."""
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

    if problem.memory_limit_bytes is not None:  # (d) memory
        terms = [
            (x[v][c], float(node.memory_bytes[c]))  # type: ignore[index]
            for v, node in enumerate(problem.nodes)
            for c in range(len(node.configs))
            if node.memory_bytes is not None and node.memory_bytes[c] != 0
        ]
        model.add_constraint(terms, Sense.LE, float(problem.memory_limit_bytes), "memory")

    if upper_bound is not None:  # (e) bounds
        model.add_constraint(objective, Sense.LE, float(upper_bound), "upper_bound")
    if lower_bound is not None:
        model.add_constraint(objective, Sense.GE, float(lower_bound), "lower_bound")
    model.minimize(objective)
    sm.objective_terms = len(objective)
    return sm


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
