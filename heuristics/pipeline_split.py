r"""A balanced interval split of one topological order: the pipeline heuristic for graphs too large for the DPs.

The DPs of :mod:`milp_partition.heuristics.pipeline_dp` build tables quadratic in the
number of units; at tens of thousands of nodes they neither fit in memory nor finish.
This heuristic runs in :math:`O((N + E) \log(N + E))` per candidate and keeps the
contiguity rule by construction.

Method
------
Take the forward nodes in one topological order (Kahn's, ties by input position).  An
interval of that order is convex: a path :math:`u \to w \to v` has :math:`u < w < v`
in the order, so :math:`w` lies in any interval that holds :math:`u` and :math:`v`.
A cut between positions :math:`p-1` and :math:`p` is *allowed* unless a colocation
class has forward members on both sides.  For a target load :math:`T`, a greedy scan
gives each accelerator, in turn, the longest run of positions, ending at an allowed
cut, whose node time is at most :math:`T` and whose memory fits the accelerator
(under 1F1B stage :math:`i` of :math:`s` keeps :math:`(s - i)` copies of its
activations); bisection finds the least :math:`T` for which the accelerators cover
the order.  Transfers are left out of :math:`T`, so the split's loads with transfers
are computed exactly (once per source node and direction) for a few targets at and
above that :math:`T`, and the best split is kept.  Non-forward nodes go to the device
of their colocation class (else of their latest-stage predecessor).  The answer is a
feasible split for the verifier to score, not an optimum; CPU cores are not used.
"""

from __future__ import annotations

import math
import time
from collections import deque

import numpy as np
from milp_partition.heuristics.pipeline_dp import DPResult

from milp_partition.pipeline.costs import PipelineCosts, pipeline_costs, stage_order_pairs
from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution

#: Multiples of the node-time target tried, to leave room for transfers.
_TARGET_FACTORS = (1.0, 1.02, 1.05, 1.1, 1.2, 1.35, 1.5)
#: Bisection steps on the target load.
_BISECTION_STEPS = 60


def _topological_order(problem: PipelineProblem) -> np.ndarray:
    """Kahn's order of all nodes, ties by input position (the graph is acyclic)."""
    graph = problem.graph
    index = graph.index
    n = len(graph.nodes)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = np.zeros(n, dtype=np.int64)
    for e in graph.edges:
        succ[index[e.source]].append(index[e.target])
        indeg[index[e.target]] += 1
    ready = deque(np.flatnonzero(indeg == 0).tolist())
    order = []
    while ready:
        u = ready.popleft()
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return np.asarray(order, dtype=np.int64)


def _allowed_cuts(classes: np.ndarray) -> np.ndarray:
    """``ok[p]``: a cut before position ``p`` (0..len) splits no class."""
    m = len(classes)
    blocked = np.zeros(m + 2, dtype=np.int64)
    if m:
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for p, c in enumerate(classes.tolist()):
            first.setdefault(c, p)
            last[c] = p
        for c, a in first.items():
            b = last[c]
            if b > a:  # cuts a+1 .. b would split the class
                blocked[a + 1] += 1
                blocked[b + 1] -= 1
    return np.cumsum(blocked)[: m + 1] == 0


def _greedy_cover(
    target: float,
    time_prefix: np.ndarray,
    fixed_prefix: np.ndarray,
    act_prefix: np.ndarray,
    capacity: np.ndarray,
    copies: np.ndarray,
    prev_cut: np.ndarray,
) -> list[int] | None:
    """Stage ends (positions) when each accelerator takes the longest allowed run within ``target``; None if short."""
    m = len(time_prefix) - 1
    ends, a = [], 0
    for i in range(len(capacity)):
        if a == m:
            ends.append(m)
            continue
        b = int(np.searchsorted(time_prefix, time_prefix[a] + target, side="right")) - 1
        if capacity[i] >= 0:
            mem = (fixed_prefix - fixed_prefix[a]) + copies[i] * (act_prefix - act_prefix[a])
            over = np.flatnonzero(mem[a + 1 :] > capacity[i])
            if len(over):
                b = min(b, a + int(over[0]))
        b = int(prev_cut[max(b, a)])
        if b <= a:
            return None
        ends.append(b)
        a = b
    return ends if a == m else None


def _loads(problem: PipelineProblem, costs: PipelineCosts, device: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Load of every device: node times plus each transfer once per source node and direction."""
    num_devices = costs.node_time.shape[1]
    n = len(device)
    loads = np.bincount(device, weights=costs.node_time[np.arange(n), device], minlength=num_devices)
    cross = device[src] != device[dst]
    if cross.any():
        u, recv = src[cross], device[dst[cross]]
        pairs = np.unique(u * num_devices + recv)
        pu, pd = pairs // num_devices, pairs % num_devices
        accel = ~costs.is_cpu
        keep = accel[pd]
        loads += np.bincount(pd[keep], weights=costs.out_transfer[pu[keep]], minlength=num_devices)
        senders = np.unique(u)
        keep = accel[device[senders]]
        loads += np.bincount(device[senders[keep]], weights=costs.out_transfer[senders[keep]], minlength=num_devices)
    return loads


def balanced_split(problem: PipelineProblem, deadline: float | None = None) -> DPResult:
    """A contiguous split of one topological order over the accelerators (see the module docstring).

    Parameters
    ----------
    problem
        The pipeline problem (objective ``time``; for ``memory`` it gives up).
    deadline
        A ``time.monotonic()`` value after which it stops trying further targets.

    Returns
    -------
    DPResult
        ``exact`` is always false; ``states`` is the number of targets tried.
    """
    start = time.perf_counter()
    name = "balanced split"

    def give_up(why: str, tried: int = 0) -> DPResult:
        return DPResult(None, math.inf, time.perf_counter() - start, False, tried, f"{name}: {why}")

    if problem.settings.objective != "time":
        return give_up("only for the time objective")
    costs = pipeline_costs(problem)
    accel = np.flatnonzero(~costs.is_cpu)
    if len(accel) == 0:
        return give_up("the cluster has no accelerator")
    order = _topological_order(problem)
    fwd = order[costs.forward[order]]
    if not costs.allowed[np.ix_(fwd, accel)].all():
        return give_up("some forward node may not run on every accelerator")
    time_prefix = np.concatenate(([0.0], np.cumsum(costs.node_time[fwd, accel[0]])))
    one_f_one_b = problem.settings.memory_model == "1f1b"
    factor = problem.settings.optimizer_state_factor if one_f_one_b else 1.0
    fixed = factor * costs.param_bytes + costs.other_bytes + (0 if one_f_one_b else costs.activation_bytes)
    act = costs.activation_bytes if one_f_one_b else np.zeros_like(costs.activation_bytes)
    fixed_prefix = np.concatenate(([0.0], np.cumsum(fixed[fwd].astype(np.float64))))
    act_prefix = np.concatenate(([0.0], np.cumsum(act[fwd].astype(np.float64))))
    k = len(accel)
    copies = (k - np.arange(k)).astype(np.float64) if one_f_one_b else np.ones(k)
    capacity = costs.memory_capacity[accel].astype(np.float64)
    stage_copies = np.zeros(len(costs.memory_capacity))
    stage_copies[accel] = copies  # activation copies a node keeps on each device
    ok = _allowed_cuts(costs.colocation_class[fwd])
    prev_cut = np.maximum.accumulate(np.where(ok, np.arange(len(ok)), 0))

    lo, hi = 0.0, float(time_prefix[-1]) + 1.0
    if _greedy_cover(hi, time_prefix, fixed_prefix, act_prefix, capacity, copies, prev_cut) is None:
        return give_up("no interval split of the topological order fits the accelerators' memory")
    tried = 1
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        tried += 1
        if _greedy_cover(mid, time_prefix, fixed_prefix, act_prefix, capacity, copies, prev_cut) is None:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi) or (deadline is not None and time.monotonic() > deadline):
            break

    index = problem.graph.index
    src = np.array([index[e.source] for e in problem.graph.edges], dtype=np.int64)
    dst = np.array([index[e.target] for e in problem.graph.edges], dtype=np.int64)
    first, second = stage_order_pairs(src, dst, costs.forward)
    best: tuple[float, np.ndarray] | None = None
    for f in _TARGET_FACTORS:
        if best is not None and deadline is not None and time.monotonic() > deadline:
            break
        ends = _greedy_cover(hi * f, time_prefix, fixed_prefix, act_prefix, capacity, copies, prev_cut)
        tried += 1
        if ends is None:
            continue
        device = _place(problem, costs, order, fwd, ends, accel, src, dst)
        if one_f_one_b and np.any(device[first] > device[second]):  # accelerators are the first devices, in stage order
            continue  # a colocation class sends an activation to an earlier stage or a gradient to a later one
        held = np.bincount(device, weights=fixed + stage_copies[device] * act, minlength=len(costs.memory_capacity))
        if np.any((costs.memory_capacity >= 0) & (held > costs.memory_capacity)):
            continue  # the non-forward nodes, placed with their classes, overfill a device
        value = float(_loads(problem, costs, device, src, dst).max())
        if best is None or value < best[0]:
            best = (value, device)
    if best is None:
        return give_up(
            "placing the non-forward nodes with their classes overfills a device or breaks 1F1B's stage order",
            tried,
        )
    ids = [nd.id for nd in problem.graph.nodes]
    devices = problem.device_ids
    solution = PipelineSolution({ids[v]: devices[d] for v, d in enumerate(best[1].tolist())})
    seconds = time.perf_counter() - start
    message = (
        f"{name}: {len(fwd)} forward nodes in one topological order over {k} accelerators, {tried} targets; "
        f"max-load {best[0]:.10g} in {seconds:.3f} s"
    )
    return DPResult(solution, best[0], seconds, False, tried, message)


def _place(
    problem: PipelineProblem,
    costs: PipelineCosts,
    order: np.ndarray,
    fwd: np.ndarray,
    ends: list[int],
    accel: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
) -> np.ndarray:
    """Device of every node: forward nodes by stage, the others with their class (else their latest predecessor's)."""
    n = len(order)
    device = np.full(n, -1, dtype=np.int64)
    a = 0
    for i, b in enumerate(ends):
        device[fwd[a:b]] = accel[i]
        a = b
    cls = costs.colocation_class
    class_device = np.full(int(cls.max()) + 1 if n else 0, -1, dtype=np.int64)
    placed = device >= 0
    class_device[cls[placed]] = device[placed]
    preds: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src.tolist(), dst.tolist()):
        preds[v].append(u)
    for v in order.tolist():  # topological: a predecessor is placed first
        if device[v] >= 0:
            continue
        last_pred = {v: max((int(device[u]) for u in preds[v]), default=-1)}
        d = class_device[cls[v]]
        if d < 0:
            d = last_pred[v] if last_pred[v] >= 0 else int(accel[0])
            class_device[cls[v]] = d
        device[v] = d
    return device
