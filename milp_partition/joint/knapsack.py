r"""The per-stage choice of configurations under memory: a multiple-choice knapsack.

For a fixed stage (node set, data-parallel degree ``d``, tensor-parallel degree ``t``
and micro-batches in flight ``y``) node ``v`` in configuration ``j`` costs
:math:`c_{vj}` seconds per sample and holds :math:`m_{vj} = a_{vj} y + b_{vj}` bytes.
The stage's best time is

.. math::

    F = \min \sum_v c_{v j_v} \quad \text{s.t.} \quad \sum_v m_{v j_v} \le M \qquad (c)\ \text{memory}

:func:`min_cost_exact` solves it exactly by a Pareto dynamic program over the nodes
(the (memory, cost) frontier; a point is kept only if no other point has both less
memory and less or equal cost), :func:`min_cost_greedy` the way Piper does: start
from the least-memory configurations and take upgrades best ratio (seconds saved per
byte added) first while they fit.  Both return ``inf`` when even the least memory
does not fit.
"""

from __future__ import annotations

import math

import numpy as np

#: :func:`min_cost_enumerate` answers where the nodes whose option matters have at most this many combinations
ENUMERATE_MAX = 2048

_GRIDS: dict[tuple[int, int], np.ndarray] = {}


def min_cost_enumerate(cost: np.ndarray, mem: np.ndarray, memory_bytes: float) -> tuple[float, list[int] | None] | None:
    """:func:`min_cost_exact`'s least cost and a choice that has it, by trying every choice of the nodes whose option
    matters, where those choices are at most :data:`ENUMERATE_MAX`; ``None`` where they are more.

    The nodes whose fastest option is also their smallest take it (as in :func:`min_cost_exact`); the others' choices
    are enumerated at once (numpy), the least cost that fits in ``memory_bytes`` kept.  Exact, like
    :func:`min_cost_exact`, and for a stage of a few nodes several times faster (the polisher's stages:
    :mod:`milp_partition.heuristics.joint_polish`).  Where two choices tie on cost the two functions may pick
    different ones.  ``(inf, None)`` when even the least memory does not fit.
    """
    n = cost.shape[0]
    if n == 0:
        return 0.0, []
    done, j_fast, free = _settled(cost, mem, memory_bytes)
    if done is not None:
        return done[0], (None if done[1] is None else done[1].tolist())
    width = cost.shape[1]
    if width ** len(free) > ENUMERATE_MAX:
        return None
    grid = _GRIDS.get((width, len(free)))
    if grid is None:  # every tuple of options, one row each
        grid = _GRIDS[(width, len(free))] = np.indices((width,) * len(free)).reshape(len(free), -1).T
    base_cost, base_mem = _fixed_sums(cost, mem, j_fast, free)
    total_mem = base_mem + mem[free[None, :], grid].sum(axis=1)
    total_cost = np.where(total_mem <= memory_bytes, base_cost + cost[free[None, :], grid].sum(axis=1), np.inf)
    best = int(np.argmin(total_cost))  # the free nodes' least-memory choice fits: some row is finite
    pick = j_fast.copy()
    pick[free] = grid[best]
    return float(total_cost[best]), [int(j) for j in pick]


def min_cost_exact(
    cost: np.ndarray, mem: np.ndarray, memory_bytes: float, *, choices: bool = False
) -> tuple[float, list[int] | None]:
    """Exact least total cost with total memory at most ``memory_bytes``.

    Parameters
    ----------
    cost, mem
        ``(nodes, options)`` arrays; unavailable options are ``inf`` in both.
    memory_bytes
        The capacity ``M``.
    choices
        Also return each node's chosen option (else ``None``).

    Returns
    -------
    (float, list of int or None)
        The least cost (``inf`` when nothing fits) and the choice.
    """
    n = cost.shape[0]
    if n == 0:
        return 0.0, ([] if choices else None)
    done, j_fast, free = _settled(cost, mem, memory_bytes)
    if done is not None:
        return done[0], (done[1].tolist() if choices and done[1] is not None else None)
    base_cost, base_mem = _fixed_sums(cost, mem, j_fast, free)
    # identical free nodes form one group: choosing for the group is choosing how many take each option
    keys = np.concatenate([cost[free], mem[free]], axis=1)
    uniq, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    width = cost.shape[1]
    # (mem, cost, (option, count) pairs) per group choice
    groups: list[tuple[np.ndarray, np.ndarray, list[tuple[tuple[int, int], ...]]]] = []
    group_min = np.zeros(len(uniq))
    for g in range(len(uniq)):
        c_row, m_row = uniq[g, :width], uniq[g, width:]
        opts = [j for j in range(width) if math.isfinite(c_row[j]) and math.isfinite(m_row[j])]
        combos = _multisets(len(opts), int(counts[g]))
        cnt = np.array(combos, dtype=float).reshape(len(combos), len(opts))
        groups.append((cnt @ m_row[opts], cnt @ c_row[opts], [tuple(zip(opts, cb)) for cb in combos]))
        group_min[g] = float(groups[-1][0].min())
    rest_min = np.concatenate([np.cumsum(group_min[::-1])[::-1][1:], [0.0]]) if len(groups) else np.zeros(0)
    # pruning: a point whose cost plus the LP bound of the groups still to come exceeds a known
    # solution's cost (the greedy's) cannot lead to the optimum
    upper = min_cost_greedy(cost, mem, memory_bytes)[0] * (1 + 1e-12)
    lp = _LPBound(groups, memory_bytes)
    f_mem = np.array([base_mem])
    f_cost = np.array([base_cost])
    history: list[tuple[np.ndarray, np.ndarray]] = []
    for pos, (g_mem, g_cost, _) in enumerate(groups):
        cand_mem = (f_mem[:, None] + g_mem[None, :]).reshape(-1)
        cand_cost = (f_cost[:, None] + g_cost[None, :]).reshape(-1)
        cand_parent = np.repeat(np.arange(len(f_mem)), len(g_mem))
        cand_opt = np.tile(np.arange(len(g_mem)), len(f_mem))
        keep = cand_mem + rest_min[pos] <= memory_bytes
        cand_mem, cand_cost, cand_parent, cand_opt = cand_mem[keep], cand_cost[keep], cand_parent[keep], cand_opt[keep]
        order = np.lexsort((cand_cost, cand_mem))
        cand_mem, cand_cost, cand_parent, cand_opt = cand_mem[order], cand_cost[order], cand_parent[order], cand_opt[order]
        best_before = np.concatenate([[math.inf], np.minimum.accumulate(cand_cost)[:-1]])
        keep = cand_cost < best_before
        if len(groups) - pos > 1 and keep.sum() > 8:
            keep &= lp.lower(pos + 1, cand_mem, cand_cost) <= upper
            if not keep.any():  # rounding: keep the cheapest point so the result stays a solution
                keep[int(np.argmin(np.where(best_before > cand_cost, cand_cost, np.inf)))] = True
        f_mem, f_cost = cand_mem[keep], cand_cost[keep]
        if choices:
            history.append((cand_parent[keep], cand_opt[keep]))
    best = int(np.argmin(f_cost))
    value = float(f_cost[best])
    if not choices:
        return value, None
    pick = j_fast.copy()
    idx = best
    members = [list(free[inverse == g]) for g in range(len(groups))]
    for pos in range(len(groups) - 1, -1, -1):
        parent, opt = history[pos]
        counts_of = groups[pos][2][int(opt[idx])]
        it = iter(members[pos])
        for j, c in counts_of:
            for _ in range(int(c)):
                pick[next(it)] = j
        idx = int(parent[idx])
    return value, [int(j) for j in pick]


class _LPBound:
    """LP relaxation of the groups from ``pos`` on: least-memory choices, then hull upgrades best saving per byte first."""

    def __init__(self, groups: list[tuple[np.ndarray, np.ndarray, list]], memory_bytes: float) -> None:
        self.M = memory_bytes
        seg_group, seg_dm, seg_dc = [], [], []
        base_cost, base_mem = [], []
        for g, (g_mem, g_cost, _) in enumerate(groups):
            start = int(np.lexsort((g_cost, g_mem))[0])
            m0, c0 = float(g_mem[start]), float(g_cost[start])
            base_cost.append(c0)
            base_mem.append(m0)
            while True:  # lower convex hull from the least-memory point towards cheaper ones
                dm, dc = g_mem - m0, c0 - g_cost
                ok = (dm > 0) & (dc > 0)
                if not ok.any():
                    break
                eff = np.where(ok, dc / np.where(ok, dm, 1.0), -np.inf)
                nxt = int(np.argmax(eff))
                seg_group.append(g)
                seg_dm.append(float(dm[nxt]))
                seg_dc.append(float(dc[nxt]))
                m0, c0 = float(g_mem[nxt]), float(g_cost[nxt])
        self.groups = len(groups)
        gidx = np.array(seg_group, dtype=np.int64)
        dm_arr, dc_arr = np.array(seg_dm), np.array(seg_dc)
        order = (
            np.argsort(-(dc_arr / np.where(dm_arr > 0, dm_arr, 1.0)), kind="stable")
            if len(dm_arr)
            else np.zeros(0, dtype=np.int64)
        )
        self.seg_group, self.seg_dm, self.seg_dc = gidx[order], dm_arr[order], dc_arr[order]
        self.rest_cost = np.concatenate([np.cumsum(np.array(base_cost)[::-1])[::-1], [0.0]])
        self.rest_mem = np.concatenate([np.cumsum(np.array(base_mem)[::-1])[::-1], [0.0]])
        self.cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def lower(self, pos: int, mem: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """A lower bound on the total cost of completing each point (mem, cost) with groups ``pos..``."""
        tab = self.cache.get(pos)
        if tab is None:
            sel = self.seg_group >= pos
            dm, dc = self.seg_dm[sel], self.seg_dc[sel]
            tab = (np.concatenate([[0.0], np.cumsum(dm)]), np.concatenate([[0.0], np.cumsum(dc)]), dc / np.where(dm > 0, dm, 1.0))
            self.cache[pos] = tab
        cum_m, cum_c, eff = tab
        room = np.maximum(self.M - mem - self.rest_mem[pos], 0.0)
        k = np.searchsorted(cum_m, room, side="right") - 1  # whole segments that fit
        saved = cum_c[k] + np.where(k < len(eff), (room - cum_m[k]) * np.append(eff, 0.0)[np.minimum(k, len(eff))], 0.0)
        return cost + self.rest_cost[pos] - saved


def _settled(
    cost: np.ndarray, mem: np.ndarray, memory_bytes: float
) -> tuple[tuple[float, np.ndarray | None] | None, np.ndarray, np.ndarray]:
    """What the exact knapsacks share: the answer where no choice is left (every node's fastest option fits: its
    cost and those options; even the least memory does not: ``(inf, None)``), else ``None``; each node's fastest
    option; the nodes whose option matters (the others' fastest option is also one of their smallest)."""
    rows = np.arange(cost.shape[0])
    j_fast = _argmin_lex(cost, mem)
    none = np.zeros(0, dtype=np.int64)
    if float(mem[rows, j_fast].sum()) <= memory_bytes:
        return (float(cost[rows, j_fast].sum()), j_fast), j_fast, none
    j_small = _argmin_lex(mem, cost)
    if float(mem[rows, j_small].sum()) > memory_bytes:
        return (math.inf, None), j_fast, none
    free = np.nonzero(
        (j_fast != j_small) & (cost[rows, j_small] > cost[rows, j_fast]) & (mem[rows, j_fast] > mem[rows, j_small])
    )[0]
    return None, j_fast, free


def _fixed_sums(cost: np.ndarray, mem: np.ndarray, j_fast: np.ndarray, free: np.ndarray) -> tuple[float, float]:
    """The seconds and bytes of the nodes not in ``free``, each at its fastest option ``j_fast``."""
    fixed = np.ones(cost.shape[0], dtype=bool)
    fixed[free] = False
    rows = np.nonzero(fixed)[0]
    return float(cost[rows, j_fast[rows]].sum()), float(mem[rows, j_fast[rows]].sum())


def _multisets(options: int, size: int) -> list[tuple[int, ...]]:
    """Every way to give ``size`` identical nodes one of ``options`` options: tuples of counts summing to ``size``."""
    if options == 1:
        return [(size,)]
    out: list[tuple[int, ...]] = []
    for first in range(size + 1):
        out.extend((first, *rest) for rest in _multisets(options - 1, size - first))
    return out


def _argmin_lex(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """Per row, the option with the least ``primary``, ties broken by the least ``secondary``."""
    best = primary.min(axis=1, keepdims=True)
    tie = np.where(primary == best, secondary, np.inf)
    return np.argmin(tie, axis=1)


def min_cost_greedy(
    cost: np.ndarray, mem: np.ndarray, memory_bytes: float, *, choices: bool = False
) -> tuple[float, list[int] | None]:
    """Piper's rule: least-memory configurations, then upgrades by best seconds saved per byte while they fit."""
    n = cost.shape[0]
    if n == 0:
        return 0.0, ([] if choices else None)
    rows = np.arange(n)
    pick = _argmin_lex(mem, cost)
    used = float(mem[rows, pick].sum())
    if used > memory_bytes:
        return math.inf, None
    upgrades: list[tuple[float, int, int]] = []
    for v in range(n):
        j0 = int(pick[v])
        for j in range(cost.shape[1]):
            saved = cost[v, j0] - cost[v, j]
            if math.isfinite(cost[v, j]) and saved > 0:
                extra = mem[v, j] - mem[v, j0]
                ratio = math.inf if extra <= 0 else saved / extra
                upgrades.append((ratio, v, j))
    upgrades.sort(key=lambda u: (-u[0], u[1], u[2]))
    for _, v, j in upgrades:
        j0 = int(pick[v])
        if cost[v, j] >= cost[v, j0]:
            continue
        extra = mem[v, j] - mem[v, j0]
        if used + extra <= memory_bytes:
            used += extra
            pick[v] = j
    value = float(cost[rows, pick].sum())
    return value, ([int(j) for j in pick] if choices else None)


def cost_bounds(cost: np.ndarray, mem: np.ndarray, memory_bytes: float) -> tuple[float, float]:
    """Fast bounds ``(lower, upper)`` on :func:`min_cost_exact` (``inf`` when nothing fits).

    With at most two options per node: the LP relaxation (least-memory options, then upgrades by
    seconds saved per byte, the last one fractional) below, and the same upgrades cut before the
    first that does not fit (a solution) above.  With more options: ``(-inf, inf)``, no bound.
    """
    n = cost.shape[0]
    if n == 0:
        return 0.0, 0.0
    rows = np.arange(n)
    small = _argmin_lex(mem, cost)
    base_mem = float(mem[rows, small].sum())
    if base_mem > memory_bytes:
        return math.inf, math.inf
    base_cost = float(cost[rows, small].sum())
    if cost.shape[1] == 1:
        return base_cost, base_cost
    if cost.shape[1] > 2:
        return -math.inf, math.inf
    other = 1 - small
    d_mem = mem[rows, other] - mem[rows, small]
    d_cost = cost[rows, small] - cost[rows, other]
    useful = np.isfinite(d_mem) & (d_cost > 0)
    d_mem, d_cost = d_mem[useful], d_cost[useful]
    if len(d_mem) == 0:
        return base_cost, base_cost
    free = d_mem <= 0
    saved_free = float(d_cost[free].sum())
    d_mem, d_cost = d_mem[~free], d_cost[~free]
    order = np.argsort(-(d_cost / d_mem), kind="stable")
    d_mem, d_cost = d_mem[order], d_cost[order]
    cum_m = np.cumsum(d_mem)
    cum_c = np.cumsum(d_cost)
    room = memory_bytes - base_mem
    k = int(np.searchsorted(cum_m, room, side="right"))  # whole upgrades that fit
    whole = float(cum_c[k - 1]) if k > 0 else 0.0
    frac = 0.0 if k >= len(d_mem) else (room - (float(cum_m[k - 1]) if k > 0 else 0.0)) / float(d_mem[k]) * float(d_cost[k])
    upper = base_cost - saved_free - whole
    lower = upper - frac
    return lower * (1 - 1e-12), upper
