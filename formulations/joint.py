r"""The joint problem (Piper's) as a mixed-integer program over stage slots.

Piper (Tarnawski et al., NeurIPS 2021) plans stages, data- and tensor-parallel degrees and
per-layer configurations with a DP over the graph's ideals; :mod:`milp_partition.joint.dp`
does that exactly.  Graphs with too many ideals (wide operator graphs) are out of the DP's
reach; this formulation needs no ideals: it places nodes into ``L`` ordered stage slots.
Its size grows with ``L * |options|``, so it suits small and medium ``k``; it is also a
second, independent exact method that the tests cross-check against the DP and brute force.

Notation
--------
Nodes :math:`v` with configurations :math:`c \in C_{vt}` per tensor-parallel degree :math:`t`
(compute :math:`p`, parameters :math:`w`, activations :math:`a`, fixed bytes :math:`b`,
sync bytes :math:`f_{c}(u)` on an in-edge from :math:`u`, :math:`g_{c}(w)` on an out-edge to
:math:`w`); edges :math:`e = (u, v)` with bytes :math:`c_e`; cluster :math:`k, M, B, N`.
Slots :math:`i = 1..L`, :math:`L = \min(|V|, k, N)`.  Options :math:`o = (d_o, t_o)` with
:math:`d_o \mid N`, :math:`d_o t_o \le k`.  :math:`Y = \min(k, N)`.

Variables: :math:`g_{io} \in \{0,1\}` (slot i is a stage with degrees o),
:math:`z_{vitc} \in \{0,1\}` (v in slot i with configuration c of degree t),
:math:`x_{vi} \in \{0,1\}`, :math:`s_i \ge 0` (data-parallel degrees of slots i..L),
:math:`u_{im} \in \{0,1\}` for :math:`m = 2..Y` (thermometer: :math:`y_i = 1 + \sum_m u_{im}`),
:math:`\mathrm{in}_{ei}, \mathrm{out}_{ei} \in \{0,1\}` (edge e enters / leaves slot i),
:math:`q^{fw}_{eic}, q^{bw}_{eic} \in \{0,1\}` (e crosses slot i's boundary and the node inside
has configuration c with sync bytes on e), :math:`T \ge 0`.  With
:math:`\pi_c(d) = p_c / d + 4 (d - 1) w_c / (d N B)` (a configuration's compute and all-reduce
share of the stage time at degree d):

.. math::

    \min T \quad \text{s.t.}

    \text{(a) assign:}\quad & \textstyle\sum_i x_{vi} = 1,\;
        \sum_{t,c} z_{vitc} = x_{vi} & \forall v, i \\
    \text{(b) one option:}\quad & \textstyle\sum_o g_{io} \le 1,\;
        \sum_c z_{vitc} \le \sum_{o: t_o = t} g_{io} & \forall i, v, t \\
    \text{(c) slot order:}\quad & \textstyle\sum_o g_{i+1,o} \le \sum_o g_{io},\;
        \sum_o g_{io} \le \sum_v x_{vi} & \forall i \\
    \text{(d) precedence:}\quad & \textstyle\sum_{j \le i} x_{vj} \le \sum_{j \le i} x_{uj}
        & \forall (u, v) \in E, i < L \\
    \text{(e) devices:}\quad & \textstyle\sum_{i,o} d_o t_o g_{io} \le k,\;
        \sum_{i,o} d_o g_{io} \le N \\
    \text{(f) later degrees:}\quad & \textstyle s_i = s_{i+1} + \sum_o d_o g_{io}
        \;(s_{L+1} = 0) & \forall i \\
    \text{(g) micro-batches in flight:}\quad & u_{i,m+1} \le u_{im},\;
        s_i - d (1 + \textstyle\sum_m u_{im}) \le Y (1 - \sum_{o: d_o = d} g_{io}) & \forall i, d \\
    \text{(h) memory:}\quad & \textstyle\sum_{v,t,c} (a_c + b_c) z_{vitc} \le M,\;
        \sum_{v,t,c} (m a_c + b_c) z_{vitc} \le M + \bar M_m (1 - u_{im}) & \forall i, m \ge 2 \\
    \text{(i) boundary:}\quad & \mathrm{in}_{ei} \ge x_{vi} - x_{ui},\;
        \mathrm{out}_{ei} \ge x_{ui} - x_{vi},\;
        q^{fw}_{eic} \ge z_{vitc} - x_{ui},\; q^{bw}_{eic} \ge z_{uitc} - x_{vi}
        & \forall e = (u, v), i, c \\
    \text{(j) time:}\quad & T \ge \textstyle\sum_{v,t,c} \pi_c(d) z_{vitc}
        + \frac{1}{d B} \sum_e \big( 2 c_e (\mathrm{in}_{ei} + \mathrm{out}_{ei})
        + \sum_c 2 f_c(u) q^{fw}_{eic} + \sum_c 2 g_c(v) q^{bw}_{eic} \big)
        - \bar T_d (1 - \textstyle\sum_{o: d_o = d} g_{io}) & \forall i, d \\
    \text{(k) bounds:}\quad & L_0 \le T \le U

(j) is the stage's time per sample :math:`TPS_i = P_i/d + (E_i/d + 4(d-1)W_i/(dN))/B` for the
slot's degree d; :math:`\bar T_d` is its right-hand side with every node (costliest configuration)
and every edge in one stage.  (g) makes :math:`y_i \ge \lceil s_i / d_i \rceil`; memory only grows
with :math:`y`, so the least :math:`y` is never worse and a plan's exact value is feasible; (h)
states the memory at every level :math:`m \le y_i` (the last is the binding one), with
:math:`\bar M_m` the excess of all nodes' largest memory at level m over M.  (i) bounds the
crossing indicators from below, which is all a min-max objective needs (the verifier
recomputes every plan).  (k): :math:`L_0` = total least work over :math:`k`
devices (:math:`\sum_v \min_{t,c} t\,p_{vtc} / k`), :math:`U` a heuristic's value when given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from milp_partition.backends.model import Model, Sense, Var, VarKind
from milp_partition.joint.problem import JointConfig, JointPlan, JointProblem, JointStage

#: Default cap on the model's binaries (``L * |options|`` slot choices dominate); above it :func:`build` refuses.
MAX_BINARIES = 200_000


class ModelTooLarge(Exception):
    """The slot model of this instance would exceed the binaries cap."""


@dataclass
class JointModel:
    """A built model with the handles :func:`values_of` and :func:`decode` need."""

    problem: JointProblem
    model: Model
    slots: int
    options: list[tuple[int, int]]
    divisors: list[int]
    max_in_flight: int
    g: dict[tuple[int, int], Var] = field(default_factory=dict)
    z: dict[tuple[int, int, int, int], Var] = field(default_factory=dict)
    x: dict[tuple[int, int], Var] = field(default_factory=dict)
    s: list[Var] = field(default_factory=list)
    u: dict[tuple[int, int], Var] = field(default_factory=dict)
    cross: dict[tuple[str, int, int], Var] = field(default_factory=dict)
    objective_var: Var | None = None
    lower_bound_s: float = 0.0


def _options(problem: JointProblem) -> tuple[list[tuple[int, int]], list[int]]:
    cl = problem.cluster
    top = min(cl.device_count, problem.microbatches)
    divisors = [d for d in range(1, top + 1) if problem.microbatches % d == 0]
    options = [(d, t) for d in divisors for t in problem.degrees if d * t <= cl.device_count]
    return options, sorted({d for d, _ in options})


def work_lower_bound_s(problem: JointProblem) -> float:
    """``sum_v min_{t,c} t p / k``: every plan's bottleneck stage takes at least this long."""
    total = math.fsum(min(t * c.time_per_sample_s for t, cs in n.configs.items() for c in cs) for n in problem.nodes)
    return total / problem.cluster.device_count


def build(problem: JointProblem, upper_bound_s: float | None = None, max_binaries: int = MAX_BINARIES) -> JointModel:
    """Build the slot model (module docstring); ``upper_bound_s`` adds ``T <= U`` (a heuristic's value).

    Raises
    ------
    ModelTooLarge
        When the model would have more than ``max_binaries`` binaries.
    """
    cl = problem.cluster
    nodes = problem.nodes
    n = len(nodes)
    index = {nd.id: v for v, nd in enumerate(nodes)}
    options, divisors = _options(problem)
    slots = max(1, min(n, cl.device_count, problem.microbatches))
    y_top = min(cl.device_count, problem.microbatches)
    configs = [[(t, c, cfg) for t in sorted(nd.configs) for c, cfg in enumerate(nd.configs[t])] for nd in nodes]
    binaries = slots * (len(options) + sum(len(cs) for cs in configs) + n + max(0, y_top - 1))
    if binaries > max_binaries:
        raise ModelTooLarge(
            f"the slot model would have {binaries} binaries ({slots} slots x {len(options)} degree options, "
            f"{n} nodes); the cap is {max_binaries}"
        )
    m = Model(name=f"joint {problem.name}".strip())
    jm = JointModel(problem, m, slots, options, divisors, y_top)
    slot_range = range(slots)
    for i in slot_range:
        for o, (d, t) in enumerate(options):
            jm.g[i, o] = m.add_var(f"g[{i},{d}x{t}]")
        for v in range(n):
            jm.x[v, i] = m.add_var(f"x[{nodes[v].id},{i}]")
            for c, (t, _, _) in enumerate(configs[v]):
                jm.z[v, i, t, c] = m.add_var(f"z[{nodes[v].id},{i},{t},{c}]")
    # (a) assign
    for v in range(n):
        m.add_constraint([(jm.x[v, i], 1.0) for i in slot_range], Sense.EQ, 1.0, f"(a) assign {nodes[v].id}")
        for i in slot_range:
            terms = [(jm.z[v, i, t, c], 1.0) for c, (t, _, _) in enumerate(configs[v])]
            m.add_constraint([*terms, (jm.x[v, i], -1.0)], Sense.EQ, 0.0, f"(a) config {nodes[v].id},{i}")
    # (b) one option per slot; a node's configuration has the slot's degree t
    for i in slot_range:
        m.add_constraint([(jm.g[i, o], 1.0) for o in range(len(options))], Sense.LE, 1.0, f"(b) option {i}")
        for v in range(n):
            for t in problem.degrees:
                terms = [(jm.z[v, i, tt, c], 1.0) for c, (tt, _, _) in enumerate(configs[v]) if tt == t]
                terms += [(jm.g[i, o], -1.0) for o, (_, to) in enumerate(options) if to == t]
                m.add_constraint(terms, Sense.LE, 0.0, f"(b) degree {nodes[v].id},{i},{t}")
    # (c) slot order: used slots first, each with a node
    for i in slot_range:
        used = [(jm.g[i, o], 1.0) for o in range(len(options))]
        if i + 1 < slots:
            m.add_constraint(
                [(jm.g[i + 1, o], 1.0) for o in range(len(options))] + [(var, -c) for var, c in used],
                Sense.LE,
                0.0,
                f"(c) order {i}",
            )
        m.add_constraint(used + [(jm.x[v, i], -1.0) for v in range(n)], Sense.LE, 0.0, f"(c) nonempty {i}")
    # (d) precedence, in prefix form
    for e in problem.edges:
        u, v = index[e.source], index[e.target]
        for i in range(slots - 1):
            terms = [(jm.x[v, j], 1.0) for j in range(i + 1)] + [(jm.x[u, j], -1.0) for j in range(i + 1)]
            m.add_constraint(terms, Sense.LE, 0.0, f"(d) precedence {e.source}->{e.target},{i}")
    # (e) devices and data-parallel degrees
    m.add_constraint(
        [(jm.g[i, o], float(d * t)) for i in slot_range for o, (d, t) in enumerate(options)],
        Sense.LE,
        cl.device_count,
        "(e) devices",
    )
    m.add_constraint(
        [(jm.g[i, o], float(d)) for i in slot_range for o, (d, _) in enumerate(options)],
        Sense.LE,
        problem.microbatches,
        "(e) sum d",
    )
    # (f) later degrees
    jm.s = [m.add_var(f"s[{i}]", VarKind.INTEGER, 0.0, float(y_top)) for i in slot_range]
    for i in slot_range:
        terms = [(jm.s[i], 1.0)] + [(jm.g[i, o], -float(d)) for o, (d, _) in enumerate(options)]
        if i + 1 < slots:
            terms.append((jm.s[i + 1], -1.0))
        m.add_constraint(terms, Sense.EQ, 0.0, f"(f) later degrees {i}")
    # (g) micro-batches in flight: y_i = 1 + sum_m u_im >= ceil(s_i / d_i)
    for i in slot_range:
        for mm in range(2, y_top + 1):
            jm.u[i, mm] = m.add_var(f"u[{i},{mm}]")
            if mm > 2:
                m.add_constraint([(jm.u[i, mm], 1.0), (jm.u[i, mm - 1], -1.0)], Sense.LE, 0.0, f"(g) thermometer {i},{mm}")
        for d in divisors:
            terms = [(jm.s[i], 1.0)] + [(jm.u[i, mm], -float(d)) for mm in range(2, y_top + 1)]
            terms += [(jm.g[i, o], float(y_top)) for o, (do, _) in enumerate(options) if do == d]
            m.add_constraint(terms, Sense.LE, float(d + y_top), f"(g) in flight {i},{d}")
    _memory(jm, configs)
    _time(jm, configs, _boundary(jm, configs, index), upper_bound_s)
    return jm


def _memory(jm: JointModel, configs: list[list[tuple[int, int, JointConfig]]]) -> None:
    """(h) memory at every number of micro-batches in flight (rows over binaries only, in bytes)."""
    m = jm.model
    n = len(jm.problem.nodes)
    has_activations = any(cfg.activation_bytes > 0 for cs in configs for _, _, cfg in cs)
    for i in range(jm.slots):
        for level in range(1, jm.max_in_flight + 1 if has_activations else 2):
            terms = [
                (jm.z[v, i, t, c], cfg.activation_bytes * level + cfg.fixed_bytes)
                for v in range(n)
                for c, (t, _, cfg) in enumerate(configs[v])
            ]
            if level == 1:
                m.add_constraint(terms, Sense.LE, jm.problem.memory_bytes, f"(h) memory {i},1")
                continue
            most = math.fsum(max(cfg.activation_bytes * level + cfg.fixed_bytes for _, _, cfg in cs) for cs in configs)
            big = max(0.0, most - jm.problem.memory_bytes)
            m.add_constraint([*terms, (jm.u[i, level], big)], Sense.LE, jm.problem.memory_bytes + big, f"(h) memory {i},{level}")


def _boundary(
    jm: JointModel, configs: list[list[tuple[int, int, JointConfig]]], index: Mapping[str, int]
) -> list[list[tuple[Var, float]]]:
    """(i) crossing indicators; returns each slot's boundary terms (variable, seconds at ``d = 1``)."""
    m, problem = jm.model, jm.problem
    B = problem.cluster.bandwidth_bytes_per_s
    per_slot: list[list[tuple[Var, float]]] = [[] for _ in range(jm.slots)]
    for k, e in enumerate(problem.edges):
        u, v = index[e.source], index[e.target]
        edge_s = 2.0 * e.bytes / B
        for i in range(jm.slots):
            if edge_s > 0:
                jm.cross["in", k, i] = cin = m.add_var(f"in[{k},{i}]")
                jm.cross["out", k, i] = cout = m.add_var(f"out[{k},{i}]")
                m.add_constraint([(cin, 1.0), (jm.x[v, i], -1.0), (jm.x[u, i], 1.0)], Sense.GE, 0.0, f"(i) in {k},{i}")
                m.add_constraint([(cout, 1.0), (jm.x[u, i], -1.0), (jm.x[v, i], 1.0)], Sense.GE, 0.0, f"(i) out {k},{i}")
                per_slot[i] += [(cin, edge_s), (cout, edge_s)]
            # (inside node, outside node, its sync map, key) for the in-edge side and the out-edge side
            for inside, outside, sync, key in ((v, u, "fw", e.source), (u, v, "bw", e.target)):
                for c, (t, _, cfg) in enumerate(configs[inside]):
                    sync_s = 2.0 * getattr(cfg, f"sync_{sync}_bytes").get(key, 0.0) / B
                    if sync_s > 0:
                        jm.cross[f"{sync}{c}", k, i] = q = m.add_var(f"q{sync}[{k},{i},{c}]")
                        terms = [(q, 1.0), (jm.z[inside, i, t, c], -1.0), (jm.x[outside, i], 1.0)]
                        m.add_constraint(terms, Sense.GE, 0.0, f"(i) sync {sync} {k},{i},{c}")
                        per_slot[i].append((q, sync_s))
    return per_slot


def _time(
    jm: JointModel,
    configs: list[list[tuple[int, int, JointConfig]]],
    boundary: list[list[tuple[Var, float]]],
    upper_bound_s: float | None,
) -> None:
    """(j) time per sample of each slot at each data-parallel degree, (k) bounds on T; the objective."""
    m, cl = jm.model, jm.problem.cluster
    B, N = cl.bandwidth_bytes_per_s, jm.problem.microbatches
    n = len(jm.problem.nodes)

    def most(d: int) -> float:  # the right-hand side of (j) with every node (costliest configuration) and edge in one stage
        nodes_s = math.fsum(max(_compute_s(cfg, d, N, B) for _, _, cfg in cs) for cs in configs)
        edges_s = math.fsum(coef for terms in boundary[:1] for _, coef in terms)
        return nodes_s + edges_s / d

    jm.lower_bound_s = work_lower_bound_s(jm.problem)
    top = max(most(d) for d in jm.divisors)
    upper = top if upper_bound_s is None else min(top, upper_bound_s)
    lower = min(jm.lower_bound_s, upper)
    jm.objective_var = T = m.add_var("T", VarKind.CONTINUOUS, lower, max(upper, lower))
    for d in jm.divisors:
        big = most(d)
        for i in range(jm.slots):
            terms = [(T, 1.0)]
            terms += [(jm.z[v, i, t, c], -_compute_s(cfg, d, N, B)) for v in range(n) for c, (t, _, cfg) in enumerate(configs[v])]
            terms += [(var, -coef / d) for var, coef in boundary[i]]
            terms += [(jm.g[i, o], -big) for o, (do, _) in enumerate(jm.options) if do == d]
            m.add_constraint(terms, Sense.GE, -big, f"(j) time {i},{d}")
    m.minimize([(T, 1.0)])


def _compute_s(cfg: JointConfig, d: int, N: int, B: float) -> float:
    """A configuration's share of (j) at data-parallel degree ``d``: ``p / d + 4 (d - 1) w / (d N B)``."""
    return cfg.time_per_sample_s / d + 4.0 * (d - 1) * cfg.parameter_bytes / (d * N * B)


def values_of(jm: JointModel, plan: JointPlan, objective_s: float) -> dict[int, float]:
    """The model's variable values (by index) that represent ``plan`` with ``T = objective_s``.

    Used to warm-start a back-end and, in the tests, to check that every plan the verifier
    accepts satisfies the model (so the model cuts no plan off).
    """
    problem = jm.problem
    nodes = problem.nodes
    index = {nd.id: v for v, nd in enumerate(nodes)}
    val: dict[int, float] = {var.index: 0.0 for var in jm.model.variables}
    stage_of: dict[int, int] = {}
    chosen: dict[int, tuple[int, int, JointConfig]] = {}
    for i, st in enumerate(plan.stages):
        o = jm.options.index((st.data_parallel, st.tensor_parallel))
        val[jm.g[i, o].index] = 1.0
        for node_id in st.nodes:
            v = index[node_id]
            stage_of[v] = i
            val[jm.x[v, i].index] = 1.0
            cfgs = nodes[v].configs[st.tensor_parallel]
            c_local = next(c for c, cfg in enumerate(cfgs) if cfg.id == st.configs[node_id])
            offset = _offset(nodes[v].configs, st.tensor_parallel)
            c = offset + c_local
            assert (v, i, st.tensor_parallel, c) in jm.z, "configuration order of the model and the plan differ"
            val[jm.z[v, i, st.tensor_parallel, c].index] = 1.0
            chosen[v] = (st.tensor_parallel, c, cfgs[c_local])
    later = 0
    for i in reversed(range(jm.slots)):
        if i < len(plan.stages):
            st = plan.stages[i]
            later += st.data_parallel
            y = -(-later // st.data_parallel)
            for mm in range(2, y + 1):
                val[jm.u[i, mm].index] = 1.0
        val[jm.s[i].index] = float(later)
    for k, e in enumerate(problem.edges):
        u, v = index[e.source], index[e.target]
        su, sv = stage_of[u], stage_of[v]
        if su == sv:
            continue
        if ("in", k, sv) in jm.cross:
            val[jm.cross["in", k, sv].index] = 1.0
            val[jm.cross["out", k, su].index] = 1.0
        if (f"fw{chosen[v][1]}", k, sv) in jm.cross:
            val[jm.cross[f"fw{chosen[v][1]}", k, sv].index] = 1.0
        if (f"bw{chosen[u][1]}", k, su) in jm.cross:
            val[jm.cross[f"bw{chosen[u][1]}", k, su].index] = 1.0
    assert jm.objective_var is not None
    val[jm.objective_var.index] = min(max(objective_s, jm.objective_var.lb), jm.objective_var.ub)
    return val


def _offset(configs: Mapping[int, tuple[JointConfig, ...]], t: int) -> int:
    """Position of degree ``t``'s first configuration in a node's flattened list (degrees ascending)."""
    return sum(len(cs) for tt, cs in configs.items() if tt < t)


def hint(jm: JointModel, plan: JointPlan, objective_s: float) -> None:
    """Warm-start the back-end with ``plan`` (a complete assignment)."""
    for idx, value in values_of(jm, plan, objective_s).items():
        jm.model.set_hint(jm.model.variables[idx], value)


def decode(jm: JointModel, values: list[float]) -> JointPlan:
    """The plan of a back-end's values: used slots in order, each node's slot and configuration."""
    problem = jm.problem
    nodes = problem.nodes
    stages: list[JointStage] = []
    for i in range(jm.slots):
        picked = [o for o in range(len(jm.options)) if values[jm.g[i, o].index] > 0.5]
        members = [v for v in range(len(nodes)) if values[jm.x[v, i].index] > 0.5]
        if not picked or not members:
            continue
        d, t = jm.options[picked[0]]
        configs: dict[str, str] = {}
        for v in members:
            cfgs = nodes[v].configs[t]
            offset = _offset(nodes[v].configs, t)
            best = max(range(len(cfgs)), key=lambda c: values[jm.z[v, i, t, offset + c].index])
            configs[nodes[v].id] = cfgs[best].id
        stages.append(JointStage(tuple(nodes[v].id for v in members), d, t, configs))
    return JointPlan(tuple(stages))
