"""ParDNN-style placement: critical-path clustering, then memory-aware mapping and refinement.

After Qararyah et al., "A computational-graph partitioning method for training
memory-constrained DNNs" (ParDNN), Parallel Computing 104, 2021.  ParDNN slices
the graph into paths along the critical path and the next heaviest paths, maps
the paths onto devices to balance load and keep heavy edges inside a device, and
then moves work off devices whose memory overflows.  This module follows those
steps on the placement problem:

1. **Clustering.**  With HEFT's mean costs, every task gets its top level ``tl``
   and bottom level ``bl`` (longest path to it, from it).  Tasks are taken by
   decreasing ``tl + bl`` (ties: smaller ``tl``); each task not yet in a cluster
   starts a path that follows, from each task, the unclustered successor with the
   largest ``comm + bl``.  The first path is the critical path.  Clusters holding
   members of one colocation group are merged.  Every task and edge is visited a
   constant number of times: ``O(n + m)``.
2. **Mapping.**  Clusters by decreasing mean work go to the device minimizing
   ``load[k] + time of the cluster on k + transfer time of its edges to clusters
   already mapped``, among devices where every member may run and where the
   cluster's memory fits without stranding later tasks (the fallback reservation
   of :mod:`milp_partition.heuristics.placement_memory`).  A cluster that fits nowhere whole is
   split into single tasks, mapped the same way.
3. **Schedule** on the fixed devices: list scheduling by upward rank with
   insertion (:func:`milp_partition.heuristics.list_scheduling.schedule_assignment`).
4. **Refinement.**  A bounded number of moves of a whole cluster, to the device
   where its time plus transfers is least or off the most loaded device (static
   memory checked); a move stays when the rescheduled makespan falls.  The number of trial schedules is
   ``min(max_refine_evaluations, refine_task_budget // n)``, so it stays
   deterministic and bounded at scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from milp_partition.heuristics.list_scheduling import (
    ListSchedulingSettings,
    mean_costs,
    place_virtual_inputs,
    schedule_assignment,
    upward_rank,
)
from milp_partition.heuristics.placement_memory import MemoryGuard
from milp_partition.heuristics.placement_state import PlacementHeuristicError

from milp_partition.placement.problem import PlacementProblem, PlacementSolution

INF = float("inf")


@dataclass(frozen=True)
class ParDNNSettings:
    """Options of :func:`pardnn`.

    Attributes
    ----------
    max_refine_evaluations
        Most trial schedules in the refinement step.
    refine_task_budget
        Trial schedules are also limited to ``refine_task_budget // num_tasks``.
    """

    max_refine_evaluations: int = 64
    refine_task_budget: int = 200_000


def top_level(problem: PlacementProblem, task_cost: np.ndarray, edge_cost: np.ndarray) -> np.ndarray:
    """``tl[j] = max over edges i->j of (tl[i] + task_cost[i] + edge_cost[e])`` (0 for sources)."""
    ptr, pred, edge = problem.pred
    ptr_l, pred_l, edge_l = ptr.tolist(), pred.tolist(), edge.tolist()
    w = task_cost.tolist()
    c = edge_cost.tolist()
    tl = [0.0] * problem.num_tasks
    for j in problem.topological_order.tolist():
        best = 0.0
        for q in range(ptr_l[j], ptr_l[j + 1]):
            i = pred_l[q]
            v = tl[i] + w[i] + c[edge_l[q]]
            if v > best:
                best = v
        tl[j] = best
    return np.asarray(tl)


def critical_path_clusters(problem: PlacementProblem, skip: np.ndarray) -> np.ndarray:
    """(n,) cluster label of each task (``-1`` for ``skip``), clusters numbered from the critical path on."""
    n = problem.num_tasks
    w, c = mean_costs(problem)
    bl = upward_rank(problem, w, c)
    tl = top_level(problem, w, c)
    order = np.lexsort((tl, -(tl + bl))).tolist()
    ptr, succ, edge = problem.succ
    ptr_l, succ_l, edge_l = ptr.tolist(), succ.tolist(), edge.tolist()
    c_l, bl_l = c.tolist(), bl.tolist()
    label = [-1] * n
    skip_l = skip.tolist()
    count = 0
    for s in order:
        if label[s] >= 0 or skip_l[s]:
            continue
        v = s
        label[v] = count
        while True:
            best, best_val = -1, -INF
            for q in range(ptr_l[v], ptr_l[v + 1]):
                t = succ_l[q]
                if label[t] < 0 and not skip_l[t]:
                    val = c_l[edge_l[q]] + bl_l[t]
                    if val > best_val:
                        best, best_val = t, val
            if best < 0:
                break
            label[best] = count
            v = best
        count += 1
    labels = np.asarray(label, dtype=np.int64)
    groups = problem.colocation
    if (groups >= 0).any():
        labels = _merge_groups(labels, groups)
    return labels


def _merge_groups(labels: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Merge the clusters that hold members of one colocation group; relabel by first appearance."""
    num = int(labels.max()) + 1
    parent = list(range(num))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first: dict[int, int] = {}
    for lab, g in zip(labels.tolist(), groups.tolist()):
        if g < 0 or lab < 0:
            continue
        if g in first:
            a, b = find(first[g]), find(lab)
            if a != b:
                parent[max(a, b)] = min(a, b)
        else:
            first[g] = lab
    root = np.asarray([find(x) for x in range(num)], dtype=np.int64)
    out = np.where(labels >= 0, root[np.maximum(labels, 0)], -1)
    _, inverse = np.unique(np.where(out >= 0, out, num), return_inverse=True)
    return np.where(out >= 0, inverse, -1)


class _ClusterGraph:
    """Members, per-device time and memory of each cluster, and the edges into and out of it."""

    def __init__(self, problem: PlacementProblem, labels: np.ndarray) -> None:
        self.problem = problem
        valid = np.flatnonzero(labels >= 0)
        self.count = int(labels.max()) + 1 if len(valid) else 0
        order = valid[np.argsort(labels[valid], kind="stable")]
        bounds = np.searchsorted(labels[order], np.arange(self.count + 1))
        self.members = [order[bounds[c] : bounds[c + 1]] for c in range(self.count)]
        time = problem.time[order]
        self.time = np.add.reduceat(time, bounds[:-1], axis=0) if self.count else np.zeros((0, problem.num_devices))
        self.memory = np.bincount(labels[valid], weights=problem.task_memory[valid], minlength=self.count)
        src_lab = labels[problem.edge_source]
        dst_lab = labels[problem.edge_target]
        cut = np.flatnonzero(src_lab != dst_lab)
        by_dst = cut[np.argsort(dst_lab[cut], kind="stable")]
        by_src = cut[np.argsort(src_lab[cut], kind="stable")]
        self.in_edges = _split(by_dst, dst_lab[by_dst], self.count)
        self.out_edges = _split(by_src, src_lab[by_src], self.count)

    def penalty(self, c: int, device: np.ndarray) -> np.ndarray:
        """(d,) transfer time of cluster ``c``'s edges to already placed tasks, for each device of ``c``."""
        p = self.problem
        total = np.zeros(p.num_devices)
        e = self.in_edges[c]
        if len(e):
            a = device[p.edge_source[e]]
            e, a = e[a >= 0], a[a >= 0]
            if len(e):
                total += p.comm[e, a, :].sum(axis=0)
        e = self.out_edges[c]
        if len(e):
            b = device[p.edge_target[e]]
            e, b = e[b >= 0], b[b >= 0]
            if len(e):
                total += p.comm[e, :, b].sum(axis=0)
        return total


def _split(edges: np.ndarray, keys: np.ndarray, count: int) -> list[np.ndarray]:
    valid = keys >= 0
    edges, keys = edges[valid], keys[valid]
    bounds = np.searchsorted(keys, np.arange(count + 1))
    return [edges[bounds[c] : bounds[c + 1]] for c in range(count)]


def _items(problem: PlacementProblem, tasks: np.ndarray) -> list[int]:
    n = problem.num_tasks
    g = problem.colocation[tasks]
    solo = tasks[g < 0].tolist()
    return solo + sorted({n + int(x) for x in g[g >= 0].tolist()})


def pardnn(problem: PlacementProblem, settings: ParDNNSettings | None = None) -> PlacementSolution:
    """ParDNN-style placement (see the module docstring).

    Raises
    ------
    PlacementHeuristicError
        When a task fits on no device with the memory left.
    """
    settings = settings or ParDNNSettings()
    n, d = problem.num_tasks, problem.num_devices
    indeg = np.diff(problem.pred[0])
    floating = (~problem.occupies_device) & (indeg == 0) & (problem.colocation < 0)
    labels = critical_path_clusters(problem, floating)
    cg = _ClusterGraph(problem, labels)
    guard = MemoryGuard(problem)
    device = np.full(n, -1, dtype=np.int64)
    load = np.zeros(d)
    mean_work = np.where(np.isfinite(cg.time), cg.time, 0.0).mean(axis=1) if cg.count else np.zeros(0)
    cluster_device = np.full(cg.count, -1, dtype=np.int64)
    finite = np.isfinite(problem.time)
    horizon = float(
        upward_rank(problem, np.where(finite, problem.time, INF).min(axis=1), np.zeros(problem.num_edges)).max(initial=0.0)
    )
    for c in np.lexsort((np.arange(cg.count), -mean_work)).tolist():
        members = cg.members[c]
        need = float(cg.memory[c])
        items = _items(problem, members)
        score = np.maximum(load + cg.time[c], horizon) + cg.time[c] + cg.penalty(c, device)
        cands = [k for k in np.argsort(score, kind="stable").tolist() if np.isfinite(score[k])]
        k = next((k for k in cands if guard.fits(k, items, need)), -1)
        if k >= 0:
            guard.take(k, items, need)
            device[members] = k
            cluster_device[c] = k
            load[k] += cg.time[c, k]
            continue
        group_device: dict[int, int] = {}
        for i in members.tolist():  # split: task by task (a colocation group as one item)
            g = int(problem.colocation[i])
            if g >= 0 and g in group_device:
                device[i] = group_device[g]
                load[device[i]] += problem.time[i, device[i]]
                continue
            row = problem.time[i] + _task_penalty(problem, i, device)
            if g >= 0:
                group = problem.colocation == g
                row = row + np.where(np.isfinite(problem.time[group]).all(axis=0), 0.0, INF)
                items_i, need_i = [n + g], float(problem.task_memory[group].sum())
            else:
                items_i, need_i = [i], float(problem.task_memory[i])
            score_i = np.maximum(load + problem.time[i], horizon) + row
            cands = [k for k in np.argsort(score_i, kind="stable").tolist() if np.isfinite(score_i[k])]
            k = next((k for k in cands if guard.fits(k, items_i, need_i)), -1)
            if k < 0:
                raise PlacementHeuristicError(
                    f"pardnn cannot place task {problem.task_ids[i]!r}: it needs memory {need_i:g} (with its colocation "
                    "group, if any) and no device it may run on has that left; give the devices more memory, or try "
                    "another heuristic or the exact solver"
                )
            guard.take(k, items_i, need_i)
            device[i] = k
            if g >= 0:
                group_device[g] = k
            load[k] += problem.time[i, k]
    place_virtual_inputs(problem, device, guard)
    best = schedule_assignment(problem, device, heuristic="pardnn", settings=ListSchedulingSettings())
    return _refine(problem, device, cluster_device, cg, best, settings)


def _task_penalty(problem: PlacementProblem, i: int, device: np.ndarray) -> np.ndarray:
    total = np.zeros(problem.num_devices)
    ptr, pred, edge = problem.pred
    lo, hi = ptr[i], ptr[i + 1]
    a = device[pred[lo:hi]]
    e = edge[lo:hi]
    if (a >= 0).any():
        total += problem.comm[e[a >= 0], a[a >= 0], :].sum(axis=0)
    ptr, succ, edge = problem.succ
    lo, hi = ptr[i], ptr[i + 1]
    b = device[succ[lo:hi]]
    e = edge[lo:hi]
    if (b >= 0).any():
        total += problem.comm[e[b >= 0], :, b[b >= 0]].sum(axis=0)
    return total


def _makespan(problem: PlacementProblem, sol: PlacementSolution) -> float:
    t = problem.time[np.arange(problem.num_tasks), sol.device]
    return float((sol.start + np.where(np.isfinite(t), t, 0.0)).max()) if problem.num_tasks else 0.0


def _refine(
    problem: PlacementProblem,
    device: np.ndarray,
    cluster_device: np.ndarray,
    cg: _ClusterGraph,
    best: PlacementSolution,
    settings: ParDNNSettings,
) -> PlacementSolution:
    """Move whole clusters while the makespan falls (static memory kept).

    Half the trial budget goes to *affinity* moves (a cluster to the device where
    its time plus its transfers to placed neighbours is least, largest gain
    first), the rest to *balance* moves (a cluster off the most loaded device).
    """
    n, d = problem.num_tasks, problem.num_devices
    budget = min(settings.max_refine_evaluations, settings.refine_task_budget // max(n, 1))
    if budget <= 0 or d < 2 or cg.count < 2:
        return best
    best_value = _makespan(problem, best)
    used = np.bincount(device, weights=problem.task_memory, minlength=d)
    cap = problem.device_memory
    # (a) affinity: clusters whose time plus transfers would fall most on another device, largest gain first
    gains = []
    for c in np.flatnonzero(cluster_device >= 0).tolist():
        members = cg.members[c]
        if c == 0 or (problem.colocation[members] >= 0).any():
            continue
        others = device.copy()
        others[members] = -1
        cost = cg.time[c] + cg.penalty(c, others)
        cur = int(cluster_device[c])
        alt = np.where((np.arange(d) != cur) & (used + cg.memory[c] <= cap), cost, INF)
        k = int(np.argmin(alt))
        if alt[k] < cost[cur]:
            gains.append((cost[cur] - alt[k], c, k))
    gains.sort(key=lambda g: (-g[0], g[1]))

    def try_move(c: int, k: int) -> None:
        """Schedule with cluster c on device k; keep the move when the makespan falls."""
        nonlocal best, best_value, device, budget
        trial = device.copy()
        trial[cg.members[c]] = k
        budget -= 1
        sol = schedule_assignment(problem, trial, heuristic="pardnn", settings=ListSchedulingSettings())
        value = _makespan(problem, sol)
        if value < best_value:
            best, best_value = sol, value
            used[int(cluster_device[c])] -= cg.memory[c]
            used[k] += cg.memory[c]
            device, cluster_device[c] = trial, k

    for _, c, k in gains[: budget // 2]:
        if used[k] + cg.memory[c] <= cap[k]:
            try_move(c, k)
    # (b) balance: move a cluster off the most loaded device
    tried: set[int] = set()
    while budget > 0:
        busy = np.bincount(device, weights=problem.time[np.arange(n), device], minlength=d)
        top = int(np.argmax(busy))
        on_top = [c for c in np.flatnonzero(cluster_device == top).tolist() if c not in tried and c != 0]
        if not on_top:
            break
        c = min(on_top, key=lambda c: (abs(cg.time[c, top] - (busy[top] - np.median(busy)) / 2), c))
        tried.add(c)
        members = cg.members[c]
        if (problem.colocation[members] >= 0).any():
            continue
        others = device.copy()
        others[members] = -1
        score = busy + cg.time[c] + cg.penalty(c, others)
        score[top] = INF
        ok = np.isfinite(score) & (used + cg.memory[c] <= cap)
        if not ok.any():
            continue
        try_move(c, int(np.argmin(np.where(ok, score, INF))))
    return best
