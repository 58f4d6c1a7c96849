r"""The exact search for Galvatron's problem: every pp, chunks, vocabulary strategy, global buffer, split and
per-layer strategy; proven optimal under the sound 1F1B time (or proven infeasible).

Problem (labels repeated in the code)
-------------------------------------
Given N devices, global batch B, usable memory U (MB), choose pp (power of 2, <= 8, <= layers), chunks m
(m | B, pp <= m), a split n_1..n_pp >= 1 of the L layers, a strategy s_l per layer and v for the vocabulary,
all in the space of :mod:`milp_partition.galvatron.problem`, to minimise

    (T)  T = sum_i C_i + (m - 1) max_i C_i + max(0, max_i (R_i - sum_{j<=i} C_j))

    (C)  C_i = e_i(v) + sum_{l in i} c(l, s_l) + sum_{l, l+1 in i} x(t_{l+1}, g(s_l), g(s_{l+1}))
    (R)  R_i = sum_{l in i} r(l, s_l)
    (M)  sum_{l in i} ceil(mem_i(l, s_l)) + ceil(E_i(v)) + int(buf(G)) <= U        for every stage i
    (G)  G = None (buffer 0) if no Megatron tp in the plan, else any power of 2 >= every tp_sp of the plan

(c, r, mem, e, E, x, buf: :mod:`milp_partition.galvatron.costs`.)

Why it is exact
---------------
1. *Outer enumeration*: every (pp, m, G, v) is tried; for G a degree, layer and vocabulary strategies are those
   with tp_sp <= G (a plan is feasible iff it fits under its cheapest admissible G, which is tried).
2. *T is non-decreasing in every C_i and every R_i* (raising C_j by d raises the sum by d and lowers the tail
   by at most d), so within a stage only (C_i, R_i) pairs that are not dominated matter.
3. *Per stage* a DP over its layers keeps, per tp_sp degree of the last layer (the only thing a re-layout
   cost depends on), the Pareto set of (memory, C, R) of all memory-feasible strategy sequences; strategies of
   one degree dominated in (c, r, memory) by another of the same degree are dropped first (same transitions).
   Stages of equal layer-type content and index share the DP (layers of a type are identical).
4. *Across stages* a DP from the last stage back keeps the Pareto set of (S, Q, M) with S = sum of C, Q = max_j
   (R_j + C after j), M = max C of the stages so far; T = (m-1) M + max(S, Q) is non-decreasing in all three.
5. *Pruning* only drops what cannot beat the incumbent (a verified plan): a stage with m C_i above it, or a
   partial plan whose (m-1) M + max(S + least compute of the layers before it, Q) is above it.  Nothing is
   rounded except as Galvatron's memory rule itself rounds (integer MB, exact arithmetic).
The reported bound is the optimum found (or the incumbent when nothing beats it); when no plan is found and
nothing was pruned, the setting is proven infeasible.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from milp_partition.galvatron.costs import Costs
from milp_partition.galvatron.problem import GalvatronPlan, GalvatronProblem, Strategy, VocabStrategy, outer_choices

INF = math.inf


@dataclass
class SearchResult:
    plan: GalvatronPlan | None
    value: float
    bound: float
    infeasible: bool
    timed_out: bool
    outer: int = 0
    pruned: int = 0
    notes: dict[str, Any] = field(default_factory=dict)


def _pareto2(points: list[tuple[float, float, Any]]) -> list[tuple[float, float, Any]]:
    """Points not dominated in (C, R)."""
    points.sort(key=lambda p: (p[0], p[1]))
    out = []
    best = INF
    for p in points:
        if p[1] < best:
            out.append(p)
            best = p[1]
    return out


class _StageTables:
    """Per-stage DP states, memoised by (stage index, layer-type runs)."""

    def __init__(
        self, cm: Costs, strategies: list[Strategy], cap: list[int], best: float, m: int, strict: list[int] | None = None
    ) -> None:
        self.cm, self.cap, self.best, self.m = cm, cap, best, m
        #: the tightest stage budget over the vocabulary strategies: a point whose every completion fits it is "safe"
        self.strict = strict if strict is not None else cap
        types = cm.p.type_of()
        #: least compute (and least of compute / synced time) of one layer of each type, over the task's strategies
        self.least_c = [min(cm.layer(t, s).c for s in strategies) for t in range(len(cm.p.layer_types))]
        self.least_cr = [min(min(cm.layer(t, s).c, cm.layer(t, s).r) for s in strategies) for t in range(len(cm.p.layer_types))]
        self.total_least = sum(self.least_c[t] for t in types)
        self.total_least_cr = sum(self.least_cr[t] for t in types)
        self.counts = [types.count(t) for t in range(len(cm.p.layer_types))]
        self.memo: dict[tuple[int, tuple[tuple[int, int], ...]], dict[int, _Bucket]] = {}
        self.front: dict[tuple[int, tuple[tuple[int, int], ...]], list[tuple[int, float, float, Any]]] = {}
        self.options: dict[tuple[int, int], list[tuple[int, float, float, int, Strategy]]] = {}
        for t in range(len(cm.p.layer_types)):
            for i in range(cm.pp):
                opts = [(cm.layer_mem(t, s, i), cm.layer(t, s).c, cm.layer(t, s).r, s.tp_sp, s) for s in strategies]
                keep: list[tuple[int, float, float, int, Strategy]] = []
                for o in opts:  # drop strategies dominated by one of the same degree (same re-layout costs)
                    dominated = any(
                        q[3] == o[3]
                        and q[0] <= o[0]
                        and q[1] <= o[1]
                        and q[2] <= o[2]
                        and (q[0], q[1], q[2]) != (o[0], o[1], o[2])
                        for q in opts
                    )
                    if not dominated and not any(q[:4] == o[:4] for q in keep):
                        keep.append(o)
                self.options[(t, i)] = keep
        self.max_mem = max(o[0] for opts in self.options.values() for o in opts) if self.options else 0
        self.lams = self._lagrange_weights() if cm.pp == 1 and math.isfinite(best) else []

    def _lagrange_weights(self) -> list[tuple[float, float, list[float]]]:
        """(l1, l2, h_t) for the one-stage finish bound: any l1, l2 >= 0 give a valid bound (Lagrangian relaxation of
        the remaining layers' budgets on C and on (m-1) C + R; re-layout costs >= 0 only loosen those budgets).
        h_t = min over options of mem + l1 c + l2 ((m-1) c + r)."""
        m = self.m
        out = []
        for which in (0, 1):
            slopes = set()
            opts = self.options[(0, 0)]
            for a in opts:
                for b in opts:
                    ta = a[1] if which == 0 else (m - 1) * a[1] + a[2]
                    tb = b[1] if which == 0 else (m - 1) * b[1] + b[2]
                    if ta < tb and a[0] > b[0]:
                        slopes.add((a[0] - b[0]) / (tb - ta))
            ss = sorted(slopes)
            picks = {ss[int(q * (len(ss) - 1))] for q in (0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1)} if ss else set()
            for lam in sorted(picks):
                l1, l2 = (lam, 0.0) if which == 0 else (0.0, lam)
                h = [
                    min(o[0] + l1 * o[1] + l2 * ((m - 1) * o[1] + o[2]) for o in self.options[(t, 0)])
                    for t in range(len(self.counts))
                ]
                out.append((l1, l2, h))
        return out

    def states(self, i: int, runs: tuple[tuple[int, int], ...]) -> dict[int, _Bucket]:
        """Per degree of the last layer, the Pareto set of (key, C, R) of the stage's first layers (``runs``)."""
        key = (i, runs)
        got = self.memo.get(key)
        if got is not None:
            return got
        t, n = runs[-1]
        prev_key = None if (len(runs) == 1 and n == 1) else (i, runs[:-1] if n == 1 else (*runs[:-1], (t, n - 1)))
        prev = None if prev_key is None else self.states(*prev_key)
        cm, cap, m, best = self.cm, self.cap[i], self.m, self.best
        covered = sum(self.least_c[tt] * k for tt, k in runs)
        covered_cr = sum(self.least_cr[tt] * k for tt, k in runs)
        # (T) >= m C_i + least compute of every layer outside the covered part: prune C above lim
        lim = (best - (self.total_least - covered)) / m if math.isfinite(best) else INF
        # one stage (pp = 1): (T) >= (m-1) C + R + least time of the layers after the covered part
        lim_r = best - (self.total_least_cr - covered_cr) if (cm.pp == 1 and math.isfinite(best)) else INF
        # one stage: the layers after the covered part must fit in memory within what is left of the budgets on
        # C (best/m) and on (m-1) C + R (best); bound their memory from below by Lagrangian relaxation
        fin: list[tuple[float, float, float]] = []
        if cm.pp == 1 and math.isfinite(best):
            rem = list(self.counts)
            for tt, k in runs:
                rem[tt] -= k
            if any(rem):
                for l1, l2, h in self.lams:
                    fin.append((l1, l2, sum(r_ * h_ for r_, h_ in zip(rem, h)) - l1 * best / m - l2 * best))
        # a point is "safe" when any way to fill the stage up to its largest size fits the tightest budget: its memory
        # can no longer matter, so its dominance key is 0 (its real memory stays in ``mem``)
        most = (len(cm.p.type_of()) - (cm.pp - 1)) - sum(k for _, k in runs)
        safe_below = self.strict[i] - most * self.max_mem
        by_g: dict[int, list[tuple[np.ndarray, ...]]] = {}
        for k_opt, (mem, c, r, g, _s) in enumerate(self.options[(t, i)]):
            parts = by_g.setdefault(g, [])
            if prev is None:
                parts.append(
                    (np.array([mem], np.int64), np.array([c]), np.array([r]), np.array([k_opt]), np.array([0]), np.array([-1]))
                )
                continue
            for pg, pb in prev.items():
                x = cm.relayout(t, pg, g)
                sz = len(pb.c)
                parts.append((pb.mem + mem, pb.c + (c + x), pb.r + r, np.full(sz, k_opt), np.full(sz, pg), np.arange(sz)))
        out: dict[int, _Bucket] = {}
        for g, parts in by_g.items():
            mem2, c2, r2, opt, pg_, pi = (np.concatenate([q[j] for q in parts]) for j in range(6))
            ok = (mem2 <= cap) & (c2 <= lim) & ((m - 1) * c2 + r2 <= lim_r)
            for l1, l2, base in fin:
                ok &= base + l1 * c2 + l2 * ((m - 1) * c2 + r2) <= cap - mem2 + 1e-9
            idx = np.flatnonzero(ok)
            keyv = np.where(mem2[idx] <= safe_below, 0, mem2[idx])
            sel = idx[_pareto3_idx(keyv, c2[idx], r2[idx])]
            out[g] = _Bucket(
                np.where(mem2[sel] <= safe_below, 0, mem2[sel]),
                c2[sel],
                r2[sel],
                mem2[sel],
                opt[sel],
                pg_[sel],
                pi[sel],
                (t, i),
                prev_key,
            )
        self.memo[key] = out
        return out

    def frontier(self, i: int, runs: tuple[tuple[int, int], ...]) -> list[tuple[int, float, float, Any]]:
        """The stage's Pareto set over every last degree: (memory, C, R, back-reference for :meth:`layers_of`)."""
        key = (i, runs)
        got = self.front.get(key)
        if got is None:
            st = self.states(i, runs)
            gs = [g for g in st for _ in range(len(st[g].c))]
            ix = [j for g in st for j in range(len(st[g].c))]
            if not gs:
                got = self.front[key] = []
                return got
            kk = np.concatenate([b.key for b in st.values()])
            cc = np.concatenate([b.c for b in st.values()])
            rr = np.concatenate([b.r for b in st.values()])
            mm = np.concatenate([b.mem for b in st.values()])
            sel = _pareto3_idx(kk, cc, rr)
            got = self.front[key] = [(int(mm[j]), float(cc[j]), float(rr[j]), (key, gs[j], ix[j])) for j in sel]
        return got

    def layers_of(self, ref: tuple[Any, int, int]) -> list[Strategy]:
        """The strategies of the stage's layers behind a frontier point."""
        out: list[Strategy] = []
        key, g, j = ref
        while key is not None:
            b = self.memo[key][g]
            out.append(self.options[b.opts][int(b.opt[j])][4])
            key, g, j = b.prev, int(b.pg[j]), int(b.pidx[j])
        return out[::-1]


@dataclass
class _Bucket:
    """DP points of one last degree as arrays: dominance key, C, R, memory, option index, parent degree and index."""

    key: np.ndarray
    c: np.ndarray
    r: np.ndarray
    mem: np.ndarray
    opt: np.ndarray
    pg: np.ndarray
    pidx: np.ndarray
    opts: tuple[int, int]
    prev: Any


def _staircase(c: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (C, R) points not weakly dominated by another, C ascending and R strictly descending."""
    o = np.lexsort((r, c))
    c2, r2 = c[o], r[o]
    run = np.minimum.accumulate(r2)
    k = np.ones(len(c2), dtype=bool)
    k[1:] = r2[1:] < run[:-1]
    return c2[k], r2[k]


def _pareto3_idx(key: np.ndarray, c: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Indices of the points not dominated in (key, C, R) (of equal points, the first kept).

    Sorted by (key, C, R), a point can only be dominated by an earlier one (:func:`_sorted_keep`)."""
    n = len(c)
    if n <= 1:
        return np.arange(n)
    order = np.lexsort((r, c, key))
    return order[_sorted_keep(c[order], r[order])]


_TRI = np.tri(256, 256, -1, dtype=bool)


def _sorted_keep(cs: np.ndarray, rs: np.ndarray, leaf: int = 192, parts: int = 16) -> np.ndarray:
    """Keep-mask of points sorted by (key, C, R): a point is dropped iff an earlier point is no worse in C and R.

    Divide and conquer: the points are cut into ``parts`` consecutive segments; each segment is first tested against
    the (C, R) staircase of the kept points of all earlier segments (dominance is transitive, so kept points
    suffice), its survivors are then checked among themselves recursively; small inputs are compared pairwise."""
    n = len(cs)
    if n <= 1:
        return np.ones(n, dtype=bool)
    if n <= leaf:
        return ~((cs[None, :] <= cs[:, None]) & (rs[None, :] <= rs[:, None]) & _TRI[:n, :n]).any(axis=1)
    keep = np.zeros(n, dtype=bool)
    fc = np.empty(0)
    fr = np.empty(0)
    step = -(-n // parts)
    for s0 in range(0, n, step):
        cand = np.arange(s0, min(n, s0 + step))
        if len(fc):
            j = np.searchsorted(fc, cs[cand], side="right") - 1
            cand = cand[~((j >= 0) & (fr[np.maximum(j, 0)] <= rs[cand]))]
            if not len(cand):
                continue
        kept = cand[_sorted_keep(cs[cand], rs[cand], leaf, parts)]
        keep[kept] = True
        fc, fr = _staircase(np.concatenate([fc, cs[kept]]), np.concatenate([fr, rs[kept]]))
    return keep


def _runs(types: tuple[int, ...], a: int, b: int) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for t in types[a:b]:
        if out and out[-1][0] == t:
            out[-1] = (t, out[-1][1] + 1)
        else:
            out.append((t, 1))
    return tuple(out)


def tasks(cm: Costs) -> list[int | None]:
    """Global-buffer choices: None (no Megatron tp) and every degree > 1."""
    return [None] + [g for g in cm.degrees() if g > 1]


def admitted(s: Strategy | VocabStrategy, task: int | None) -> bool:
    if task is None:
        return s.tp_sp == 1 or s.sp
    return s.tp_sp <= task


def search(
    problem: GalvatronProblem,
    incumbent: float = INF,
    incumbent_plan: GalvatronPlan | None = None,
    deadline: float | None = None,
) -> SearchResult:
    """Minimise T over the whole space (see the module docstring); ``incumbent`` is a verified plan's T.

    With an incumbent, passes run at targets below it (0.85, 0.92, 0.97 of it, then it): a pass at target tau
    explores every plan below tau, so a pass that finds one has found the optimum, and one that finds none
    proves T >= tau (the lower bound reported if time runs out); tight targets prune far more.
    """
    lower = 0.0
    if math.isfinite(incumbent):
        for f in (0.85, 0.92, 0.97):
            got = _search(problem, incumbent * f, None, deadline)
            if got.timed_out:
                break
            if got.plan is not None:
                got.bound, got.infeasible = got.value, False
                return got
            lower = incumbent * f
    got = _search(problem, incumbent, incumbent_plan, deadline)
    if got.timed_out:
        got.bound = lower
    return got


def _search(
    problem: GalvatronProblem,
    incumbent: float = INF,
    incumbent_plan: GalvatronPlan | None = None,
    deadline: float | None = None,
) -> SearchResult:
    best, best_plan = incumbent, incumbent_plan
    types = problem.type_of()
    L = len(types)
    usable = problem.usable_mb()
    outer = pruned = 0
    timed_out = False
    for pp, m in outer_choices(problem):
        if deadline is not None and time.monotonic() > deadline:
            timed_out = True
            break
        cm = Costs(problem, pp, m)
        all_s = cm.strategies()
        if not all_s:
            continue
        # a lower bound of every plan with this (pp, m): T >= (1 + (m-1)/pp) * (least compute of all layers)
        least = [min(cm.layer(types[k], s).c for s in all_s) for k in range(L)]
        prefix_least = [0.0]
        for x in least:
            prefix_least.append(prefix_least[-1] + x)
        if (1 + (m - 1) / pp) * prefix_least[-1] > best:
            pruned += 1
            continue
        for task in tasks(cm):
            if deadline is not None and time.monotonic() > deadline:
                timed_out = True
                break
            strats = [s for s in all_s if admitted(s, task)]
            vocabs = [v for v in cm.vocab_strategies() if admitted(v, task)]
            if not strats or not vocabs:
                continue
            outer += 1
            gm = cm.global_buffer_mb(task)
            cap = [usable - gm - min(cm.vocab_mem(v, i) for v in vocabs) for i in range(pp)]
            strict = [usable - gm - max(cm.vocab_mem(v, i) for v in vocabs) for i in range(pp)]
            if min(cap) <= 0:
                continue
            tables = _StageTables(cm, strats, cap, best, m, strict)
            for v in vocabs:
                vc = cm.vocab(v)
                vcap = [usable - gm - cm.vocab_mem(v, i) for i in range(pp)]
                value, plan = _combine(problem, cm, tables, types, v, vc.c, vcap, m, pp, best, prefix_least)
                if plan is not None and value < best:
                    best, best_plan = value, plan
                    tables = _StageTables(cm, strats, cap, best, m, strict)
        if timed_out:
            break
    found = best_plan is not None
    return SearchResult(
        best_plan,
        best,
        best if not timed_out else -INF,
        infeasible=(not found and not timed_out),
        timed_out=timed_out,
        outer=outer,
        pruned=pruned,
    )


def _combine(
    problem: GalvatronProblem,
    cm: Costs,
    tables: _StageTables,
    types: tuple[int, ...],
    v: VocabStrategy,
    e: tuple[float, ...],
    vcap: list[int],
    m: int,
    pp: int,
    best: float,
    prefix_least: list[float],
) -> tuple[float, GalvatronPlan | None]:
    L = len(types)

    def stage(i: int, a: int, b: int) -> list[tuple[float, float, Any]]:
        pts = [(p[1] + e[i], p[2], p[3]) for p in tables.frontier(i, _runs(types, a, b)) if p[0] <= vcap[i]]
        return _pareto2(pts)

    if pp == 1:
        val, arg = INF, None
        for c, r, p in stage(0, 0, L):
            t = (m - 1) * c + max(c, r)
            if t < val:
                val, arg = t, p
        if arg is None or val >= best:
            return INF, None
        return val, GalvatronPlan(1, m, (L,), tuple(tables.layers_of(arg)), v)
    # G[a]: states (S, Q, M, back) of stages i..pp-1 covering layers a..L-1
    G: dict[int, list[tuple[float, float, float, Any]]] = {L: [(0.0, 0.0, 0.0, None)]}
    for i in range(pp - 1, -1, -1):
        newG: dict[int, list[tuple[float, float, float, Any]]] = {}
        starts = [0] if i == 0 else range(i, L - (pp - 1 - i))
        before_e = e[0] if i > 0 else 0.0
        for a in starts:
            cands: list[tuple[float, float, float, Any]] = []
            for b in range(a + 1, L - (pp - 1 - i) + 1):
                nxt = G.get(b)
                if not nxt:
                    continue
                for c, r, p in stage(i, a, b):
                    for S, Q, M, back in nxt:
                        S2, Q2, M2 = S + c, max(Q, r + S), max(M, c)
                        if (m - 1) * M2 + max(S2 + prefix_least[a] + before_e, Q2) >= best:
                            continue
                        cands.append((S2, Q2, M2, (b, p, back)))
            if cands:
                newG[a] = _pareto_sqm(cands)
        G = newG
    val, arg = INF, None
    for S, Q, M, back in G.get(0, []):
        t = (m - 1) * M + max(S, Q)
        if t < val:
            val, arg = t, back
    if arg is None:
        return INF, None
    division, layers = [], []
    a, node = 0, arg
    while node is not None:
        b, p, node = node
        division.append(b - a)
        layers += tables.layers_of(p)
        a = b
    return val, GalvatronPlan(pp, m, tuple(division), tuple(layers), v)


def _pareto_sqm(points: list[tuple[float, float, float, Any]]) -> list[tuple[float, float, float, Any]]:
    """Points not dominated in (S, Q, M)."""
    points.sort(key=lambda p: (p[0], p[1], p[2]))
    qs: list[float] = []
    ms: list[float] = []
    out = []
    for p in points:
        k = bisect_right(qs, p[1])
        if k and ms[k - 1] <= p[2]:
            continue
        out.append(p)
        j = k
        while j < len(qs) and ms[j] >= p[2]:
            j += 1
        qs[k:j] = [p[1]]
        ms[k:j] = [p[2]]
    return out
