r"""Dynamic-programming heuristics for contiguous pipeline partitioning.

Both DPs cut the forward graph into a *chain of stages* and give each stage its own
device; they warm-start the exact model and give it upper bounds.  Every split they
return is contiguous, so it is feasible for the contiguous and the non-contiguous
variant alike.

Units
-----
Colocation classes that hold a forward node are contracted into *units*; classes
that lie on a cycle of the class quotient of the forward graph are merged (they
could not be ordered otherwise), and a unit whose every edge goes to one single
node ``m`` elsewhere, whose nodes take no time on any device and add no memory (or
memory cannot bind), and that may run wherever ``m``'s unit may, is merged into
``m``'s unit.  That last merge loses nothing: moving such a unit next to ``m``
never raises a load, and keeps a chain of ideals a chain of ideals.  Classes with
no forward node (*backward-only* classes) are not units: they are placed greedily
after the forward split (see :func:`ideal_dp`).

Stages and devices
------------------
Devices fall into groups: accelerators that are interchangeable (same times,
allowed nodes, capacity and memory coefficients) form one group each under the
``"static"`` memory model; under ``"1f1b"`` all accelerators form one *ordered*
group (the j-th accelerator stage of the chain goes to accelerator j, so every
forward edge between accelerators runs forward); the host CPU cores form one group.  The
chain may interleave the groups freely and may leave any device empty
(interchangeable devices are then handed out from the first of their group on).
Under 1F1B with CPU cores this misses splits whose accelerators are out of
position order along the chain with a CPU stage between them; results then say
they are not exact.  With
:math:`c = (c_1, \dots, c_G)` the number of devices used per group,

.. math::

    f(\emptyset, c) = 0, \qquad
    f(I, c) = \min\Big(\min_{g:\,c_g \ge 1} f(I, c - e_g),\;
        \min_{g:\,c_g \ge 1}\; \min_{I' \subsetneq I}
        \max\big(f(I', c - e_g),\, w_{g, c_g}(I \setminus I')\big)\Big),

over the sets :math:`I` of the family (ideals for :func:`ideal_dp`, prefixes of one
topological order for :func:`chain_dp`), where :math:`w_{g,j}(S)` is the value of
stage :math:`S` on the j-th device of group g, :math:`+\infty` when it breaks a
rule.  The answer is :math:`f(V, (n_1, \dots, n_G))`.

Stage value
-----------
For objective ``"time"`` the value is the load, for ``"memory"`` the accelerator's
memory (0 on a CPU core) with :math:`+\infty` when the load exceeds
``max_time_per_sample``.  The load of stage S on accelerator d is

.. math::

    w(S) = \sum_{v \in S} t_{vd} + \sum_{h} x_h\,[0 < |h \cap S| < |h|],

with one hyperedge :math:`h_u = \{\mathrm{unit}(u)\} \cup \mathrm{units}(\mathrm{succ}(u))`
per node u of transfer time :math:`x_u > 0`: a device pays :math:`x_u` once exactly
when it holds some but not all of :math:`h_u` (outgoing if it holds u, incoming
otherwise).  For :math:`S = I \setminus I'` with :math:`I' \subseteq I`,
:math:`|h \cap S| = |h \cap I| - |h \cap I'|`, and with
:math:`X(J) = \sum_{h \text{ mixed in } J} x_h` (mixed: :math:`0 < |h \cap J| < |h|`)

.. math::

    \sum_h x_h [h \text{ split by } S] = X(I) + X(I') - \sum_{h \text{ mixed in } I}
        x_h \big([h \text{ mixed in } I'] + [|h \cap I'| = |h \cap I|]\big),

so a stage costs :math:`O(\#\text{hyperedges mixed in } I)` on top of per-set sums
precomputed once.  A stage is allowed on d only if all its nodes may run there
and, on an accelerator, its memory fits; under ``"1f1b"`` an accelerator stage may
have no forward edge into an earlier stage and no backward edge into a later one
(:func:`~milp_partition.pipeline.costs.stage_order_pairs`; an edge between a forward
and a backward node is not ordered).  Edges to nodes of backward-only classes are
left out of the DP's loads; the value returned is always recomputed from the final
assignment by the definition (memory per node rounded up to whole bytes, as the
model and the verifier do).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from milp_partition.pipeline.costs import PipelineCosts, pipeline_costs, stage_order_pairs
from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution

#: Relative slack on ``max_time_per_sample`` (the verifier's).
TIME_BOUND_REL_TOL = 1e-9


#: Most units the DPs take: their dense (sets x units) tables are quadratic in units (5,000: about 0.3 GB at peak).
DP_MAX_UNITS = 5000
#: The DPs are not set up past this many (forward colocation class, device) pairs: their (nodes x devices) arrays
#: took minutes for 20,000 nodes on 4,096 devices, past any time limit.
DP_MAX_SETUP_CELLS = 4 * DP_MAX_UNITS * 256


@dataclass(frozen=True)
class DPResult:
    """What a DP returns.

    Attributes
    ----------
    solution
        Device of every node (``None`` when the DP found no split or gave up).
    value
        Objective of ``solution`` by the problem's definition (``math.inf`` when none).
    seconds
        Wall-clock time of the call.
    exact
        True iff the DP searched its whole family and placed no node greedily, so
        ``value`` is optimal among the splits it can represent (for :func:`ideal_dp`:
        every split whose devices can be ordered so that each forward edge runs
        forward).  Always false under 1F1B with CPU cores and two or more
        accelerators, where the chain keeps the accelerators in position order.
    states
        Number of sets of the family enumerated (ideals, or prefix positions).
    message
        What was done, or why it gave up.
    """

    solution: PipelineSolution | None
    value: float
    seconds: float
    exact: bool
    states: int
    message: str


@dataclass(frozen=True)
class IdealDPSettings:
    """Settings of :func:`ideal_dp`.

    Attributes
    ----------
    max_ideals
        Give up when the forward graph has more ideals than this (they grow
        exponentially with the graph's width; time grows with the pairs of nested
        ideals, memory with the square of the count).
    """

    max_ideals: int = 20000


# --------------------------------------------------------------------------- problem arrays


@dataclass(frozen=True)
class _Instance:
    """Arrays of one problem shared by the DPs and the evaluator.

    ``memory[v, d]`` is the whole bytes node v adds to accelerator d (0 on CPU cores),
    ``capacity[d]`` is ``inf`` when unbounded; under 1F1B node ``order_first[k]`` may not be
    on a later accelerator than ``order_second[k]`` (:func:`stage_order_pairs`).
    """

    costs: PipelineCosts
    src: np.ndarray
    dst: np.ndarray
    memory: np.ndarray
    capacity: np.ndarray
    num_accelerators: int
    one_f_one_b: bool
    objective: str
    time_limit: float
    node_ids: tuple[str, ...]
    device_ids: tuple[str, ...]
    topo_rank: np.ndarray
    order_first: np.ndarray
    order_second: np.ndarray

    @property
    def num_devices(self) -> int:
        return len(self.device_ids)

    def time_ok(self, load: np.ndarray | float) -> np.ndarray | bool:
        """Whether loads respect ``max_time_per_sample`` (always true for objective ``"time"``)."""
        return load <= self.time_limit * (1 + TIME_BOUND_REL_TOL) + 1e-12


def _instance(problem: PipelineProblem) -> _Instance:
    costs = pipeline_costs(problem)
    settings = problem.settings
    num_acc = len(problem.cluster.devices)
    memory = np.zeros_like(costs.node_time)
    for d in range(num_acc):
        if settings.memory_model == "1f1b":
            memory[:, d] = (
                settings.optimizer_state_factor * costs.param_bytes + (num_acc - d) * costs.activation_bytes + costs.other_bytes
            )
        else:
            memory[:, d] = costs.static_bytes
    capacity = np.where(costs.memory_capacity < 0, np.inf, costs.memory_capacity.astype(np.float64))
    limit = math.inf if settings.objective == "time" else float(settings.max_time_per_sample or 0.0)
    arrays = problem.graph.arrays
    first, second = stage_order_pairs(arrays.src, arrays.dst, costs.forward)
    return _Instance(
        costs=costs,
        src=arrays.src,
        dst=arrays.dst,
        memory=np.ceil(memory),
        capacity=capacity,
        num_accelerators=num_acc,
        one_f_one_b=settings.memory_model == "1f1b",
        objective=settings.objective,
        time_limit=limit,
        node_ids=tuple(n.id for n in problem.graph.nodes),
        device_ids=tuple(problem.device_ids),
        topo_rank=np.argsort(arrays.topo_order),
        order_first=first,
        order_second=second,
    )


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class _Evaluation:
    objective: float
    max_load: float
    feasible: bool


def _evaluate(inst: _Instance, assign: np.ndarray) -> _Evaluation:
    """Score an assignment (``-1`` = not placed yet; such nodes are ignored).

    Loads, memory and the 1F1B stage order follow the problem's definition directly.
    """
    costs = inst.costs
    num_dev = inst.num_devices
    placed = np.flatnonzero(assign >= 0)
    dev = assign[placed]
    loads = np.bincount(dev, weights=costs.node_time[placed, dev], minlength=num_dev)
    memory = np.bincount(dev, weights=inst.memory[placed, dev], minlength=num_dev)
    both = (assign[inst.src] >= 0) & (assign[inst.dst] >= 0)
    u, a, b = inst.src[both], assign[inst.src[both]], assign[inst.dst[both]]
    cross = a != b
    u, a, b = u[cross], a[cross], b[cross]
    senders = np.unique(u)
    transfer = np.bincount(assign[senders], weights=costs.out_transfer[senders], minlength=num_dev)
    received = np.unique(u * num_dev + b)
    transfer += np.bincount(received % num_dev, weights=costs.out_transfer[received // num_dev], minlength=num_dev)
    loads = loads + np.where(costs.is_cpu, 0.0, transfer)
    accel = ~costs.is_cpu
    feasible = bool(np.all(memory[accel] <= inst.capacity[accel]))
    if inst.one_f_one_b:
        a, b = assign[inst.order_first], assign[inst.order_second]
        on_acc = (a >= 0) & (b >= 0) & (a < inst.num_accelerators) & (b < inst.num_accelerators)
        feasible &= not bool(np.any(a[on_acc] > b[on_acc]))
    max_load = float(loads.max(initial=0.0))
    if inst.objective == "memory":
        feasible &= bool(np.all(inst.time_ok(loads)))
        objective = float(memory[accel].max(initial=0.0))
    else:
        objective = max_load
    return _Evaluation(objective, max_load, feasible)


# --------------------------------------------------------------------------- units


@dataclass(frozen=True)
class _Units:
    """The contracted forward graph the DPs split.

    Attributes
    ----------
    unit_of
        ``(n,)`` unit of each node, ``-1`` for nodes of backward-only classes.
    preds, succs
        Per unit, bitmasks of its predecessor / successor units through forward edges.
    time, allowed, memory
        ``(U, D)`` sums (all) over the unit's nodes.
    hyper_units, hyper_cost
        The hyperedges :math:`h_u` (identical ones merged, costs added).
    reverse
        ``(r, 2)`` unit pairs (a, b) of 1F1B's stage order (:func:`stage_order_pairs`) that the
        forward order does not imply (edges between backward nodes, reversed); 1F1B forbids b before a.
    loose
        Node positions of each backward-only class.
    notes
        Human-readable notes on merges.
    """

    unit_of: np.ndarray
    preds: tuple[int, ...]
    succs: tuple[int, ...]
    time: np.ndarray
    allowed: np.ndarray
    memory: np.ndarray
    hyper_units: tuple[np.ndarray, ...]
    hyper_cost: np.ndarray
    reverse: np.ndarray
    loose: tuple[np.ndarray, ...]
    notes: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.preds)


def _strong_components(num: int, succ: list[list[int]]) -> np.ndarray:
    """Component index of each vertex (iterative Tarjan)."""
    index = [-1] * num
    low = [0] * num
    on_stack = [False] * num
    comp = np.full(num, -1, dtype=np.int64)
    stack: list[int] = []
    counter = 0
    ncomp = 0
    for root in range(num):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if index[w] < 0:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comp


def _memory_never_binds(inst: _Instance) -> bool:
    """True when objective is time and every accelerator could hold every node."""
    if inst.objective != "time":
        return False
    accel = np.flatnonzero(~inst.costs.is_cpu)
    return bool(np.all(inst.memory[:, accel].sum(axis=0) <= inst.capacity[accel]))


def _absorb_free_units(inst: _Instance, unit_of: np.ndarray) -> tuple[np.ndarray, int]:
    """Merge each free unit into the unit of its only neighbour node (see module docstring)."""
    costs = inst.costs
    free_node = np.all(costs.node_time == 0, axis=1)
    if not _memory_never_binds(inst):
        free_node &= np.all(inst.memory == 0, axis=1)
    unit_of = unit_of.copy()
    absorbed = 0
    while True:
        inside = np.flatnonzero(unit_of >= 0)
        units, sizes = np.unique(unit_of[inside], return_counts=True)
        order = inside[np.argsort(unit_of[inside], kind="stable")]
        members = dict(zip(units.tolist(), np.split(order, np.cumsum(sizes)[:-1]), strict=True))
        neighbours: dict[int, set[int]] = {int(x): set() for x in units}
        for a, b in zip(inst.src.tolist(), inst.dst.tolist(), strict=True):
            ua, ub = int(unit_of[a]), int(unit_of[b])
            if ua == ub:
                continue
            if ua >= 0:
                neighbours[ua].add(b)
            if ub >= 0:
                neighbours[ub].add(a)
        touched: set[int] = set()
        for x in units.tolist():
            nbrs = neighbours[x]
            if len(nbrs) != 1 or x in touched:
                continue
            m = next(iter(nbrs))
            target = int(unit_of[m])
            if target < 0 or target in touched or not np.all(free_node[members[x]]):
                continue
            own = np.all(costs.allowed[members[x]], axis=0)
            theirs = np.all(costs.allowed[members[target]], axis=0)
            if np.any(theirs & ~own):
                continue
            unit_of[members[x]] = target
            touched.update((x, target))
            absorbed += 1
        if not touched:
            return unit_of, absorbed


def _build_units(inst: _Instance) -> _Units:
    costs = inst.costs
    n = len(inst.node_ids)
    cls = costs.colocation_class
    fwd = costs.forward
    num_cls = int(cls.max()) + 1 if n else 0
    has_fwd = np.zeros(num_cls, dtype=bool)
    has_fwd[cls[fwd]] = True
    fe = fwd[inst.src] & fwd[inst.dst] & (cls[inst.src] != cls[inst.dst])
    class_succ: list[list[int]] = [[] for _ in range(num_cls)]
    for a, b in set(zip(cls[inst.src[fe]].tolist(), cls[inst.dst[fe]].tolist(), strict=True)):
        class_succ[a].append(b)
    comp = _strong_components(num_cls, class_succ)
    notes: list[str] = []
    sizes = np.bincount(comp[has_fwd], minlength=num_cls) if num_cls else np.zeros(0, dtype=np.int64)
    if np.any(sizes > 1):
        notes.append(f"merged {int((sizes > 1).sum())} cycles of colocation classes in the forward graph")
    unit_of = np.where(has_fwd[cls], comp[cls], -1) if n else np.zeros(0, dtype=np.int64)
    unit_of, absorbed = _absorb_free_units(inst, unit_of)
    if absorbed:
        notes.append(f"merged {absorbed} zero-cost units into their only neighbour")
    # relabel units 0..U-1 by their first node
    first: dict[int, int] = {}
    for x in unit_of.tolist():
        if x >= 0 and x not in first:
            first[x] = len(first)
    relabel = np.full(int(unit_of.max(initial=-1)) + 2, -1, dtype=np.int64)
    for x, new in first.items():
        relabel[x] = new
    unit_of = relabel[unit_of]
    num_units = len(first)
    dp_nodes = np.flatnonzero(unit_of >= 0)
    time_u = np.zeros((num_units, inst.num_devices))
    np.add.at(time_u, unit_of[dp_nodes], costs.node_time[dp_nodes])
    memory_u = np.zeros((num_units, inst.num_devices))
    np.add.at(memory_u, unit_of[dp_nodes], inst.memory[dp_nodes])
    banned_u = np.zeros((num_units, inst.num_devices), dtype=np.int64)
    np.add.at(banned_u, unit_of[dp_nodes], (~costs.allowed[dp_nodes]).astype(np.int64))
    preds = [0] * num_units
    succs = [0] * num_units
    ua, ub = unit_of[inst.src], unit_of[inst.dst]
    forward_pairs: set[tuple[int, int]] = set()
    for a, b, f in zip(ua.tolist(), ub.tolist(), (fwd[inst.src] & fwd[inst.dst]).tolist(), strict=True):
        if f and a != b:
            preds[b] |= 1 << a
            succs[a] |= 1 << b
            forward_pairs.add((a, b))
    all_pairs = set(zip(unit_of[inst.order_first].tolist(), unit_of[inst.order_second].tolist(), strict=True))
    reverse = sorted({(a, b) for a, b in all_pairs if a >= 0 and b >= 0 and a != b} - forward_pairs)
    hyper: dict[tuple[int, ...], float] = {}
    receivers: dict[int, set[int]] = {}
    for a, b in zip(inst.src.tolist(), inst.dst.tolist(), strict=True):
        if unit_of[a] >= 0 and unit_of[b] >= 0 and costs.out_transfer[a] > 0:
            receivers.setdefault(a, {int(unit_of[a])}).add(int(unit_of[b]))
    for u, units in receivers.items():
        if len(units) > 1:
            key = tuple(sorted(units))
            hyper[key] = hyper.get(key, 0.0) + float(costs.out_transfer[u])
    loose_classes = sorted({int(c) for c in cls[unit_of < 0].tolist()})
    loose = tuple(np.flatnonzero(cls == c) for c in loose_classes)
    if loose:
        notes.append(f"{len(loose)} backward-only colocation classes are placed greedily after the forward split")
    return _Units(
        unit_of=unit_of,
        preds=tuple(preds),
        succs=tuple(succs),
        time=time_u,
        allowed=banned_u == 0,
        memory=memory_u,
        hyper_units=tuple(np.array(k, dtype=np.int64) for k in hyper),
        hyper_cost=np.array(list(hyper.values()), dtype=np.float64),
        reverse=np.array(reverse, dtype=np.int64).reshape(-1, 2),
        loose=loose,
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- devices


@dataclass(frozen=True)
class _Devices:
    """Device groups, the DP's states and its transitions.

    A state is the number of devices used per group, flattened in C order over
    ``dims`` (group sizes plus one).  Transition q moves from state ``prev[q]`` to
    ``target[q]`` by putting a stage on device ``device[q]`` of group ``group[q]``,
    whose stage values are column ``profile[q]`` of the per-profile tables (profiles
    are representative devices, ``profile_device``).  Devices of a group that is not
    ``ordered`` are interchangeable.
    """

    dims: tuple[int, ...]
    strides: tuple[int, ...]
    group_devices: tuple[tuple[int, ...], ...]
    ordered: tuple[bool, ...]
    profile_device: np.ndarray
    target: np.ndarray
    prev: np.ndarray
    profile: np.ndarray
    device: np.ndarray
    group: np.ndarray
    target_start: np.ndarray
    target_state: np.ndarray

    @property
    def num_states(self) -> int:
        return int(np.prod(self.dims))


def _device_groups(inst: _Instance) -> tuple[list[list[int]], list[list[int]]]:
    """Groups of devices and, per group, the profile device used for its j-th device."""
    costs = inst.costs
    groups: list[list[int]] = []
    profiles: list[list[int]] = []
    keys: dict[bytes, int] = {}
    if inst.one_f_one_b and inst.num_accelerators:
        ordered = list(range(inst.num_accelerators))
        groups.append(ordered)
        profiles.append(ordered)
    for d in range(inst.num_devices):
        if inst.one_f_one_b and d < inst.num_accelerators:
            continue
        key = b"|".join(
            (
                bytes([bool(costs.is_cpu[d])]),
                costs.node_time[:, d].tobytes(),
                costs.allowed[:, d].tobytes(),
                inst.memory[:, d].tobytes(),
                np.float64(inst.capacity[d]).tobytes(),
            )
        )
        if key in keys:
            g = keys[key]
            groups[g].append(d)
            profiles[g].append(groups[g][0])
        else:
            keys[key] = len(groups)
            groups.append([d])
            profiles.append([d])
    return groups, profiles


def _device_model(inst: _Instance) -> _Devices:
    groups, profiles = _device_groups(inst)
    dims = tuple(len(g) + 1 for g in groups)
    strides = tuple(int(np.prod(dims[i + 1 :])) for i in range(len(dims)))
    profile_device = np.array(sorted({d for p in profiles for d in p}), dtype=np.int64)
    column = {int(d): i for i, d in enumerate(profile_device.tolist())}
    rows: list[tuple[int, int, int, int, int]] = []
    for state in range(int(np.prod(dims))):
        counts = np.unravel_index(state, dims)
        for g, c in enumerate(counts):
            if c >= 1:
                rows.append((state, state - strides[g], column[profiles[g][c - 1]], groups[g][c - 1], g))
    table = np.array(rows, dtype=np.int64).reshape(-1, 5)
    target = table[:, 0]
    starts = np.flatnonzero(np.r_[True, target[1:] != target[:-1]]) if len(target) else np.zeros(0, dtype=np.int64)
    return _Devices(
        dims=dims,
        strides=strides,
        group_devices=tuple(tuple(g) for g in groups),
        ordered=tuple(inst.one_f_one_b and g == 0 and inst.num_accelerators > 0 for g in range(len(groups))),
        profile_device=profile_device,
        target=target,
        prev=table[:, 1],
        profile=table[:, 2],
        device=table[:, 3],
        group=table[:, 4],
        target_start=starts,
        target_state=target[starts],
    )


# --------------------------------------------------------------------------- families of sets


@dataclass(frozen=True)
class _Family:
    """Sets of units the DP builds stages from.

    ``member`` is ``(N, U)``; row 0 is the empty set, row ``N - 1`` all units, and
    every set's proper subsets in the family come before it.  ``subs(i)`` returns the
    indices of the family's proper subsets of set i.
    """

    member: np.ndarray
    subs: Callable[[int], np.ndarray]


def _masks_to_rows(masks: list[int], width: int) -> np.ndarray:
    nbytes = max(1, (width + 7) // 8)
    raw = b"".join(m.to_bytes(nbytes, "little") for m in masks)
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(len(masks), nbytes)
    return np.unpackbits(rows, axis=1, bitorder="little")[:, :width].astype(bool)


def _enumerate_ideals(units: _Units, limit: int) -> tuple[list[int], list[list[int]]] | None:
    """All ideals of the unit DAG as bitmasks, with each one's immediate sub-ideals.

    Depth-first from the empty set, adding one addable unit at a time (a unit whose
    predecessors are all in).  Returns ``None`` once more than ``limit`` are found.
    """
    preds, succs = units.preds, units.succs
    index = {0: 0}
    masks = [0]
    covers: list[list[int]] = [[]]
    start = sum(1 << v for v in range(units.count) if preds[v] == 0)
    stack = [(0, start)]
    while stack:
        mask, addable = stack.pop()
        me = index[mask]
        rest = addable
        while rest:
            low = rest & -rest
            rest ^= low
            new = mask | low
            j = index.get(new)
            if j is None:
                j = len(masks)
                if j >= limit:
                    return None
                index[new] = j
                masks.append(new)
                covers.append([])
                grown = addable ^ low
                after = succs[low.bit_length() - 1]
                while after:
                    w = after & -after
                    after ^= w
                    if preds[w.bit_length() - 1] & ~new == 0:
                        grown |= w
                stack.append((new, grown))
            covers[j].append(me)
    return masks, covers


def _ideal_family(units: _Units, masks: list[int], covers: list[list[int]]) -> _Family:
    """Ideals sorted by size, with the sub-ideal sets as bitsets over their new indices."""
    order = sorted(range(len(masks)), key=lambda i: masks[i].bit_count())
    new_index = [0] * len(masks)
    for new, old in enumerate(order):
        new_index[old] = new
    below: list[int] = []  # below[i]: bitset of the ideals contained in ideal i (i itself included)
    for new, old in enumerate(order):
        bits = 1 << new
        for sub in covers[old]:
            bits |= below[new_index[sub]]
        below.append(bits)

    def subs(i: int) -> np.ndarray:
        bits = below[i] ^ (1 << i)
        raw = np.frombuffer(bits.to_bytes(max(1, (i + 7) // 8), "little"), dtype=np.uint8)
        return np.flatnonzero(np.unpackbits(raw, bitorder="little"))

    return _Family(_masks_to_rows([masks[o] for o in order], units.count), subs)


def _topological_units(units: _Units) -> list[int]:
    """A topological order of the units, ties broken by the smallest unit index (input order)."""
    indegree = [p.bit_count() for p in units.preds]
    ready = [v for v in range(units.count) if indegree[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        after = units.succs[v]
        while after:
            w = after & -after
            after ^= w
            x = w.bit_length() - 1
            indegree[x] -= 1
            if indegree[x] == 0:
                heapq.heappush(ready, x)
    return order


def _prefix_family(units: _Units, order: list[int]) -> _Family:
    member = np.zeros((units.count + 1, units.count), dtype=bool)
    for j, v in enumerate(order):
        member[j + 1 :, v] = True
    return _Family(member, lambda i: np.arange(i, dtype=np.int64))


# --------------------------------------------------------------------------- per-set tables and stage values


@dataclass(frozen=True)
class _Tables:
    """Sums over each set of the family, per profile column (``(N, R)``), and hyperedge counts."""

    time: np.ndarray
    banned: np.ndarray
    memory: np.ndarray
    count: np.ndarray
    mixed: np.ndarray
    mixed_cost: np.ndarray
    hyper_size: np.ndarray
    hyper_cost: np.ndarray


def _row_sums(member: np.ndarray, weights: np.ndarray, chunk: int = 8192) -> np.ndarray:
    out = np.empty((member.shape[0], weights.shape[1]))
    for lo in range(0, member.shape[0], chunk):
        out[lo : lo + chunk] = member[lo : lo + chunk].astype(np.float64) @ weights
    return out


def _tables(units: _Units, family: _Family, devices: _Devices) -> _Tables:
    member = family.member
    cols = devices.profile_device
    hyper_size = np.array([len(h) for h in units.hyper_units], dtype=np.int64)
    count_type = np.int16 if units.count < 32000 else np.int32
    count = np.zeros((member.shape[0], len(units.hyper_units)), dtype=count_type)
    for h, us in enumerate(units.hyper_units):
        count[:, h] = member[:, us].sum(axis=1)
    mixed = (count > 0) & (count < hyper_size)
    return _Tables(
        time=_row_sums(member, units.time[:, cols]),
        banned=_row_sums(member, (~units.allowed[:, cols]).astype(np.float64)),
        memory=_row_sums(member, units.memory[:, cols]),
        count=count,
        mixed=mixed,
        mixed_cost=_row_sums(mixed, units.hyper_cost[:, None])[:, 0],
        hyper_size=hyper_size,
        hyper_cost=units.hyper_cost,
    )


def _transfers(i: int, sub: np.ndarray, tab: _Tables) -> np.ndarray:
    r"""Transfer time of each stage ``I \ I'`` (I = set i, I' over ``sub``), per the module docstring."""
    base = tab.mixed_cost[i] + tab.mixed_cost[sub]
    hs = np.flatnonzero(tab.mixed[i])
    if len(hs) == 0:
        return base
    c = tab.count[sub[:, None], hs]
    hit = ((c > 0) & (c < tab.hyper_size[hs])).astype(np.float64) + (c == tab.count[i, hs])
    return base - hit @ tab.hyper_cost[hs]


@dataclass(frozen=True)
class _Context:
    """Everything the DP loop needs besides the DP table."""

    inst: _Instance
    units: _Units
    family: _Family
    devices: _Devices
    tables: _Tables
    profile_accel: np.ndarray
    profile_capacity: np.ndarray


def _stage_values(ctx: _Context, i: int, sub: np.ndarray) -> np.ndarray:
    r"""``(len(sub), R)`` value of stage ``I \ I'`` on each profile device (``inf`` = not allowed)."""
    tab = ctx.tables
    load = tab.time[i] - tab.time[sub]
    ok = tab.banned[sub] == tab.banned[i]
    memory = tab.memory[i] - tab.memory[sub]
    ok &= memory <= ctx.profile_capacity
    accel = ctx.profile_accel
    if accel.any():
        load = load + _transfers(i, sub, tab)[:, None] * accel
        if ctx.inst.one_f_one_b and len(ctx.units.reverse):
            ok &= ~(_goes_back(ctx, i, sub)[:, None] & accel)
    if ctx.inst.objective == "memory":
        ok &= ctx.inst.time_ok(load)
        return np.where(ok, memory, np.inf)
    return np.where(ok, load, np.inf)


def _goes_back(ctx: _Context, i: int, sub: np.ndarray) -> np.ndarray:
    r"""Whether stage ``I \ I'`` holds the first unit of a pair of ``reverse`` whose second is in ``I'``
    (forbidden on a 1F1B accelerator)."""
    row = ctx.family.member[i]
    rev = ctx.units.reverse
    rev = rev[row[rev[:, 0]] & row[rev[:, 1]]]
    if len(rev) == 0:
        return np.zeros(len(sub), dtype=bool)
    m = ctx.family.member[sub]
    return np.any(~m[:, rev[:, 0]] & m[:, rev[:, 1]], axis=1)


# --------------------------------------------------------------------------- the DP


def _transition_values(ctx: _Context, best: np.ndarray, i: int, sub: np.ndarray) -> np.ndarray:
    """``(len(sub), Q)`` candidates :math:`\\max(f(I', c - e_g), w)` per sub-set and transition."""
    vals = _stage_values(ctx, i, sub)
    dev = ctx.devices
    return np.maximum(best[sub][:, dev.prev], vals[:, dev.profile])


def _run_dp(ctx: _Context, deadline: float | None = None) -> tuple[np.ndarray, int, int | None]:
    """Fill :math:`f` (``(N, states)``); return it, the number of (set, sub-set) pairs, and the set at which
    ``deadline`` (a ``time.monotonic()`` value) stopped it (``None`` when it ran to the end)."""
    family, dev = ctx.family, ctx.devices
    num = family.member.shape[0]
    best = np.full((num, dev.num_states), np.inf)
    best[0] = 0.0
    pairs = 0
    for i in range(1, num):
        if deadline is not None and time.monotonic() > deadline:
            return best, pairs, i
        sub = family.subs(i)
        pairs += len(sub)
        trans = np.full(dev.num_states, np.inf)
        if len(sub) and len(dev.target):
            cand = _transition_values(ctx, best, i, sub)
            trans[dev.target_state] = np.minimum.reduceat(cand.min(axis=0), dev.target_start)
        closed = trans.reshape(dev.dims)
        for axis in range(len(dev.dims)):
            closed = np.minimum.accumulate(closed, axis=axis)
        best[i] = closed.ravel()
    return best, pairs, None


def _backtrack(ctx: _Context, best: np.ndarray) -> np.ndarray:
    """Device of each unit in an optimal chain (follows equal values back through :math:`f`).

    Interchangeable devices are handed out from the first of their group on, in chain order.
    """
    family, dev = ctx.family, ctx.devices
    stages: list[tuple[int, np.ndarray]] = []  # (transition, units of the stage), last stage first
    state, i = dev.num_states - 1, family.member.shape[0] - 1
    while i != 0:
        value = best[i, state]
        sub = family.subs(i)
        moved = False
        if len(sub):
            cand = _transition_values(ctx, best, i, sub)
            for q in np.flatnonzero(dev.target == state).tolist():
                j = int(np.argmin(cand[:, q]))
                if cand[j, q] == value:
                    stages.append((q, family.member[i] & ~family.member[sub[j]]))
                    state, i, moved = int(dev.prev[q]), int(sub[j]), True
                    break
        if moved:
            continue
        counts = np.unravel_index(state, dev.dims)
        for g, c in enumerate(counts):
            if c >= 1 and best[i, state - dev.strides[g]] == value:
                state -= dev.strides[g]
                break
        else:  # pragma: no cover - the table is filled by the same operations
            raise AssertionError("DP backtracking lost its way")
    unit_device = np.full(ctx.units.count, -1, dtype=np.int64)
    used = [0] * len(dev.dims)
    for q, stage in reversed(stages):
        g = int(dev.group[q])
        if dev.ordered[g]:
            unit_device[stage] = dev.device[q]
        else:
            unit_device[stage] = dev.group_devices[g][used[g]]
            used[g] += 1
    return unit_device


def _greedy_pass(inst: _Instance, classes: list[np.ndarray], assign: np.ndarray) -> bool:
    """Put each class, in turn, on the allowed device that keeps the objective (then max load) smallest."""
    for members in classes:
        choice: tuple[tuple[float, float], int] | None = None
        for d in range(inst.num_devices):
            if not np.all(inst.costs.allowed[members, d]):
                continue
            assign[members] = d
            ev = _evaluate(inst, assign)
            if ev.feasible and (choice is None or (ev.objective, ev.max_load) < choice[0]):
                choice = ((ev.objective, ev.max_load), d)
        if choice is None:
            return False
        assign[members] = choice[1]
    return True


def _place_loose(inst: _Instance, units: _Units, forward: np.ndarray) -> np.ndarray | None:
    """Place the backward-only classes greedily after the forward split.

    Two greedy passes, one over the classes in reverse topological order (of their
    last node), one in topological order (of their first node); the better complete
    assignment is kept.  ``None`` when neither pass finds room for every class.
    """
    if not units.loose:
        return forward
    rank = inst.topo_rank
    orders = (
        sorted(units.loose, key=lambda m: -int(rank[m].max())),
        sorted(units.loose, key=lambda m: int(rank[m].min())),
    )
    best: tuple[tuple[float, float], np.ndarray] | None = None
    for order in orders:
        assign = forward.copy()
        if not _greedy_pass(inst, order, assign):
            continue
        ev = _evaluate(inst, assign)
        if ev.feasible and (best is None or (ev.objective, ev.max_load) < best[0]):
            best = ((ev.objective, ev.max_load), assign)
    return None if best is None else best[1]


# --------------------------------------------------------------------------- driver


def _infeasible_reason(inst: _Instance) -> str | None:
    nowhere = np.flatnonzero(~inst.costs.allowed.any(axis=1))
    if len(nowhere):
        return f"node {inst.node_ids[int(nowhere[0])]!r} may run on no device of the cluster"
    return None


def _no_split_message(inst: _Instance) -> str:
    if inst.objective == "memory":
        return "no split fits in memory with every load within max_time_per_sample"
    return "no split fits in memory (or on the devices its nodes may use)"


def _order_restricted(inst: _Instance) -> bool:
    """Whether the family leaves out contiguous chains: 1F1B with CPU cores and two or more accelerators."""
    return inst.one_f_one_b and inst.num_accelerators >= 2 and inst.num_devices > inst.num_accelerators


def _describe_devices(inst: _Instance) -> str:
    cpus = inst.num_devices - inst.num_accelerators
    return f"{inst.num_accelerators} accelerators + {cpus} CPU core" + ("" if cpus == 1 else "s")


def _context(inst: _Instance, units: _Units, family: _Family) -> _Context:
    devices = _device_model(inst)
    prof = devices.profile_device
    return _Context(
        inst=inst,
        units=units,
        family=family,
        devices=devices,
        tables=_tables(units, family, devices),
        profile_accel=~inst.costs.is_cpu[prof],
        profile_capacity=np.where(inst.costs.is_cpu[prof], np.inf, inst.capacity[prof]),
    )


def _headline(name: str, ctx: _Context, pairs: int, states_word: str) -> str:
    inst, units = ctx.inst, ctx.units
    parts = [
        f"{name}: {ctx.family.member.shape[0]} {states_word} of {units.count} units ({len(inst.node_ids)} nodes), "
        f"{pairs} stage pairs, {_describe_devices(inst)}",
        *units.notes,
    ]
    if _order_restricted(inst):
        parts.append(
            "not exact: under 1F1B the chain keeps accelerators in position order, "
            "which misses splits that pass through a CPU core between them"
        )
    return "; ".join(parts)


def _solve(
    name: str, inst: _Instance, units: _Units, family: _Family, start: float, states_word: str, deadline: float | None
) -> DPResult:
    """Run the DP over ``family``, place backward-only classes, and score the split."""
    ctx = _context(inst, units, family)
    best, pairs, stopped = _run_dp(ctx, deadline)
    num = family.member.shape[0]
    head = _headline(name, ctx, pairs, states_word)
    if stopped is not None:
        seconds = time.perf_counter() - start
        return DPResult(None, math.inf, seconds, False, stopped, f"{head}; stopped by the time limit at set {stopped} of {num}")
    complete = not _order_restricted(inst)
    if not np.isfinite(best[num - 1, -1]):
        seconds = time.perf_counter() - start
        return DPResult(None, math.inf, seconds, complete, num, f"{head}; {_no_split_message(inst)}")
    unit_device = _backtrack(ctx, best)
    forward = np.full(len(inst.node_ids), -1, dtype=np.int64)
    dp_nodes = units.unit_of >= 0
    forward[dp_nodes] = unit_device[units.unit_of[dp_nodes]]
    assign = _place_loose(inst, units, forward)
    ev = None if assign is None else _evaluate(inst, assign)
    seconds = time.perf_counter() - start
    if assign is None or ev is None or not ev.feasible:
        failure = "the backward-only classes fit on no device after the forward split"
        return DPResult(None, math.inf, seconds, False, num, f"{head}; {failure}")
    what = "max-load" if inst.objective == "time" else "peak memory"
    devices = [inst.device_ids[d] for d in assign.tolist()]
    solution = PipelineSolution(dict(zip(inst.node_ids, devices, strict=True)))
    message = f"{head}; {what} {ev.objective:.10g} in {seconds:.3f} s"
    return DPResult(solution, ev.objective, seconds, complete and not units.loose, num, message)


def _too_many_classes(name: str, problem: PipelineProblem, max_units: int, start: float) -> DPResult | None:
    """Refuse before any table is built when the forward colocation classes (at least the units, less merges
    of zero-cost units) are far more than ``max_units``: building the units alone takes seconds there."""
    classes = len({nd.colocation_group or f"\0{nd.id}" for nd in problem.graph.nodes if not nd.is_backward})
    devices = len(problem.device_ids)
    if classes * devices > DP_MAX_SETUP_CELLS:  # its (nodes x devices) arrays alone take minutes
        return DPResult(
            None,
            math.inf,
            time.perf_counter() - start,
            False,
            0,
            f"{name}: {classes} forward colocation classes on {devices} devices, over the {DP_MAX_SETUP_CELLS:,} "
            "class-device pairs its setup takes; not run",
        )
    if classes <= 4 * max_units:
        return None
    return DPResult(
        None,
        math.inf,
        time.perf_counter() - start,
        False,
        0,
        f"{name}: {classes} forward colocation classes, far over the {max_units} units its tables (quadratic in "
        "units) take; not run",
    )


def _too_large(name: str, units: _Units, max_units: int, start: float) -> DPResult | None:
    """Refuse a graph whose unit count would make the DP's dense tables too large (quadratic memory)."""
    if units.count <= max_units:
        return None
    return DPResult(
        None,
        math.inf,
        time.perf_counter() - start,
        False,
        0,
        f"{name}: {units.count} units, over the {max_units} its tables (quadratic in units) take; not run",
    )


def ideal_dp(problem: PipelineProblem, settings: IdealDPSettings = IdealDPSettings(), deadline: float | None = None) -> DPResult:
    r"""Tarnawski-style DP over the ideals of the (unit-contracted) forward graph.

    An ideal is a down-closed set of units; a stage is the difference
    :math:`I \setminus I'` of two nested ideals, taken by the next device of one
    group (accelerators in position order under 1F1B, interchangeable
    accelerators and CPU cores in any order; devices may stay empty).  With
    :math:`f(I, c)` the best objective for placing ideal I on c devices per group,

    .. math::

        f(I, c) = \min\Big(\min_g f(I, c - e_g),\; \min_g \min_{I' \subsetneq I}
            \max\big(f(I', c - e_g),\, w_{g, c_g}(I \setminus I')\big)\Big),
        \quad f(\emptyset, c) = 0,

    the answer is :math:`f(V, n)`; see the module docstring for :math:`w`.  Runs
    in :math:`O(P \cdot (Q + w))` array work for P nested pairs, Q transitions
    and w hyperedges cut by an ideal.  Backward-only classes are then placed
    greedily, each on the allowed device that keeps the objective smallest.

    Parameters
    ----------
    problem
        The problem; the contiguous and the non-contiguous variant get the same
        (contiguous) split.
    settings
        ``max_ideals``: give up (solution ``None``) beyond this many ideals.
    deadline
        A ``time.monotonic()`` value; the DP stops there (solution ``None``).

    Returns
    -------
    DPResult
        ``exact`` is true when every ideal was enumerated and no node was placed greedily.
    """
    start = time.perf_counter()
    refused = _too_many_classes("ideal DP", problem, DP_MAX_UNITS, start)
    if refused is not None:
        return refused
    inst = _instance(problem)
    reason = _infeasible_reason(inst)
    if reason is not None:
        return DPResult(None, math.inf, time.perf_counter() - start, True, 0, f"ideal DP: {reason}")
    units = _build_units(inst)
    refused = _too_large("ideal DP", units, DP_MAX_UNITS, start)
    if refused is not None:
        return refused
    found = _enumerate_ideals(units, settings.max_ideals)
    if found is None:
        return DPResult(
            None,
            math.inf,
            time.perf_counter() - start,
            False,
            settings.max_ideals,
            f"ideal DP: more than {settings.max_ideals} ideals (graph too wide); use the chain DP or raise max_ideals",
        )
    family = _ideal_family(units, *found)
    return _solve("ideal DP", inst, units, family, start, "ideals", deadline)


def chain_dp(problem: PipelineProblem, deadline: float | None = None) -> DPResult:
    r"""DP over the intervals of one topological order of the units.

    The order is Kahn's with ties broken by input position.  Its prefixes
    :math:`P_0 \subset P_1 \subset \dots \subset P_U` are ideals, so the recurrence
    of :func:`ideal_dp` over this family, with stages :math:`P_j \setminus P_i`
    (:math:`i < j`), gives contiguous splits in :math:`O(U^2 (Q + w))` array work.
    It refuses graphs of more than :data:`DP_MAX_UNITS` units (its tables are quadratic
    in them) and stops at ``deadline`` (a ``time.monotonic()`` value).  Backward-only
    classes are placed greedily afterwards.

    Returns
    -------
    DPResult
        ``exact`` is true when no node was placed greedily (optimal among interval
        splits of that order, not among all splits).
    """
    start = time.perf_counter()
    refused = _too_many_classes("chain DP", problem, DP_MAX_UNITS, start)
    if refused is not None:
        return refused
    inst = _instance(problem)
    reason = _infeasible_reason(inst)
    if reason is not None:
        return DPResult(None, math.inf, time.perf_counter() - start, True, 0, f"chain DP: {reason}")
    units = _build_units(inst)
    refused = _too_large("chain DP", units, DP_MAX_UNITS, start)
    if refused is not None:
        return refused
    family = _prefix_family(units, _topological_units(units))
    return _solve("chain DP", inst, units, family, start, "positions", deadline)
