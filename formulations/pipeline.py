r"""Pipeline partitioning as an integer program (Tarnawski et al., NeurIPS 2020).

Notation
--------
Colocation classes :math:`c \in C` (nodes of one class share a device; a node
without a group is a class of its own), devices :math:`d \in D` (accelerators
:math:`A`, then host CPU cores), nodes :math:`v` with class :math:`c(v)`,
time :math:`t_{cd} = \sum_{v \in c} \mathrm{time}(v, d)`, output transfer time
:math:`\tau_u` of node :math:`u` (see :mod:`milp_partition.pipeline.costs`), memory
coefficient :math:`m_{cd}` (static: parameter + activation + other bytes; 1F1B:
:math:`f\,p_c + (s - i_d)\,a_c + o_c` with :math:`i_d` the accelerator's position
and :math:`s = |A|`), capacity :math:`M_d`.

Variables: :math:`x_{cd} \in \{0,1\}` (class c on device d, only where every node
of c may run on d); :math:`z_{vd} \in \{0,1\}` for forward nodes (v is reachable
from d's forward nodes); :math:`\mathrm{in}_{ud}, \mathrm{out}_{ud} \in \{0,1\}`
for accelerators d and nodes with :math:`\tau_u > 0`; :math:`T \ge 0`.

.. math::

    \min T \quad \text{s.t.}

    \text{(a) assign:}\quad & \textstyle\sum_d x_{cd} = 1 & \forall c \\
    \text{(b) load:}\quad & \textstyle\sum_c t_{cd} x_{cd} + \sum_u \tau_u
        (\mathrm{in}_{ud} + \mathrm{out}_{ud}) \le T & \forall d \in A \\
    & \textstyle\sum_c t_{cd} x_{cd} \le T & \forall d \notin A \\
    \text{(c) memory:}\quad & \textstyle\sum_c m_{cd} x_{cd} \le M_d & \forall d \in A \\
    \text{(d) transfer out:}\quad & \mathrm{out}_{ud} \ge x_{c(u)d} - x_{c(v)d},\;
        \mathrm{out}_{ud} \le x_{c(u)d} & \forall (u,v) \in E, d \in A \\
    \text{(e) transfer in:}\quad & \mathrm{in}_{ud} \ge x_{c(v)d} - x_{c(u)d},\;
        \mathrm{in}_{ud} \le 1 - x_{c(u)d} & \forall (u,v) \in E, d \in A \\
    \text{(f) contiguity:}\quad & z_{vd} \ge x_{c(v)d},\; z_{vd} \ge z_{ud},\;
        x_{c(v)d} \le x_{c(u)d} + 1 - z_{ud} & \forall \text{forward } (u,v), d \\
    \text{(g) stage order (1F1B):}\quad & x_{c(u)d_i} + \textstyle\sum_{j<i} x_{c(v)d_j} \le 1
        & \forall (u,v) \in O, i \\
    \text{(h) symmetry:}\quad & x_{c d_j} \le \textstyle\sum_{c' < c} x_{c' d_{j-1}}
        & \text{identical } d_{j-1}, d_j \text{ (static memory)} \\
    \text{(i) bounds:}\quad & L \le T \le U

In (g), :math:`O` holds the edges between forward nodes and, reversed, the edges
between backward nodes (activations run to later stages, gradients to earlier ones;
an edge between a forward and a backward node is not ordered), as
:func:`~milp_partition.pipeline.costs.stage_order_pairs` defines it.

(f) is exact: with :math:`z` the reachability from d's forward nodes, a forward
node w off d but reachable from it may not feed a forward node on d, which is
the rule "no path u -> w -> v with u, v on d and w off it".  (b), (d), (e) bound
the transfer indicators from below, which is all a min-max objective needs; the
upper links in (d), (e) only remove slack.  (h) orders identical accelerators
by the smallest class each holds (through prefix sums), which any solution can
be permuted to meet.  (i) uses :math:`L` = max(largest class at its fastest
device, total work at the fastest device / |D|) and the upper bound U of a
heuristic when one is given.

With ``objective="memory"`` (mCAP's memory balancing) a variable :math:`P` replaces
T in the objective: (b) holds with the constant :math:`T_{\max}` in place of T and
(c) becomes :math:`\sum_c m_{cd} x_{cd} \le \min(P, M_d)`; minimize :math:`P`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from milp_partition.backends.model import Model, Sense, Var, VarKind
from milp_partition.budget import Budget
from milp_partition.pipeline.costs import PipelineCosts, class_times, pipeline_costs, stage_order_pairs, time_lower_bound
from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution


@dataclass(frozen=True)
class PipelineFormulationSettings:
    """Options that change the model, never its optimum.

    Attributes
    ----------
    symmetry_breaking
        Add (h) among identical accelerators.
    lower_bounds
        Add the lower bound L of (i).
    """

    symmetry_breaking: bool = True
    lower_bounds: bool = True


@dataclass
class PipelineModel:
    """A built model with the handles that :func:`hint` and :func:`decode` need."""

    problem: PipelineProblem
    costs: PipelineCosts
    model: Model
    class_members: list[list[int]]
    x: dict[tuple[int, int], Var]
    z: dict[tuple[int, int], Var] = field(default_factory=dict)
    inn: dict[tuple[int, int], Var] = field(default_factory=dict)
    out: dict[tuple[int, int], Var] = field(default_factory=dict)
    sym: dict[tuple[int, int], Var] = field(default_factory=dict)
    objective_var: Var | None = None
    lower_bound: float = 0.0
    #: the build stops (TimeoutError) once it is spent; checked between the steps and inside the long loops
    budget: Budget | None = None

    def check_budget(self, step: int = 0) -> None:
        """Raise TimeoutError when the budget is spent (the clock is read when ``step`` is a multiple of 256)."""
        if self.budget is not None and step % 256 == 0 and self.budget.expired():
            raise TimeoutError


def _class_members(costs: PipelineCosts) -> list[list[int]]:
    members: dict[int, list[int]] = {}
    for v, c in enumerate(costs.colocation_class.tolist()):
        members.setdefault(c, []).append(v)
    return [members[c] for c in sorted(members)]


def _memory_coefficients(problem: PipelineProblem, costs: PipelineCosts) -> np.ndarray:
    """``(n, D)`` bytes a node adds to each device's memory (0 on CPU cores)."""
    num_devices = costs.node_time.shape[1]
    s = int((~costs.is_cpu).sum())
    mem = np.zeros((len(costs.forward), num_devices), dtype=np.float64)
    for d in range(num_devices):
        if costs.is_cpu[d]:
            continue
        if problem.settings.memory_model == "1f1b":
            in_flight = s - d  # accelerators come first, so d is the stage position
            mem[:, d] = (
                problem.settings.optimizer_state_factor * costs.param_bytes
                + in_flight * costs.activation_bytes
                + costs.other_bytes
            )
        else:
            mem[:, d] = costs.static_bytes
    return np.ceil(mem)


def identical_accelerator_runs(problem: PipelineProblem) -> list[list[int]]:
    """Groups of consecutive accelerator positions with the same kind and memory."""
    runs: list[list[int]] = []
    for d, dev in enumerate(problem.cluster.devices):
        if (
            runs
            and problem.cluster.devices[runs[-1][-1]].kind == dev.kind
            and (problem.cluster.devices[runs[-1][-1]].memory_bytes == dev.memory_bytes)
        ):
            runs[-1].append(d)
        else:
            runs.append([d])
    return [r for r in runs if len(r) > 1]


def build(
    problem: PipelineProblem,
    *,
    upper_bound: float | None = None,
    settings: PipelineFormulationSettings = PipelineFormulationSettings(),
    budget: Budget | None = None,
) -> PipelineModel:
    """Build the integer program of ``problem`` (see the module docstring).

    Raises TimeoutError once ``budget`` is spent (a large graph's model may take longer than the limit).
    """
    costs = pipeline_costs(problem)
    graph = problem.graph
    members = _class_members(costs)
    num_devices = costs.node_time.shape[1]
    mem = _memory_coefficients(problem, costs)
    model = Model(name=f"pipeline_{graph.name or 'graph'}")

    class_allowed, class_time = class_times(costs)  # (C, D) each
    class_mem = np.array([mem[m].sum(axis=0) for m in members])

    x: dict[tuple[int, int], Var] = {}
    pm = PipelineModel(problem, costs, model, members, x, budget=budget)
    for c in range(len(members)):
        pm.check_budget(c)
        for d in range(num_devices):
            if class_allowed[c, d]:
                x[c, d] = model.add_var(f"x[{c},{d}]")
    pm.check_budget()

    # (a) assign
    for c in range(len(members)):
        pm.check_budget(c)
        model.add_constraint([(x[c, d], 1.0) for d in range(num_devices) if (c, d) in x], Sense.EQ, 1.0, f"assign[{c}]")
    _add_transfers(pm)  # (d) transfer out, (e) transfer in
    pm.check_budget()
    _add_load_memory_objective(pm, class_allowed, class_time, class_mem, upper_bound, settings)  # (b), (c), (i)
    pm.check_budget()
    if problem.settings.contiguous:
        _add_contiguity(pm)  # (f)
        pm.check_budget()
    if problem.settings.memory_model == "1f1b":
        _add_stage_order(pm)  # (g)
        pm.check_budget()
    # (h) symmetry among identical accelerators (positions matter under 1F1B, so not there)
    if settings.symmetry_breaking and problem.settings.memory_model == "static":
        for run in identical_accelerator_runs(problem):
            _add_symmetry_breaking(pm, run)
    pm.check_budget()
    return pm


def _accelerators(pm: PipelineModel) -> list[int]:
    return [d for d in range(pm.costs.node_time.shape[1]) if not pm.costs.is_cpu[d]]


def _add_transfers(pm: PipelineModel) -> None:
    """(d) transfer out and (e) transfer in: indicators of node u's output crossing to or from device d."""
    model, x, costs = pm.model, pm.x, pm.costs
    cls = costs.colocation_class
    arrays = pm.problem.graph.arrays
    edges_by_source: dict[int, list[int]] = {}
    for u, v in zip(arrays.src.tolist(), arrays.dst.tolist()):
        if cls[u] != cls[v]:
            edges_by_source.setdefault(u, []).append(v)
    accelerators = _accelerators(pm)
    for step, (u, targets) in enumerate(edges_by_source.items()):
        pm.check_budget(step if len(accelerators) < 64 else 0)  # every source when each is long
        if costs.out_transfer[u] <= 0:
            continue
        cu = int(cls[u])
        for d in accelerators:
            xu = x.get((cu, d))
            xvs = [x[int(cls[v]), d] for v in targets if (int(cls[v]), d) in x]
            if xu is not None:
                out = pm.out[u, d] = model.add_var(f"out[{u},{d}]")
                model.add_constraint([(out, 1.0), (xu, -1.0)], Sense.LE, 0.0, f"out_ub[{u},{d}]")
                for xv in xvs:
                    model.add_constraint([(out, 1.0), (xu, -1.0), (xv, 1.0)], Sense.GE, 0.0, f"out[{u},{d}]")
            if xvs:
                inn = pm.inn[u, d] = model.add_var(f"in[{u},{d}]")
                if xu is not None:
                    model.add_constraint([(inn, 1.0), (xu, 1.0)], Sense.LE, 1.0, f"in_ub[{u},{d}]")
                for xv in xvs:
                    terms = [(inn, 1.0), (xv, -1.0)] + ([(xu, 1.0)] if xu is not None else [])
                    model.add_constraint(terms, Sense.GE, 0.0, f"in[{u},{d}]")


def _add_load_memory_objective(
    pm: PipelineModel,
    class_allowed: np.ndarray,
    class_time: np.ndarray,
    class_mem: np.ndarray,
    upper_bound: float | None,
    settings: PipelineFormulationSettings,
) -> None:
    """(b) load, (c) memory and (i) bounds, with the objective variable T (time) or P (peak memory)."""
    model, x, costs, problem = pm.model, pm.x, pm.costs, pm.problem
    num_classes, num_devices = class_time.shape
    accelerators = _accelerators(pm)

    transfer_terms: dict[int, list[tuple[Var, float]]] = {}  # per accelerator, in one pass (not one per device)
    for step, ((u, d), var) in enumerate((*pm.inn.items(), *pm.out.items())):
        pm.check_budget(step)
        transfer_terms.setdefault(d, []).append((var, float(costs.out_transfer[u])))

    def load_terms(d: int) -> list[tuple[Var, float]]:
        pm.check_budget()
        terms = [(x[c, d], float(class_time[c, d])) for c in range(num_classes) if (c, d) in x and class_time[c, d] > 0]
        if not costs.is_cpu[d]:
            terms.extend(transfer_terms.get(d, ()))
        return terms

    def memory_terms(d: int) -> list[tuple[Var, float]]:
        pm.check_budget()
        return [(x[c, d], float(class_mem[c, d])) for c in range(num_classes) if (c, d) in x and class_mem[c, d] > 0]

    # (i) bounds
    lower = time_lower_bound(class_allowed, class_time)
    pm.lower_bound = lower
    time_ub = float(np.where(class_allowed, class_time, 0).max(axis=1).sum() + 2 * costs.out_transfer.sum())

    if problem.settings.objective == "time":
        ub = time_ub if upper_bound is None else min(time_ub, upper_bound * (1 + 1e-9) + 1e-12)
        lb = lower if settings.lower_bounds else 0.0
        T = model.add_var("T", VarKind.CONTINUOUS, min(lb, ub), ub)
        pm.objective_var = T
        for d in range(num_devices):  # (b) load
            model.add_constraint([*load_terms(d), (T, -1.0)], Sense.LE, 0.0, f"load[{d}]")
        for d in accelerators:  # (c) memory
            cap = costs.memory_capacity[d]
            if cap >= 0:
                model.add_constraint(memory_terms(d), Sense.LE, float(cap), f"memory[{d}]")
    else:
        t_max = float(problem.settings.max_time_per_sample or 0.0)
        mem_total = float(class_mem.max(axis=1, initial=0).sum())
        mem_ub = mem_total if upper_bound is None else min(mem_total, upper_bound)
        P = model.add_var("P", VarKind.CONTINUOUS, 0.0, max(mem_ub, 0.0))
        pm.objective_var = P
        for d in range(num_devices):  # (b) load under the time bound
            model.add_constraint(load_terms(d), Sense.LE, t_max, f"load[{d}]")
        for d in accelerators:  # (c) memory, bounded by P
            terms = memory_terms(d)
            model.add_constraint([*terms, (P, -1.0)], Sense.LE, 0.0, f"memory_peak[{d}]")
            cap = costs.memory_capacity[d]
            if cap >= 0:
                model.add_constraint(terms, Sense.LE, float(cap), f"memory[{d}]")
    model.minimize([(pm.objective_var, 1.0)])


def _add_contiguity(pm: PipelineModel) -> None:
    """(f) contiguity over forward nodes: reachability z and the convexity rows."""
    model, x, costs = pm.model, pm.x, pm.costs
    cls = costs.colocation_class
    arrays = pm.problem.graph.arrays
    fwd_edges = [(u, v) for u, v in zip(arrays.src.tolist(), arrays.dst.tolist()) if costs.forward[u] and costs.forward[v]]
    fwd_nodes = sorted({w for e in fwd_edges for w in e})
    for d in range(costs.node_time.shape[1]):
        for step, v in enumerate(fwd_nodes):
            pm.check_budget(step)
            pm.z[v, d] = model.add_var(f"z[{v},{d}]")
            if (int(cls[v]), d) in x:
                model.add_constraint([(pm.z[v, d], 1.0), (x[int(cls[v]), d], -1.0)], Sense.GE, 0.0, f"reach_self[{v},{d}]")
        for step, (u, v) in enumerate(fwd_edges):
            pm.check_budget(step)
            model.add_constraint([(pm.z[v, d], 1.0), (pm.z[u, d], -1.0)], Sense.GE, 0.0, f"reach[{u},{v},{d}]")
            xv = x.get((int(cls[v]), d))
            if xv is None:
                continue
            xu = x.get((int(cls[u]), d))
            terms = [(xv, 1.0), (pm.z[u, d], 1.0)] + ([(xu, -1.0)] if xu is not None else [])
            model.add_constraint(terms, Sense.LE, 1.0, f"convex[{u},{v},{d}]")


def _add_stage_order(pm: PipelineModel) -> None:
    """(g) stage order under 1F1B: a forward edge never runs to an earlier accelerator, a backward edge to a later one."""
    model, x, cls = pm.model, pm.x, pm.costs.colocation_class
    accelerators = _accelerators(pm)
    arrays = pm.problem.graph.arrays
    first, second = stage_order_pairs(arrays.src, arrays.dst, pm.costs.forward)
    pairs = {(int(cls[u]), int(cls[v])): (u, v) for u, v in zip(first.tolist(), second.tolist(), strict=True)}
    for (cu, cv), (u, v) in pairs.items():
        if cu == cv:
            continue
        for i, d in enumerate(accelerators):
            pm.check_budget(i)
            if (cu, d) not in x:
                continue
            earlier = [(x[cv, e], 1.0) for e in accelerators[:i] if (cv, e) in x]
            if earlier:
                model.add_constraint([(x[cu, d], 1.0), *earlier], Sense.LE, 1.0, f"order[{u},{v},{i}]")


def _add_symmetry_breaking(pm: PipelineModel, run: list[int]) -> None:
    r"""(h): a class may go on ``run[j]`` only if ``run[j-1]`` holds a class of smaller index.

    :math:`u_{ac} \le u_{a,c-1} + x_{c-1,a}`, :math:`u_{a0} = 0` makes :math:`u_{ac}` at most
    "device a holds a class below c"; then :math:`x_{cb} \le u_{ac}`.  Sorting identical
    devices by the smallest class each holds meets this, so no optimum is lost.
    """
    model, x = pm.model, pm.x
    num_classes = len(pm.class_members)
    for j in range(1, len(run)):
        a, b = run[j - 1], run[j]
        previous: Var | None = None
        for c in range(num_classes):
            pm.check_budget(c)
            u = pm.sym[a, c] = model.add_var(f"below[{a},{c}]")
            terms = [(u, 1.0)]
            if previous is not None:
                terms.append((previous, -1.0))
            if c > 0 and (c - 1, a) in x:
                terms.append((x[c - 1, a], -1.0))
            model.add_constraint(terms, Sense.LE, 0.0, f"symmetry_u[{a},{c}]")
            if (c, b) in x:
                model.add_constraint([(x[c, b], 1.0), (u, -1.0)], Sense.LE, 0.0, f"symmetry[{c},{a},{b}]")
            previous = u


def hint(pm: PipelineModel, solution: PipelineSolution, objective: float) -> None:
    """Set a complete warm start from ``solution`` whose objective value is ``objective``."""
    problem, costs = pm.problem, pm.costs
    device_pos = {dev: d for d, dev in enumerate(problem.device_ids)}
    index = problem.graph.index
    cls = costs.colocation_class
    class_device = {}
    for node_id, dev in solution.assignment.items():
        class_device[int(cls[index[node_id]])] = device_pos[dev]
    if pm.sym:
        class_device = _canonical_order(problem, class_device)
    for (c, d), var in pm.x.items():
        pm.model.set_hint(var, 1.0 if class_device.get(c) == d else 0.0)
    node_device = [class_device[int(c)] for c in cls]
    succ = problem.graph.arrays
    for (u, d), var in pm.out.items():
        on = node_device[u] == d and any(node_device[v] != d for v in succ.successors(u).tolist())
        pm.model.set_hint(var, 1.0 if on else 0.0)
    for (u, d), var in pm.inn.items():
        on = node_device[u] != d and any(node_device[v] == d for v in succ.successors(u).tolist())
        pm.model.set_hint(var, 1.0 if on else 0.0)
    if pm.z:
        reach = _reachability(pm, node_device)
        for (v, d), var in pm.z.items():
            pm.model.set_hint(var, 1.0 if reach[d][v] else 0.0)
    for (a, c), var in pm.sym.items():
        pm.model.set_hint(var, 1.0 if any(class_device.get(cc) == a for cc in range(c)) else 0.0)
    if pm.objective_var is not None:
        pm.model.set_hint(pm.objective_var, min(max(objective, pm.objective_var.lb), pm.objective_var.ub))


def _canonical_order(problem: PipelineProblem, class_device: dict[int, int]) -> dict[int, int]:
    """Relabel identical accelerators so that each run is sorted by the smallest class held (meets (h))."""
    relabel: dict[int, int] = {}
    for run in identical_accelerator_runs(problem):
        smallest = {d: min((c for c, dd in class_device.items() if dd == d), default=float("inf")) for d in run}
        for new, old in zip(run, sorted(run, key=lambda d: (smallest[d], d))):
            relabel[old] = new
    return {c: relabel.get(d, d) for c, d in class_device.items()}


def _reachability(pm: PipelineModel, node_device: list[int]) -> list[list[bool]]:
    """For each device, which forward nodes are reachable (inclusive) from its forward nodes."""
    arrays = pm.problem.graph.arrays
    fwd = pm.costs.forward
    num_devices = pm.costs.node_time.shape[1]
    out = []
    for d in range(num_devices):
        reach = [False] * arrays.n
        for v in arrays.topo_order.tolist():
            if not fwd[v]:
                continue
            if node_device[v] == d or any(reach[u] and fwd[u] for u in arrays.predecessors(v).tolist()):
                reach[v] = True
        out.append(reach)
    return out


def decode(pm: PipelineModel, values: list[float]) -> PipelineSolution:
    """The assignment encoded by ``values`` (one per model variable)."""
    device_ids = pm.problem.device_ids
    class_device: dict[int, int] = {}
    for (c, d), var in pm.x.items():
        if values[var.index] > 0.5:
            class_device[c] = d
    nodes = pm.problem.graph.nodes
    cls = pm.costs.colocation_class
    return PipelineSolution({nodes[v].id: device_ids[class_device[int(cls[v])]] for v in range(len(nodes))})
