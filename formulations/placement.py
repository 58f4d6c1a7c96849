r"""Operator placement and scheduling: a CP-SAT interval model and a disjunctive MILP for CBC.

Notation
--------
Tasks :math:`i` with duration :math:`d_{ik}` on device :math:`k` (only pairs in
:math:`A`, where the time is finite and the task's memory fits alone), memory
:math:`m_i`, capacity :math:`M_k`; edges :math:`e = (i, j)` with transfer
:math:`c^e_{ab}` (zero diagonal), :math:`C^e_b = \max_a c^e_{ab}`,
:math:`\bar C^e_a = \max_b c^e_{ab}`; heads :math:`h_{ik}` and tails :math:`q_{ik}`
of the device-path recursion (:mod:`milp_partition.placement.bounds`); a lower
bound :math:`L` and an upper bound :math:`U` (a heuristic's makespan).

Variables: :math:`x_{ik} \in \{0,1\}` for :math:`(i,k) \in A`; start
:math:`S_i \ge 0`; makespan :math:`T`; liveness: release :math:`R_i`;
contention: transfer start :math:`X_e` and :math:`y_{eab} \in \{0,1\}` (edge e
crosses from a to b); CBC: order :math:`z_{ij} \in \{0,1\}` (i before j).

.. math::

    \min T \quad \text{s.t.}

    \text{(a) assign:}\quad & \textstyle\sum_k x_{ik} = 1 & \forall i \\
    \text{(b) colocation:}\quad & x_{ik} = x_{gk} & \forall i \text{ in the group of leader } g \\
    \text{(c) precedence:}\quad & S_j \ge S_i + \textstyle\sum_k d_{ik} x_{ik}
        + \sum_a c^e_{ab} x_{ia} - C^e_b (1 - x_{jb}) & \forall e=(i,j), b \\
    & S_j \ge S_i + \textstyle\sum_k d_{ik} x_{ik} + \sum_b c^e_{ab} x_{jb} - \bar C^e_a (1 - x_{ia})
        & \forall e=(i,j), a \\
    \text{(d) no overlap:}\quad & \mathrm{NoOverlap}_k\{[S_i, S_i + d_{ik}) \text{ present iff } x_{ik}: d_{ik} > 0\}
        & \forall k \\
    \text{(e) memory, static:}\quad & \textstyle\sum_i m_i x_{ik} \le M_k & \forall k \\
    \text{(e) memory, liveness:}\quad & R_i \ge S_j + \textstyle\sum_k d_{jk} x_{jk}
        \;\forall j \in \mathrm{succ}(i) \cup \{i\},\;
        \mathrm{Cumulative}_k\{[S_i, R_i) \text{ iff } x_{ik}, m_i\} \le M_k & \forall k \\
    \text{(f) contention:}\quad & X_e \ge S_i + \textstyle\sum_k d_{ik} x_{ik},\;
        S_j \ge X_e + \sum_{a \ne b} c^e_{ab} y_{eab},\;
        y_{eab} \ge x_{ia} + x_{jb} - 1,\; y_{eab} \le x_{ia},\; y_{eab} \le x_{jb} \\
    & \mathrm{NoOverlap}\{[X_e, X_e + c^e_{ab}) \text{ iff } y_{eab}\} \text{ per out-port } a
        \text{ and per in-port } b \\
    \text{(g) makespan:}\quad & T \ge S_i + \textstyle\sum_k (d_{ik} + q_{ik}) x_{ik} & \forall i \\
    \text{(h) heads:}\quad & S_i \ge \textstyle\sum_k h_{ik} x_{ik} & \forall i \\
    \text{(i) load:}\quad & \textstyle\sum_i d_{ik} x_{ik} \le T & \forall k \\
    \text{(j) symmetry:}\quad & x_{i k'} \le \textstyle\sum_{i' < i} x_{i' k}
        & \text{identical devices } k < k' \text{ adjacent in their class} \\
    \text{(k) bounds:}\quad & L \le T \le U \\
    \text{(l) all devices:}\quad & \mathrm{Cumulative}\{[S_i, S_i + \min_k d_{ik}), 1\} \le |D|

(c) is exact: exactly one :math:`x_{jb}` is 1 and for it the first row reads
:math:`S_j \ge C_i + c^e_{p(i) b}`; for the other b the row is implied by
:math:`S_j \ge C_i`.  (g) with :math:`q = 0` is the plain makespan row; (g), (h),
(i) and (k) are redundant (valid for every schedule, by
:mod:`milp_partition.placement.bounds`) and prune the search.  (j) holds for some
optimal solution: permuting identical devices (same time column, capacity and
transfer rows and columns) maps schedules to schedules, and the first task (by
index) on each device of a class can be ordered.

CBC gets (d) as a disjunctive big-M program instead of intervals (only small
instances are realistic: one order variable per pair of tasks that no path
orders), with :math:`H = U` (or a horizon) as the big M:

.. math::

    S_j \ge S_i + d_{ik} - H (1 - z_{ij}) - H (2 - x_{ik} - x_{jk}),\quad
    S_i \ge S_j + d_{jk} - H z_{ij} - H (2 - x_{ik} - x_{jk})
    \quad \forall \{i, j\} \text{ unordered}, k: d_{ik}, d_{jk} > 0

Liveness memory and link contention are CP-SAT only (CBC raises ModelError).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

import numpy as np

from milp_partition.backends.model import Model, Sense, Var, VarKind
from milp_partition.errors import ModelError
from milp_partition.placement.bounds import PathBounds
from milp_partition.placement.problem import PlacementProblem, PlacementSolution


@dataclass(frozen=True)
class PlacementFormulationSettings:
    """Options that change the model, never its optimum.

    Attributes
    ----------
    disjunctive
        Linear big-M no-overlap for CBC instead of intervals.
    symmetry_breaking
        Add (j) among identical devices.
    redundant
        Add (g) with tails, (h), (i).
    global_cumulative
        Add (l) (CP-SAT only).
    """

    disjunctive: bool = False
    symmetry_breaking: bool = True
    redundant: bool = True
    global_cumulative: bool = True


@dataclass
class PlacementModel:
    """A built model and the handles needed to hint and decode it."""

    model: Model
    problem: PlacementProblem
    x: dict[tuple[int, int], Var]
    start: list[Var]
    makespan: Var
    release: list[Var | None] = field(default_factory=list)
    transfer: dict[int, Var] = field(default_factory=dict)
    cross: dict[tuple[int, int, int], Var] = field(default_factory=dict)
    order: dict[tuple[int, int], Var] = field(default_factory=dict)
    prefix: dict[tuple[int, int], Var] = field(default_factory=dict)


def identical_device_classes(problem: PlacementProblem) -> list[list[int]]:
    """Classes (size >= 2) of devices that are interchangeable: same times, capacity, transfer rows and columns."""
    d = problem.num_devices
    classes: list[list[int]] = []
    seen: set[int] = set()
    for a in range(d):
        if a in seen:
            continue
        cls = [a]
        for b in range(a + 1, d):
            if b in seen:
                continue
            if not (
                np.array_equal(problem.time[:, a], problem.time[:, b]) and problem.device_memory[a] == problem.device_memory[b]
            ):
                continue
            perm = np.arange(d)
            perm[a], perm[b] = b, a
            if np.array_equal(problem.comm, problem.comm[:, perm][:, :, perm]):
                cls.append(b)
        if len(cls) > 1:
            classes.append(cls)
            seen.update(cls)
    return classes


def _reachability(problem: PlacementProblem) -> list[int]:
    """Bitset of the tasks reachable from each task."""
    n = problem.num_tasks
    reach = [0] * n
    ptr, succ, _ = problem.succ
    for i in problem.topological_order[::-1].tolist():
        r = 0
        for j in succ[ptr[i] : ptr[i + 1]].tolist():
            r |= reach[j] | (1 << j)
        reach[i] = r
    return reach


def build(
    problem: PlacementProblem,
    *,
    lower_bound: float = 0.0,
    upper_bound: float | None = None,
    path: PathBounds | None = None,
    settings: PlacementFormulationSettings = PlacementFormulationSettings(),
) -> PlacementModel:
    """Build the program of the module docstring."""
    n, d, m = problem.num_tasks, problem.num_devices, problem.num_edges
    if settings.disjunctive and (problem.settings.memory_model == "liveness" or problem.settings.link_contention):
        raise ModelError(
            "the disjunctive (CBC) placement model has static memory and no link contention only; use --solver cpsat"
        )
    allowed = problem.allowed
    t = np.where(allowed, problem.time, 0.0)
    comm = problem.comm
    finite_max = np.where(allowed, problem.time, 0.0).max(axis=1)
    horizon = float(finite_max.sum() + (comm.max(axis=(1, 2)).sum() if m else 0.0))
    U = float(upper_bound) if upper_bound is not None else horizon
    L = max(0.0, float(lower_bound))
    if L > U:
        L = U
    use_path = path is not None and settings.redundant
    head = np.where(allowed, path.head, 0.0) if use_path else np.zeros((n, d))  # type: ignore[union-attr]
    tail = np.where(allowed, path.tail, 0.0) if use_path else np.zeros((n, d))  # type: ignore[union-attr]

    model = Model(name=f"placement_{problem.name or 'instance'}")
    x: dict[tuple[int, int], Var] = {}
    for i in range(n):
        for k in np.flatnonzero(allowed[i]).tolist():
            x[i, k] = model.add_var(f"x_{i}_{k}")
    T = model.add_var("T", VarKind.CONTINUOUS, L, U)
    start: list[Var] = []
    for i in range(n):
        ks = np.flatnonzero(allowed[i])
        lo = float(head[i, ks].min()) if use_path else 0.0
        hi = U - float((t[i, ks] + tail[i, ks]).min())
        start.append(model.add_var(f"S_{i}", VarKind.CONTINUOUS, lo, max(lo, hi)))
    pm = PlacementModel(model, problem, x, start, T, release=[None] * n)

    # (a) assign
    for i in range(n):
        model.add_constraint([(x[i, k], 1.0) for k in range(d) if (i, k) in x], Sense.EQ, 1.0, f"assign_{i}")
    _add_colocation(pm)  # (b)
    _add_precedence(pm, t)  # (c)
    # (d) no overlap
    if settings.disjunctive:
        _add_disjunctive(pm, t, U)
    else:
        for k in range(d):
            ivs = [
                model.add_interval(start[i], float(t[i, k]), presence=x[i, k], name=f"I_{i}_{k}")
                for i in range(n)
                if (i, k) in x and t[i, k] > 0
            ]
            if len(ivs) > 1:
                model.add_no_overlap(ivs, f"nooverlap_{k}")
    # (e) memory
    if problem.settings.memory_model == "static":
        _add_static_memory(pm)
    else:
        _add_liveness(pm, t, U)
    # (f) contention
    if problem.settings.link_contention:
        _add_contention(pm, t, U)
    _add_redundant(pm, t, head, tail, use_path, settings)  # (g) makespan, (h) heads, (i) load, (l) all devices
    # (j) symmetry
    if settings.symmetry_breaking:
        for cls in identical_device_classes(problem):
            for k, k2 in itertools.pairwise(cls):
                _add_symmetry(pm, k, k2)
    model.minimize([(T, 1.0)])
    return pm


def _dur_terms(
    pm: PlacementModel, t: np.ndarray, i: int, extra: np.ndarray | None = None, sign: float = -1.0
) -> list[tuple[Var, float]]:
    """``sign * (t[i, k] + extra[k]) * x[i, k]`` over the devices task i may run on (its duration, plus extra)."""
    coef = t[i] if extra is None else t[i] + extra
    return [(pm.x[i, k], sign * float(coef[k])) for k in range(pm.problem.num_devices) if (i, k) in pm.x and coef[k] != 0]


def _add_colocation(pm: PlacementModel) -> None:
    """(b) colocation: the tasks of one group share one device."""
    problem, model, x = pm.problem, pm.model, pm.x
    for g in np.unique(problem.colocation[problem.colocation >= 0]).tolist():
        members = np.flatnonzero(problem.colocation == g).tolist()
        lead = members[0]
        for i in members[1:]:
            for k in range(problem.num_devices):
                a, b = x.get((i, k)), x.get((lead, k))
                if a is None and b is None:
                    continue
                model.add_constraint([(v, c) for v, c in ((a, 1.0), (b, -1.0)) if v is not None], Sense.EQ, 0.0, f"coloc_{i}_{k}")


def _add_precedence(pm: PlacementModel, t: np.ndarray) -> None:
    """(c) precedence with the transfer delay of the edge's device pair (one row per receiving and per sending device)."""
    problem, model, x, start = pm.problem, pm.model, pm.x, pm.start
    d, comm = problem.num_devices, problem.comm
    src, dst = problem.edge_source.tolist(), problem.edge_target.tolist()
    for e in range(problem.num_edges):
        i, j = src[e], dst[e]
        base = [(start[j], 1.0), (start[i], -1.0), *_dur_terms(pm, t, i)]
        c = comm[e]
        colocated = problem.colocation[i] >= 0 and problem.colocation[i] == problem.colocation[j]
        if colocated or not c.any():
            model.add_constraint(base, Sense.GE, 0.0, f"prec_{e}")
            continue
        for b in range(d):
            if (j, b) not in x:
                continue
            Cb = float(max(c[a, b] for a in range(d) if (i, a) in x))
            if Cb <= 0:
                model.add_constraint([*base, (x[j, b], 0.0)], Sense.GE, 0.0, f"prec_{e}_in{b}")
                continue
            terms = base + [(x[i, a], -float(c[a, b])) for a in range(d) if (i, a) in x] + [(x[j, b], -Cb)]
            model.add_constraint(terms, Sense.GE, -Cb, f"prec_{e}_in{b}")
        for a in range(d):
            if (i, a) not in x:
                continue
            Ca = float(max(c[a, b] for b in range(d) if (j, b) in x))
            if Ca <= 0:
                continue
            terms = base + [(x[j, b], -float(c[a, b])) for b in range(d) if (j, b) in x] + [(x[i, a], -Ca)]
            model.add_constraint(terms, Sense.GE, -Ca, f"prec_{e}_out{a}")


def _add_static_memory(pm: PlacementModel) -> None:
    """(e) static memory: the tasks on a device fit its memory (rows only where they could overflow)."""
    problem, model, x = pm.problem, pm.model, pm.x
    mem = problem.task_memory
    for k in range(problem.num_devices):
        terms = [(x[i, k], float(mem[i])) for i in range(problem.num_tasks) if (i, k) in x and mem[i] > 0]
        if sum(c for _, c in terms) > problem.device_memory[k]:
            model.add_constraint(terms, Sense.LE, float(problem.device_memory[k]), f"memory_{k}")


def _add_redundant(
    pm: PlacementModel,
    t: np.ndarray,
    head: np.ndarray,
    tail: np.ndarray,
    use_path: bool,
    settings: PlacementFormulationSettings,
) -> None:
    """(g) makespan with tails, (h) heads, (i) load and (l) the all-devices cumulative."""
    problem, model, x, start, T = pm.problem, pm.model, pm.x, pm.start, pm.makespan
    n, d, allowed = problem.num_tasks, problem.num_devices, problem.allowed
    sptr = problem.succ[0]
    for i in range(n):
        if settings.redundant or sptr[i + 1] == sptr[i]:
            model.add_constraint([(T, 1.0), (start[i], -1.0), *_dur_terms(pm, t, i, tail[i])], Sense.GE, 0.0, f"makespan_{i}")
        if use_path and np.ptp(head[i][allowed[i]]) > 0:
            model.add_constraint([(start[i], 1.0), *_dur_terms(pm, t, i, head[i] - t[i])], Sense.GE, 0.0, f"head_{i}")
    if settings.redundant:  # (i) load
        for k in range(d):
            terms = [(x[i, k], float(t[i, k])) for i in range(n) if (i, k) in x and t[i, k] > 0]
            if terms:
                model.add_constraint([*terms, (T, -1.0)], Sense.LE, 0.0, f"load_{k}")
    # (l) all devices: at most |D| tasks run at once, each at least its fastest time
    if settings.redundant and settings.global_cumulative and not settings.disjunctive:
        fastest = np.where(allowed, problem.time, np.inf).min(axis=1)
        ivs = [model.add_interval(start[i], float(fastest[i]), name=f"G_{i}") for i in range(n) if fastest[i] > 0]
        if len(ivs) > d:
            model.add_cumulative(ivs, [1.0] * len(ivs), float(d), "all_devices")


def _add_disjunctive(pm: PlacementModel, t: np.ndarray, H: float) -> None:
    problem, model, x, S = pm.problem, pm.model, pm.x, pm.start
    n, d = problem.num_tasks, problem.num_devices
    reach = _reachability(problem)
    for i in range(n):
        for j in range(i + 1, n):
            if (reach[i] >> j) & 1 or (reach[j] >> i) & 1:
                continue
            common = [k for k in range(d) if (i, k) in x and (j, k) in x and t[i, k] > 0 and t[j, k] > 0]
            if problem.colocation[i] >= 0 and problem.colocation[i] == problem.colocation[j]:
                pass  # colocated: they share a device, the rows below apply on it
            if not common:
                continue
            z = model.add_var(f"z_{i}_{j}")
            pm.order[i, j] = z
            for k in common:
                # i before j:  S_j >= S_i + d_ik - H(1 - z) - H(2 - x_ik - x_jk)
                model.add_constraint(
                    [(S[j], 1.0), (S[i], -1.0), (z, -H), (x[i, k], -H), (x[j, k], -H)],
                    Sense.GE,
                    float(t[i, k]) - 3 * H,
                    f"disj_{i}_{j}_{k}_a",
                )
                # j before i:  S_i >= S_j + d_jk - H z - H(2 - x_ik - x_jk)
                model.add_constraint(
                    [(S[i], 1.0), (S[j], -1.0), (z, H), (x[i, k], -H), (x[j, k], -H)],
                    Sense.GE,
                    float(t[j, k]) - 2 * H,
                    f"disj_{i}_{j}_{k}_b",
                )


def _add_liveness(pm: PlacementModel, t: np.ndarray, H: float) -> None:
    problem, model, x, S = pm.problem, pm.model, pm.x, pm.start
    n, d = problem.num_tasks, problem.num_devices
    mem = problem.task_memory
    ptr, succ, _ = problem.succ
    for i in range(n):
        if mem[i] <= 0:
            continue
        R = model.add_var(f"R_{i}", VarKind.CONTINUOUS, 0.0, H)
        pm.release[i] = R
        for j in [i, *succ[ptr[i] : ptr[i + 1]].tolist()]:
            model.add_constraint(
                [(R, 1.0), (S[j], -1.0), *[(x[j, k], -float(t[j, k])) for k in range(d) if (j, k) in x and t[j, k] != 0]],
                Sense.GE,
                0.0,
                f"release_{i}_{j}",
            )
    for k in range(d):
        items = [(i, float(mem[i])) for i in range(n) if pm.release[i] is not None and (i, k) in x]
        if sum(c for _, c in items) <= problem.device_memory[k]:
            continue
        ivs = [model.add_interval(S[i], end=pm.release[i], presence=x[i, k], name=f"L_{i}_{k}") for i, _ in items]  # type: ignore[arg-type]
        model.add_cumulative(ivs, [c for _, c in items], float(problem.device_memory[k]), f"liveness_{k}")


def _add_contention(pm: PlacementModel, t: np.ndarray, H: float) -> None:
    problem, model, x, S = pm.problem, pm.model, pm.x, pm.start
    d = problem.num_devices
    out_port: dict[int, list[int]] = {k: [] for k in range(d)}
    in_port: dict[int, list[int]] = {k: [] for k in range(d)}
    for e, (i, j) in enumerate(zip(problem.edge_source.tolist(), problem.edge_target.tolist())):
        c = problem.comm[e]
        pairs = [(a, b) for a in range(d) for b in range(d) if a != b and c[a, b] > 0 and (i, a) in x and (j, b) in x]
        if not pairs or (problem.colocation[i] >= 0 and problem.colocation[i] == problem.colocation[j]):
            continue
        X = model.add_var(f"X_{e}", VarKind.CONTINUOUS, 0.0, H)
        pm.transfer[e] = X
        model.add_constraint(
            [(X, 1.0), (S[i], -1.0), *[(x[i, k], -float(t[i, k])) for k in range(d) if (i, k) in x and t[i, k] != 0]],
            Sense.GE,
            0.0,
            f"xfer_ready_{e}",
        )
        lag: list[tuple[Var, float]] = []
        for a, b in pairs:
            y = model.add_var(f"y_{e}_{a}_{b}")
            pm.cross[e, a, b] = y
            model.add_constraint([(y, 1.0), (x[i, a], -1.0), (x[j, b], -1.0)], Sense.GE, -1.0, f"y_{e}_{a}_{b}_lo")
            model.add_constraint([(y, 1.0), (x[i, a], -1.0)], Sense.LE, 0.0, f"y_{e}_{a}_{b}_a")
            model.add_constraint([(y, 1.0), (x[j, b], -1.0)], Sense.LE, 0.0, f"y_{e}_{a}_{b}_b")
            lag.append((y, -float(c[a, b])))
            iv = model.add_interval(X, float(c[a, b]), presence=y, name=f"X_{e}_{a}_{b}")
            out_port[a].append(iv)
            in_port[b].append(iv)
        model.add_constraint([(S[j], 1.0), (X, -1.0), *lag], Sense.GE, 0.0, f"xfer_arrive_{e}")
    for k in range(d):
        if len(out_port[k]) > 1:
            model.add_no_overlap(out_port[k], f"outport_{k}")
        if len(in_port[k]) > 1:
            model.add_no_overlap(in_port[k], f"inport_{k}")


def _add_symmetry(pm: PlacementModel, k: int, k2: int) -> None:
    """(j): device k2 takes task i only if device k took some task before i (prefix sums u)."""
    model, x = pm.model, pm.x
    prev: Var | None = None
    for i in range(pm.problem.num_tasks):
        if (i, k2) in x:
            if prev is None:
                model.add_constraint([(x[i, k2], 1.0)], Sense.EQ, 0.0, f"sym_{k}_{k2}_{i}")
            else:
                model.add_constraint([(x[i, k2], 1.0), (prev, -1.0)], Sense.LE, 0.0, f"sym_{k}_{k2}_{i}")
        if (i, k) in x:
            u = model.add_var(f"u_{k}_{i}", VarKind.INTEGER, 0.0, float(i + 1))
            pm.prefix[k, i] = u
            model.add_constraint(
                [(u, 1.0), (x[i, k], -1.0)] + ([(prev, -1.0)] if prev is not None else []), Sense.EQ, 0.0, f"prefix_{k}_{i}"
            )
            prev = u


def canonical_devices(problem: PlacementProblem, device: np.ndarray) -> np.ndarray:
    """Relabel identical devices so that (j) holds: within a class, devices in order of their first task."""
    dev = device.copy()
    for cls in identical_device_classes(problem):
        first = {k: (np.flatnonzero(device == k)[0] if (device == k).any() else problem.num_tasks + k) for k in cls}
        mapping = dict(zip(sorted(cls, key=lambda k: first[k]), cls))
        for k, k_new in mapping.items():
            dev[device == k] = k_new
    return dev


def hint(pm: PlacementModel, solution: PlacementSolution, makespan: float) -> None:
    """Warm start from a verified schedule (its devices relabelled to meet (j))."""
    problem, model = pm.problem, pm.model
    t = np.where(problem.allowed, problem.time, 0.0)
    dev = canonical_devices(problem, np.asarray(solution.device, dtype=np.int64))
    start = np.asarray(solution.start, dtype=np.float64)
    n = problem.num_tasks
    dur = t[np.arange(n), dev]
    end = start + dur
    for (i, k), v in pm.x.items():
        model.set_hint(v, 1.0 if dev[i] == k else 0.0)
    for i, v in enumerate(pm.start):
        model.set_hint(v, float(start[i]))
    model.set_hint(pm.makespan, float(makespan))
    for (k, i), u in pm.prefix.items():
        model.set_hint(u, float(np.sum(dev[: i + 1] == k)))
    ptr, succ, _ = problem.succ
    for i, r in enumerate(pm.release):
        if r is not None:
            model.set_hint(r, float(max([end[i], *end[succ[ptr[i] : ptr[i + 1]]].tolist()])))
    tstart = solution.transfer_start
    for e, X in pm.transfer.items():
        i = int(problem.edge_source[e])
        model.set_hint(X, float(tstart[e]) if tstart is not None and np.isfinite(tstart[e]) else float(end[i]))
    for (e, a, b), y in pm.cross.items():
        i, j = int(problem.edge_source[e]), int(problem.edge_target[e])
        model.set_hint(y, 1.0 if (dev[i] == a and dev[j] == b) else 0.0)
    for (i, j), z in pm.order.items():
        model.set_hint(z, 1.0 if (start[i], i) < (start[j], j) else 0.0)


def decode(pm: PlacementModel, values: list[float]) -> PlacementSolution:
    """Devices, starts and (with contention) transfer starts from a solver's values."""
    problem = pm.problem
    n, d = problem.num_tasks, problem.num_devices
    device = np.zeros(n, dtype=np.int64)
    best = np.full(n, -1.0)
    for (i, k), v in pm.x.items():
        if values[v.index] > best[i]:
            best[i], device[i] = values[v.index], k
    start = np.array([values[v.index] for v in pm.start], dtype=np.float64)
    if not problem.settings.link_contention and problem.settings.memory_model == "static":
        start = _push_forward(problem, device, start)
    tstart = None
    if problem.settings.link_contention:
        tstart = np.full(problem.num_edges, np.nan)
        for e, X in pm.transfer.items():
            tstart[e] = values[X.index]
    del d
    return PlacementSolution(device, start, tstart)


def _push_forward(problem: PlacementProblem, device: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The solver's starts, each moved later just as far as its inputs and its device's previous task need, in real units.

    A back-end's times are rounded (CBC prints 8 significant digits; CP-SAT works on a
    grid), so a start may precede its input's arrival by a rounding error.  Tasks are
    taken in the order of the solver's starts (ties, and inversions that only rounding
    can cause, resolved by precedence) and each starts at the latest of its own start,
    its predecessors' ends plus transfers, and the end of its device's previous task.
    Starts only move later, by at most the rounding; under static memory and without
    link contention, moving a start later breaks nothing else.
    """
    n = problem.num_tasks
    dur = problem.time[np.arange(n), device]
    dur = np.where(np.isfinite(dur), dur, 0.0)
    rank = np.empty(n, dtype=np.int64)
    rank[np.asarray(problem.topological_order, dtype=np.int64)] = np.arange(n)
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    waiting = np.zeros(n, dtype=np.int64)
    succs: list[list[int]] = [[] for _ in range(n)]
    for e, (i, j) in enumerate(zip(problem.edge_source.tolist(), problem.edge_target.tolist())):
        preds[j].append((i, float(problem.comm[e, device[i], device[j]])))
        succs[i].append(j)
        waiting[j] += 1
    ready = [(float(start[i]), int(rank[i]), i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    out = start.copy()
    free = np.zeros(problem.num_devices)
    while ready:
        _, _, i = heapq.heappop(ready)
        s = max([float(start[i]), *(out[j] + dur[j] + lag for j, lag in preds[i])])
        if dur[i] > 0:
            s = max(s, free[device[i]])
            free[device[i]] = s + dur[i]
        out[i] = s
        for j in succs[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (float(start[j]), int(rank[j]), j))
    return out
