r"""A proven lower bound for the joint problem that needs no ideals: chain segments in pooled stage classes.

For graphs with too many ideals for the exact DP (wide graphs: parallel chains between a source and a
sink).  Every stage of a plan has a class :math:`\kappa = (d, t, y)`: its data- and tensor-parallel
degrees and its micro-batches in flight :math:`y = \lceil s / d \rceil`.  The graph's nodes are split
into chains :math:`h = (v_1, \ldots, v_L)`, maximal paths whose inner edges :math:`v_j \to v_{j+1}` are
the only out-edge of :math:`v_j` and the only in-edge of :math:`v_{j+1}` (every other node is a chain of
one).  In a plan, the nodes of a chain in one stage form a run :math:`v_{i+1}..v_j` (stages are ordered
along every path); a segment variable :math:`f_{h i j \kappa}` says that run is in a stage of class
:math:`\kappa`.  Where two runs meet, the inner edge crosses a stage boundary and both stages pay
:math:`2 c_e` bytes (:math:`\gamma_{hij}`: the bytes of the segment's inner edges at its two ends that
leave the chain's run, over :math:`B`).  For a target :math:`T`, with
:math:`\tau_{c d} = p_c + 4 (d - 1) w_c / (N B)`:

.. math::

    \exists\, n_\kappa \ge 0,\ f_{h i j \kappa}, x_{v \kappa c}, \mathrm{in}_{e\kappa}, \mathrm{out}_{e\kappa} \in [0, 1]
    \quad \text{s.t.}

    \text{(a) cover:}\quad & \textstyle\sum_{i, \kappa} f_{h i j \kappa}
        - \sum_{j', \kappa} f_{h j j' \kappa} = [j = L_h] - [j = 0] & \forall h, j = 0..L_h \\
    \text{(b) configuration:}\quad & \textstyle\sum_{c \in C_{v t_\kappa}} x_{v \kappa c}
        = \sum_{i < \mathrm{pos}(v) \le j} f_{h i j \kappa} & \forall v \in h, \kappa \\
    \text{(c) devices:}\quad & \textstyle\sum_\kappa n_\kappa d_\kappa t_\kappa \le k,\;
        \sum_\kappa n_\kappa d_\kappa \le N \\
    \text{(d) positions:}\quad & \textstyle\sum_{\kappa:\, \sigma_\kappa \subseteq [a, b]} n_\kappa \le b - a + 1,\;
        \sum_{\kappa:\, \omega_\kappa \subseteq [a, b]} d_\kappa n_\kappa \le b - a + 1,\;
        \sum_{\kappa:\, d_\kappa = \delta,\, \omega_\kappa \subseteq [a, b]} n_\kappa
        \le \lfloor (b - a + 1) / \delta \rfloor
        & \forall 1 \le a \le b \le \min(k, N), \delta \\
    & \textstyle\sum_{\kappa:\, y_\kappa = 1} n_\kappa \le 1 \\
    \text{(e) time:}\quad & \textstyle\sum_{v, c} \tau_{c d_\kappa} x_{v \kappa c}
        + \sum_{h, i, j} \gamma_{h i j} f_{h i j \kappa}
        + \sum_{e \notin \text{chains}} \tfrac{2 c_e}{B} (\mathrm{in}_{e\kappa} + \mathrm{out}_{e\kappa})
        \le n_\kappa d_\kappa T & \forall \kappa \\
    \text{(f) memory:}\quad & \textstyle\sum_{v, c} (a_c y_\kappa + b_c) x_{v \kappa c} \le n_\kappa M
        & \forall \kappa \\
    \text{(g) outer edges:}\quad & \mathrm{in}_{e\kappa} \ge X_{v\kappa} - X_{u\kappa},\;
        \mathrm{out}_{e\kappa} \ge X_{u\kappa} - X_{v\kappa}
        & \forall e = (u, v) \notin \text{chains}, \kappa \\
    \text{(h) fits a stage:}\quad & f_{h i j \kappa} = 0 \text{ where }
        \textstyle\sum_{v} \min_c \tau_{c d_\kappa} + \gamma_{hij} > d_\kappa T
        \text{ or } \sum_v \min_c (a_c y_\kappa + b_c) > M
        \text{ or } (y_\kappa > 1 \text{ and a } v \text{ is reached by every node}) & (v = v_{i+1}..v_j)

with :math:`X_{v\kappa} = \sum_{i < \mathrm{pos}(v) \le j} f_{h i j \kappa}` (the share of node v in class
:math:`\kappa`), :math:`\sigma_\kappa = [d (y - 1) + 1, \min(d y, \min(k, N))]` (the values of
:math:`s` a stage of the class can have) and :math:`\omega_\kappa = [\max(1, d (y - 2) + 2), \min(d y, \min(k, N))]`
(where the positions :math:`(s - d, s]` it owns lie), and :math:`\sum_\kappa n_\kappa` = the stages
when a shape forces them.  Every plan of value :math:`\le T` satisfies it, so "infeasible at T" proves
the optimum is above :math:`T`: set :math:`n_\kappa` to the number of its stages of class
:math:`\kappa`, :math:`f = 1` on each run's segment and class, :math:`x = 1` on each node's
configuration in its stage's class.  (a): the runs of a chain tile it; (e): the sum over the class's
stages of :math:`d \cdot TPS_i \le d T`, with fewer bytes (no sync bytes; an edge outside the chains
only where its ends' classes differ, (g), so its ends are in different stages); (f): the sum of their
memory; (c): the plan's sums.  (d): the stages' :math:`s_i = d_i + s_{i+1}` are distinct values in
:math:`[1, \min(k, N)]` and stage i owns the positions :math:`(s_{i+1}, s_i]`, disjoint from the others'; a
stage of class :math:`\kappa` has :math:`s \in \sigma_\kappa` (from :math:`y = \lceil s/d \rceil`) and owns
:math:`d` positions inside :math:`\omega_\kappa` (stages of one :math:`d`: whole numbers of them); only the
last stage has :math:`s = d`, i.e. :math:`y = 1` (any other has :math:`s = d + s_{i+1} > d`).  (h): a run
is inside one stage, whose :math:`d\,TPS` is at least the run's least time with its two boundary edges,
and whose memory at least the run's least memory; a node that every node reaches (a graph's one sink) is in
the last stage (the last stage's nodes reach it, so it is not earlier), whose :math:`y` is 1.  :math:`y` ranges over :math:`1..\lceil \min(k, N) / d \rceil`.  The relaxation forgets which
stage of a class a run is in (a class's stages pool their time and memory), the order of the stages,
and lets runs be fractional.

A linear program (the stage counts :math:`n_\kappa` are real too: integer ones moved the bound by about
2% on the wide benchmarks at many times the cost), solved by GLOP with every row scaled to :math:`O(1)`
(time over :math:`T`, bytes over :math:`M`); :func:`segment_bound` bisects
:math:`T` and takes a target as proven only when the solver answers infeasible, then lowers it by
``SAFETY_REL`` against the solver's feasibility tolerance (about 1e-6 absolute on those rows).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from milp_partition.backends.base import SolveStatus
from milp_partition.backends.ortools_direct import glop_solver, lp_status
from milp_partition.budget import Budget
from milp_partition.joint.problem import JointProblem

#: A target proven infeasible proves the optimum above ``target * (1 - SAFETY_REL)`` (the solver's tolerance).
SAFETY_REL = 1e-5
#: Past this many segment variables (chains' runs times classes; long chains grow it as their length squared,
#: and building the rows as the cube) :func:`segment_bound` does not build the program.
MAX_SEGMENT_VARIABLES = 300_000
#: Without a known plan the target doubles from the lower end at most this many times.
MAX_DOUBLINGS = 12


@dataclass(frozen=True)
class StageClass:
    """A stage's data-parallel degree ``d``, tensor-parallel degree ``t`` and micro-batches in flight ``y``."""

    d: int
    t: int
    y: int


def stage_options(problem: JointProblem) -> list[tuple[int, int]]:
    """Every ``(d, t)`` a stage can have: ``d | N``, ``d <= min(k, N)``, ``t`` offered, ``d t <= k`` (a forced shape's degrees)."""
    cl = problem.cluster
    smax = min(cl.device_count, problem.microbatches)
    shape = problem.shape
    degrees = [t for t in problem.degrees if shape is None or shape.tensor_parallel in (None, t)]
    divisors = [d for d in range(1, smax + 1) if problem.microbatches % d == 0]
    divisors = [d for d in divisors if shape is None or shape.data_parallel in (None, d)]
    return [(d, t) for d in divisors for t in degrees if d * t <= cl.device_count]


def stage_classes(problem: JointProblem) -> list[StageClass]:
    """Every class a stage can have: a :func:`stage_options` pair and ``1 <= y <= ceil(min(k, N) / d)``."""
    smax = min(problem.cluster.device_count, problem.microbatches)
    return [StageClass(d, t, y) for d, t in stage_options(problem) for y in range(1, -(-smax // d) + 1)]


def chains(problem: JointProblem) -> list[tuple[list[int], list[float]]]:
    """The graph's nodes as chains: ``(nodes in path order, bytes of each inner edge)``; every node in exactly one.

    An inner edge ``u -> v`` is ``u``'s only out-edge and ``v``'s only in-edge (one edge, not a repeated pair).
    """
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    outs: list[list[tuple[int, float]]] = [[] for _ in problem.nodes]
    ins: list[list[int]] = [[] for _ in problem.nodes]
    for e in problem.edges:
        outs[index[e.source]].append((index[e.target], e.bytes))
        ins[index[e.target]].append(index[e.source])
    nxt = {u: out[0] for u, out in enumerate(outs) if len(out) == 1 and len(ins[out[0][0]]) == 1 and out[0][0] != u}
    has_prev = {v for v, _ in nxt.values()}
    found = []
    for head in range(len(problem.nodes)):
        if head in has_prev:
            continue
        nodes, inner = [head], []
        while nodes[-1] in nxt:
            v, c = nxt[nodes[-1]]
            nodes.append(v)
            inner.append(c)
        found.append((nodes, inner))
    return found


def model_size(problem: JointProblem) -> int:
    """The number of segment variables the program would have: ``sum over chains of L (L + 1) / 2`` times the classes."""
    runs = sum(len(nodes) * (len(nodes) + 1) // 2 for nodes, _ in chains(problem))
    return runs * len(stage_classes(problem))


def _build(problem: JointProblem, target_s: float, classes: list[StageClass]) -> Any:
    """The relaxation at ``target_s`` (module docstring) as a pywraplp solver, rows scaled to O(1)."""
    cl = problem.cluster
    s = glop_solver()
    n = [s.NumVar(0.0, cl.device_count // (c.d * c.t), f"n{q}") for q, c in enumerate(classes)]
    time_rows: list[list[Any]] = [[] for _ in classes]  # terms of (e), in units of T
    mem_rows: list[list[Any]] = [[] for _ in classes]  # terms of (f), in units of M
    reduce = 4.0 / (problem.microbatches * cl.bandwidth_bytes_per_s)
    mass: dict[int, list[Any]] = {}  # node -> per class: X_{v kappa}
    last = _reached_by_all(problem)
    found = chains(problem)
    for nodes, inner in found:
        # per position and class, per configuration: (time in units of T, memory in units of M)
        use = [
            [
                [
                    (
                        (cfg.time_per_sample_s + reduce * (c.d - 1) * cfg.parameter_bytes) / target_s,
                        (cfg.activation_bytes * c.y + cfg.fixed_bytes) / problem.memory_bytes,
                    )
                    for cfg in problem.nodes[v].configs[c.t]
                ]
                for c in classes
            ]
            for v in nodes
        ]
        # a node every node reaches is in the last stage, whose y is 1: no other class can hold it, (h)
        least = [
            [
                (min(u[0] for u in cfgs) if v not in last or c.y == 1 else math.inf, min(u[1] for u in cfgs))
                for cfgs, c in zip(row, classes)
            ]
            for v, row in zip(nodes, use)
        ]
        covering = _cover(s, inner, classes, least, time_rows, cl.bandwidth_bytes_per_s * target_s)
        for pos, v in enumerate(nodes):
            mass[v] = [sum(covering[pos][q]) for q in range(len(classes))]
            for q in range(len(classes)):
                xs = [s.NumVar(0.0, 1.0, "") for _ in use[pos][q]]
                s.Add(sum(xs) == mass[v][q])  # (b) configuration
                for x, (units_t, units_m) in zip(xs, use[pos][q]):
                    time_rows[q].append(units_t * x)
                    mem_rows[q].append(units_m * x)
    _outer_edges(s, problem, found, mass, time_rows, cl.bandwidth_bytes_per_s * target_s)
    s.Add(sum(n[q] * c.d * c.t for q, c in enumerate(classes)) <= cl.device_count)  # (c) devices
    s.Add(sum(n[q] * c.d for q, c in enumerate(classes)) <= problem.microbatches)  # (c) devices
    smax = min(cl.device_count, problem.microbatches)
    for lo in range(1, smax + 1):
        for hi in range(lo, smax + 1):
            inside = [n[q] for q, c in enumerate(classes) if lo <= c.d * (c.y - 1) + 1 and min(c.d * c.y, smax) <= hi]
            if inside:
                s.Add(sum(inside) <= hi - lo + 1)  # (d) positions
            owned = [
                c.d * n[q] for q, c in enumerate(classes) if lo <= max(1, c.d * (c.y - 2) + 2) and min(c.d * c.y, smax) <= hi
            ]
            if owned:
                s.Add(sum(owned) <= hi - lo + 1)  # (d) positions (owned)
            for d in sorted({c.d for c in classes}):  # the same, rounded down, for the stages of one d
                same = [
                    n[q]
                    for q, c in enumerate(classes)
                    if c.d == d and lo <= max(1, d * (c.y - 2) + 2) and min(d * c.y, smax) <= hi
                ]
                if same and d > 1:
                    s.Add(sum(same) <= (hi - lo + 1) // d)  # (d) positions (owned, one d)
    s.Add(sum(n[q] for q, c in enumerate(classes) if c.y == 1) <= 1)  # (d) only the last stage has y = 1
    if problem.shape is not None and problem.shape.stages is not None:
        s.Add(sum(n) == problem.shape.stages)
    for q, c in enumerate(classes):
        s.Add(sum(time_rows[q]) <= c.d * n[q])  # (e) time
        s.Add(sum(mem_rows[q]) <= n[q])  # (f) memory
    return s


def _reached_by_all(problem: JointProblem) -> set[int]:
    """The nodes every node reaches (itself included): they are in the last stage of every plan."""
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    preds: list[list[int]] = [[] for _ in problem.nodes]
    for e in problem.edges:
        preds[index[e.target]].append(index[e.source])
    memo: dict[int, int] = {}  # node -> bitmask of its ancestors and itself

    def ancestors(v: int) -> int:
        stack = [v]
        while stack:  # iterative post-order: a node's mask after its predecessors'
            u = stack[-1]
            todo = [w for w in preds[u] if w not in memo]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            mask = 1 << u
            for w in preds[u]:
                mask |= memo[w]
            memo[u] = mask
        return memo[v]

    everyone = (1 << len(problem.nodes)) - 1
    return {v for v in range(len(problem.nodes)) if ancestors(v) == everyone}


def _cover(
    s: Any,
    inner: list[float],
    classes: list[StageClass],
    least: list[list[tuple[float, float]]],
    time_rows: list[list[Any]],
    scale_bytes: float,
) -> list[list[list[Any]]]:
    """One chain's segment variables with (a) cover and their boundary bytes in (e); ``[pos][class]``: those covering a node.

    ``least[pos][class]``: the node's least time (units of T) and least memory (units of M) in that class.  (h): a
    segment whose least time with its boundary bytes exceeds ``d`` (one stage's ``d T``), or whose least memory exceeds
    ``M``, fits no stage of the class: it gets no variable.
    """
    length = len(least)
    covering: list[list[list[Any]]] = [[[] for _ in classes] for _ in range(length)]
    ends: list[list[Any]] = [[] for _ in range(length + 1)]
    starts: list[list[Any]] = [[] for _ in range(length + 1)]
    for i in range(length):
        for j in range(i + 1, length + 1):
            # the inner edges at the run's ends cross a boundary: 2 c each, in units of T (the bytes over B T)
            edge_bytes = (inner[i - 1] if i > 0 else 0.0) + (inner[j - 1] if j < length else 0.0)
            for q, c in enumerate(classes):
                need_time = sum(least[pos][q][0] for pos in range(i, j)) + 2.0 * edge_bytes / scale_bytes
                need_memory = sum(least[pos][q][1] for pos in range(i, j))
                if need_time > c.d * (1 + 1e-9) or need_memory > 1 + 1e-9:
                    continue  # (h) fits no stage
                f = s.NumVar(0.0, 1.0, "")
                starts[i].append(f)
                ends[j].append(f)
                for pos in range(i, j):
                    covering[pos][q].append(f)
                if edge_bytes > 0:
                    time_rows[q].append(2.0 * edge_bytes / scale_bytes * f)
    for j in range(length + 1):
        s.Add(sum(ends[j]) - sum(starts[j]) == (1 if j == length else 0) - (1 if j == 0 else 0))  # (a) cover
    return covering


def _outer_edges(
    s: Any,
    problem: JointProblem,
    found: list[tuple[list[int], list[float]]],
    mass: dict[int, list[Any]],
    time_rows: list[list[Any]],
    scale_bytes: float,
) -> None:
    """(g): every edge that is not inside a chain crosses where its ends' classes differ; both ends' classes pay 2 c."""
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    inner = {(a, b) for nodes, _ in found for a, b in itertools.pairwise(nodes)}
    for e in problem.edges:
        u, v = index[e.source], index[e.target]
        if (u, v) in inner or e.bytes <= 0:
            continue
        for q, row in enumerate(time_rows):
            into, out = s.NumVar(0.0, 1.0, ""), s.NumVar(0.0, 1.0, "")
            s.Add(into >= mass[v][q] - mass[u][q])  # (g) outer edges
            s.Add(out >= mass[u][q] - mass[v][q])  # (g) outer edges
            row.append(2.0 * e.bytes / scale_bytes * (into + out))


def relaxation_feasible(problem: JointProblem, target_s: float, time_limit_s: float) -> bool | None:
    """Is the relaxation feasible at ``target_s``?  ``False``: the solver proved it infeasible (every plan's value is
    above ``target_s``, up to ``SAFETY_REL``); ``None``: undecided within ``time_limit_s``."""
    classes = stage_classes(problem)
    if not classes:
        return False
    s = _build(problem, target_s, classes)
    s.SetTimeLimit(max(1, int(time_limit_s * 1000)))
    status = lp_status(s.Solve())
    if status is SolveStatus.INFEASIBLE:
        return False
    if status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        return True
    return None


def segment_bound(problem: JointProblem, lower_s: float, upper_s: float, budget: Budget, rel_tol: float = 1e-3) -> float:
    """Raise the proven bound ``lower_s`` (> 0) by bisection on the relaxation's target between it and ``upper_s``.

    ``upper_s`` may be infinite (no plan known): the target then doubles from ``lower_s`` until the relaxation is
    feasible (at most ``MAX_DOUBLINGS`` times).  Each pass may take what is left of ``budget``; a pass left undecided ends the search.  Returns the
    largest of ``lower_s`` and every target proven infeasible (lowered by ``SAFETY_REL``).
    ``lower_s`` unchanged where the program would have more than ``MAX_SEGMENT_VARIABLES`` segment variables.
    """
    if not stage_classes(problem) or model_size(problem) > MAX_SEGMENT_VARIABLES:
        return lower_s  # no class (no plan at all) or too large a program to build within a solve's budget
    lo, hi, proven = lower_s, upper_s, lower_s
    doublings = 0
    while (not math.isfinite(hi) or hi - lo > rel_tol * hi) and lo > 0 and not budget.expired():
        if not math.isfinite(hi):
            doublings += 1
            if doublings > MAX_DOUBLINGS:
                break  # no plan known and none of the relaxation up to 2^MAX_DOUBLINGS times the start: leave it
        mid = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * lo
        got = relaxation_feasible(problem, mid, budget.left())
        if got is None:
            break
        if got:
            hi = mid
        else:
            lo = mid
            proven = max(proven, mid * (1 - SAFETY_REL))
    return proven
