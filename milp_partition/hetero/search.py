"""The exact search for Sailor's heterogeneous problem: branch and bound over (mbs, D, P), stages and replica sets.

**Reduction (sound).**  A plan's stage i uses a set Q_i of replica configurations (column = (kind, zone), tp).
Its reduced set Q'_i keeps, per column, the configuration of least tp.  Every term the objective reads from a
set (C_i = max compute, U = max update, min tp of the stage for W_i, the kinds for the all-reduce, memory) is
at least as good for Q'_i, and moving every replica of a column to its least tp only frees devices, so Q'_i is
feasible when Q_i is.  Only the sends may differ: they are bounded below over every Q_i that reduces to Q'_i
(a configuration of Q'_i pairs with its cheapest partner among all configurations of the neighbour's columns
with tp at least the neighbour's least tp).  The search enumerates reduced sets only; the lower bound of each
(reduced) leaf holds for every plan that reduces to it.

**Tree.**  Outer: (mbs, D, P) in increasing order of a lower bound (:meth:`_Search.triple_bound`: the devices'
time bound: every device of kind g serves at most max_i C_i seconds per micro-batch, and D copies of every layer
need sum_l min_tp tp (f+b)(l) device-seconds of some kind, split fractionally between kinds; the bottleneck split
programs for max_i y_i and sum_i y_i and the T_sync program, both under the tp budget D sum_i t_i <= devices).
The triples are listed by a quick bound (the split without the tp budget, no higher); phase 1 (a few hundred nodes
per triple, balanced ends first) looks for a good incumbent, and a triple it explores to the end is done (its
unresolved leaves kept); phase 2 explores the others in order of their full bound.
Inner: depth-first over stages (end layer, reduced set), pruned with the incumbent against a bound from the
decided stages (compute, update, all-reduce, sends bounded per pair of neighbouring sets), the later stages (the
capped bottleneck split from the next layer, and a **Lagrangian bound** on their sum of y under the devices the decided
stages leave: :func:`_lagrange_suffix`), T_sync's floor and the device budget (weighted sums over columns, exact for
two columns); in large two-column trees, **device floors** of max_i y_i and T_sync (:meth:`_Triple.ymax_floor`,
:meth:`_Triple.allreduce_floor`: the largest threshold at which the two-column device table holds no plan), and, in
large trees, **cap levels**: a completion below the incumbent keeps every later
y_k under (incumbent - the node's other terms) / (m - 1), so the device tables rebuilt for the configurations under
the tightest of a few fractions of the triple's cap at least that room must hold the completion.  A stage whose set
spans two columns or more has an adjacent pair across two columns in its ring, so its all-reduce is bounded by the
least cross-column pair (:meth:`_Search._ar_lb`).  At a leaf: when few replica lists reduce to it (at most
:data:`LEAF_ENUM_MAX`), every one is priced (:mod:`milp_partition.hetero.leaf`: the leaf's exact optimum); else replica
counts per column (exactly: a dynamic program over stages on used devices), then replica orders (columns in each
order); the plan is priced exactly (:func:`milp_partition.hetero.cost.evaluate`).  A leaf whose best plan is above its
lower bound keeps that bound in the proven bound (reported with its gap, never hidden).  The links may be pooled
(:mod:`milp_partition.hetero.pool`: the least of several fits); the tables read them piece by piece.

**Plans that span regions** (``search``'s ``regions``, where ``min_devices`` exceeds every region's devices, as in
:func:`milp_partition.hetero.pooled.split_bound`'s region search): every plan covered uses two regions.  A leaf whose
stages all stay in one region is dropped (no plan reducing to it is covered), and a node whose decided stages all stay
in one region R is bounded with the crossing its completion must make: the first later stage with a replica outside R
follows a stage all in R, so some replica r sends across regions at that boundary in both directions
(:meth:`_Triple.span_lb`, :meth:`_Triple.span_tables`).  There the cheaper setup pays (the ``SPAN_`` settings: no cap
levels, two-column table, device floors, Lagrangian bound or device precheck, one round of the caps); and under a
threshold with no plan behind it (a caller's ceiling) there is no phase 1.

**In C** (:mod:`milp_partition.hetero.native`, where the extension is built): the tree of a triple
(:meth:`_Triple.tree`: :meth:`_Triple.rec`'s operations in the same order, the same nodes), the scan of a node's (end,
set) pairs, the device tables and the setup's dynamic programs; each has its Python or numpy form here, the definition
the tests compare it with.

The answer: the incumbent, and a proven bound = min(incumbent, unresolved leaves' bounds, the full bound of the
first unexplored triple of phase 2 when the budget ran out; when it ran out before phase 2, the least listed bound of
the triples not done, the triples listed after it ran out with their bound without the split).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from milp_partition.budget import Budget
from milp_partition.hetero import native
from milp_partition.hetero.cost import bucketed_seconds, evaluate, memory_bytes
from milp_partition.hetero.leaf import best_of_leaf, leaf_size
from milp_partition.hetero.pool import fit_parts
from milp_partition.hetero.problem import FLOAT_BYTES, HeteroPlan, HeteroProblem, Replica

#: Relative slack on pruning: nodes within this of the incumbent are still explored (bounds use prefix sums).
PRUNE_REL = 1e-12
#: Budget checks every this many nodes.
TICK = 2000
#: And every this many calls of the tree (each also where its pair row is new: :meth:`_Triple.rec`).
ENTRY_TICK = 64
#: Phase 1 (heuristic sweep over every triple): share of the time limit and nodes per triple.
PHASE1_SHARE = 0.08
PHASE1_NODES = 300
#: Phase 1 on two columns (the settings the search finishes) ends once this many triples in a row were entered without
#: a better incumbent: a triple it cut at its node cap is explored again in phase 2, so the sweep past the last
#: improvement costs time and proves nothing (phase 2 explores every triple not done, in order of its bound).
PHASE1_PATIENCE = 64
#: Tighter caps on the later stages' y, as fractions of the triple's cap: a node whose own terms leave the later stages
#: less room than a level checks the devices under that level's tables (built when first needed).
LEVEL_FRACTIONS = (0.97, 0.94, 0.9, 0.85, 0.8, 0.7, 0.6)
#: Nodes a triple explores before its levels are used (small trees do not pay for their tables).
LEVEL_AFTER_NODES = 300
#: The Lagrangian bound on the stages' sum of y (:func:`_lagrange_suffix`): multipliers mu = f * (the least sum of y) /
#: (the weight vector's budget), for the factors f here on the weight vector one over the counts and on each column
#: alone (every mu >= 0 gives a sound bound).  The best on opt350-a80-v240's triples (a grid of 2^(j/2)): one over the
#: counts with f 2-5.7 in most, a very large f (the devices first) in a quarter, the A100 column with f 0.5-1.4 in a
#: tenth.
LAGRANGE_FACTORS = (1.4, 2.0, 2.8, 4.0, 5.7, 1024.0)
LAGRANGE_FACTORS_COLUMN = (0.5, 0.7, 1.0, 1024.0)
#: Whether the search uses the Lagrangian bound (the tests turn it off to compare).
LAGRANGE_BOUND = True
#: The tree uses the Lagrangian bound only where it raised the root's least sum of y by more than this share of it.
LAGRANGE_KEEP = 0.02
#: Nodes a two-column triple explores before it bounds its least max_i y_i under the devices (:meth:`_Triple.ymax_floor`:
#: a few two-column tables, worth it in large trees only); None: never.
YSTAR_AFTER_NODES: int | None = 300
#: The floor's bisection stops once (m - 1) times its interval is below this share of the incumbent.
YSTAR_REL = 1e-3
#: Once the floor is raised (before any level's tables are built), the levels' caps are at these fractions of the
#: way from the floor to the triple's cap.
YSTAR_LEVELS = (0.85, 0.7, 0.55, 0.4, 0.3, 0.2, 0.1, 0.05)
#: Whether a two-column triple checks its exact device table under the incumbent's caps before the caps' rounds
#: (:meth:`_Triple.run`; the tests turn it off to compare: the same decisions).
TWO_PRECHECK = True
#: The two-column fit tests keep only the rows a split from layer 0 reaches where the table is at least this wide
#: (column-0 devices + 1): below, the C stage costs less than finding them (gptneo-a32-v96, 33 wide: 1.4 % more
#: instructions with them; gptneo-a128x2-v128x2-b2048's pooled search, 257 wide: the C stage's time halved).
REACH_MIN_WIDTH = 64
#: Whether a search whose plans must span two regions (``search``'s ``regions``, :meth:`_Triple.span_lb`) bounds a node
#: whose decided stages stay in one region with the crossing its completion must make (the tests turn it off to compare).
SPAN_BOUND = True
#: Whether a search of plans that span two regions raises its device floors (:meth:`_Triple.raise_floors`).  Measured
#: on the three five-zone region searches (the same bounds either way): without them 4-13 % more nodes but 10-22 % less
#: CPU (e.g. gptneo-a128x5-b2048 1.85 M nodes, 63 k table steps, 21.0 CPU s with; 2.10 M, 20 k, 16.4 s without); on the
#: two-column settings they pay (gptneo-a80-v240-b4096 2.3 against 3.1 CPU s) and stay.
SPAN_FLOORS = False
#: Whether a search of plans that span two regions uses the Lagrangian bound (:meth:`_Triple.lagrange`).  Measured on
#: the three five-zone region searches (the same bounds either way): without it 1-5 % more nodes, 5-15 % less CPU
#: (gptneo-a32x5-b1024 1.29 M -> 1.33 M nodes, 7.8 -> 6.6 CPU s; gptneo-a128x5-b2048 15.7 -> 14.5 s).
SPAN_LAGRANGE = False
#: Whether a search of plans that span two regions checks a triple's device table before its caps' rounds
#: (:data:`TWO_PRECHECK`).  On the three five-zone region searches it rules out no triple the rounds would not (the same
#: nodes) and takes 28-40 % of their table steps (gptneo-a128x5-b2048 21.0 k -> 14.6 k steps, 14.8 -> 13.9 CPU s).
SPAN_PRECHECK = False
#: The listing computes the bounds of this many degrees at once (:meth:`_Search.list_degrees`).
LIST_CHUNK = 64
#: The all-reduce tables of this many consecutive degrees are computed at once (:meth:`_Search.min_ar_table`).
AR_BATCH = 32
#: The most rounds of the caps' bottleneck programs in a triple's setup (:meth:`_Triple.tighten_caps`), and in a search
#: of plans that span two regions: there a second round moved few caps (gptneo-a128x5-b2048's region search 2,891,674
#: nodes with four rounds, 2,900,009 with one, 1.64-1.72 against 1.54-1.61 CPU s; the other two within noise).
CAP_ROUNDS = 4
SPAN_CAP_ROUNDS = 1
#: Whether a triple's tree runs in C where the extension is built (:meth:`_Triple.tree`; the tests turn it off to compare:
#: the same nodes).
NATIVE_TREE = True
#: Whether a search of plans that span two regions uses the cap levels (:meth:`_Triple.level_fits`).  With the tree in
#: C (:meth:`_Triple.tree`) a node costs far less than the levels' tables: on the three five-zone region searches (at
#: their ceilings, the same bounds) without them 1.2-1.6x the nodes and 12-35 % less CPU (gptneo-a128x5-b2048 2.11 M ->
#: 2.85 M nodes, 14.6 k -> 6.3 k table steps, 7.7 -> 5.0 CPU s; gptneo-a32x5-b1024 2.2 -> 1.8 s; opt350-a80x5-b2048 2.4
#: -> 2.1 s).  The two-column settings keep them (the same or a little less CPU with them: gptneo-a128x2-v128x2-b2048
#: 5.4 against 5.6 s).
SPAN_LEVELS = False
#: Whether a search of plans that span two regions (two columns, one per region) keeps the exact two-column device table
#: (:meth:`_Triple.two_suffix`; the weighted device budgets stay).  With the tree in C, on the three five-zone region
#: searches at their ceilings (the same bounds) without it 1.02-1.03x the nodes and 15-35 % less CPU (gptneo-a32x5-b1024
#: 2.19 M -> 2.25 M nodes, 1.77 -> 1.41 CPU s; opt350-a80x5-b2048 2.11 -> 1.79 s; gptneo-a128x5-b2048, 513 columns wide,
#: 5.0 -> 3.2 s).
SPAN_TWO = False
#: A leaf with at most this many replica lists (:func:`milp_partition.hetero.leaf.leaf_size`) is priced plan by plan.
LEAF_ENUM_MAX = 512


def _tp_max(cfgs: list[tuple[int, int]]) -> int:
    """The largest tp among the replica configurations (column, tp) of a micro-batch size (0: none)."""
    return max((tp for _j, tp in cfgs), default=0)


@dataclass
class SearchOutcome:
    """What the search found: the best plan, its value, the proven bound, whether it ran to the end."""

    plan: HeteroPlan | None = None
    value: float = math.inf
    bound: float = 0.0
    complete: bool = False
    stopped_by: str | None = None
    nodes: int = 0
    leaves: int = 0
    unresolved: list[float] = field(default_factory=list)
    triples: int = 0


class _Tables:
    """Per micro-batch size: configurations, prefix sums and caches."""

    def __init__(self, problem: HeteroProblem, mbs: int) -> None:
        self.problem = problem
        self.mbs = mbs
        mod = problem.model
        self.L = L = mod.layers
        self.cols = [c for c in problem.cluster.columns if c.count > 0]
        self.caps = [c.count for c in self.cols]
        self.fit_cache: dict[tuple[int, int], list[int]] = {}
        self.pair_cache: dict[tuple[tuple[int, ...], tuple[int, ...], float, float], tuple[float, float]] = {}
        self.set_keys: dict[tuple[int, ...], tuple[int, tuple[int, ...]]] = {}
        self.ar_floor_cache: dict[int, float] = {}
        self.misc: dict[object, Any] = {}  # per-table caches of the bound programs, each keyed by its own tuple
        self.comp_cache: dict[int, np.ndarray] = {}
        self.min_ar_cache: dict[int, dict[int, np.ndarray]] = {}
        self.ardp_cache: dict[int, tuple[list[np.ndarray], float]] = {}
        self.arvec_cache: dict[int, np.ndarray] = {}  # D -> :meth:`_Search.ar_splits`' vector
        # D -> (min_ar_cache's tables stacked [tp][s][e] in its tps' order, whether one holds a NaN)
        self.min_ar_stack: dict[int, tuple[np.ndarray, bool]] = {}
        self.theta1: float | None = None
        self.cfgs: list[tuple[int, int]] = []
        for j, c in enumerate(self.cols):
            for tp in (1, 2, 4):
                if problem.replica_valid(c.kind, mbs, tp):
                    self.cfgs.append((j, tp))
        #: the largest tp of a replica: every plan of (mbs, D, P) has at most D P tp_max devices
        self.tp_max = _tp_max(self.cfgs)
        self.fbpre: list[list[float]] = []
        self.upd: list[tuple[float, ...]] = []
        self.ppre: list[list[float]] = []
        self.apre: list[list[float]] = []
        self.memcap: list[float] = []
        self.memconst: list[float] = []
        for j, tp in self.cfgs:
            t = mod.times[(self.cols[j].kind, mbs, tp)]
            self.fbpre.append(list(itertools.accumulate((x[0] + x[1] for x in t), initial=0.0)))
            self.upd.append(tuple(x[2] for x in t))
            self.ppre.append(list(itertools.accumulate(mod.params_floats[tp], initial=0.0)))
            self.apre.append(list(itertools.accumulate(mod.act_mem_floats[tp], initial=0.0)))
            self.memcap.append(problem.cluster.memory_of(self.cols[j].kind))
            self.memconst.append(2.0e9 if tp == 1 else 3.0e9)
        self.w1pre = list(itertools.accumulate((FLOAT_BYTES * w for w in mod.params_floats[1]), initial=0.0))
        self.out = mod.act_output_floats
        # least compute per layer over configurations that can hold the layer at all (one micro-batch in flight)
        self.cmin = []
        for ly in range(L):
            best = math.inf
            for k in range(len(self.cfgs)):
                if self.fits(k, ly, ly + 1, 1):
                    best = min(best, self.fbpre[k][ly + 1] - self.fbpre[k][ly])
            self.cmin.append(best)
        self.cminpre = list(itertools.accumulate(self.cmin, initial=0.0))
        self.umin = min((min(u) for u in self.upd), default=math.inf)
        self._send: dict[tuple[int, int, float], float] = {}
        self._ar: dict[tuple[float, int, int, int], float] = {}
        self.ext: dict[tuple[int, int], list[int]] = {}
        for j in range(len(self.cols)):
            for tp in (1, 2, 4):
                self.ext[(j, tp)] = [k for k, (jj, tt) in enumerate(self.cfgs) if jj == j and tt >= tp]
        self.tmin = math.inf
        sizes = {FLOAT_BYTES * mbs * o for o in self.out}
        for k1 in range(len(self.cfgs)):
            for k2 in range(len(self.cfgs)):
                for sz in sizes:
                    self.tmin = min(self.tmin, self.send(k1, k2, sz))

    def fits(self, k: int, s: int, e: int, in_flight: int) -> bool:
        """Whether configuration k holds layers s..e-1 with ``in_flight`` micro-batches (memory grows with e)."""
        row = self.fit_cache.get((k, in_flight))
        if row is None:
            # memory grows with e (prefix sums of non-negative floats): the count of ends that fit is the last one;
            # the same arithmetic as :meth:`_fits`, elementwise, for the in-flight counts 1..L (and this one) at once
            L = self.L
            pp, ap = np.array(self.ppre[k]), np.array(self.apre[k])
            params = pp[None, :] - pp[:, None]
            act = (ap[None, :] - ap[:, None]) * self.mbs * FLOAT_BYTES
            flights = sorted({*range(1, L + 1), in_flight})
            fl = np.array(flights, dtype=float)[:, None, None]
            used = params * self.problem.model.optimizer_bytes_per_param + act * fl + self.memconst[k]
            ok = (used <= self.memcap[k] * (1 + 1e-12)) & (np.arange(L + 1)[None, :] > np.arange(L + 1)[:, None])
            counts = ok[:, :L].sum(axis=2).tolist()
            for f, cnt in zip(flights, counts):
                self.fit_cache.setdefault((k, f), [s0 + int(n) for s0, n in enumerate(cnt)])
            row = self.fit_cache[(k, in_flight)]
        return e <= row[s]

    def fit_row(self, k: int, in_flight: int) -> list[int]:
        """Per first layer s, the last end e that configuration k holds with ``in_flight`` micro-batches."""
        self.fits(k, 0, 0, in_flight)
        return self.fit_cache[(k, in_flight)]

    def comp_matrix(self, k: int) -> np.ndarray:
        """[s][e] -> compute of layers s..e-1 on configuration k (prefix differences)."""
        got = self.comp_cache.get(k)
        if got is None:
            pre = np.array(self.fbpre[k])
            got = self.comp_cache[k] = pre[None, :] - pre[:, None]
        return got

    def _fits(self, k: int, s: int, e: int, in_flight: int) -> bool:
        params = self.ppre[k][e] - self.ppre[k][s]
        act = (self.apre[k][e] - self.apre[k][s]) * self.mbs * FLOAT_BYTES
        used = params * self.problem.model.optimizer_bytes_per_param + act * in_flight + self.memconst[k]
        return used <= self.memcap[k] * (1 + 1e-12)

    def comp(self, k: int, s: int, e: int) -> float:
        return self.fbpre[k][e] - self.fbpre[k][s]

    def send(self, k1: int, k2: int, nbytes: float) -> float:
        key = (k1, k2, nbytes)
        v = self._send.get(key)
        if v is None:
            (j1, t1), (j2, t2) = self.cfgs[k1], self.cfgs[k2]
            c1, c2 = self.cols[j1], self.cols[j2]
            v = self.problem.cluster.link_fit((c1.zone, c1.kind, t1, c2.zone, c2.kind, t2)).seconds(nbytes)
            self._send[key] = v
        return v

    def ar(self, nbytes: float, d: int, j1: int, j2: int) -> float:
        key = (nbytes, d, j1, j2)
        v = self._ar.get(key)
        if v is None:
            c1, c2 = self.cols[j1], self.cols[j2]
            v = bucketed_seconds(self.problem.cluster.link_fit((c1.zone, c1.kind, 1, c2.zone, c2.kind, 1)), nbytes, d)
            self._ar[key] = v
        return v

    def theta_devices(self, d: int) -> float:
        """Lower bound on max_i C_i: device-seconds per micro-batch of D copies of every layer, per kind.

        The fractional problem is homogeneous in D: the bound is D times the bound of D = 1.
        """
        if self.theta1 is None:
            self.theta1 = self._theta_devices(1)
        return d * self.theta1 * (1 - 1e-12)

    def _theta_devices(self, d: int) -> float:
        kinds: dict[str, int] = {}
        for c in self.cols:
            kinds[c.kind] = kinds.get(c.kind, 0) + c.count
        names = sorted(kinds)
        w: dict[str, list[float]] = {g: [] for g in names}
        for ly in range(self.L):
            for g in names:
                best = math.inf
                for k, (j, tp) in enumerate(self.cfgs):
                    if self.cols[j].kind == g and self.fits(k, ly, ly + 1, 1):
                        best = min(best, tp * (self.fbpre[k][ly + 1] - self.fbpre[k][ly]))
                w[g].append(best)
        if len(names) == 1:
            g = names[0]
            return d * sum(w[g]) / kinds[g] if all(math.isfinite(x) for x in w[g]) else math.inf
        if len(names) != 2:
            tot = sum(min(w[g][ly] for g in names) for ly in range(self.L))
            return d * tot / sum(kinds.values())
        ga, gv = names
        order = sorted(
            range(self.L), key=lambda ly: (w[ga][ly] / w[gv][ly]) if math.isfinite(w[gv][ly]) and w[gv][ly] > 0 else -math.inf
        )

        def ok(theta: float) -> bool:
            room = kinds[ga] * theta
            need_v = 0.0
            for ly in order:
                wa, wv = w[ga][ly], w[gv][ly]
                if math.isfinite(wa) and wa > 0:
                    take = min(d, room / wa)
                else:
                    take = 0.0 if not math.isfinite(wa) else d
                room -= take * wa if math.isfinite(wa) else 0.0
                rest = d - take
                if rest > 1e-12:
                    if not math.isfinite(wv):
                        return False
                    need_v += rest * wv
            return need_v <= kinds[gv] * theta

        lo, hi = 0.0, 1.0
        while not ok(hi):
            hi *= 2
            if hi > 1e9:
                return math.inf
        for _ in range(60):
            mid = (lo + hi) / 2
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return lo * (1 - 1e-9)


def _bucketed_vec(size: np.ndarray, n: int | np.ndarray, coef: tuple[float, ...]) -> np.ndarray:
    """:func:`milp_partition.hetero.cost.bucketed_seconds` over an array of sizes (all > 0); ``n`` (ring members) a
    whole number or an array of them that broadcasts with the sizes."""
    bucket = 500_000_000.0
    full = np.maximum(np.ceil(size / bucket) - 1, 0)
    last = size - full * bucket

    def ring(x: np.ndarray | float) -> np.ndarray:
        step = np.asarray(x, dtype=float) / n
        lx = np.log2(step / 1e6)
        bw = sum(c * lx ** (len(coef) - k - 1) for k, c in enumerate(coef))
        return 2 * (n - 1) * ((step / 1e9) / bw)

    return np.asarray(full * ring(bucket) + ring(last))


_SCRATCH = threading.local()


def _scratch(shape: tuple[int, ...], slot: int) -> np.ndarray:
    """A float64 work array of ``shape`` (``slot``: which of a call's arrays), kept per thread between calls: the
    pooled links' rings evaluate tens of parts at once, and arrays of a few hundred kB allocated and freed at every call
    cost their pages' faults again each time (the C allocator gives a freed heap top back to the system)."""
    bufs: dict[tuple[tuple[int, ...], int], np.ndarray] | None = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = {}
    key = (shape, slot)
    got = bufs.get(key)
    if got is None:
        if len(bufs) >= 64:  # a few shapes repeat (the sizes per tp, a batch of degrees): keep the memory bounded
            bufs.clear()
        got = bufs[key] = np.empty(shape)
    return got


def _bucketed_vec_min(size: np.ndarray, n: int | np.ndarray, parts: tuple[tuple[float, ...], ...]) -> np.ndarray:
    """:func:`_bucketed_vec` for a link that takes the least time over several fits (``parts``), piece by piece as
    :class:`milp_partition.hetero.pool.MinLinkFit` prices each bucket; one part: :func:`_bucketed_vec`'s values.  The
    parts are evaluated at once (a leading axis), with :func:`_bucketed_vec`'s operations in its order."""
    if len(parts) == 1:
        return _bucketed_vec(size, n, parts[0])
    bucket = 500_000_000.0
    full = np.maximum(np.ceil(size / bucket) - 1, 0)
    last = size - full * bucket
    k = len(parts[0])
    coef = np.array(parts)  # [part][power]
    extra = (1,) * np.ndim(last)

    def ring_min(x: np.ndarray) -> np.ndarray:
        step = np.asarray(x, dtype=float) / n
        lx = np.log2(step / 1e6)
        # bw = 0 + sum_i c_i lx^(k-i-1) per part, into work arrays kept between calls (:func:`_scratch`)
        shape = (len(parts), *np.shape(lx))
        bw, tmp = _scratch(shape, 0), _scratch(shape, 1)
        bw.fill(0.0)
        for i in range(k):
            c = coef[:, i].reshape(-1, *extra)
            # c lx^j with numpy's lx ** j: j = 0 is c itself (lx ** 0 is 1, even for inf and NaN), j = 1 is c lx, j = 2
            # c (lx lx) (numpy squares for ** 2): the same floats with fewer passes over the sizes
            j = k - i - 1
            if j == 0:
                np.add(bw, c, out=bw)
            else:
                np.multiply(c, lx if j == 1 else lx * lx if j == 2 else lx**j, out=tmp)
                np.add(bw, tmp, out=bw)
        if bool((bw > 0).all()):
            # every part's bandwidth positive: 2 (n - 1) (step / 1e9) / bw falls as bw grows, and rounding keeps that
            # order, so the least over the parts is the one at the largest bandwidth (the same float)
            return np.asarray(2 * (n - 1) * ((step / 1e9) / bw.max(axis=0)))
        np.divide(step / 1e9, bw, out=tmp)
        np.multiply(2 * (n - 1), tmp, out=tmp)
        return np.asarray(tmp.min(axis=0))

    # a full bucket's ring reads n alone: evaluated once per n (the same floats, broadcast over the sizes)
    at_bucket = ring_min(np.full(np.broadcast_shapes(np.shape(n), (1,) * np.ndim(last)), bucket))
    return np.asarray(full * at_bucket + ring_min(last))


def _well_conditioned_each(size: np.ndarray, n: int, coef: tuple[float, ...]) -> np.ndarray:
    """Per size (> 0), whether the bandwidth fit ``coef`` at each ring step of :func:`_bucketed_vec` over n members (the
    last piece, and a full bucket where there is one) is positive and at least 1e-6 of the sum of its terms' magnitudes
    (so a few roundings move it by less than 1e-10 of itself).  One fit: the definition :func:`_well_conditioned_all`
    (every part of a pooled link at once) is tested against."""
    bucket = 500_000_000.0
    full = np.maximum(np.ceil(size / bucket) - 1, 0)
    k = len(coef)
    ok = np.ones(np.shape(size), dtype=bool)
    for steps, where in (((size - full * bucket) / n, True), (np.full(np.shape(size), bucket / n), full > 0)):
        lx = np.log2(steps / 1e6)
        bw = sum(c * lx ** (k - i - 1) for i, c in enumerate(coef))
        mag = sum(abs(c) * np.abs(lx) ** (k - i - 1) for i, c in enumerate(coef))
        ok &= (bw > 1e-6 * mag) | ~np.asarray(where)
    return ok


def _well_conditioned_all(size: np.ndarray, n: int | np.ndarray, parts: tuple[tuple[float, ...], ...]) -> np.ndarray:
    """Per size, whether :func:`_well_conditioned_each` holds for every fit of ``parts`` (all of one length), the parts
    evaluated at once on a leading axis: the same sums in the same order, part by part.  ``n`` (ring members) a whole
    number or an array of them that broadcasts with the sizes (then the result has the broadcast shape)."""
    bucket = 500_000_000.0
    full = np.maximum(np.ceil(size / bucket) - 1, 0)
    coef = np.array(parts)  # [part][power]
    k = coef.shape[1]
    ok: np.ndarray | bool = True
    # (a full bucket's step reads n alone: once per n, broadcast over the sizes; the same floats)
    at_bucket = np.zeros(np.broadcast_shapes(np.shape(n), (1,) * np.ndim(size))) + bucket / n
    ndim = max(np.ndim(size), np.ndim(n))
    for steps, where in (((size - full * bucket) / n, True), (at_bucket, full > 0)):
        lx = np.log2(steps / 1e6)
        alx = np.abs(lx)
        # bw = 0 + sum_i c_i lx^j, mag = 0 + sum_i |c_i| |lx|^j (j = k - i - 1; numpy's x ** 2 is x x, x ** 1 is x, x ** 0
        # is 1), into work arrays kept between calls (:func:`_scratch`): the same floats
        shape = (len(parts), *np.shape(lx))
        bw, mag, tmp = _scratch(shape, 0), _scratch(shape, 1), _scratch(shape, 2)
        bw.fill(0.0)
        mag.fill(0.0)
        for i in range(k):
            c = coef[:, i].reshape(-1, *((1,) * ndim))
            j = k - i - 1
            for acc, cc, x in ((bw, c, lx), (mag, np.abs(c), alx)):
                if j == 0:
                    np.add(acc, cc, out=acc)
                else:
                    np.multiply(cc, x if j == 1 else x * x if j == 2 else x**j, out=tmp)
                    np.add(acc, tmp, out=acc)
        np.multiply(1e-6, mag, out=tmp)
        ok = ok & ((bw > tmp).all(axis=0) | ~np.asarray(where))
    return np.asarray(ok)


def _distinct(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values of x, per entry the index of its value): an elementwise function evaluated on the first and
    read back through the second gives the same floats as on x itself, once per distinct value (the all-reduce tables'
    sizes repeat, the layers of a model being of a few shapes: 99 distinct among GPT-Neo-2.7's 595 layer ranges)."""
    u, inv = np.unique(x, return_inverse=True)
    return u, inv.reshape(x.shape)


def _x_min(p: int, i: int, tmin: float, sound: bool) -> float:
    """Least X_i of stage i of p when every send takes at least tmin (tmin may be negative only in odd fits)."""
    t = max(tmin, 0.0) if tmin >= 0 else tmin
    if p == 1:
        return 0.0
    if i == 0:
        return t if (p <= 3 or sound) else 2 * t
    if i == p - 1:
        return t if sound else 2 * t
    return 2 * t


def _x_coef(p: int, i: int, sound: bool) -> tuple[float, float]:
    """(ka, kb) with X_i = ka a_i + kb b_i (:meth:`_Search.x_of`; 0, 1 or 2 each, so the products are exact)."""
    if p == 1:
        return 0.0, 0.0
    if i == 0:
        return (1.0 if (p <= 3 or sound) else 2.0), 0.0
    if i == p - 1:
        return 0.0, (1.0 if sound else 2.0)
    return 1.0, 1.0


def _window_min(y: np.ndarray, d: int) -> np.ndarray:
    """win[:, j] = min of y[:, k] over k in [max(0, j - d), j] (van Herk / Gil-Werman: blocks of d + 1, a running
    minimum forward and backward in each block; a window meets at most two blocks)."""
    rows, n = y.shape
    w = d + 1
    nb = -(-n // w)
    yp = np.concatenate([y, np.full((rows, nb * w - n), math.inf)], axis=1).reshape(rows, nb, w)
    pre = np.minimum.accumulate(yp, axis=2).reshape(rows, nb * w)
    suf = np.minimum.accumulate(yp[:, :, ::-1], axis=2)[:, :, ::-1].reshape(rows, nb * w)
    win = np.minimum.accumulate(y, axis=1)  # j < d: the window starts at 0
    if n > d:
        win[:, d:] = np.minimum(suf[:, : n - d], pre[:, d:n])
    return win


def _two_step(nxt: np.ndarray, d: int, t0: int, t1: int) -> np.ndarray:
    """conv[e][a] = min over n of nxt[e][a - n t0] + (d - n) t1: n of a stage's d replicas on column 0 (tp t0), d - n
    on column 1 (tp t1); n = 0 only when t1 > 0 and n = d only when t0 > 0 (a 0 tp: the column is not allowed);
    nxt[e][a] = least column-1 devices of the later stages from layer e with at most a column-0 devices (inf: none).
    In C where the extension is built (:func:`milp_partition.hetero.native.two_step`, the same values), else
    :func:`_two_step_numpy`."""
    got = native.two_step(nxt, d, t0, t1)
    return got if got is not None else _two_step_numpy(nxt, d, t0, t1)


def _two_step_numpy(nxt: np.ndarray, d: int, t0: int, t1: int) -> np.ndarray:
    """:func:`_two_step` in numpy.

    Every finite value is a whole number of devices, so the sums are exact in any order: per residue r of a modulo
    t0, with j = (a - r) / t0, conv = (d - j) t1 + the least of nxt[e][r + k t0] + k t1 over k in [j - d, j] (a window
    minimum: a running minimum when the window reaches k = 0 for every j)."""
    inf = math.inf
    out = np.full(nxt.shape, inf)
    width = nxt.shape[1]
    if not t0:  # every replica on column 1
        return nxt + d * t1 if t1 else out
    if not t1:  # every replica on column 0
        shift = d * t0
        if shift < width:
            out[:, shift:] = nxt[:, : width - shift]
        return out
    for r in range(min(t0, width)):
        y = nxt[:, r::t0]  # [e][k]
        jn = y.shape[1]
        y = y + t1 * np.arange(jn)
        win = np.minimum.accumulate(y, axis=1) if d >= jn - 1 else _window_min(y, d)
        out[:, r::t0] = win + t1 * (d - np.arange(jn))
    return out


def _bottleneck(
    ylb: list[list[np.ndarray]], allowed: list[list[np.ndarray]], L: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """rmax[k][s0] = least max_{i >= k} y_i and rsum[k][s0] = least sum_{i >= k} y_i over the ways to split layers
    s0..L-1 into stages k..P-1, each stage at its least y over its allowed configurations (``ylb`` where
    ``allowed``).  Exact dynamic programs on a relaxation: lower bounds for every plan whose stages obey ``allowed``.
    """
    p, inf = len(ylb), math.inf
    rmax = [np.full(L + 1, inf) for _ in range(p + 1)]
    rsum = [np.full(L + 1, inf) for _ in range(p + 1)]
    rmax[p][L], rsum[p][L] = -inf, 0.0
    for k in range(p - 1, -1, -1):
        yk = np.full((L + 1, L + 1), inf)
        for arr, ok in zip(ylb[k], allowed[k]):
            yk = np.where(ok, np.minimum(yk, arr), yk)
        rmax[k] = np.maximum(yk, rmax[k + 1][None, :]).min(axis=1)
        rsum[k] = (yk + rsum[k + 1][None, :]).min(axis=1)
    return rmax, rsum


def _inf_below(arr: np.ndarray) -> bool:
    """Whether ``arr`` [..][s0][e] is inf wherever e <= s0 (a stage holds a layer at least: the search's tables are),
    so that the C programs need not read there (their ``upper``)."""
    n = arr.shape[-1]
    low = np.arange(n)[None, :] <= np.arange(n)[:, None]  # [s0][e]: e <= s0
    return bool(np.isposinf(arr[..., low]).all())


def _bottleneck_arr(
    ylb: np.ndarray, allowed: np.ndarray, L: int, upper: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_bottleneck` on stacked arrays: ``ylb`` and ``allowed`` are [k][c][s0][e]; rows rmax[k], rsum[k], and each
    stage's least y over its allowed configurations [k][s0][e].  ``upper``: ``ylb`` is inf wherever e <= s0
    (:func:`_inf_below`; the C programs then read less, the same values)."""
    fast = native.bottleneck(ylb, allowed, upper) if ylb.shape[2] == L + 1 else None
    if fast is not None:  # the same values as the numpy lines below
        return fast
    p, inf = ylb.shape[0], math.inf
    rmax = np.full((p + 1, L + 1), inf)
    rsum = np.full((p + 1, L + 1), inf)
    rmax[p, L], rsum[p, L] = -inf, 0.0
    ymin = np.where(allowed, ylb, inf).min(axis=1)  # [k][s0][e]: each stage's least y over its allowed configurations
    for k in range(p - 1, -1, -1):
        yk = ymin[k]
        rmax[k] = np.maximum(yk, rmax[k + 1][None, :]).min(axis=1)
        rsum[k] = (yk + rsum[k + 1][None, :]).min(axis=1)
    return rmax, rsum, ymin


def _span_programs(
    masks: np.ndarray,
    ylb: np.ndarray,
    ymin: np.ndarray,
    inc_a: np.ndarray,
    inc_b: np.ndarray,
    ka: np.ndarray,
    kb: np.ndarray,
    nmax: np.ndarray,
    nsum: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The crossing programs of :meth:`_Triple.span_tables` (In and Lat, max and sum), the definition
    :func:`milp_partition.hetero.native.span_dp` repeats: ``masks`` and ``ylb`` [k][c][s0][e], ``ymin`` [k][s0][e] (each
    stage's least y over its allowed configurations), the crossing increments ``inc_a`` [c][e] and ``inc_b`` [c][s0], the
    sends' coefficients ``ka``, ``kb`` [k], the plain programs ``nmax``, ``nsum`` (P + 1) x (L + 1)."""
    p, inf = ylb.shape[0], math.inf
    masked = np.where(masks, ylb, inf)  # [k][c][s0][e]
    in_max, in_sum, lat_max, lat_sum = (np.full((p + 1, ylb.shape[2]), inf) for _ in range(4))
    for k in range(p - 1, 0, -1):  # stage 0 has no boundary before it
        y = ymin[k]  # [s0][e] (masked[k]'s least over the configurations)
        yin = (masked[k] + kb[k] * inc_b[:, :, None]).min(axis=0)
        yout = (masked[k] + ka[k] * inc_a[:, None, :]).min(axis=0)
        in_max[k] = np.maximum(yin, nmax[k + 1][None, :]).min(axis=1)
        in_sum[k] = (yin + nsum[k + 1][None, :]).min(axis=1)
        lat_max[k] = np.minimum(np.maximum(y, lat_max[k + 1][None, :]), np.maximum(yout, in_max[k + 1][None, :])).min(axis=1)
        lat_sum[k] = np.minimum(y + lat_sum[k + 1][None, :], yout + in_sum[k + 1][None, :]).min(axis=1)
    return in_max, in_sum, lat_max, lat_sum


#: Up to this many columns the device relaxation weighs every subset of columns (2^n - 1 vectors), beyond it each
#: column alone and all of them.
SUBSET_WEIGHTS_MAX_COLUMNS = 5


def _weight_vectors(caps: list[int]) -> list[tuple[float, ...]]:
    """The weight vectors lambda of the device-budget relaxation (sum over replicas of lambda[column] tp <= sum_j
    lambda[j] count_j holds for every plan and every lambda >= 0): each subset of columns with weight 1, the single
    columns first, then the larger subsets (with more than two columns the pairs and triples budget, e.g., two zones
    of one kind together: a stage whose allowed configurations all lie in the pair takes D tp of the pair's devices,
    which no single column's weight sees), then one over the counts.  Two columns: each alone, both, one over the
    counts (as before)."""
    n = len(caps)
    if n <= SUBSET_WEIGHTS_MAX_COLUMNS:
        lams = [tuple(1.0 if mask >> j & 1 else 0.0 for j in range(n)) for mask in range(1, 1 << n)]
        lams.sort(key=lambda v: sum(v))  # stable: by size, then by bitmask
    else:
        lams = [tuple(1.0 if j == jj else 0.0 for j in range(n)) for jj in range(n)]
        lams.append(tuple(1.0 for _ in range(n)))
    lams.append(tuple(1.0 / max(1, c) for c in caps))
    return lams


def _lambda_suffix(masks: np.ndarray, w: np.ndarray, L: int, bits: np.ndarray | None = None) -> np.ndarray:
    """sfx[k][t][s0] = least sum over stages k..P-1 (splitting layers s0..L-1) of each stage's least weight w[t][c]
    over the configurations c that ``masks`` [k][c][s0][e] allows (inf: no split); sfx[P][t][L] = 0.  Per weight
    vector t; the caller multiplies by D.  In C where the extension is built (the same values), else numpy.
    ``bits`` (int64 [k][s0][e], optional): written with bit c set where masks[k][c][s0][e] is."""
    got = native.lambda_suffix(masks, w, bits)
    if got is not None:
        return got
    if bits is not None:
        bits[...] = 0
        for c in range(masks.shape[1]):
            bits[masks[:, c]] |= np.int64(1) << np.int64(c)
    p, inf = masks.shape[0], math.inf
    cost = np.where(masks[:, None], w[None, :, :, None, None], inf).min(axis=2)  # [k][t][s0][e]
    sfx = np.full((p + 1, w.shape[0], L + 1), inf)
    sfx[p, :, L] = 0.0
    for k in range(p - 1, -1, -1):
        sfx[k] = (cost[k] + sfx[k + 1][:, None, :]).min(axis=2)
    return sfx


def _lambda_first(masks: np.ndarray, w: np.ndarray, L: int) -> np.ndarray:
    """:func:`_lambda_suffix`'s row sfx[0][t][0] (the whole layers, every stage)."""
    return _lambda_suffix(masks, w, L)[0, :, 0]


def _lambda_first_under(ylb: np.ndarray, thr: float, w: np.ndarray, L: int) -> np.ndarray:
    """:func:`_lambda_first` of the masks ``ylb <= thr`` (``ylb`` [k][c][s0][e] inf wherever e <= s0, as
    :meth:`_Search.stage_ylb_arr` is).  With a finite ``thr``, in C where the extension is built: the same values,
    computed only on the states a split from layer 0 reaches (stage k from a layer in [k, L - P + k])."""
    if math.isfinite(thr):
        got = native.lambda_first(ylb, w, thr)
        if got is not None:
            return got
    return _lambda_first(ylb <= thr, w, L)


def _lagrange_suffix(ylb: np.ndarray, wm: np.ndarray, L: int) -> np.ndarray:
    """G[n][k][s0] = the least, over the splits of layers s0..L-1 into stages k..P-1, of sum_k min_c (ylb[k][c][s][e] +
    wm[n][c]) (inf: no split; G[n][P][L] = 0).  ``ylb`` [k][c][s][e] is inf where configuration c may not serve the
    stage; ``wm`` [n][c] >= 0 is a multiplier times a weight vector's devices of the stage's D replicas on c.

    **The Lagrangian bound (sound).**  Let stage k of a plan have y_k >= ylb[k][c] for every configuration c among its
    replicas and lambda-weighted devices dev_k >= D min over its replicas' c of w(c) (``wm = mu D w``, mu >= 0).  Then
    y_k + mu dev_k >= ylb[k][c*] + wm[c*] for the replica c* of least weight, at least the stage's min_c; summed over
    the stages k.. and with sum_k dev_k <= the budget left B: sum_k y_k >= G[n][k][s0] - mu B (weak duality; in C
    where the extension is built, the same values)."""
    got = native.lagrange_suffix(ylb, wm)
    if got is not None:
        return got
    p, n, inf = ylb.shape[0], wm.shape[0], math.inf
    g = np.full((n, p + 1, L + 1), inf)
    g[:, p, L] = 0.0
    for k in range(p - 1, -1, -1):
        cost = (ylb[k][None] + wm[:, :, None, None]).min(axis=1)  # [n][s][e]
        g[:, k] = (cost + g[:, k + 1][:, None, :]).min(axis=2)
    return g


def set_allreduce_lb(srch: _Search, tb: _Tables, sets: list[tuple[int, ...]], d: int) -> np.ndarray:
    """[q][s][e]: a lower bound on the all-reduce of layers s..e-1 for every plan whose stage has reduced set q
    (:meth:`_Search.ar_lb`: the weights over q's least tp, the worst column of q at its cheapest partner in q), for
    all (s, e) at once in numpy (:func:`_bucketed_vec`), lowered by 1e-9 of itself to stay below the exact bucket
    loop's rounding.  Where a fit the set reads is not well conditioned on an entry's size
    (:func:`_well_conditioned_each`: on GPT-Neo-2.7, the 5 kB stage of the last layer alone) that entry is
    :meth:`_Search.ar_lb` itself (each entry is a bound on its own).  Entries with e <= s are 0 (never read)."""
    L = tb.L
    out = np.zeros((len(sets), L + 1, L + 1))
    if d <= 1:
        return out
    idx = np.arange(L + 1)
    valid = idx[None, :] > idx[:, None]
    w1 = srch.problem.model.params_floats[1]
    cl = srch.problem.cluster
    # per (tp, column, column, D): the pair's ring values and where they are well conditioned; they read the weights,
    # the columns and D only, kept on the search (shared by the micro-batch sizes with these columns)
    pair_cache: dict[tuple[int, int, int, int], tuple[np.ndarray, np.ndarray]] = srch.set_pair_cache

    def pair(tp: int, j: int, j2: int, pos: np.ndarray, u: np.ndarray, inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, well conditioned) per entry of the pair's ring (values 0 where the size is 0 or not well
        conditioned; read only where well conditioned); ``u``, ``inv``: the sizes' distinct values (1 where not
        positive) and each entry's index among them."""
        key = (tp, j, j2, d)
        if key not in pair_cache:
            c1, c2 = tb.cols[j], tb.cols[j2]
            # a pooled link (:class:`milp_partition.hetero.pool.MinLinkFit`) is the least of its parts, piece by piece:
            # every part evaluated (its ``coefficients`` alone are its first part, above the link where another is less)
            parts = fit_parts(cl.link_fit((c1.zone, c1.kind, 1, c2.zone, c2.kind, 1)))
            # AR_BATCH degrees from d at once (the triples ask for nearby D in turn): per entry the same operations
            ds = [x for x in range(d, d + AR_BATCH) if (tp, j, j2, x) not in pair_cache]
            dcol = np.array(ds)[:, None]
            good_all = _well_conditioned_all(u[None, :], dcol, parts)
            with np.errstate(all="ignore"):  # entries not well conditioned are not read
                v_all = _bucketed_vec_min(u[None, :], dcol, parts)
            for row, x in enumerate(ds):
                good = ~pos | good_all[row][inv]
                pair_cache[(tp, j, j2, x)] = (np.where(pos & good, v_all[row][inv], 0.0), good)
        return pair_cache[key]

    # per least tp: the sizes, where they are positive, and their distinct values (:func:`_distinct`), read neither D
    # nor the sets: kept on the tables
    sizes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = tb.misc.setdefault("set_ar_sizes", {})
    rows: dict[tuple[int, tuple[int, ...]], int] = {}  # (least tp, columns) -> the first set's row: the same bound
    for qi, q in enumerate(sets):
        tpmin = min(4, min(tb.cfgs[c][1] for c in q))
        same = rows.setdefault((tpmin, tuple(sorted({tb.cfgs[c][0] for c in q}))), qi)
        if same != qi:  # the bound reads the set's least tp and columns only (and ar_lb's exact loop the same)
            out[qi] = out[same]
            continue
        if tpmin not in sizes:
            if tpmin == 1:
                pre = np.array(tb.w1pre)
            else:
                pre = np.array(list(itertools.accumulate((FLOAT_BYTES * x / tpmin for x in w1), initial=0.0)))
            size = np.where(valid, pre[None, :] - pre[:, None], 0.0)
            pos = valid & (size > 0)
            sizes[tpmin] = (size, pos, *_distinct(np.where(pos, size, 1.0)))
        size, pos, u, inv = sizes[tpmin]
        cols = sorted({tb.cfgs[c][0] for c in q})
        if len(cols) == 1:
            vals, good = pair(tpmin, cols[0], cols[0], pos, u, inv)
        else:
            vals, good = np.full(size.shape, -math.inf), np.ones(size.shape, dtype=bool)
            for j in cols:
                # with two columns or more, the least cross-column pair (:meth:`_Search._ar_lb`)
                best_j = np.full(size.shape, math.inf)
                for j2 in cols:
                    if j2 == j:
                        continue
                    (a, ga), (b, gb) = pair(tpmin, j, j2, pos, u, inv), pair(tpmin, j2, j, pos, u, inv)
                    best_j = np.minimum(best_j, np.minimum(a, b))
                    good = good & ga & gb
                vals = np.maximum(vals, best_j)
        out[qi] = np.where(valid, vals - 1e-9 * np.abs(vals), 0.0)
        # a fit evaluated badly on an entry's size: the exact loop there
        for s0, e in zip(*np.nonzero(valid & ~good)):
            out[qi, s0, e] = srch.ar_lb(tb, q, int(s0), int(e), d)
    return out


def _share_ar_caches(tables: dict[int, _Tables], tb: _Tables) -> None:
    """Give ``tb`` the all-reduce caches of an earlier micro-batch size with the same tp degrees (they read the weights
    and the tps, not the mbs)."""
    for other in tables.values():
        if other is not tb and {t for _j, t in other.cfgs} == {t for _j, t in tb.cfgs}:
            tb.min_ar_cache, tb.ar_floor_cache, tb.ardp_cache = other.min_ar_cache, other.ar_floor_cache, other.ardp_cache
            tb.arvec_cache, tb.min_ar_stack = other.arvec_cache, other.min_ar_stack
            return


class _Search:
    def __init__(self, problem: HeteroProblem, budget: Budget, incumbent: float, plan: HeteroPlan | None) -> None:
        self.node_cap: int | None = None
        self.min_devices = 0
        self.regions: dict[str, str] | None = None  # pooled zone -> region (:func:`search`'s ``regions``)
        self.balanced = False
        self.abort = False
        self.triple_nodes = 0
        self.problem = problem
        self.budget = budget
        self.sound = problem.objective == "sound"
        self.out = SearchOutcome(plan=plan, value=incumbent)
        self.ticks = 0
        self.entries = 0  # tree calls since the clock was last read (:meth:`_Triple.rec`)
        self.stop = False
        self.full_bounds: dict[tuple[float, int, int, int], float] = {}
        self.fewer_cache: dict[tuple[int, tuple[int, ...]], bool] = {}
        self.ring_cache: dict[tuple[object, ...], object] = {}  # (tp, n, parts) -> ring values; ("well", ...) -> bool
        self.ar_cache: dict[tuple[tuple[int, tuple[int, ...]], int, int, int], float] = {}
        self.x_cache: dict[tuple[int, float], tuple[float, float]] = {}
        # per (mbs, P): (y_hi, least weighted devices per replica under it) of :meth:`devices_admit`'s tests so far
        self.admit_seen: dict[tuple[int, int], list[tuple[float, list[float]]]] = {}
        # (configurations, counts, D) -> :meth:`_Triple._shared_of_d`'s parts (shared by the micro-batch sizes)
        self.triple_shared: dict[tuple[object, ...], tuple[Any, ...]] = {}
        self.col_ar_cache: dict[tuple[int, tuple[int, ...]], dict[int, np.ndarray]] = {}  # :meth:`col_ar_table`
        # (D, configurations) -> :func:`set_allreduce_lb`'s [q][s][e] (the micro-batch sizes share it)
        self.set_ar_cache: dict[tuple[int, tuple[tuple[int, int], ...]], np.ndarray] = {}
        self.set_pair_cache: dict[tuple[int, int, int, int], tuple[np.ndarray, np.ndarray]] = {}  # (set_allreduce_lb)

    # ---- bounds between neighbouring sets ----
    def pair_lb(self, tb: _Tables, q1: tuple[int, ...], q2: tuple[int, ...], size_a: float, size_b: float) -> tuple[float, float]:
        """Lower bounds on (a_i, b_{i+1}) for sets q1 (stage i) and q2 (stage i+1) and every set reducing to them."""
        key = (q1, q2, size_a, size_b)
        got = tb.pair_cache.get(key)
        if got is None:
            got = tb.pair_cache[key] = self._pair_lb(tb, q1, q2, size_a, size_b)
        return got

    def _pair_lb(
        self, tb: _Tables, q1: tuple[int, ...], q2: tuple[int, ...], size_a: float, size_b: float
    ) -> tuple[float, float]:
        e1 = [k for c in q1 for k in tb.ext[tb.cfgs[c]]]
        e2 = [k for c in q2 for k in tb.ext[tb.cfgs[c]]]
        a = max(max(min(tb.send(c, d, size_a) for d in e2) for c in q1), max(min(tb.send(c, d, size_a) for c in e1) for d in q2))
        b = max(max(min(tb.send(d, c, size_b) for c in e1) for d in q2), max(min(tb.send(d, c, size_b) for d in e2) for c in q1))
        return a, b

    def ar_lb(self, tb: _Tables, q: tuple[int, ...], s: int, e: int, d: int) -> float:
        if d <= 1:
            return 0.0
        sk = tb.set_keys.get(q)
        if sk is None:  # the all-reduce reads a set's least tp and its columns only
            sk = tb.set_keys[q] = (min(4, min(tb.cfgs[c][1] for c in q)), tuple(sorted({tb.cfgs[c][0] for c in q})))
        key = (sk, s, e, d)
        got = self.ar_cache.get(key)  # shared by the micro-batch sizes: the weights do not depend on them
        if got is None:
            got = self.ar_cache[key] = self._ar_lb(tb, q, s, e, d)
        return got

    def _ar_lb(self, tb: _Tables, q: tuple[int, ...], s: int, e: int, d: int) -> float:
        tpmin = min(4, min(tb.cfgs[c][1] for c in q))
        w = tb.w1pre[e] - tb.w1pre[s]
        w = sum(FLOAT_BYTES * self.problem.model.params_floats[1][ly] / tpmin for ly in range(s, e)) if tpmin != 1 else w
        cols = sorted({tb.cfgs[c][0] for c in q})
        if len(cols) == 1:
            return tb.ar(w, d, cols[0], cols[0])
        # the D replicas of the stage list every column of the set; with two columns or more, every column j has a
        # replica next to one of another column (a run of j's ends beside one, on one side at least), so some
        # adjacent pair is (j, j2) or (j2, j) with j2 != j: the worst pair is at least that pair's all-reduce
        return max(min(min(tb.ar(w, d, j, j2), tb.ar(w, d, j2, j)) for j2 in cols if j2 != j) for j in cols)

    def min_ar_table(self, tb: _Tables, d: int) -> dict[int, np.ndarray]:
        """tp -> [s][e]: a lower bound on the all-reduce of layers s..e-1 over D replicas whose least tp is tp.

        The least over the column pairs' fits, in numpy (bucket count and last bucket computed at once; the
        result is lowered by 1e-9 of its size to stay below the exact bucket loop's rounding).  Computed for
        :data:`AR_BATCH` degrees from d at once (the listing asks for every D in turn; each entry is the same
        elementwise operations on its own size and D), once per distinct size (:func:`_distinct`).
        """
        got = tb.min_ar_cache.get(d)
        if got is None:
            tps = sorted({tp for _j, tp in tb.cfgs})
            L = tb.L
            pre = np.array(tb.w1pre)
            w = pre[None, :] - pre[:, None]  # [s][e]
            valid = np.arange(L + 1)[None, :] > np.arange(L + 1)[:, None]
            fits = {
                fit_parts(self.problem.cluster.link_fit((c1.zone, c1.kind, 1, c2.zone, c2.kind, 1)))
                for c1 in tb.cols
                for c2 in tb.cols
            }
            ds = [x for x in range(d, d + AR_BATCH) if x not in tb.min_ar_cache]
            dcol = np.array(ds)[:, None]
            new: list[dict[int, np.ndarray]] = [{} for _ in ds]
            first = last = np.full(len(ds), np.inf)  # ar_floor's least first and last stage, per D
            # [D][tp][s][e]: every D's tables stacked by tp (ar_split's program reads them so), each table a view
            stack = np.empty((len(ds), len(tps), L + 1, L + 1))
            for ti, tp in enumerate(tps):
                key = ("ar_sizes", tp)
                if key not in tb.misc:  # the sizes do not depend on D: their distinct values once per tp
                    tb.misc[key] = _distinct(np.where(valid, w / min(4, tp), 1.0))
                u, inv = tb.misc[key]
                best = np.full((len(ds), len(u)), np.inf)
                for parts in fits:
                    best = np.minimum(best, _bucketed_vec_min(u[None, :], dcol, parts))
                low = best - 1e-9 * np.abs(best)
                tables = stack[:, ti]  # [D][s][e], every D at once
                tables[...] = np.where(valid[None], low[:, inv], np.inf)
                for k in range(len(ds)):
                    new[k][tp] = tables[k]
                first = np.minimum(first, tables[:, 0, 1:].min(axis=1))
                last = np.minimum(last, tables[:, :L, L].min(axis=1))
            has_nan = cast("list[bool]", np.isnan(stack).any(axis=(1, 2, 3)).tolist())
            for k, (x, table, f, la) in enumerate(zip(ds, new, first.tolist(), last.tolist())):
                tb.min_ar_cache[x] = table
                tb.min_ar_stack[x] = (stack[k], has_nan[k])
                # ar_floor's value from the same minima (with a NaN among them, ar_floor computes its own)
                if x > 1 and x not in tb.ar_floor_cache and not (math.isnan(f) or math.isnan(la)):
                    tb.ar_floor_cache[x] = max(f, la)
            got = new[0]
        return got

    def col_ar_table(self, tb: _Tables, d: int) -> dict[int, np.ndarray]:
        """tp -> [j][s][e]: a lower bound on the all-reduce of layers s..e-1 of every stage of D >= 2 replicas whose
        least tp is tp and that has a replica on column j: that replica has a neighbour in the ring, on some column j2,
        so the stage's worst adjacent pair is at least the least over j2 of the rings (j, j2) and (j2, j).  Lowered by
        1e-9 of itself; 0 (no restriction) where a fit is not well conditioned on the entry's size
        (:func:`_well_conditioned_each`).  Cached per (D, tps): the micro-batch sizes share it (it reads the weights,
        the tps and the links only)."""
        key = (d, tuple(sorted({tp for _j, tp in tb.cfgs})))
        got = self.col_ar_cache.get(key)
        if got is None:
            L, ncol, cl = tb.L, len(tb.cols), self.problem.cluster
            pre = np.array(tb.w1pre)
            idx = np.arange(L + 1)
            valid = idx[None, :] > idx[:, None]
            w = pre[None, :] - pre[:, None]
            got = {}
            for t in sorted({tp for _j, tp in tb.cfgs}):
                size = np.where(valid, w / min(4, t), 1.0)
                pos = valid & (size > 0)
                u, inv = _distinct(np.where(pos, size, 1.0))
                ring: dict[tuple[int, int], np.ndarray] = {}
                by_parts: dict[tuple[tuple[float, ...], ...], np.ndarray] = {}  # column pairs with one link: once
                for j1 in range(ncol):
                    for j2 in range(ncol):
                        c1, c2 = tb.cols[j1], tb.cols[j2]
                        parts = fit_parts(cl.link_fit((c1.zone, c1.kind, 1, c2.zone, c2.kind, 1)))
                        got_ring = by_parts.get(parts)
                        if got_ring is None:
                            good_u = _well_conditioned_all(u, d, parts)
                            with np.errstate(all="ignore"):
                                vals = _bucketed_vec_min(u, d, parts)
                                low = vals - 1e-9 * np.abs(vals)
                            got_ring = by_parts[parts] = np.where(pos & good_u[inv], low[inv], 0.0)
                        ring[(j1, j2)] = got_ring
                arr = np.zeros((ncol, L + 1, L + 1))
                for j in range(ncol):
                    arr[j] = np.min([np.minimum(ring[(j, j2)], ring[(j2, j)]) for j2 in range(ncol)], axis=0)
                got[t] = arr
            self.col_ar_cache[key] = got
        return got

    def ar_floor(self, tb: _Tables, d: int) -> float:
        """A lower bound on T_sync: the larger of the least all-reduces of the first stage (layers 0..e-1) and of the
        last stage (layers s..L-1), over every e, s, least tp and column pair."""
        if d <= 1:
            return 0.0
        got = tb.ar_floor_cache.get(d)
        if got is None:
            table = self.min_ar_table(tb, d)
            first = min(float(arr[0, 1:].min()) for arr in table.values())
            last = min(float(arr[: tb.L, tb.L].min()) for arr in table.values())
            got = tb.ar_floor_cache[d] = max(first, last)
        return got

    def ar_split(self, tb: _Tables, d: int, p: int) -> float:
        """A lower bound on T_sync of every plan with D = d and P = p: the least, over the splits into p stages and
        the stages' least tps t_i with D sum_i t_i <= the devices (every replica of stage i takes t_i devices at
        least), of max_i (the least all-reduce of stage i's layers at least tp t_i); at least :meth:`ar_floor`.
        An exact dynamic program over (stages, first layer, tp budget) on that relaxation, run once per D for every
        P (after j steps it holds j stages over the last layers, for every budget)."""
        if d <= 1:
            return 0.0
        rows = tb.ardp_cache.get(d)
        total = sum(tb.caps)
        if rows is None:
            table = self.min_ar_table(tb, d)
            L, inf = tb.L, math.inf
            pmax = max(1, min(L, total // d))
            budget = min(total // d, 4 * pmax)
            got_stack = tb.min_ar_stack.get(d)  # (the tables stacked as min_ar_table built them, and whether a NaN)
            stacked, has_nan = got_stack if got_stack is not None else (np.array(list(table.values())), None)
            if has_nan is None:
                has_nan = bool(np.isnan(stacked).any())
            fast = None if has_nan else native.ar_dp(stacked, list(table), budget, pmax)
            if fast is not None:  # the same program in C (rows of layer 0 only; the same values)
                out_rows = list(fast)
            else:
                g = np.full((L + 1, budget + 1), inf)  # g[s][b]: j stages over layers s..L-1 within tp budget b
                g[L, :] = 0.0
                out_rows = [np.full(budget + 1, inf)]
                for _j in range(pmax):
                    nxt = np.full((L + 1, budget + 1), inf)
                    for t, arr in table.items():
                        if t > budget:
                            continue
                        # a stage over s..e-1 with least tp t, then the rest from e within budget b - t
                        cand = np.maximum(arr[:, :, None], g[None, :, : budget + 1 - t])  # [s][e][b - t]
                        nxt[:, t:] = np.minimum(nxt[:, t:], cand.min(axis=1))
                    g = nxt
                    out_rows.append(g[0].copy())
            rows = tb.ardp_cache[d] = (out_rows, self.ar_floor(tb, d))
        got_rows, floor = rows
        if p >= len(got_rows):
            return floor
        row = got_rows[p]
        return max(float(row[min(total // d, len(row) - 1)]), floor)

    def ar_splits(self, tb: _Tables, d: int) -> np.ndarray:
        """[P]: :meth:`ar_split` of (d, P) for P = 0..L (entry 0 unused), the same floats, cached per D with the tables'
        all-reduce rows (shared by the micro-batch sizes of the same tps; the listing asks for every P of a D at once)."""
        got = tb.arvec_cache.get(d)
        if got is None:
            self.ar_split(tb, d, 1)  # builds the rows of D
            rows, floor = tb.ardp_cache[d]
            b = sum(tb.caps) // d
            vals = [floor] * (tb.L + 1)
            for p in range(1, min(len(rows), tb.L + 1)):
                row = rows[p]
                vals[p] = max(float(row[min(b, len(row) - 1)]), floor)
            got = tb.arvec_cache[d] = np.array(vals)
        return cast("np.ndarray", got)

    def x_of(self, p: int, i: int, a: float, b: float) -> float:
        if p == 1:
            return 0.0
        if i == 0:
            return a if (p <= 3 or self.sound) else 2 * a
        if i == p - 1:
            return b if self.sound else 2 * b
        return a + b

    def stage_ylb(self, tb: _Tables, p: int) -> list[list[np.ndarray]]:
        """ylb[k][c][s0][e]: least y_k = C_k + X_k of stage k of p over layers s0..e-1 with a replica of configuration
        c (its compute plus its least sends, each send at its cheapest partner); inf where c cannot hold the
        layers with p - k micro-batches in flight.  Cached per (p, objective) in ``tb``; each array is
        :meth:`ylb_part`'s (shared between the P's: callers never write into it)."""
        key = ("ylb", p, self.sound)
        got = tb.misc.get(key)
        if got is not None:
            return got  # type: ignore[return-value]
        ylb = [[self.ylb_part(tb, c, p - k, self.send_role(p, k)) for c in range(len(tb.cfgs))] for k in range(p)]
        tb.misc[key] = ylb
        return ylb

    def send_role(self, p: int, k: int) -> str:
        """Which least sends X_k of stage k of p holds (Sailor: the first stage's doubled from P = 4, the last's
        always; sound: none doubled): "none", "a", "2a", "b", "2b" or "a+b"."""
        if p == 1:
            return "none"
        if k == 0:
            return "a" if (p <= 3 or self.sound) else "2a"
        if k == p - 1:
            return "b" if self.sound else "2b"
        return "a+b"

    def ylb_part(self, tb: _Tables, c: int, in_flight: int, role: str) -> np.ndarray:
        """[s0][e]: configuration c's compute over layers s0..e-1 plus its least sends of ``role``; inf where c cannot
        hold the layers with ``in_flight`` micro-batches (or e <= s0).  Built once per (c, in_flight, role)."""
        parts = tb.misc.setdefault(("ylbpart", self.sound), {})
        pkey = (c, in_flight, role)
        arr = parts.get(pkey)
        if arr is None:
            # the array reads in_flight only through the fit row: the in-flight counts with the same row share one
            fit_row = tb.fit_row(c, in_flight)
            same = tb.misc.setdefault(("ylbrow", self.sound), {})
            rkey = (c, role, tuple(fit_row))
            arr = same.get(rkey)
            if arr is None:
                self.send_tables(tb)
                amin_c, bmin_c = tb.misc[("ab", self.sound)]
                L = tb.L
                idx = np.arange(L + 1)
                upper = idx[None, :] > idx[:, None]  # [s0][e]: e > s0
                a = np.array(amin_c[c])[None, :]  # [e]
                b = np.array([*bmin_c[c], 0.0])[:, None]  # [s0]
                x = {"none": 0.0, "a": a, "2a": 2 * a, "b": b, "2b": 2 * b, "a+b": a + b}[role]
                fit = idx[None, :] <= np.array([*fit_row, L])[:, None]
                arr = same[rkey] = np.where(upper & fit, tb.comp_matrix(c) + x, math.inf)
            parts[pkey] = arr
        return cast("np.ndarray", arr)

    def stage_ymin(self, tb: _Tables, p: int, k: int) -> np.ndarray:
        """[s0][e]: the least :meth:`ylb_part` over the configurations for stage k of p (cached per (in flight, role):
        the same array for every P that has it)."""
        mins = tb.misc.setdefault(("ymin", self.sound), {})
        key = (p - k, self.send_role(p, k))
        got = mins.get(key)
        if got is None:
            arrs = [self.ylb_part(tb, c, p - k, key[1]) for c in range(len(tb.cfgs))]
            # the same parts (shared between in-flight counts with the same fit rows) give the same minimum
            same = tb.misc.setdefault(("yminparts", self.sound), {})
            pkey = tuple(id(a) for a in arrs)
            got = same.get(pkey)
            if got is None:
                got = same[pkey] = np.min(arrs, axis=0)
            mins[key] = got
        return cast("np.ndarray", got)

    def stage_ylb_arr(self, tb: _Tables, p: int) -> np.ndarray:
        """:meth:`stage_ylb` stacked: [k][c][s0][e] (cached per (P, objective))."""
        key = ("ylbarr", p, self.sound)
        got = tb.misc.get(key)
        if got is None:
            got = tb.misc[key] = np.array(self.stage_ylb(tb, p))
        return cast("np.ndarray", got)

    def send_tables(self, tb: _Tables) -> None:
        """Per configuration c: the least forward send of a stage ending at e and the least backward send of a stage
        starting at s0 (over every partner configuration), cached in ``tb.misc``."""
        sound = self.sound
        key_ab = ("ab", sound)
        if key_ab in tb.misc:
            return
        nk_all = range(len(tb.cfgs))
        L = tb.L
        tb.misc[key_ab] = (
            [
                [
                    min(tb.send(c, k2, FLOAT_BYTES * tb.mbs * tb.out[e - 1]) for k2 in nk_all) if e >= 1 else 0.0
                    for e in range(L + 1)
                ]
                for c in nk_all
            ],
            [
                [
                    min(tb.send(c, k2, FLOAT_BYTES * tb.mbs * (tb.out[s0 - 1] if sound else tb.out[s0])) for k2 in nk_all)
                    if s0 >= 1
                    else 0.0
                    for s0 in range(L)
                ]
                for c in nk_all
            ],
        )

    def root_split(self, tb: _Tables, p: int, d: int | None = None) -> tuple[float, float]:
        """(least max_i y_i, least sum_i y_i) over every split into p stages, every configuration that fits; with
        ``d``, also under the device budget: a stage whose least tp is t_i has a replica of tp t_i (so y_i is at
        least that replica's least y) and takes D t_i devices at least, D sum_i t_i <= the devices.  Exact dynamic
        programs over (stage, first layer, tp budget) on that relaxation, run once per P for every budget.  A budget of
        4 P or more binds nothing (every tp is at most 4): then the values are :meth:`free_split`'s (the same minima
        of the same sums), with no budget program."""
        if d is not None and sum(tb.caps) // d >= 4 * p:
            return self.free_split(tb, p)
        key = ("splitdp", p, self.sound)
        got = tb.misc.get(key)
        if got is None and native.available():
            got = tb.misc[key] = self._root_split_native(tb, p)
        if got is None:
            ylb = self.stage_ylb(tb, p)
            L, inf = tb.L, math.inf
            budget = min(4 * p, sum(tb.caps))  # D >= 1: never more tp budget than devices
            tps = sorted({tp for _j, tp in tb.cfgs})
            gmax = np.full((L + 1, budget + 1), inf)
            gsum = np.full((L + 1, budget + 1), inf)
            gmax[L, :], gsum[L, :] = -inf, 0.0
            for k in range(p - 1, -1, -1):
                nmax = np.full((L + 1, budget + 1), inf)
                nsum = np.full((L + 1, budget + 1), inf)
                # stage k starts at s in [k, L - p + k] (k stages before it, p - k - 1 after) and ends at e in
                # [k + 1, L - p + k + 1]; every other entry is inf or never read from the first layer
                rows, ends = slice(k, L - p + k + 1), slice(k + 1, L - p + k + 2)
                for t in tps:
                    if t > budget:
                        continue  # a replica of tp t needs more devices than the budget's cap (fewer than 4 devices)
                    yk = np.full((L + 1, L + 1), inf)
                    for c, (_j, tp) in enumerate(tb.cfgs):
                        if tp == t:
                            yk = np.minimum(yk, ylb[k][c])
                    ykb = yk[rows, ends][:, :, None]
                    cmax = np.maximum(ykb, gmax[None, ends, : budget + 1 - t]).min(axis=1)
                    csum = (ykb + gsum[None, ends, : budget + 1 - t]).min(axis=1)
                    nmax[rows, t:] = np.minimum(nmax[rows, t:], cmax)
                    nsum[rows, t:] = np.minimum(nsum[rows, t:], csum)
                gmax, gsum = nmax, nsum
            got = tb.misc[key] = (gmax[0].copy(), gsum[0].copy())  # type: ignore[assignment]
        gmax0, gsum0 = cast("tuple[np.ndarray, np.ndarray]", got)  # misc holds several tables
        b = len(gmax0) - 1 if d is None else min(sum(tb.caps) // d, len(gmax0) - 1)
        return float(gmax0[b]), float(gsum0[b])

    def _root_split_native(self, tb: _Tables, p: int) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`root_split`'s programs in C (:func:`milp_partition.hetero.native.split_dp`; the same values), each
        stage's least y per tp from :meth:`stage_ymin_tp`; None when the extension is not available."""
        tps = sorted({tp for _j, tp in tb.cfgs})
        yk = np.array([[self.stage_ymin_tp(tb, p, k, t) for t in tps] for k in range(p)])
        return native.split_dp(yk, tps, min(4 * p, sum(tb.caps)))

    def stage_ymin_tp(self, tb: _Tables, p: int, k: int, tp: int) -> np.ndarray:
        """[s0][e]: the least :meth:`ylb_part` over the configurations of tp ``tp`` for stage k of p (inf: none);
        cached per (in flight, role, tp)."""
        mins = tb.misc.setdefault(("ymintp", self.sound), {})
        key = (p - k, self.send_role(p, k), tp)
        got = mins.get(key)
        if got is None:
            got = np.full((tb.L + 1, tb.L + 1), math.inf)
            for c, (_j, t) in enumerate(tb.cfgs):
                if t == tp:
                    got = np.minimum(got, self.ylb_part(tb, c, p - k, key[1]))
            mins[key] = got
        return cast("np.ndarray", got)

    def free_split(self, tb: _Tables, p: int) -> tuple[float, float]:
        """(least max_i y_i, least sum_i y_i) over every split into p stages and every configuration that fits, with no
        device budget: :meth:`root_split` without its tp-budget dimension (at most its value for every D), a dynamic
        program over (stage, first layer) only.  Cached per (P, objective) in ``tb``."""
        key = ("free", p, self.sound)
        got = tb.misc.get(key)
        if got is None:
            # _bottleneck with every configuration allowed: each stage's least y over the configurations is
            # stage_ymin's (the same minima), then the same dynamic program (in C where built: _bottleneck_arr's
            # programs on one configuration per stage, all allowed, whose least y is stage_ymin's itself)
            L, inf = tb.L, math.inf
            ys = [self.stage_ymin(tb, p, k) for k in range(p)]
            stacked = np.array(ys)[:, None]  # [k][1][s0][e]
            fast = native.bottleneck(stacked, np.ones(stacked.shape, dtype=bool), True)  # (ylb_part's: inf at e <= s0)
            if fast is not None:
                got = tb.misc[key] = (float(fast[0][0, 0]), float(fast[1][0, 0]))
            else:
                rmax, rsum = np.full(L + 1, inf), np.full(L + 1, inf)
                rmax[L], rsum[L] = -inf, 0.0
                for k in range(p - 1, -1, -1):
                    yk = ys[k]
                    rmax, rsum = np.maximum(yk, rmax[None, :]).min(axis=1), (yk + rsum[None, :]).min(axis=1)
                got = tb.misc[key] = (float(rmax[0]), float(rsum[0]))
        return cast("tuple[float, float]", got)

    def triple_bound(self, tb: _Tables, d: int, p: int, quick: bool = False, split: bool = True) -> float:
        """A lower bound on the iteration time of every plan with micro-batch ``tb.mbs``, D = d and P = p:
        (m - 1) max_i y_i + sum_i y_i + U + T_sync with max_i y_i at least the device-time bound theta plus the least
        send, the average least compute plus the least send, and the bottleneck split's least max; sum_i y_i at
        least the bottleneck split's least sum; U at its floor, T_sync at :meth:`ar_split`.  The split is
        :meth:`root_split` under the device budget, or with ``quick`` :meth:`free_split` (no budget: a bound no
        higher, far cheaper, for ordering the triples; the search checks the full one before it enters a triple), or
        with ``split=False`` none (the lowest, with no table of P)."""
        m = math.ceil(self.problem.global_batch / (tb.mbs * d))
        xmin, xsum = self.x_stats(tb, p)
        if not split:  # the bound without the split programs (lower still): before any table of P is built
            ymax_lb, ysum_lb = -math.inf, -math.inf
        else:
            ymax_lb, ysum_lb = self.free_split(tb, p) if quick else self.root_split(tb, p, d)
        return (
            (m - 1) * max(tb.theta_devices(d) + xmin, tb.cminpre[tb.L] / p + xmin, ymax_lb)
            + max(tb.cminpre[tb.L] + xsum, ysum_lb)
            + tb.umin
            + self.ar_split(tb, d, p)
        )

    def x_stages(self, tb: _Tables, p: int) -> tuple[list[float], list[tuple[float, float]], np.ndarray, np.ndarray]:
        """Per stage of p: the least X_i (:func:`_x_min`), (ka, kb) with X_i = ka a_i + kb b_i (:func:`_x_coef`;
        Sailor: the first stage's send doubled from P = 4, the last's always), and ka, kb as arrays (the C programs');
        cached per (P, objective) in ``tb``, read only."""
        key = ("xstage", p, self.sound)
        got = tb.misc.get(key)
        if got is None:
            coefs = [_x_coef(p, i, self.sound) for i in range(p)]
            got = tb.misc[key] = (
                [_x_min(p, i, tb.tmin, self.sound) for i in range(p)],
                coefs,
                np.array([c[0] for c in coefs], dtype=np.float64),
                np.array([c[1] for c in coefs], dtype=np.float64),
            )
        return cast("tuple[list[float], list[tuple[float, float]], np.ndarray, np.ndarray]", got)

    def x_stats(self, tb: _Tables, p: int) -> tuple[float, float]:
        """(min, sum) of the least X_i over the p stages (:func:`_x_min`), cached per (P, least send): the same values
        for every D and micro-batch size of that least send (the triple bounds ask for them thousands of times)."""
        key = (p, tb.tmin)
        got = self.x_cache.get(key)
        if got is None:
            xs = [_x_min(p, i, tb.tmin, self.sound) for i in range(p)]
            got = self.x_cache[key] = (min(xs), sum(xs))
        return got

    def full_bound(self, tables: dict[int, _Tables], triple: tuple[float, int, int, int]) -> float:
        """The triple's bound under the device budget (at least its quick bound), computed once."""
        got = self.full_bounds.get(triple)
        if got is None:
            quick, mbs, d, p = triple
            got = self.full_bounds[triple] = max(quick, self.triple_bound(tables[mbs], d, p))
        return got

    def list_triples(self) -> tuple[list[tuple[float, int, int, int]], list[float], dict[int, _Tables]]:
        """The triples (quick bound, mbs, D, P) to explore, unsorted; the floors of the triples left unlisted when the
        budget ran out while listing (empty when it did not); the tables per micro-batch size."""
        prob = self.problem
        triples: list[tuple[float, int, int, int]] = []
        floors: list[float] = []  # bounds of the triples not listed (the budget ran out while listing)
        stopped = False
        tables: dict[int, _Tables] = {}
        for mbs in prob.micro_batches():
            tb = _Tables(prob, mbs)
            if not tb.cfgs or not all(math.isfinite(x) for x in tb.cmin):
                continue
            tables[mbs] = tb
            _share_ar_caches(tables, tb)
            total = sum(tb.caps)
            chunk: list[tuple[int, bool]] = []  # (D, late): their bounds computed together (:meth:`list_degrees`)
            for d in range(1, total + 1):
                if stopped:
                    # the budget ran out at an earlier D: every triple of D or more of this micro-batch size is at
                    # least sum_l min C + min U (the formula's other terms are >= 0), listed as one floor
                    floors.append(tb.cminpre[tb.L] + tb.umin)
                    break
                # once the budget is spent, this D is listed with the bound without the split (no tables, no degree
                # left out: that test builds tables); the D after it ends the list above
                late = self.budget.expired()
                stopped = stopped or late
                if not any(d * p * tb.tp_max >= self.min_devices for p in range(1, min(tb.L, total // d) + 1)):
                    continue
                if d > 1:
                    self.ar_splits(tb, d)  # (its tables now, so that the clock above sees their time)
                chunk.append((d, late))
                if late or len(chunk) >= LIST_CHUNK:
                    triples.extend(self.list_degrees(tb, chunk))
                    chunk = []
            triples.extend(self.list_degrees(tb, chunk))
        return triples, floors, tables

    def list_degrees(self, tb: _Tables, chunk: list[tuple[int, bool]]) -> list[tuple[float, int, int, int]]:
        """The triples (quick bound, mbs, D, P) of the degrees ``chunk`` ((D, late) in increasing D) that the listing
        keeps, in order of D then P: per D the P with D P tp_max >= ``min_devices`` (at most L and the devices over D)
        whose bound without the split (:meth:`triple_bound`, ``split=False``) is below the incumbent, unless every plan
        of D has one of D - 1 at most its value (:meth:`dominated_by_fewer`, not asked where ``late``), keyed by the
        quick bound (``late``: by the bound without the split).  Every D of the chunk at once (:meth:`degree_bounds`)."""
        if not chunk:
            return []
        L, total, mbs = tb.L, sum(tb.caps), tb.mbs
        ds = np.array([d for d, _late in chunk])
        ps = np.arange(1, L + 1)
        valid = (ps[None, :] <= np.minimum(L, total // ds)[:, None]) & (ds[:, None] * ps[None, :] * tb.tp_max >= self.min_devices)
        lb0 = self.degree_bounds(tb, ds, None)
        keep = valid & (lb0 * (1 - PRUNE_REL) < self.out.value)
        rows = [(i, d, late) for i, (d, late) in enumerate(chunk) if keep[i].any()]
        rows = [(i, d, late) for i, d, late in rows if late or not self.dominated_by_fewer(tb, d)]
        quick_ps = sorted({int(p) for i, _d, late in rows if not late for p in ps[keep[i]]})
        fs = np.full((L + 1, 2), -math.inf)
        for p in quick_ps:
            fs[p] = self.free_split(tb, p)
        keys = self.degree_bounds(tb, ds, fs) if quick_ps else lb0
        out: list[tuple[float, int, int, int]] = []
        for i, d, late in rows:
            listed = ps[keep[i]]
            vals = (lb0 if late else keys)[i][listed - 1]
            out.extend((key, mbs, d, p) for key, p in zip(vals.tolist(), listed.tolist()))
        return out

    def ar_vector(self, tb: _Tables, d: int) -> np.ndarray:
        """:meth:`ar_splits` of D = d, read from its cache where built (not asked again)."""
        got = tb.arvec_cache.get(d)
        return cast("np.ndarray", got) if got is not None else self.ar_splits(tb, d)

    def degree_bounds(self, tb: _Tables, ds: np.ndarray, fs: np.ndarray | None) -> np.ndarray:
        """[D][P - 1]: :meth:`triple_bound` of every D of ``ds`` and P = 1..L, without the split (``fs`` None) or with
        ``fs`` [P] as the split's least max and sum of y (:meth:`free_split`: the quick bound; -inf where not asked): the
        same operations on the same values, element by element (so the same floats), with no Python call per (D, P)."""
        L = tb.L
        ps = np.arange(1, L + 1)
        m = np.array([math.ceil(self.problem.global_batch / (tb.mbs * int(d))) for d in ds])
        xkey = ("xarr", tb.tmin)
        xarr = tb.misc.get(xkey)
        if xarr is None:  # row P: x_stats of P (P = 1..L), the same floats
            xarr = tb.misc[xkey] = np.array([(0.0, 0.0), *(self.x_stats(tb, p) for p in range(1, tb.L + 1))])
        xmin, xsum = xarr[ps, 0], xarr[ps, 1]
        cmin = tb.cminpre[tb.L]
        if fs is not None:
            ymax_lb, ysum_lb = fs[ps, 0], fs[ps, 1]
        else:
            ymax_lb = ysum_lb = np.full(L, -math.inf)
        # (the listing built each D's T_sync rows before its clock reading: read here, not asked again)
        ar = np.array([self.ar_vector(tb, int(d))[ps] if d > 1 else np.zeros(L) for d in ds])
        theta = np.array([tb.theta_devices(int(d)) for d in ds])
        ymax = np.maximum(np.maximum(theta[:, None] + xmin[None, :], (cmin / ps + xmin)[None, :]), ymax_lb[None, :])
        with np.errstate(invalid="ignore"):  # 0 * inf is nan, as in triple_bound's floats (m = 1, no split fits)
            return cast("np.ndarray", (m - 1)[:, None] * ymax + np.maximum(cmin + xsum, ysum_lb)[None, :] + tb.umin + ar)

    def run(self) -> SearchOutcome:
        prob = self.problem
        triples, floors, tables = self.list_triples()
        triples.sort()
        if floors or self.budget.expired():  # no time to explore: the least listed bound (each a triple's lower bound)
            self.out.triples, self.out.stopped_by = len(triples), "time_limit"
            self.out.bound = min([self.out.value, *(t[0] for t in triples[:1]), *floors])
            return self.out
        self.out.triples = len(triples)
        # phase 1 (a heuristic): every triple in order, a few hundred nodes each, balanced stage ends first, for
        # a good incumbent early.  A triple it explores to the end (no node cap, no stop) is done: every plan of it
        # was priced or pruned against an incumbent no lower than the final one, and its unresolved leaves are kept;
        # the others' unresolved leaves are dropped (phase 2 explores them again)
        phase1 = (
            self.budget.capped(self.budget.limit_s * PHASE1_SHARE)
            if math.isfinite(self.budget.limit_s)
            else self.budget.capped(5.0)
        )
        done: set[tuple[int, int, int]] = set()
        self.node_cap, self.balanced = PHASE1_NODES, True
        # a threshold with no plan behind it (a caller's ceiling, :func:`milp_partition.hetero.pooled.pooled_bound`): what
        # is asked is the proof that no plan is below it, so no phase 1 (on the three five-zone region searches 5-15 %
        # less CPU: the triples it cuts at their node cap are set up twice)
        skip_phase1 = self.out.plan is None and math.isfinite(self.out.value)
        patience = PHASE1_PATIENCE if sum(1 for c in prob.cluster.columns if c.count > 0) <= 2 else None
        entered_since = 0  # triples entered since the incumbent last fell
        for t in triples:
            _q, mbs, d, p = t
            if skip_phase1 or t[0] * (1 - PRUNE_REL) >= self.out.value or phase1.expired():
                break
            if patience is not None and entered_since >= patience:
                break
            if self.full_bound(tables, t) * (1 - PRUNE_REL) >= self.out.value:
                done.add((mbs, d, p))
                continue
            self.triple_nodes = 0
            kept = len(self.out.unresolved)
            before = self.out.value
            self.inner(tables[mbs], d, p)
            entered_since = 0 if self.out.value < before else entered_since + 1
            if self.abort or self.stop:
                del self.out.unresolved[kept:]
            else:
                done.add((mbs, d, p))
            self.abort = False
            if self.stop:
                self.stop = False
                break
        self.node_cap, self.balanced, self.abort = None, False, False
        # phase 2: every triple not done whose quick bound is below the incumbent, in order of its full bound (so
        # that the bound of the first triple not explored, when the time runs out, is the least left)
        if self.budget.expired():  # the full bounds below cost tables: the quick bounds of the triples left instead
            self.out.stopped_by = "time_limit"
            rest = [t[0] for t in triples if t[0] * (1 - PRUNE_REL) < self.out.value and (t[1], t[2], t[3]) not in done]
            self.out.bound = min([self.out.value, *rest, *self.out.unresolved])
            return self.out
        live = sorted(
            (self.full_bound(tables, t), t[1], t[2], t[3])
            for t in triples
            if t[0] * (1 - PRUNE_REL) < self.out.value and (t[1], t[2], t[3]) not in done
        )
        for lb, mbs, d, p in live:
            if lb * (1 - PRUNE_REL) >= self.out.value:
                break
            if self.budget.expired():
                self.stop = True
            if not self.stop:
                self.inner(tables[mbs], d, p)
            if self.stop:
                self.out.stopped_by = "time_limit"
                self.out.bound = min([self.out.value, lb, *self.out.unresolved])
                return self.out
        self.out.complete = True
        # a leaf left unresolved at or above the final incumbent proves nothing is lost there (phase 1 leaves priced
        # before the incumbent fell are such)
        self.out.unresolved = [u for u in self.out.unresolved if u < self.out.value]
        self.out.bound = min([self.out.value, *self.out.unresolved])
        return self.out

    # ---- one (mbs, D, P) ----
    def inner(self, tb: _Tables, d: int, p: int) -> None:
        """The exact branch and bound of one (mbs, D, P) (:class:`_Triple`), against the incumbent in ``self.out``,
        entered only when :meth:`devices_admit` does not rule the triple out."""
        if self.devices_admit(tb, d, p):
            _Triple(self, tb, d, p).run()

    def dominated_by_fewer(self, tb: _Tables, d: int) -> bool:
        """Whether every plan with micro-batch ``tb.mbs`` and D = d has a plan with D = d - 1 (same P) of at most its
        value: then the triples of D = d hold nothing better than those of d - 1 and are not searched.

        The plan without its last replica in every stage: the same stages and memory per replica, fewer devices;
        C_i, U and the sends are maxima over a subset (the sends pair replica r with replica r: pairs r < d - 1 stay),
        so no larger; m = ceil(B / (beta D)) must be the same for d and d - 1 (checked).  The all-reduce of stage i is
        the worst adjacent pair r < d - 2 of ARB_k(W'_i, d - 1), W'_i = w_i / t' with t' the new least tp (capped at 4),
        at least the old least tp t; the same pairs are in the plan of D = d, at ARB_k(W_i, d), W_i = w_i / t.  So it
        suffices that ARB_k(w / t', d - 1) <= ARB_k(w / t, d) for every count-1 fit k between the columns, every
        stage's weights w (every layer range) and every t <= t' among the tps: checked on the table, with a margin of
        1e-9 of the values (the fits are odd: a ring of more members is not always slower, and then the rule is off).
        """
        if d <= 1:
            return False
        b, mbs = self.problem.global_batch, tb.mbs
        if math.ceil(b / (mbs * d)) != math.ceil(b / (mbs * (d - 1))):
            return False
        tps = tuple(sorted({min(4, tp) for _j, tp in tb.cfgs}))
        key = (d, tps)  # the all-reduce reads the weights, the tps and the columns, not the micro-batch size
        got = self.fewer_cache.get(key)
        if got is None:
            got = self.fewer_cache[key] = self._ar_no_larger_with_fewer(tb, d, tps)
        return got

    def _ar_no_larger_with_fewer(self, tb: _Tables, d: int, tps: tuple[int, ...]) -> bool:
        """ARB_k(w / t', d - 1) <= ARB_k(w / t, d) - margin for every fit k, layer range, t <= t' (:meth:`dominated_by_fewer`)."""
        L = tb.L
        pre = np.array(tb.w1pre)
        w = (pre[None, :] - pre[:, None])[np.arange(L + 1)[None, :] > np.arange(L + 1)[:, None]]  # every layer range
        w = w[w > 0]  # a range of no weights: no all-reduce on either side
        links = {
            fit_parts(self.problem.cluster.link_fit((c1.zone, c1.kind, 1, c2.zone, c2.kind, 1)))
            for c1 in tb.cols
            for c2 in tb.cols
        }

        def well(t: int, n: int, parts: tuple[tuple[float, ...], ...]) -> bool:
            key = ("well", t, n, parts)  # the same weights for every micro-batch size: shared by D and D + 1
            got = self.ring_cache.get(key)
            if got is None:
                got = self.ring_cache[key] = n <= 1 or bool(_well_conditioned_all(_distinct(w / t)[0], n, parts).all())
            return cast(bool, got)

        def ring(t: int, n: int, parts: tuple[tuple[float, ...], ...]) -> np.ndarray:
            key = (t, n, parts)
            got = self.ring_cache.get(key)
            if got is None:
                if n <= 1:
                    got = np.zeros_like(w)
                else:
                    # a pooled link (:mod:`milp_partition.hetero.pool`) is the least of its parts piece by piece: the
                    # same function the plans are priced with, each part evaluated well (once per distinct size)
                    u, inv = _distinct(w / t)
                    got = _bucketed_vec_min(u, n, parts)[inv]
                self.ring_cache[key] = got
            return cast(np.ndarray, got)

        # the fit is evaluated well (no cancellation: a relative error below 1e-10) at every ring step compared: asked
        # first, for every fit and tp (no ring is priced where one is not)
        if not all(well(t, x, coef) for coef in links for t in tps for x in (d - 1, d)):
            return False
        for coef in links:
            few = {t: ring(t, d - 1, coef) for t in tps}
            many = {t: ring(t, d, coef) for t in tps}
            for t in tps:
                for t2 in tps:
                    if t2 < t:
                        continue
                    lo, hi = few[t2], many[t]
                    if not np.all(np.isfinite(lo)) or not np.all(np.isfinite(hi)):
                        return False
                    if not np.all(lo + 1e-9 * np.abs(lo) <= hi - 1e-9 * np.abs(hi)):
                        return False
        return True

    def lambda_weights(self, tb: _Tables) -> tuple[np.ndarray, np.ndarray]:
        """The weight vectors of the device-budget relaxation (one per column, all ones, one over the counts), as
        (per weight, per configuration: lambda_t[column] tp) and (per weight: sum_j lambda_t[j] count_j).  Every plan has,
        for every t, sum over its replicas of lambda_t[column] tp <= sum_j lambda_t[j] count_j (its devices per column
        are at most the counts, and the weights are non-negative)."""
        got = tb.misc.get("lams")
        if got is None:
            ncol = len(tb.cols)
            lams = _weight_vectors(tb.caps)
            w = np.array([[l_[j] * tp for j, tp in tb.cfgs] for l_ in lams])
            cap = np.array([sum(l_[j] * tb.caps[j] for j in range(ncol)) for l_ in lams])
            got = tb.misc["lams"] = (w, cap)
        return cast("tuple[np.ndarray, np.ndarray]", got)

    def span_columns(self, tb: _Tables) -> list[int] | None:
        """Per column of ``tb``: its region's index, where every plan the search must cover spans two regions (the
        regions are given, every column has one, and ``min_devices`` exceeds every region's devices: such a plan cannot
        stay in one region); else None (:meth:`_Triple.span_lb` is not used)."""
        if self.regions is None or self.min_devices <= 0:
            return None
        names = [self.regions.get(c.zone) for c in tb.cols]
        if any(n is None for n in names):
            return None
        order = sorted(set(cast("list[str]", names)))
        index = [order.index(cast(str, n)) for n in names]
        per = [sum(cap for cap, r in zip(tb.caps, index) if r == k) for k in range(len(order))]
        if len(order) < 2 or self.min_devices <= max(per):
            return None
        return index

    def cross_sends(self, tb: _Tables) -> tuple[list[float], list[float]]:
        """(acr[e], bcr[s0]): the least forward send of a stage ending at e and the least backward send of a stage
        starting at s0 between two configurations of different regions (:meth:`send_tables`'s sizes, the pairs
        restricted to crossing ones; inf where no crossing link is priced), cached in ``tb.misc``."""
        key = ("cross", self.sound)
        got = tb.misc.get(key)
        if got is None:
            cols = self.span_columns(tb)
            assert cols is not None
            pairs = [
                (c1, c2) for c1, (j1, _t1) in enumerate(tb.cfgs) for c2, (j2, _t2) in enumerate(tb.cfgs) if cols[j1] != cols[j2]
            ]
            L, inf = tb.L, math.inf

            def least(nbytes: float) -> float:
                return min((tb.send(c1, c2, nbytes) for c1, c2 in pairs), default=inf)

            acr = [least(FLOAT_BYTES * tb.mbs * tb.out[e - 1]) if e >= 1 else 0.0 for e in range(L + 1)]
            bcr = [
                least(FLOAT_BYTES * tb.mbs * (tb.out[s0 - 1] if self.sound else tb.out[s0])) if s0 >= 1 else 0.0
                for s0 in range(L)
            ]
            got = tb.misc[key] = (acr, [*bcr, 0.0])
        return cast("tuple[list[float], list[float]]", got)

    def devices_admit(self, tb: _Tables, d: int, p: int) -> bool:
        """False when no plan of (tb.mbs, d, p) below the incumbent fits the devices (a sound test, before the triple's
        tables are built).

        A plan below the incumbent has every y_k = C_k + X_k at most y_hi = (incumbent - least sum of compute - least
        sends - least update - T_sync's floor) / (m - 1) (else (m - 1) max_k y_k alone, with the other terms at their
        floors, reaches it), so each stage k over layers s..e-1 has all its replicas on configurations c with
        ylb[k][c][s][e] <= y_hi (:meth:`stage_ylb`, a lower bound on y_k with c among the stage's replicas).  Each of
        its D replicas takes lambda_t-weighted devices at least the least weight over those configurations, so
        D sum_k (that least) <= sum_j lambda_t[j] count_j for every weight vector t: a dynamic program over (stage,
        first layer) per t (:meth:`_Triple.lambda_suffix` with the caps from the incumbent alone, no all-reduce
        mask: it allows every configuration the triple's own masks allow, so it rules out no more than they would)."""
        value = self.out.value
        if not math.isfinite(value):
            return True
        m = math.ceil(self.problem.global_batch / (tb.mbs * d))
        y_hi = (
            math.inf
            if m == 1
            else (value - tb.cminpre[tb.L] - self.x_stats(tb, p)[1] - tb.umin - self.ar_split(tb, d, p)) / (m - 1)
        )
        w, cap = self.lambda_weights(tb)
        # the least weighted devices per replica, F(y_hi), only falls as y_hi grows (the masks only gain
        # configurations): a threshold seen at or above y_hi whose F already fails D rules the triple out, one at or
        # below whose F fits admits it (the same decision as computing F(y_hi))
        # (as Python floats: the same products and comparisons as the arrays', without an array per test)
        seen = self.admit_seen.setdefault((tb.mbs, p), [])
        cap_tol = (cap * (1 + 1e-12)).tolist()
        for y_seen, first in seen:
            fits = all(d * f <= c for f, c in zip(first, cap_tol))
            if y_seen >= y_hi and not fits:
                return False
            if y_seen <= y_hi and fits:
                return True
        first = _lambda_first_under(self.stage_ylb_arr(tb, p), y_hi * (1 + 1e-12), w, tb.L).tolist()
        seen.append((y_hi, first))
        return all(d * f <= c for f, c in zip(first, cap_tol))

    # ---- a leaf: counts, orders, exact price ----
    def leaf(
        self, tb: _Tables, d: int, p: int, m: int, chosen: list[tuple[int, int, tuple[int, ...]]], lb_partial: float
    ) -> None:
        self.out.leaves += 1
        if self.budget.expired():  # a leaf can take milliseconds (device counts x orders): the limit is read at each
            self.stop = True  # the caller returns on stop; the triple counts as unexplored (its bound stays in)
            return
        # exact leaf bound (sends between every neighbouring pair now known)
        c = [max(tb.comp(k, s, e) for k in q) for s, e, q in chosen]
        a, b = [0.0] * p, [0.0] * p
        for i in range(p - 1):
            _s1, e1, q1 = chosen[i]
            s2, _e2, q2 = chosen[i + 1]
            sa = FLOAT_BYTES * tb.mbs * tb.out[e1 - 1]
            sb = FLOAT_BYTES * tb.mbs * (tb.out[s2 - 1] if self.sound else tb.out[s2])
            a[i], b[i + 1] = self.pair_lb(tb, q1, q2, sa, sb)
        u = max(tb.upd[k][s] for s, e, q in chosen for k in q)
        ar = [self.ar_lb(tb, q, s, e, d) for s, e, q in chosen]
        x = [self.x_of(p, i, a[i], b[i]) for i in range(p)]
        lb = (m - 1) * max(ci + xi for ci, xi in zip(c, x)) + sum(x) + sum(c) + u + (max(ar) if d > 1 else 0.0)
        if lb * (1 - PRUNE_REL) >= self.out.value:
            return
        if leaf_size(tb.cfgs, tb.caps, d, chosen) <= LEAF_ENUM_MAX:  # few plans reduce to the leaf: every one priced, no bound
            v, plan = best_of_leaf(self.problem, [(c.kind, c.zone, c.count) for c in tb.cols], tb.cfgs, tb.mbs, d, chosen)
            if v < self.out.value:
                self.out.value, self.out.plan = v, plan
            return
        counts_list = self.counts(tb, d, chosen)
        if not counts_list:
            return  # no device counts fit: every plan reducing to these sets is infeasible
        best = math.inf
        best_plan = None
        cols_used = sorted({tb.cfgs[k][0] for _s, _e, q in chosen for k in q})
        orders = (
            list(itertools.permutations(cols_used)) if len(cols_used) <= 3 else [tuple(cols_used), tuple(reversed(cols_used))]
        )
        for counts in counts_list:
            for order in orders:
                rank = {j: r for r, j in enumerate(order)}
                reps = []
                for (_s, _e, q), cnt in zip(chosen, counts):
                    row = []
                    for k in sorted(q, key=lambda k: rank[tb.cfgs[k][0]]):
                        j, tp = tb.cfgs[k]
                        col = tb.cols[j]
                        row.extend([Replica(col.kind, col.zone, tp)] * cnt[k])
                    reps.append(tuple(row))
                plan = HeteroPlan(tb.mbs, tuple((s, e) for s, e, _q in chosen), tuple(reps))
                if not self.memory_ok(plan):
                    continue
                v = evaluate(self.problem, plan).iteration_s
                if v < best:
                    best, best_plan = v, plan
        if best < self.out.value:
            self.out.value, self.out.plan = best, best_plan
        if best > lb * (1 + 1e-9) and lb < self.out.value:
            self.out.unresolved.append(lb)

    def memory_ok(self, plan: HeteroPlan) -> bool:
        """The exact memory rule (the search's own test allows rounding slack)."""
        p = len(plan.stages)
        for i, ((s, e), row) in enumerate(zip(plan.stages, plan.replicas)):
            for kind, tp in {(r.kind, r.tp) for r in row}:
                if memory_bytes(self.problem, plan.mbs, tp, s, e, p - i) > self.problem.cluster.memory_of(kind):
                    return False
        return True

    def counts(self, tb: _Tables, d: int, chosen: list[tuple[int, int, tuple[int, ...]]]) -> list[list[dict[int, int]]]:
        """A few feasible replica counts per stage (each set member at least once, D per stage, within the columns).

        Exact feasibility: a dynamic program over stages whose state is the devices used in every column but the
        last, keeping the least used in the last (and one choice path per state).  Aligned counts (the same count
        of the first member in every stage with the same columns) are tried first: they pair like with like.
        """
        ncol = len(tb.cols)
        caps = tb.caps
        options: list[list[dict[int, int]]] = []
        for _s, _e, q in chosen:
            if len(q) == 1:
                options.append([{q[0]: d}])
            elif len(q) == 2:
                options.append([{q[0]: n, q[1]: d - n} for n in range(1, d)])
            else:
                opts = []
                for comp in itertools.product(range(1, d), repeat=len(q) - 1):
                    if sum(comp) < d:
                        opts.append(dict(zip(q, [*comp, d - sum(comp)])))
                options.append(opts)

        def use(opt: dict[int, int]) -> list[int]:
            u = [0] * ncol
            for k, n in opt.items():
                j, tp = tb.cfgs[k]
                u[j] += n * tp
            return u

        def ok(cs: list[dict[int, int]]) -> bool:
            tot = [0] * ncol
            for opt in cs:
                for j, v in enumerate(use(opt)):
                    tot[j] += v
            return all(tot[j] <= caps[j] for j in range(ncol))

        out: list[list[dict[int, int]]] = []
        mixed = [i for i, (_s, _e, q) in enumerate(chosen) if len(q) == 2]
        if mixed:
            feas = []
            for n in range(1, d):
                cs = [
                    options[i][0] if len(q) == 1 else ({q[0]: n, q[1]: d - n} if len(q) == 2 else options[i][0])
                    for i, (_s, _e, q) in enumerate(chosen)
                ]
                if all(len(q) <= 2 for _s, _e, q in chosen) and ok(cs):
                    feas.append(cs)
            for cs in feas[:1] + feas[-1:] + feas[len(feas) // 2 : len(feas) // 2 + 1]:
                if cs not in out:
                    out.append(cs)
        states: dict[tuple[int, ...], tuple[int, list[int]]] = {tuple([0] * (ncol - 1)): (0, [])}
        for opts in options:
            nxt: dict[tuple[int, ...], tuple[int, list[int]]] = {}
            for st, (last, path) in states.items():
                for oi, opt in enumerate(opts):
                    u = use(opt)
                    ns = tuple(st[j] + u[j] for j in range(ncol - 1))
                    nl = last + u[-1]
                    if nl > caps[-1] or any(ns[j] > caps[j] for j in range(ncol - 1)):
                        continue
                    old = nxt.get(ns)
                    if old is None or nl < old[0]:
                        nxt[ns] = (nl, [*path, oi])
            states = nxt
            if not states:
                return out
        for _last, path in list(states.values())[:2]:
            cs = [options[i][oi] for i, oi in enumerate(path)]
            if cs not in out:
                out.append(cs)
        return out


def _stage_scan_numpy(
    arrays: tuple[np.ndarray, ...], ends: np.ndarray, s: int, last: bool, scalars: tuple[float, ...]
) -> tuple[list[list[int]], list[float], list[float]]:
    """:meth:`_Triple.scan` in numpy over [end][set] (the definition of the C loop,
    :func:`milp_partition.hetero.native.stage_scan`, which takes the same arguments): per end the kept sets (in set
    order), the least lb (1 - PRUNE_REL) of the allowed sets (NaN as -inf; inf when none) and their least compute."""
    with np.errstate(invalid="ignore"):  # 0 inf is NaN, as in the loop (no warning there either)
        return _stage_scan_numpy_core(arrays, ends, s, last, scalars)


def _stage_scan_numpy_core(
    arrays: tuple[np.ndarray, ...], ends: np.ndarray, s: int, last: bool, scalars: tuple[float, ...]
) -> tuple[list[list[int]], list[float], list[float]]:
    """:func:`_stage_scan_numpy`'s arithmetic."""
    cq, aq, uq, arq, set_bits, allowed, ymax2, ysum2, bhere, restsum, restmax, usage, used, sfx, caps = arrays
    ka, kb, mm1, floor_y, umax, armax, umin, ar_floor, value, keep = scalars
    ci = cq[:, s, :][:, ends].T
    a = np.zeros_like(ci) if last else aq[:, ends].T
    yi = ci + (ka * a + kb * bhere[None, :])
    big = np.where(ymax2[None, :] >= yi, ymax2[None, :], yi)
    rm = restmax[ends]
    base = np.where(rm >= floor_y, rm, floor_y)[:, None]
    big = np.where(base > big, base, big)
    uqs = uq[:, s][None, :]
    u = np.where(umax >= uqs, umax, uqs)
    ars = arq[:, s, :][:, ends].T
    ar = np.where(armax >= ars, armax, ars)
    lb = (
        mm1 * big
        + ysum2[None, :]
        + yi
        + restsum[ends][:, None]
        + np.where(u >= umin, u, umin)
        + np.where(ar >= ar_floor, ar, ar_floor)
    )
    ok = (set_bits[None, :] & allowed[ends][:, None]) == set_bits[None, :]
    lbk = lb * keep
    minlb = np.where(ok, np.where(np.isnan(lbk), -math.inf, lbk), math.inf).min(axis=1)
    basemin = np.where(ok & ~np.isnan(ci), ci, math.inf).min(axis=1)  # a NaN compute is never below (as in the loop)
    lam = (((usage + used)[None, :, :] + sfx[:, ends].T[:, None, :]) <= caps).all(axis=2)
    kept = ok & ~(lbk >= value) & lam
    return [np.flatnonzero(row).tolist() for row in kept], minlb.tolist(), basemin.tolist()


class _Triple:
    """The exact branch and bound of one (mbs, D, P): its caps, bound tables and tree, sharing one state.

    Parameters
    ----------
    search : _Search
        The search this triple belongs to (incumbent, counters, budget, stop flags, caches on ``tb``).
    tb : _Tables
        The tables of the micro-batch size.
    d, p : int
        Data-parallel degree D and pipeline depth P.
    """

    def __init__(self, search: _Search, tb: _Tables, d: int, p: int) -> None:
        self.search, self.tb, self.d, self.p = search, tb, d, p
        prob = search.problem
        L = self.L = tb.L
        m = self.m = math.ceil(prob.global_batch / (tb.mbs * d))
        theta = self.theta = tb.theta_devices(d)
        ncol = self.ncol = len(tb.cols)
        xmins, self.x_coef, self.ka_np, self.kb_np = search.x_stages(tb, p)
        self.xmins = xmins
        xmin_all = self.xmin_all = min(xmins)
        # the parts read from the tables and D alone (the sets, the weights, the device usage), read only
        # (they read the tables' configurations and counts, not the micro-batch size: shared by the sizes)
        skey = (tuple(tb.cfgs), tuple(tb.caps), d)
        shared = search.triple_shared.get(skey)
        if shared is None:
            shared = search.triple_shared[skey] = self._shared_of_d(tb, d)
        self.sets, self.set_index, self.lams, self.lam_cap, self.caps_tol, self.usage_arr, self.set_bits = shared[:7]
        self.set_bits_np, self.lag_w = shared[7:]
        sets, lams = self.sets, self.lams
        self.suffix_np = np.zeros((0, 0, 0))
        self.last_sfx = self.suffix_np
        # the device budget of the stages still to come, under the incumbent: every stage k's compute is at most
        # y_hi - xmin_k (else (m - 1) max_i y_i alone reaches the incumbent); suffix[t][k][s] = least lambda_t-weighted
        # devices for stages k..P-1 over layers s..L-1 (each replica takes its cheapest allowed configuration)
        ar_floor = self.ar_floor = search.ar_split(tb, d, p)  # T_sync's least over this (D, P)
        value = search.out.value
        self.y_hi = math.inf if m == 1 else (value - tb.cminpre[L] - sum(xmins) - tb.umin - ar_floor) / (m - 1)
        inf = math.inf
        # the all-reduce under the incumbent: T_sync >= AR_i for every stage, so a stage whose least tp leaves
        # AR_i above what the rest of the bound leaves cannot be in a better plan; its replicas need tp >= tp_lo
        self.ar_hi = (
            (value - ((m - 1) * max(theta + xmin_all, tb.cminpre[L] / p + xmin_all) + tb.cminpre[L] + sum(xmins) + tb.umin))
            if d > 1
            else inf
        )
        self.min_ar = search.min_ar_table(tb, d) if d > 1 else None
        # the column-aware all-reduce bound (two columns, D > 1), built for :meth:`allreduce_floor` when a tree is large
        self.col_ar: dict[int, np.ndarray] | None = None
        self.ar_cap_masks = math.inf
        self.ar_todo = ncol == 2 and d > 1 and YSTAR_AFTER_NODES is not None
        self.sound = search.sound
        search.send_tables(tb)
        self.amin_c, _bmin_c = tb.misc[("ab", self.sound)]
        self.nk = len(tb.cfgs)
        self.tol = 1 + 1e-12
        # numpy form of: stage k over layers s0..e-1 may use configuration c when it fits, its compute plus its least
        # sends stay under y_hi, and its tp is at least the least tp the all-reduce allows; the stage's cheapest
        # lambda-weighted replica times D, plus the best suffix from e
        self.ylb_arr = search.stage_ylb_arr(tb, p)
        self._init_span(sets)  # (before the two-column tables: a search of plans that span two regions has none)
        self._init_two_columns(sets, ncol)
        self.masks_by_k: np.ndarray = np.zeros((0,), dtype=bool)
        self.rmax_l: list[list[float]] = []
        self.rsum_l: list[list[float]] = []
        self.y_cap_masks = math.inf
        self.level_cache: dict[int, tuple[list[list[list[float]]], list[list[np.ndarray | None]]]] = {}  # rec's
        self.level_built = False  # whether a cap level's tables were built (rec's or the C tree's)
        self.level_caps: list[float] = []  # the levels' caps, decreasing (:meth:`tighten_caps`, :meth:`ymax_floor`)
        self.nodes0 = 0
        self.allowed_np = np.zeros((0, 0, 0), dtype=np.int64)
        self.rmax_np = self.rsum_np = np.zeros((0, 0))
        self.ymin_np = np.zeros((0, 0, 0))
        # the sets' terms at every (s0, e), shared by the triples of this micro-batch size and D (not filtered)
        self.set_terms = [tb.misc.setdefault(("setterms", d, last), {}) for last in (False, True)]
        self.chosen: list[tuple[int, int, tuple[int, ...]]] = []
        # dominance: two partial plans with the same next stage index, next layer, last set and multiset of sets
        # (so the same device-count options) complete alike; one no better in every accumulated term is dropped
        # (its completions' bounds are no lower; an unresolved leaf of the kept one keeps its bound in the answer)
        self.memo: dict[tuple[object, ...], list[tuple[float, ...]]] = {}
        # per (previous stage's set, first layer): the pair bounds (a_{i-1}, b_i) over :attr:`sets` (:meth:`prev_arrays`)
        # (shared by the triples of this micro-batch size with the same sets: the rows read neither D nor P)
        self.pair_rows: dict[tuple[tuple[int, ...], int], tuple[np.ndarray, np.ndarray]] = tb.misc.setdefault(
            ("pair_rows", tuple(sets)), {}
        )
        # the same rows as one array [previous set][s][a then b per set] and where it holds them, for the C tree
        if ("pair_tab", tuple(sets)) not in tb.misc:
            nq = len(sets)
            tb.misc[("pair_tab", tuple(sets))] = (np.zeros((nq, L + 1, 2 * nq)), np.zeros((nq, L + 1), dtype=np.uint8))
        self.pair_tab, self.pair_have = tb.misc[("pair_tab", tuple(sets))]
        self.scan_const: tuple[np.ndarray, ...] | None = None
        self.scan_out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self.ends_cache: dict[tuple[int, int], np.ndarray] = {}
        # the floor of max_i y_i in the tree's bound: the device-time bound plus the least send, raised once by
        # :meth:`ymax_floor` in a large two-column tree
        self.floor_y = theta + xmin_all
        self.ystar_todo = self.two and m > 1 and YSTAR_AFTER_NODES is not None
        self._init_lagrange(lams, ncol)
        if self.spanning and not SPAN_FLOORS:
            self.ar_todo = self.ystar_todo = False
        # the cap levels from this many nodes on (never: a count no tree reaches)
        self.level_after = LEVEL_AFTER_NODES if (SPAN_LEVELS or not self.spanning) else 1 << 62

    def _shared_of_d(self, tb: _Tables, d: int) -> tuple[Any, ...]:
        """The triple's parts that read the tables' configurations and counts and D alone, built once per (configurations,
        counts, D) (the micro-batch sizes with the same configurations share them): the reduced sets
        (per column at most one tp; at most D members), their index, the weight vectors of the device-budget
        relaxation, their budgets with the tolerance, each set's least weighted use [set][t], each set's members as
        bits (list and array) and the Lagrangian weights [t][c] (D lambda_t[column] tp)."""
        ncol = len(tb.cols)
        per_col: list[list[int]] = [[k for k, (j, _t) in enumerate(tb.cfgs) if j == jj] for jj in range(ncol)]
        sets: list[tuple[int, ...]] = []
        for choice in itertools.product(*[[None, *ks] for ks in per_col]):
            q = tuple(k for k in choice if k is not None)
            if q and len(q) <= d:
                sets.append(q)
        lams = _weight_vectors(tb.caps)
        lam_cap = [sum(l_[j] * tb.caps[j] for j in range(ncol)) for l_ in lams]
        usage = []
        for q in sets:  # per weight vector: the least lambda_t-weighted devices of D replicas on set q
            row = []
            for l_ in lams:
                vals = [l_[tb.cfgs[c][0]] * tb.cfgs[c][1] for c in q]
                row.append(sum(vals) + (d - len(q)) * min(vals))
            usage.append(row)
        caps_tol = np.array([c * (1 + 1e-12) for c in lam_cap])
        set_bits = [sum(1 << c for c in q) for q in sets]
        lag_w = np.array([[d * l_[tb.cfgs[c][0]] * tb.cfgs[c][1] for c in range(len(tb.cfgs))] for l_ in lams])
        index = {q: k for k, q in enumerate(sets)}
        return sets, index, lams, lam_cap, caps_tol, np.array(usage), set_bits, np.array(set_bits, dtype=np.int64), lag_w

    def _init_two_columns(self, sets: list[tuple[int, ...]], ncol: int) -> None:
        """The two-column tables' fixed parts (empty on other column counts): per set its column-0 and column-1 tps and
        the counts of replicas on column 0 it allows."""
        tb, d = self.tb, self.d
        self.two = ncol == 2 and (SPAN_TWO or not self.spanning)
        self.cap0, self.cap1 = (tb.caps[0], tb.caps[1]) if self.two else (0, 0)
        self.avec = np.arange(self.cap0 + 1)
        # per set: its column-0 and column-1 members' tps and the counts n of replicas on column 0 it allows
        self.two_steps: dict[tuple[int, ...], tuple[int, int, np.ndarray]] = {}
        if self.two:
            for q in sets:
                t0 = next((tb.cfgs[c][1] for c in q if tb.cfgs[c][0] == 0), 0)
                t1 = next((tb.cfgs[c][1] for c in q if tb.cfgs[c][0] == 1), 0)
                ns = np.arange(1, d) if (t0 and t1) else np.array([d] if t0 else [0])
                self.two_steps[q] = (t0, t1, ns)
        self.two_use_arrays: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        self.two_sfx: list[list[np.ndarray | None]] = []
        self.two_np: list[np.ndarray] = []  # two_sfx[k] as [s0][a] arrays (:meth:`two_tables`)
        self.last_two_np: list[np.ndarray] = []
        self.last_two_stack = np.zeros((0, 0, 0))  # the same tables as one array [k][s0][a]
        self.two_stack = self.last_two_stack  # two_np's
        # per set: (t0, t1, least n, most n) of :meth:`two_use`, for :meth:`scan`
        self.twoq = np.array(
            [[t0, t1, int(ns[0]), int(ns[-1])] if len(ns) else [t0, t1, 1, 0] for t0, t1, ns in (self.two_steps[q] for q in sets)]
            if self.two
            else np.zeros((0, 4)),
            dtype=np.int64,
        )

    def _init_span(self, sets: list[tuple[int, ...]]) -> None:
        """Plans that must span two regions (:meth:`span_lb`): per set its region (-1: it spans two), the decided stages'
        region per depth (-2: none decided, -1: they span two already); the crossing tables come after the caps."""
        tb = self.tb
        key = ("set_region", self.d)  # (the columns' regions and the sets: once per micro-batch size and D)
        if key not in tb.misc:
            cols = self.search.span_columns(tb)
            tb.misc[key] = (
                cols,
                [cols[tb.cfgs[q[0]][0]] if len({cols[tb.cfgs[c][0]] for c in q}) == 1 else -1 for q in sets] if cols else [],
            )
        cols, self.set_region = tb.misc[key]
        # every plan the search covers spans two regions (the settings' choices keyed on it: SPAN_FLOORS, SPAN_LEVELS,
        # SPAN_TWO, SPAN_LAGRANGE, SPAN_PRECHECK); the crossing bound (and the leaves in one region dropped) with it
        self.spanning = cols is not None
        self.span = self.spanning and SPAN_BOUND
        self.span_stack = [-2]
        self.acr: list[float] = []
        self.acr_np = np.zeros(0)
        self.span_in: tuple[list[list[float]], list[list[float]]] = ([], [])
        self.span_lat: tuple[list[list[float]], list[list[float]]] = ([], [])
        self.span_np: tuple[np.ndarray, ...] = ()  # (in_max, in_sum, lat_max, lat_sum) as arrays, for the C tree

    def _init_lagrange(self, lams: list[tuple[float, ...]], ncol: int) -> None:
        """The Lagrangian bound's fixed parts (:meth:`lagrange`; its weights :attr:`lag_w` come with the sets): the
        (weight vector, factor) pairs."""
        # the Lagrangian bound on the later stages' sum of y (:meth:`lagrange`): per weight vector kept, G[n][k][s0],
        # its multiplier, its weight vector's index and budget (None: not used in this triple)
        self.lag_g: np.ndarray | None = None
        self.lag_mu = np.zeros(0)
        self.lag_t = np.zeros(0, dtype=np.int64)
        self.lag_capt = np.zeros(0)
        # (weight vector, factor) pairs of :meth:`lagrange`: one over the counts (the last weight vector) and each
        # column alone (the first ncol, :func:`_weight_vectors`); on one or two columns (the settings it was measured
        # on; the several-zone searches keep their cost)
        self.lag_pairs = (
            [(len(lams) - 1, f) for f in LAGRANGE_FACTORS] + [(j, f) for j in range(ncol) for f in LAGRANGE_FACTORS_COLUMN]
            if LAGRANGE_BOUND and ncol <= 2 and (SPAN_LAGRANGE or not self.spanning)
            else []
        )

    def run(self) -> None:
        """Tighten the caps, build the device-budget tables, then search the tree (each step may prune the triple).

        On two columns the exact device table is first built under the incumbent's caps alone (``y_hi``, ``ar_hi``,
        before the bottleneck and Lagrangian rounds of :meth:`tighten_caps`): the rounds only take configurations away,
        and the table's fit only falls with fewer configurations, so a triple it rules out here :meth:`two_suffix`
        would rule out after them (the same decisions, the same tree); on gptneo-a32-v96 it rules out 97 of the 153
        triples entered, each before its ~2.5 ms of rounds."""
        precheck = TWO_PRECHECK and (SPAN_PRECHECK or not self.spanning)
        if precheck and self.two and not self.two_fit_masks(self.build_masks(self.y_hi, self.ar_hi)):
            return
        if not self.tighten_caps() or not self.lambda_suffix():
            return
        if self.two and not self.two_suffix():
            return
        if self.span:
            self.span_tables()
        self.nodes0 = self.search.out.nodes
        if NATIVE_TREE and native.tree_available():
            self.tree()
        else:
            self.rec_lists()
            self.rec(0, 0, -math.inf, 0.0, 0.0, 0.0, -math.inf, 0.0, [0.0] * len(self.lams), np.zeros(self.cap0 + 1))

    def rec_lists(self) -> None:
        """The tables :meth:`rec` reads as lists (the C tree reads the arrays): the bottleneck programs' rows and, where
        plans must span, the crossing programs'."""
        self.rmax_l = self.rmax_np.tolist()
        self.rsum_l = self.rsum_np.tolist()
        if self.span_np:
            in_max, in_sum, lat_max, lat_sum = self.span_np
            self.span_in = (in_max.tolist(), in_sum.tolist())
            self.span_lat = (lat_max.tolist(), lat_sum.tolist())

    def tree(self) -> None:
        """:meth:`rec` from the root in C (:func:`milp_partition.hetero.native.tree_run`): the same operations in the same
        order, so the same nodes, pruning, leaves and counters (the tests compare both).  What :meth:`rec` computes in
        Python along the way is asked through callbacks at the same points: a pair row of the previous set
        (:meth:`prev_arrays`' cache), a cap level's tables (:meth:`level_fits`' build), a leaf (:meth:`_Search.leaf`),
        the clock, the device floors (:meth:`raise_floors`) and the Lagrangian rows (:meth:`later_sums`)."""
        srch = self.search
        if srch.stop or srch.abort:
            return
        arrays, ints, doubles = self.tree_inputs()
        nodes, ticks, tnodes, entries, stop, abort, _value = native.tree_run(arrays, ints, doubles, self.tree_callbacks())
        srch.out.nodes, srch.ticks, srch.triple_nodes, srch.entries = nodes, ticks, tnodes, entries
        srch.stop = srch.stop or bool(stop)
        srch.abort = srch.abort or bool(abort)

    def tree_inputs(self) -> tuple[tuple[np.ndarray, ...], tuple[int, ...], tuple[float, ...]]:
        """The arrays, whole numbers and doubles :func:`milp_partition.hetero.native.tree_run` reads (:meth:`tree`), in
        its argument order."""
        srch, tb, p, L = self.search, self.tb, self.p, self.L
        sets = self.sets
        cq, aq, uq, arq = (np.ascontiguousarray(x, dtype=float) for x in self.set_term_lists())
        f64 = np.float64
        one = np.zeros(1)
        two_np = self.two_stack if self.two else one
        two_none = (~np.isfinite(two_np).any(axis=2)).astype(np.int8) if self.two else np.zeros(1, dtype=np.int8)
        span = self.span
        span_arr = list(self.span_np) if span else [one] * 4
        arrays = (
            cq,
            aq,
            uq,
            arq,
            np.ascontiguousarray(self.usage_arr, dtype=f64).reshape(len(sets), len(self.lams)),
            np.ascontiguousarray(self.caps_tol, dtype=f64),
            np.array(self.lam_cap, dtype=f64),
            np.ascontiguousarray(self.rmax_np, dtype=f64),
            np.ascontiguousarray(self.rsum_np, dtype=f64),
            np.ascontiguousarray(self.suffix_np, dtype=f64),
            two_np,
            self.ka_np,
            self.kb_np,
            self.set_bits_np,
            self.allowed_np,
            np.ascontiguousarray(self.twoq, dtype=np.int64) if self.two else np.zeros(4, dtype=np.int64),
            np.array(self.set_region, dtype=np.int64) if span else np.zeros(1, dtype=np.int64),
            two_none,
            *span_arr,
            self.acr_np if span else one,
            np.array(self.level_caps, dtype=f64),
            self.pair_tab,
            self.pair_have,
        )
        ints = (
            p,
            L + 1,
            len(sets),
            len(self.lams),
            self.cap0 + 1 if self.two else 1,
            int(self.two),
            int(span),
            int(self.lag_g is not None),
            int(self.sound),
            int(srch.balanced),
            int(self.ar_todo or self.ystar_todo),
            self.d,
            self.m,
            srch.out.nodes,
            srch.ticks,
            srch.triple_nodes,
            -1 if srch.node_cap is None else srch.node_cap,
            self.nodes0,
            YSTAR_AFTER_NODES if YSTAR_AFTER_NODES is not None else 0,
            self.level_after,
            TICK,
            srch.entries,
            ENTRY_TICK,
        )
        doubles = (
            1 - PRUNE_REL,
            srch.out.value,
            self.floor_y,
            self.ar_floor,
            tb.umin,
            tb.tmin,
            self.xmin_all,
            tb.cminpre[L],
            float(self.cap1),
            self.y_cap_masks,
        )

        return arrays, ints, doubles

    def tree_callbacks(self) -> tuple[Callable[..., object], ...]:
        """What :func:`milp_partition.hetero.native.tree_run` asks Python for (:meth:`tree`), in its argument order."""
        srch, tb, p, sets, d, m = self.search, self.tb, self.p, self.sets, self.d, self.m
        f64 = np.float64
        one = np.zeros(1)

        def pair(qp: int, s: int) -> tuple[bool]:  # prev_arrays' rows into pair_tab, and whether computed now
            return (self.pair_row(sets[qp], s)[1],)

        def level(j: int) -> tuple[np.ndarray, np.ndarray]:  # level_fits' build of level j
            masks = self.masks_by_k & (self.ylb_arr <= self.level_caps[j] * self.tol)
            self.level_built = True
            sfx = np.ascontiguousarray(self.lambda_array(masks), dtype=f64)
            if self.two:
                self.two_tables(masks)
            return sfx, (self.last_two_stack if self.two else one)

        def leaf(ch: list[tuple[int, int, int]], lb: float) -> tuple[float, bool]:
            srch.leaf(tb, d, p, m, [(s, e, sets[q]) for s, e, q in ch], lb)
            return srch.out.value, srch.stop

        def raise_floors() -> tuple[float, float, list[float]]:
            self.raise_floors()
            return self.floor_y, self.ar_floor, list(self.level_caps)

        def lag(i: int, used: list[float]) -> tuple[np.ndarray, np.ndarray]:
            b, rs = self.lag_rest(i, used)
            return np.ascontiguousarray(b, dtype=f64), np.ascontiguousarray(rs, dtype=f64)

        return (pair, level, leaf, srch.budget.expired, raise_floors, lag)

    def later_sums(self, i: int, rest: int, used: list[float]) -> tuple[list[list[float]] | None, np.ndarray, list[float]]:
        """For :meth:`rec` at stage i: the Lagrangian bounds of the later stages' sum of y under the devices the decided
        stages leave, per end and set (None: not used), and per end the least sum of the later stages' y (array, list)."""
        if rest and self.lag_g is not None:
            lag_arr, rs_row = self.lag_rest(i, used)
            return lag_arr.tolist(), rs_row, rs_row.tolist()
        return None, self.rsum_np[i + 1], self.rsum_l[i + 1]

    def end_order(self, s: int, rest: int) -> list[int]:
        """The ends of a stage from layer s with ``rest`` stages after it, in :meth:`rec`'s order: increasing, or in
        phase 1 (balanced) nearest the even split first."""
        L = self.L
        ends = list(range(s + 1, L - rest + 1)) if rest else [L]
        if self.search.balanced and rest:
            aim = s + (L - s) / (rest + 1)
            ends.sort(key=lambda x: abs(x - aim))
        return ends

    def past_room(self, base_min_c: float, armax: float) -> bool:
        """Whether the ends after this one can be skipped (:meth:`rec`, an end where no allowed set is below the incumbent):
        compute grows with the end, so once even the cheapest set's compute ``base_min_c`` is over the incumbent's room,
        every later end is too (not in phase 1's balanced order)."""
        tb, srch = self.tb, self.search
        return (
            not srch.balanced
            and tb.tmin >= 0
            and math.isfinite(base_min_c)
            and (self.m - 1) * (base_min_c + self.xmin_all) + tb.cminpre[self.L] + tb.umin + armax > srch.out.value
        )

    def span_tables(self) -> None:
        """The later stages' least max and sum of y when a boundary among them crosses regions (:meth:`span_lb`).

        Stage k of a plan whose boundary k-1|k crosses (replica r of stage k-1 in one region, replica r of stage k in
        another) has a backward send b_k at least the least crossing one, bcr[s0], beside its own least; stage k-1's
        forward send a_{k-1} at least acr[e].  Per stage, its least y over the configurations the caps allow (as
        :func:`_bottleneck_arr`), with the crossing backward send (Yin) or forward send (Yout); then exact dynamic
        programs over the splits of layers s0..L-1 into stages k..P-1:

        In[k][s0]  = min_e  max/sum( Yin[k][s0][e], N[k+1][e] )        (the boundary k-1|k crosses)
        Lat[k][s0] = min_e  min( max/sum( Y[k][s0][e], Lat[k+1][e] ), max/sum( Yout[k][s0][e], In[k+1][e] ) )
                                                                         (some boundary after stage k's start)

        with N the plain programs (``rmax_np``, ``rsum_np``), In[P] = Lat[P] = inf.  Each is a lower bound of its
        max or sum of y over every completion with such a crossing (one crossing kept; more only add)."""
        tb = self.tb
        acr, bcr = self.search.cross_sends(tb)
        self.acr = acr
        key = ("span_inc", self.sound)  # (they read the tables and the sends only: once per micro-batch size)
        if key not in tb.misc:
            amin = np.array(self.amin_c)  # [c][e]
            _a, bmin_c = tb.misc[("ab", self.sound)]
            bmin = np.array([[*row, 0.0] for row in bmin_c])  # [c][s0]
            tb.misc[key] = (
                np.maximum(np.array(acr)[None, :] - amin, 0.0),  # [c][e]
                np.maximum(np.array(bcr)[None, :] - bmin, 0.0),  # [c][s0]
                np.array(acr),
            )
        inc_a, inc_b, self.acr_np = tb.misc[key]
        nmax, nsum = self.rmax_np, self.rsum_np
        args = (self.masks_by_k, self.ylb_arr, self.ymin_np, inc_a, inc_b, self.ka_np, self.kb_np, nmax, nsum)
        # the same values as its numpy form; upper: ylb (each ylb_part, tested) and so ymin are inf wherever e <= s0
        got = native.span_dp(*args, upper=True)
        in_max, in_sum, lat_max, lat_sum = got if got is not None else _span_programs(*args)
        self.span_np = (in_max, in_sum, lat_max, lat_sum)  # (as lists for rec: :meth:`rec_lists`)

    def span_lb(
        self,
        i: int,
        e: int,
        ci: float,
        a_here: float,
        b_here: float,
        ymax2: float,
        ysum2: float,
        restmax: float,
        restsum: float,
        u: float,
        ar: float,
    ) -> float:
        """A lower bound of every completion of a node whose decided stages 0..i (stage i over layers ..e-1, its compute
        ``ci``, least sends ``a_here``, ``b_here``) all stay in one region R, in a search whose plans span two regions
        (:meth:`_Search.span_columns`); ``restmax``, ``restsum``: the node's bounds of the later stages' max and sum of y;
        ``u``, ``ar``: the decided stages' U and largest all-reduce.

        **Sound.**  Let j > i be the first stage with a replica outside R (it exists: the plan spans two regions).
        Stage j-1 is all in R, so the replicas r of stages j-1 and j in different regions send across: a_{j-1} >=
        acr and b_j >= bcr at that boundary.  Either j = i + 1 (stage i's y takes acr[e], the later stages' the In
        programs of :meth:`span_tables`) or j > i + 1 (the Lat programs); the bound is the lesser of the two."""
        ka, kb = self.x_coef[i]
        m1 = self.m - 1
        floor_y = self.floor_y
        umin, ar_floor = self.tb.umin, self.ar_floor
        tail = (u if u >= umin else umin) + (ar if ar >= ar_floor else ar_floor)
        in_max, in_sum = self.span_in
        lat_max, lat_sum = self.span_lat
        acr = self.acr[e]
        y1 = ci + (ka * (acr if acr > a_here else a_here) + kb * b_here)
        base1 = max(restmax, in_max[i + 1][e], floor_y, ymax2, y1)
        lb1 = m1 * base1 + ysum2 + y1 + max(restsum, in_sum[i + 1][e]) + tail
        y2 = ci + (ka * a_here + kb * b_here)
        base2 = max(restmax, lat_max[i + 1][e], floor_y, ymax2, y2)
        lb2 = m1 * base2 + ysum2 + y2 + max(restsum, lat_sum[i + 1][e]) + tail
        return lb1 if lb1 < lb2 else lb2

    def build_masks(self, y_cap: float, ar_cap: float) -> np.ndarray:
        """[k][c][s0][e] -> configuration c may serve stage k over layers s0..e-1 in a plan better than the incumbent
        (it fits, its y_k stays under y_cap, its tp lets the all-reduce stay under ar_cap)."""
        ok = self.ylb_arr <= y_cap * self.tol
        if self.min_ar is not None:
            # some tp t <= c's with min_ar[t] <= the cap: the least of those tables at most the cap (the same answer)
            ok &= (self.min_ar_by_cfg() <= ar_cap * self.tol)[None]
        return ok

    def min_ar_by_cfg(self) -> np.ndarray:
        """[c][s0][e]: the least all-reduce table (:meth:`_Search.min_ar_table`) over the tps up to configuration c's,
        kept per D on the tables (:meth:`build_masks`)."""
        key = ("min_ar_by_cfg", self.d)
        got = self.tb.misc.get(key)
        if got is None:
            assert self.min_ar is not None
            rows = []
            for _j, tp in self.tb.cfgs:
                tabs = [arr for t, arr in self.min_ar.items() if t <= tp]
                rows.append(np.minimum.reduce(tabs) if tabs else np.full((self.L + 1, self.L + 1), math.inf))
            got = self.tb.misc[key] = np.array(rows)
        return cast(np.ndarray, got)

    def col_ar_masks(self, ar_cap: float) -> np.ndarray:
        """[c][s0][e]: configuration c = (column j, tp) may be in a stage over layers s0..e-1 whose all-reduce stays
        under ar_cap: some least tp t <= tp of the stage with :meth:`_Search.col_ar_table`'s bound of column j at most
        ar_cap."""
        assert self.col_ar is not None
        ok = {t: arr <= ar_cap * self.tol for t, arr in self.col_ar.items()}
        out = np.zeros((self.nk, self.L + 1, self.L + 1), dtype=bool)
        for c, (j, tp) in enumerate(self.tb.cfgs):
            for t, arr in ok.items():
                if t <= tp:
                    out[c] |= arr[j]
        return out

    def allreduce_floor(self) -> float:
        """A lower bound on T_sync of every plan of the triple below the incumbent, under the two columns' devices: the
        largest A found (by bisection between T_sync's floor and the triple's all-reduce cap) at which the two-column
        device table of the configurations :meth:`col_ar_masks` allows under A (and the caps allow) holds no plan.

        Sound: a plan below the incumbent with T_sync at most such an A has every stage's all-reduce at most A, so each
        replica's configuration passes :meth:`col_ar_masks` (A) and the caps, and the exact two-column relaxation
        (:meth:`two_tables`) would hold it; feasibility only grows with A."""
        lo, hi = self.ar_floor, self.ar_cap_masks
        if self.d > 1 and self.col_ar is None:
            self.col_ar = self.search.col_ar_table(self.tb, self.d)
        if self.col_ar is None or not (math.isfinite(hi) and hi > lo):
            return lo
        if not self.two_fit_masks(self.masks_by_k & self.col_ar_masks(lo)[None]):
            steps = 0
            while hi - lo > YSTAR_REL * self.search.out.value and steps < 24:
                mid = (lo + hi) / 2
                if self.two_fit_masks(self.masks_by_k & self.col_ar_masks(mid)[None]):
                    hi = mid
                else:
                    lo = mid
                steps += 1
        return lo

    def two_fit_masks(self, masks: np.ndarray) -> bool:
        """Whether the two-column device table of the configurations ``masks`` allows holds a plan (its first row
        only: :meth:`two_tables` without the per-stage lists)."""
        self.two_tables(masks, lists=False)
        return bool(self.last_two_np[0][0, self.cap0] <= self.cap1)

    def tighten_caps(self) -> bool:
        """The caps from the incumbent, tightened by the bottleneck programs until they stop moving; False when
        they prune the whole triple.

        A plan better than the incumbent has (m - 1) max_i y_i + sum_i y_i + U + T_sync < incumbent with
        sum_i y_i >= rsum[0][0] and at least the Lagrangian bound (:meth:`lagrange`), max_i y_i >= max(rmax[0][0],
        theta + least send), T_sync >= the all-reduce floor.
        """
        tb, L, m, d, theta, xmin_all, ar_floor = self.tb, self.L, self.m, self.d, self.theta, self.xmin_all, self.ar_floor
        out = self.search.out
        inf = math.inf
        y_cap, ar_cap = self.y_hi, self.ar_hi
        for _round in range(SPAN_CAP_ROUNDS if self.spanning else CAP_ROUNDS):
            masks_by_k = self.build_masks(y_cap, ar_cap)
            self.y_cap_masks, self.ar_cap_masks = y_cap, ar_cap
            # (upper: ylb_part builds every stage table inf wherever e <= s0; tested)
            rmax_arr, rsum_arr, ymin = _bottleneck_arr(self.ylb_arr, masks_by_k, L, True)
            r00, s00 = float(rmax_arr[0][0]), float(rsum_arr[0][0])
            if not math.isfinite(s00):
                return False  # no split of the layers obeys the caps
            ymax_lb = max(r00, theta + xmin_all)
            if ((m - 1) * ymax_lb + s00 + tb.umin + ar_floor) * (1 - PRUNE_REL) >= out.value:
                return False  # every plan of this (mbs, D, P) is at least the incumbent (before the Lagrangian)
            lag = self.lagrange(masks_by_k, s00)  # the sum of y under the device budget (Lagrangian)
            lag_gain = lag - s00
            s00 = max(s00, lag)
            if ((m - 1) * ymax_lb + s00 + tb.umin + ar_floor) * (1 - PRUNE_REL) >= out.value:
                return False  # every plan of this (mbs, D, P) is at least the incumbent
            y_new = math.inf if m == 1 else (out.value - s00 - tb.umin - ar_floor) / (m - 1)
            ar_new = (out.value - ((m - 1) * ymax_lb + s00 + tb.umin)) if d > 1 else inf
            if y_new >= y_cap * (1 - 1e-6) and ar_new >= ar_cap * (1 - 1e-6):
                break
            y_cap, ar_cap = min(y_cap, y_new), min(ar_cap, ar_new)
        self.masks_by_k = masks_by_k
        self.ymin_np = ymin  # [k][s0][e] under these masks (:meth:`span_tables`)
        if lag_gain <= LAGRANGE_KEEP * s00:
            self.lag_g = None  # the Lagrangian barely moves the root: the tree does not pay for it at every node
        self.level_caps = [self.y_cap_masks * f for f in LEVEL_FRACTIONS]
        self.rmax_np, self.rsum_np = np.ascontiguousarray(rmax_arr), np.ascontiguousarray(rsum_arr)  # (lists: rec_lists)
        return True

    def ymax_floor(self) -> float:
        """A lower bound on max_i y_i of every plan of the triple below the incumbent, under the two columns' devices:
        the largest Y found (by bisection between the floor and the triple's cap) at which the two-column device
        table of the configurations with ylb <= Y (and allowed by the caps) holds no plan.

        Sound: a plan below the incumbent whose max_i y_i were at most such a Y has every replica's configuration c
        with ylb[k][c][s][e] <= y_k <= Y (:meth:`_Search.stage_ylb`) and allowed by the caps, so the exact two-column
        relaxation (:meth:`two_tables`, least tp per column) would hold it.  Feasibility only grows with Y (the tables
        only gain configurations), so every Y below a failing one fails too."""
        lo, hi = self.floor_y, self.y_cap_masks
        if not (math.isfinite(hi) and hi > lo):
            return lo
        if not self.two_fit_under(lo):
            steps = 0
            while (self.m - 1) * (hi - lo) > YSTAR_REL * self.search.out.value and steps < 24:
                mid = (lo + hi) / 2
                if self.two_fit_under(mid):
                    hi = mid
                else:
                    lo = mid
                steps += 1
        return lo

    def two_fit_under(self, y: float) -> bool:
        """Whether the two-column device table of the configurations with ylb <= y (among the caps') holds a plan."""
        return self.two_fit_masks(self.masks_by_k & (self.ylb_arr <= y * self.tol))

    def lagrange(self, masks_by_k: np.ndarray, s00: float) -> float:
        """A lower bound on sum_i y_i of every plan of the triple below the incumbent, under the device budget: the
        largest G[n][0][0] - mu_n B_t (:func:`_lagrange_suffix`; configurations where ``masks_by_k`` allows them) over
        the weight vectors t of :meth:`_shared_of_d` (budget B_t) one over the counts and each column alone, and
        multipliers mu = f s00 / B_t, f in :data:`LAGRANGE_FACTORS` (one over the counts) or
        :data:`LAGRANGE_FACTORS_COLUMN`.  Keeps, per weight vector, the tables of its best multiplier for the tree
        (:meth:`lag_rest`).  With :data:`LAGRANGE_BOUND` off: -inf, and no tables."""
        if not self.lag_pairs:
            return -math.inf
        ylb = np.where(masks_by_k, self.ylb_arr, math.inf)
        scale = s00 if s00 > 0 else 1e-12
        tf = self.lag_pairs
        ti = np.array([t for t, _f in tf], dtype=np.int64)
        capt = np.array(self.lam_cap)[ti] * (1 + 1e-12)
        mu = np.array([f for _t, f in tf]) * scale / np.array(self.lam_cap)[ti]
        g = _lagrange_suffix(ylb, mu[:, None] * self.lag_w[ti], self.L)
        root = g[:, 0, 0] - mu * capt
        keep = [int(np.flatnonzero(ti == t)[np.argmax(root[ti == t])]) for t in sorted(set(ti.tolist()))]
        self.lag_g = np.ascontiguousarray(g[keep])
        self.lag_mu, self.lag_t, self.lag_capt = mu[keep], ti[keep], capt[keep]
        return float(root.max())

    def lag_rest(self, i: int, used: list[float]) -> tuple[np.ndarray, np.ndarray]:
        """At a node of stage i with the decided stages' weighted devices ``used`` (per weight vector): B[e][q], a lower
        bound on the sum of y of stages i+1.. from layer e when stage i takes set q (the Lagrangian bound of
        :meth:`lagrange` on the budget that stages 0..i leave: G[n][i+1][e] - mu_n (B_t - used_t - usage_t(q)), the
        best n), and per e the larger of the bottleneck program's least sum and the least of B over the sets."""
        lag_t = self.lag_t
        left = self.lag_capt - np.array(used)[lag_t]  # [n]
        coef = self.lag_mu[:, None] * (left[:, None] - self.usage_arr[:, lag_t].T)  # [n][q]
        assert self.lag_g is not None
        b = (self.lag_g[:, i + 1, :][:, :, None] - coef[:, None, :]).max(axis=0)  # [e][q]
        return b, np.maximum(self.rsum_np[i + 1], b.min(axis=1))

    def lambda_array(self, masks_by_k: np.ndarray, bits: np.ndarray | None = None) -> np.ndarray:
        """sfx[k][t][s0] (:meth:`lambda_suffix`) for the configurations ``masks_by_k`` allows, kept in
        :attr:`last_sfx`; ``bits`` as :func:`_lambda_suffix`'s."""
        self.last_sfx = sfx = _lambda_suffix(masks_by_k, self.lag_w, self.L, bits)  # (lag_w: D lambda_t[column] tp)
        return sfx

    def lambda_tables(self, masks_by_k: np.ndarray) -> list[list[list[float]]]:
        """suffix[t][k][s0] (:meth:`lambda_array`) as lists (:meth:`level_fits` of :meth:`rec`)."""
        sfx = self.lambda_array(masks_by_k)
        return [[sfx[k, t].tolist() for k in range(self.p + 1)] for t in range(len(self.lams))]

    def lambda_suffix(self) -> bool:
        """The lambda-weighted device suffix tables under the caps; False when no plan fits the devices.

        suffix[t][k][s0] = least lambda_t-weighted devices of stages k..P-1 over layers s0..L-1, each stage's D
        replicas on its cheapest allowed configuration (all weight vectors and configurations at once), in
        :attr:`suffix_np` [k][t][s0].  With it :attr:`allowed_np` [k][s0][e]: per stage k, first layer s0, end e, the
        configurations that pass the caps as one integer, bit c set when configuration c passes (a set passes when
        all its bits do), for :meth:`scan` and the C tree.
        """
        self.allowed_np = np.empty((self.p, self.L + 1, self.L + 1), dtype=np.int64)
        self.suffix_np = self.lambda_array(self.masks_by_k, self.allowed_np)
        if (self.suffix_np[0, :, 0] > self.caps_tol).any():
            return False  # no plan of this (mbs, D, P) within the devices beats the incumbent
        return True

    def two_suffix(self) -> bool:
        """Two columns: the budget relaxation solved exactly; False when the two columns hold no better plan.

        two_sfx[k][s0][a] = least devices of column 1 that stages k..P-1 over layers s0..L-1 need with at most a
        devices of column 0 (each replica on an allowed configuration; per column the least tp is the cheapest).
        A stage over s0..e-1 whose allowed configurations' least tps are (t0, t1) puts n of its D replicas on column 0
        and D - n on column 1: two_sfx[k][s0][a] = min over e and n of two_sfx[k+1][e][a - n t0] + (D - n) t1.  That
        step depends on (e, t0, t1), not on s0: it is computed once per (t0, t1) for every e and n at once (numpy),
        then each (s0, e) picks its pair's row.
        """
        self.two_sfx = two_sfx = self.two_tables(self.masks_by_k)
        self.two_np, self.two_stack = self.last_two_np, self.last_two_stack
        first = two_sfx[0][0]
        if first is None or first[self.cap0] > self.cap1:
            return False  # the two columns cannot hold any plan of this (mbs, D, P) that beats the incumbent
        return True

    def two_tables(self, masks_by_k: np.ndarray, lists: bool = True) -> list[list[np.ndarray | None]]:
        """two_sfx[k][s0] (:meth:`two_suffix`) for the configurations ``masks_by_k`` allows (None: no completion); the
        same values as arrays [k][s0][a] in :attr:`last_two_np` (an all-inf row where None).  ``lists=False``: the
        arrays only (the lists left empty)."""
        tb, L, p, d, nk, cap0 = self.tb, self.L, self.p, self.d, self.nk, self.cap0
        inf = math.inf
        two_sfx: list[list[np.ndarray | None]] = [[None] * (L + 1) for _ in range(p + 1)]
        two_sfx[p][L] = np.zeros(cap0 + 1)
        big = 1 << 20
        tps0 = [(c, tb.cfgs[c][1]) for c in range(nk) if tb.cfgs[c][0] == 0]
        tps1 = [(c, tb.cfgs[c][1]) for c in range(nk) if tb.cfgs[c][0] == 1]
        combos = [(t0, t1) for t0 in [0, *sorted({t for _c, t in tps0})] for t1 in [0, *sorted({t for _c, t in tps1})]]
        combos = [(t0, t1) for t0, t1 in combos if t0 or t1]
        cidx = np.full((5, 5), -1)
        for i, (t0, t1) in enumerate(combos):
            cidx[t0, t1] = i
        # [k][s0][a]: two_sfx[k] (all inf where None) as one array, for :meth:`scan` and the C tree (each stage written
        # in place where the C stage runs)
        stack = np.full((p + 1, L + 1, cap0 + 1), inf)
        stack[p, L] = 0.0
        cur = stack[p]
        layers = [cur] * (p + 1)
        # least allowed tp per column over [k][s0][e] (0: the column has no allowed configuration there), every stage
        # at once
        least = []
        for group in (tps0, tps1):
            if group:
                cs = [c for c, _tp in group]
                tpv = np.array([tp for _c, tp in group])[None, :, None, None]
                tm = np.where(masks_by_k[:, cs], tpv, big).min(axis=1)
                tm[tm == big] = 0
            else:
                tm = np.zeros((p, L + 1, L + 1), dtype=int)
            least.append(tm)
        if not lists and cap0 + 1 >= REACH_MIN_WIDTH:
            # the first row only: the states a split from layer 0 reaches through allowed (s0, e) pairs, stage by stage
            # (the others' rows are never read from it); the pairs of every other first layer are dropped (0, 0)
            reach = np.zeros(L + 1, dtype=bool)
            reach[0] = True
            for k in range(p):
                least[0][k][~reach], least[1][k][~reach] = 0, 0
                reach = ((least[0][k] > 0) | (least[1][k] > 0)).any(axis=0)
        for k in range(p - 1, -1, -1):
            t0m, t1m = least[0][k], least[1][k]
            nxt = cur  # [e][a]: two_sfx[k + 1][e] (inf where None)
            fast = native.two_layer(nxt, t0m, t1m, d, stack[k])  # the same values as the numpy lines below
            if fast is not None:
                cur = fast
            else:
                cur = stack[k]
                cur[:] = self._two_layer_numpy(nxt, t0m, t1m, cidx, combos)
            cur[L - (p - k) + 1 :] = inf  # stage k starts at L - (p - k) at the latest
            if lists:
                for s0 in np.flatnonzero(np.isfinite(cur).any(axis=1)).tolist():
                    two_sfx[k][s0] = cur[s0]
            layers[k] = cur
        self.last_two_np = layers
        self.last_two_stack = stack
        return two_sfx

    def _two_layer_numpy(
        self, nxt: np.ndarray, t0m: np.ndarray, t1m: np.ndarray, cidx: np.ndarray, combos: list[tuple[int, int]]
    ) -> np.ndarray:
        """One stage of :meth:`two_tables` in numpy: [s0][a] = the least over e of the step of (t0m, t1m)[s0][e]."""
        L, d, cap0, inf = self.L, self.d, self.cap0, math.inf
        e_idx = np.arange(L + 1)
        # per (t0, t1): conv[e][a] = min over n of nxt[e][a - n t0] + (D - n) t1, n replicas on column 0 (needs
        # t0 when n > 0), D - n on column 1 (needs t1 when n < D)
        kid = cidx[t0m, t1m]  # [s0][e]; -1 (no configuration) picks the last, all-inf row
        convs = np.full((len(combos) + 1, L + 1, cap0 + 1), inf)  # the last row: no configuration allowed
        for i in np.unique(kid).tolist():
            if i < 0:
                continue
            convs[i] = _two_step(nxt, d, *combos[i])
        return np.asarray(convs[kid, e_idx[None, :]].min(axis=1))  # [s0][a]

    def two_use(self, g: np.ndarray, q: tuple[int, ...]) -> np.ndarray:
        """g[a] = least column-1 devices of the decided stages with at most a of column 0, after adding set q: n of
        the D replicas on q's column-0 member (tp t0), D - n on its column-1 member (tp t1), every n at once."""
        t0, t1, ns = self.two_steps[q]
        if len(ns):
            fast = native.two_use(g, self.d, t0, t1, int(ns[0]), int(ns[-1]))  # ns is a range: the same values in C
            if fast is not None:
                return fast
        got = self.two_use_arrays.get(q)
        if got is None:
            idx = self.avec[None, :] - ns[:, None] * t0  # [n][a]
            add = np.where(idx >= 0, ((self.d - ns) * t1)[:, None].astype(float), math.inf)
            got = self.two_use_arrays[q] = (np.maximum(idx, 0), add)
        idx_c, add = got
        # the same sums as g[a - n t0] + (D - n) t1 where a - n t0 >= 0, inf elsewhere
        return np.asarray((g[idx_c] + add).min(axis=0))

    def two_ok(self, g: np.ndarray, k: int, e: int) -> bool:
        """Some completion of stages k.. from layer e fits the two columns with the decided stages' use g."""
        nxt = self.two_sfx[k][e]
        if nxt is None:
            return False
        fast = native.two_fits(g, nxt)  # the same sums and minimum in C
        return bool((fast if fast is not None else (g + nxt[::-1]).min()) <= self.cap1)

    def size_a(self, e: int) -> float:
        """Bytes of the forward send of a stage ending at layer e."""
        tb = self.tb
        return FLOAT_BYTES * tb.mbs * tb.out[e - 1]

    def size_b(self, s: int) -> float:
        """Bytes of the backward send of a stage starting at layer s."""
        tb = self.tb
        return FLOAT_BYTES * tb.mbs * (tb.out[s - 1] if self.sound else tb.out[s])

    def set_terms_at(self, last: bool, s: int, e: int) -> list[tuple[tuple[int, ...], float, float, float, float]]:
        """Per set of :attr:`sets` (in order): (set, compute, least forward send (0 for the last stage), update, least
        all-reduce) over layers s..e-1, read from :meth:`set_term_lists` (cached per (s, e))."""
        table = self.set_terms[1 if last else 0]
        key = s * (self.L + 1) + e
        got = table.get(key)
        if got is None:
            cq, aq, uq, arq = self.set_term_lists()
            a_row = aq[:, e].tolist() if not last else [0.0] * len(self.sets)
            got = table[key] = list(zip(self.sets, cq[:, s, e].tolist(), a_row, uq[:, s].tolist(), arq[:, s, e].tolist()))
        return got

    def set_term_lists(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per set of :attr:`sets`: compute [q][s][e], least forward send [q][e], update [q][s] (each the maximum over
        the set's members: the same values as member by member) and a lower bound on the all-reduce [q][s][e]
        (:func:`set_allreduce_lb`).  Built once per micro-batch size and D, in numpy."""
        key = ("setlists", self.d)
        got = self.tb.misc.get(key)
        if got is None:
            tb, nk = self.tb, self.nk
            members_key = ("setmembers", self.sound, tuple(self.sets))  # (the sets' maxima read neither D nor P)
            if members_key not in tb.misc:
                comp = np.stack([tb.comp_matrix(c) for c in range(nk)])  # [c][s][e]
                amin = np.array(self.amin_c)  # [c][e]
                upd = np.array([[*tb.upd[c], 0.0] for c in range(nk)])  # [c][s] (s = L: no stage starts there)
                members = [list(q) for q in self.sets]
                tb.misc[members_key] = (
                    np.stack([comp[m].max(axis=0) for m in members]),  # [q][s][e]
                    np.stack([amin[m].max(axis=0) for m in members]),  # [q][e]
                    np.stack([upd[m].max(axis=0) for m in members]),  # [q][s]
                )
            cq, aq, uq = tb.misc[members_key]
            # the all-reduce reads the weights, the sets' tps and columns and D, not the micro-batch size: shared by
            # the sizes with the same configurations (the sets follow from them and D; read only)
            ar_key = (self.d, tuple(tb.cfgs))
            arq = self.search.set_ar_cache.get(ar_key)
            if arq is None:
                arq = self.search.set_ar_cache[ar_key] = set_allreduce_lb(self.search, tb, self.sets, self.d)  # [q][s][e]
            got = tb.misc[key] = (cq, aq, uq, arq)
        return cast("tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]", got)

    def dominated(self, key: tuple[object, ...], vals: tuple[float, ...]) -> bool:
        """Whether a partial plan with these accumulated terms is dominated by one seen under the same key."""
        memo = self.memo
        seen = memo.get(key)
        if seen is None:
            memo[key] = [vals]
            return False
        for old in seen:
            if all(a <= b for a, b in zip(old, vals)):
                return True
        seen[:] = [old for old in seen if not all(b <= a for a, b in zip(old, vals))]
        seen.append(vals)
        return False

    def level_of(self, y_room: float) -> int | None:
        """The tightest level whose cap is at least ``y_room`` (the most the later stages' y may reach), or None."""
        best = None
        for j, cap in enumerate(self.level_caps):
            if cap * (1 - 1e-9) >= y_room:
                best = j
            else:
                break
        return best

    def level_fits(self, j: int, k: int, e: int, used2: list[float], g2: np.ndarray) -> bool:
        """Whether stages k.. from layer e can fit the devices with every stage's y under level j's cap (the lambda
        and two-column tables of the configurations that cap allows), after the decided stages' use.

        Before level j's tables are built, the tightest looser level already built is asked: its cap is larger, so it
        allows a superset of configurations and its tables are no higher entry by entry (minima over more, the same
        sums); when it rules the completion out, level j would too, and its tables are not built for this node."""
        got = self.level_cache.get(j)
        if got is None:
            looser = next((self.level_cache[jj] for jj in range(j - 1, -1, -1) if jj in self.level_cache), None)
            if looser is not None and not self._level_check(looser, k, e, used2, g2):
                return False
            cap = self.level_caps[j]
            masks = self.masks_by_k & (self.ylb_arr <= cap * self.tol)
            got = self.level_cache[j] = (self.lambda_tables(masks), self.two_tables(masks) if self.two else [])
            self.level_built = True
        return self._level_check(got, k, e, used2, g2)

    def _level_check(
        self,
        got: tuple[list[list[list[float]]], list[list[np.ndarray | None]]],
        k: int,
        e: int,
        used2: list[float],
        g2: np.ndarray,
    ) -> bool:
        """:meth:`level_fits`' test on one level's tables."""
        suffix, two_sfx = got
        caps = self.lam_cap
        if any(used2[t] + suffix[t][k][e] > caps[t] * (1 + 1e-12) for t in range(len(caps))):
            return False
        if self.two:
            nxt = two_sfx[k][e]
            if nxt is None:
                return False
            fast = native.two_fits(g2, nxt)
            if (fast if fast is not None else (g2 + nxt[::-1]).min()) > self.cap1:
                return False
        return True

    def scan(
        self,
        i: int,
        s: int,
        ends: list[int],
        prev: tuple[np.ndarray, np.ndarray, np.ndarray],
        used: list[float],
        umax: float,
        armax: float,
        g_used: np.ndarray,
        restsum: np.ndarray,
    ) -> tuple[list[list[int]], list[float], list[float]]:
        """The (end, set) pairs node (i, s) keeps, every end of ``ends`` at once: per end e (in that order) the sets q
        allowed for stage i over layers s..e-1 (every member's bit in the triple's mask of (i, s, e)) whose bound (:meth:`rec`'s lb) is below the
        incumbent now and whose D replicas leave the later stages room in every weighted device budget (the test of
        :meth:`rec`) and, on two columns, the stages from e the devices (:meth:`two_use` then :meth:`two_ok`, with the
        decided stages' ``g_used``), in set order; the least lb (1 - PRUNE_REL) over the allowed sets (a NaN as -inf)
        and their least compute.  The same double operations in the same order as :meth:`rec`'s loop (so the same decisions); in C
        where the extension is built (:func:`milp_partition.hetero.native.stage_scan`), else numpy below.

        The incumbent only falls while the node runs: :meth:`rec` checks each kept pair's bound again (a pair dropped
        here is dropped there too), and the least bound tells whether any set was below the incumbent at the start of
        its end (the first such set in set order meets the incumbent of that start)."""
        if self.scan_const is None:  # the triple's fixed arrays (C-contiguous float64 / int64), once
            cq, aq, uq, arq = self.set_term_lists()
            self.scan_const = tuple(
                np.ascontiguousarray(x) for x in (cq, aq, uq, arq, self.set_bits_np, self.usage_arr, self.caps_tol)
            )
        cq, aq, uq, arq, set_bits, usage, caps = self.scan_const
        ymax2, ysum2, bhere = (np.ascontiguousarray(x, dtype=float) for x in prev)  # (already so: no copy)
        ka, kb = self.x_coef[i]
        last = i == self.p - 1
        scalars = (
            ka,
            kb,
            float(self.m - 1),
            self.floor_y,
            umax,
            armax,
            self.tb.umin,
            self.ar_floor,
            self.search.out.value,
            1 - PRUNE_REL,
        )
        if isinstance(ends, range):  # the usual case: a range, one array per (first, last) end kept
            ends_np = self.ends_cache.get((ends.start, ends.stop))
            if ends_np is None:
                ends_np = self.ends_cache[(ends.start, ends.stop)] = np.arange(ends.start, ends.stop, dtype=np.int64)
        else:
            ends_np = np.array(ends, dtype=np.int64)
        arrays = (
            cq,
            aq,
            uq,
            arq,
            set_bits,
            self.allowed_np[i, s],
            ymax2,
            ysum2,
            bhere,
            restsum,  # [e]: the later stages' least sum of y (:meth:`lag_rest`)
            self.rmax_np[i + 1],
            usage,
            np.array(used, dtype=float),
            self.suffix_np[i + 1],  # [t][s0]
            caps,
        )
        two = (g_used, self.twoq, self.two_np[i + 1], self.d, float(self.cap1)) if self.two else None
        if self.scan_out is None:  # reused: each call's rows are read into lists before the next call
            width, nq = self.L + 1, len(self.sets)
            self.scan_out = (
                np.empty((width, nq), dtype=np.int64),
                np.empty(width, dtype=np.int64),
                np.empty(width),
                np.empty(width),
            )
        fast = native.stage_scan(arrays, ends_np, s, last, scalars, two, self.scan_out)
        if fast is not None:
            cand, cnt, minlb, basemin = fast
            n = len(ends)  # the buffers' first n rows
            kept = [row[:c] for row, c in zip(cand[:n].tolist(), cnt[:n].tolist())]  # (one tolist, then list slices)
            return kept, minlb[:n].tolist(), basemin[:n].tolist()
        kept, minlbs, basemins = _stage_scan_numpy(arrays, ends_np, s, last, scalars)
        if self.two:  # the two-column test of rec (two_use, then two_ok), set by set
            sets = self.sets
            kept = [[qi for qi in row if self.two_ok(self.two_use(g_used, sets[qi]), i + 1, e)] for row, e in zip(kept, ends)]
        return kept, minlbs, basemins

    def prev_arrays(
        self, i: int, s: int, ymax: float, ysum: float, c_prev: float, b_prev: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per set q of :attr:`sets` for stage i (from layer s), three arrays: the max and the sum of the decided stages'
        y with stage i-1's y now known, and b_i.  Stage i-1's y needs its forward send, bounded with q
        (:meth:`_Search.pair_lb`, kept as rows per (previous set, s)); it does not depend on stage i's end, so it is
        computed once per call of :meth:`rec`: X_{i-1} (:meth:`_Search.x_of`: a, 2 a or a + b), y_{i-1}, the maximum
        and the sum elementwise, the same operations as scalar by scalar."""
        nq = len(self.sets)
        if i == 0:
            return np.full(nq, ymax, dtype=float), np.full(nq, ysum, dtype=float), np.zeros(nq)
        (a_prev, b_here), _fresh = self.pair_row(self.chosen[-1][2], s)
        p = self.p
        if i - 1 == 0:
            x = a_prev if (p <= 3 or self.sound) else 2 * a_prev
        else:  # a middle stage (stage i - 1 < p - 1 is never the last)
            x = a_prev + b_prev
        y_prev = c_prev + x
        return np.where(ymax >= y_prev, ymax, y_prev), ysum + y_prev, b_here

    def pair_row(self, q_prev: tuple[int, ...], s: int) -> tuple[tuple[np.ndarray, np.ndarray], bool]:
        """(a_{i-1}, b_i) per set of :attr:`sets` after stage i-1 on set ``q_prev`` ends at layer s (:meth:`_Search.pair_lb`),
        cached; and whether it was computed now (then :meth:`rec` reads the clock: on many columns a row is thousands of
        pair bounds)."""
        key = (q_prev, s)
        rows = self.pair_rows.get(key)
        if rows is not None:
            return rows, False
        srch, tb = self.search, self.tb
        sa, sb = self.size_a(s), self.size_b(s)
        got = [srch.pair_lb(tb, q_prev, q, sa, sb) for q in self.sets]
        rows = self.pair_rows[key] = (np.array([g[0] for g in got], dtype=float), np.array([g[1] for g in got], dtype=float))
        qp, nq = self.set_index[q_prev], len(self.sets)
        self.pair_tab[qp, s, :nq], self.pair_tab[qp, s, nq:] = rows
        self.pair_have[qp, s] = 1
        return rows, True

    def raise_floors(self) -> None:
        """Once the tree is past ``YSTAR_AFTER_NODES`` nodes: T_sync's floor under the devices
        (:meth:`allreduce_floor`) and max y's (:meth:`ymax_floor`), each raised once, and the cap levels placed between
        the latter and the cap (below it no plan fits)."""
        if self.ar_todo:
            self.ar_todo = False
            self.ar_floor = max(self.ar_floor, self.allreduce_floor())
        if self.ystar_todo:
            self.ystar_todo = False
            floor = self.ymax_floor()
            if floor > self.floor_y:
                self.floor_y = floor
                if not self.level_built:
                    self.level_caps = [floor + (self.y_cap_masks - floor) * f for f in YSTAR_LEVELS]

    def rec(
        self,
        i: int,
        s: int,
        ymax: float,
        ysum: float,
        c_prev: float,
        b_prev: float,
        umax: float,
        armax: float,
        used: list[float],
        g_used: np.ndarray,
    ) -> None:
        """Depth-first over stage i's end layer and reduced set, from layer s, with the decided stages' terms."""
        srch = self.search
        if srch.stop or srch.abort:
            return
        # the clock: every ENTRY_TICK calls, and where this call's pair row is new (many columns: thousands of bounds)
        srch.entries += 1
        if srch.entries >= ENTRY_TICK or (i > 0 and (self.chosen[-1][2], s) not in self.pair_rows):
            srch.entries = 0
            if srch.budget.expired():
                srch.stop = True
                return
        tb, p, m, two, two_sfx, chosen = self.tb, self.p, self.m, self.two, self.two_sfx, self.chosen
        rmax_l, umin = self.rmax_l, tb.umin
        # X_i = ka a_i + kb b_i (the same values as _Search.x_of: each coefficient is 0, 1 or 2)
        ka, kb = self.x_coef[i]
        rest = p - i - 1
        prev = self.prev_arrays(i, s, ymax, ysum, c_prev, b_prev)
        ymax2_l, ysum2_l, bhere_l = (x.tolist() for x in prev)
        # per set (by index): the decided stages' weighted devices with this stage's D replicas on the set
        used_l = (self.usage_arr + np.array(used)).tolist()  # [set][t] (the same sums as one by one)
        if (self.ar_todo or self.ystar_todo) and srch.out.nodes - self.nodes0 > cast(int, YSTAR_AFTER_NODES):
            self.raise_floors()
        floor_y, ar_floor = self.floor_y, self.ar_floor
        use_levels = m > 1 and 0 < self.y_cap_masks < math.inf and srch.out.nodes - self.nodes0 > self.level_after
        ends = self.end_order(s, rest)
        # every (end, set) pair at once: the sets each end keeps (bound and weighted devices), the least bound and the
        # least compute of the allowed sets (:meth:`scan`)
        lag_b, rs_row, rsum_row = self.later_sums(i, rest, used)
        cands, minlbs, basemins = self.scan(i, s, ends, prev, used, umax, armax, g_used, rs_row)
        last = i == p - 1
        span, set_region, status = self.span, self.set_region, self.span_stack[-1]
        for idx, e in enumerate(ends):
            srch.out.nodes += 1
            srch.ticks += 1
            srch.triple_nodes += 1
            if srch.node_cap is not None and srch.triple_nodes > srch.node_cap:
                srch.abort = True
                return
            if srch.ticks >= TICK:
                srch.ticks = 0
                if srch.budget.expired():
                    srch.stop = True
                    return
            if two and rest and two_sfx[i + 1][e] is None:
                continue  # no completion from layer e fits the devices under the incumbent
            kept = cands[idx]
            if not kept:  # most ends: the scan kept no set, so only the test that ends the loop
                if minlbs[idx] >= srch.out.value and self.past_room(basemins[idx], armax):
                    break
                continue
            restsum_e = rsum_row[e]  # least sum of the later stages' y (bottleneck programs, Lagrangian bound)
            restmax = rmax_l[i + 1][e]  # least max of the later stages' y
            base = restmax if restmax >= floor_y else floor_y
            value = srch.out.value
            any_ok = minlbs[idx] < value  # some allowed set's bound below the incumbent at this end's start
            base_min_c = basemins[idx]
            full = self.set_terms_at(last, s, e)
            for qi in kept:
                q, ci, a_here, u_q, ar_q = full[qi]
                ymax2, ysum2, b_here = ymax2_l[qi], ysum2_l[qi], bhere_l[qi]
                restsum = restsum_e
                if lag_b is not None and lag_b[e][qi] > restsum:
                    restsum = lag_b[e][qi]  # with this set's own devices
                yi = ci + (ka * a_here + kb * b_here)
                big = ymax2 if ymax2 >= yi else yi
                if base > big:
                    big = base
                u = umax if umax >= u_q else u_q
                ar = armax if armax >= ar_q else ar_q
                lb = (m - 1) * big + ysum2 + yi + restsum + (u if u >= umin else umin) + (ar if ar >= ar_floor else ar_floor)
                if lb * (1 - PRUNE_REL) >= value:
                    continue  # the incumbent fell since the scan
                # the decided stages in one region: a plan not covered (a leaf), or one whose crossing is to come
                region = (set_region[qi] if status in (-2, set_region[qi]) else -1) if span else -1
                if region >= 0 and (
                    rest == 0
                    or self.span_lb(i, e, ci, a_here, b_here, ymax2, ysum2, base, restsum, u, ar) * (1 - PRUNE_REL) >= value
                ):
                    continue
                used2 = used_l[qi]
                g2 = self.two_use(g_used, q) if two else g_used  # (the scan checked two_ok on it)
                if use_levels and rest:
                    # a completion below the incumbent has (m - 1) y_k below the room its other terms leave
                    others = ysum2 + yi + restsum + (u if u >= umin else umin) + (ar if ar >= ar_floor else ar_floor)
                    j = self.level_of((value / (1 - PRUNE_REL) - others) / (m - 1))
                    if j is not None and not self.level_fits(j, i + 1, e, used2, g2):
                        continue
                chosen.append((s, e, q))
                if rest == 0:
                    srch.leaf(tb, self.d, p, m, chosen, lb)
                    value = srch.out.value
                elif not self.dominated((i + 1, e, q, tuple(sorted(x[2] for x in chosen))), (ymax2, ysum2, ci, b_here, u, ar)):
                    self.span_stack.append(region)
                    self.rec(i + 1, e, ymax2, ysum2, ci, b_here, u, ar, used2, g2)
                    self.span_stack.pop()
                    value = srch.out.value
                chosen.pop()
                if srch.stop or srch.abort:
                    return
            if not any_ok and self.past_room(base_min_c, armax):
                break


def search(
    problem: HeteroProblem,
    budget: Budget,
    incumbent: float = math.inf,
    plan: HeteroPlan | None = None,
    min_devices: int = 0,
    regions: dict[str, str] | None = None,
) -> SearchOutcome:
    """Branch and bound (module docstring); ``incumbent``/``plan``: a verified plan to start from.  ``min_devices``:
    only the triples (mbs, D, P) with D P tp_max >= ``min_devices`` are searched (tp_max the largest tp of the micro-batch
    size), so the bound covers every plan of at least ``min_devices`` devices and none of fewer (the degree rule may
    then leave out a triple whose plans are matched by fewer devices: :mod:`milp_partition.hetero.spanning` states the
    use that stays sound).  ``regions``: each column's zone -> its region; where ``min_devices`` exceeds every region's
    devices, the plans it covers span two regions and a node whose decided stages stay in one is bounded with the
    crossing its completion must make (:meth:`_Triple.span_lb`; the bound then covers those plans only)."""
    srch = _Search(problem, budget, incumbent, plan)
    srch.min_devices = min_devices
    srch.regions = regions
    return srch.run()
