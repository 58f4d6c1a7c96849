"""A proven lower bound on the plans that use both regions, for a setting of one GPU kind in two regions.

The settings with one kind in several zones of two regions (``A100-40`` in us-central1-a, -b, -c, -f and us-west1-b)
have their optimum in one region: the links between regions are about five times slower.  Each region alone is
bounded by its pooled search (:func:`milp_partition.hetero.pooled.regional_plan`: a bound of every plan that stays in
the region); this module bounds the plans that use both, so that the setting's bound is the least of the regions'
bounds and this one, with no pooled search over both regions.

**Labels.**  Give each stage of a plan the label A or B when all its replicas lie in region A or B, else M (mixed).
The plan uses both regions exactly when some stage is M, or some stage is A and another B.  Then:

* a boundary between two stages of different labels **crosses**: some row r (replica r of every stage) has (k, r) and
  (k + 1, r) in different regions (A next to M: the M stage has a replica in B, the A stage's replica of its row is in
  A; likewise B next to M; A next to B: every row), so a_k >= sigma_x(4 beta o(last layer of S_k)) and
  b_{k+1} >= sigma_x(4 beta o(first layer of S_{k+1})) (``o(first - 1)`` under the sound objective), sigma_x(x) the
  least seconds of x bytes over every fit between zones of different regions (both directions, every pair of tps of
  the micro-batch size); every other send is at least sigma(x), the least over every pair of zones;
* a stage's all-reduce is at least the least bucketed ring of its weights at its least tp over the count-1 fits of
  its label: within A, within B, or (M: its ordered replica list has an adjacent pair in two regions) between them;
  and at least 0 (the formula's maximum starts at 0);
* the A stages' least tps sum to at most N_A // D (each of the D replicas of an A stage takes t_k devices of A at
  least), the B stages' to at most N_B // D;
* D = 1: no stage is M.

**Bound per (beta, D, P)** (T = (m - 1) max_i y_i + sum_i y_i + U + T_sync, y_i = C_i + X_i, m = ceil(B / (beta D))):
T_pp >= T_lo = (m - 1) Y + S + U_min, Y and S the least max and sum of y over every split (under the devices' tp
budget, no labels: exact dynamic programs over (stage, first layer, tp budget)), C_i at least the compute at the
stage's least tp t_i (the replica of that tp is one of the stage's, and must hold the layers with P - i micro-batches
in flight), X_i = ka a_i + kb b_i (the formula's doubling), U >= the least update of layer 0.  T_sync >= ar_lo, the
larger of the unlabelled floor (the least, over splits under the devices' tp budget, of the largest stage's least ring
over every count-1 fit) and the labelled one (the same over the labelled splits that use both regions, each stage's
ring over its label's fits, the A, B and total budgets).  Let theta = cap - T_lo.  A plan with T_sync >= theta has
T >= cap.  The others are split by T_sync into classes [lo, hi) from ar_lo to theta (:data:`LEVELS`); a plan of a
class has every stage's all-reduce below hi, so every stage's (layers, least tp, label) has its label's least ring
below hi: a dynamic program over (stage, first layer, A budget, B budget, total budget, labels of the previous, this
and the next stage, which labels were seen) gives the least max and sum of y over the labelled splits that use both
regions, with the crossing boundaries' sends at sigma_x (first with the total budget only, each A or B stage within
its region's: a relaxation, no higher and far cheaper), and the class is at least (m - 1) max y + sum y + U_min + lo.
The bound of the triple is the least of its classes and the cap (each term on its own least: the least of a
sum is at least the sum of the least terms), and the answer the least over the triples that hold a plan
(D P <= N), lowered by 1e-9 of itself (prefix sums and numpy's log2 against the formula's scalar arithmetic) and at
most ``cap_s``.  Rings are evaluated with numpy where the fit is well-conditioned (else no bound from that fit), the
bucket loop replayed with the formula's float operations and the weights summed as the formula sums them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from milp_partition.budget import Budget
from milp_partition.hetero.cost import memory_bytes
from milp_partition.hetero.pool import fit_parts, region_of
from milp_partition.hetero.problem import BUCKET_BYTES, FLOAT_BYTES, TP_DEGREES, HeteroProblem

#: Relative slack taken off the bound (prefix sums and numpy's log2 against the formula's scalar arithmetic).
SLACK_REL = 1e-9
#: A fit is read with numpy only where its bandwidth is at least this share of its terms' magnitudes.
CONDITION_REL = 1e-6
#: Where the T_sync classes of a triple end, as fractions of the way from its floor to the cap's threshold.
LEVELS = (0.25, 0.5, 0.75, 1.0)
#: Stage labels: all replicas in region A, all in region B, both (mixed).
LABEL_A, LABEL_B, LABEL_M = 0, 1, 2
#: Which labels a partial plan has shown: only A, only B, both regions (a stage M, or stages A and B).
SEEN_A, SEEN_B, SEEN_BOTH = 0, 1, 2


@dataclass(frozen=True)
class SpanningBound:
    """What :func:`spanning_bound` proved.

    Attributes
    ----------
    bound_s
        A lower bound on the iteration seconds of every plan with replicas in both regions, at most the cap
        (``None``: the budget ran out before every triple was bounded: no bound).
    triples
        (micro-batch size, D, P) triples that hold a plan.
    labelled
        Triples whose labelled program was run (the others reached the cap without it).
    """

    bound_s: float | None
    triples: int
    labelled: int


def regions_of(problem: HeteroProblem) -> list[str]:
    """The regions of the columns with devices, most devices first."""
    per: dict[str, int] = {}
    for c in problem.cluster.columns:
        if c.count > 0:
            per[region_of(c.zone)] = per.get(region_of(c.zone), 0) + c.count
    return sorted(per, key=lambda r: (-per[r], r))


def applies(problem: HeteroProblem) -> bool:
    """Whether the bound applies: one GPU kind with devices, in exactly two regions."""
    kinds = {c.kind for c in problem.cluster.columns if c.count > 0}
    return len(kinds) == 1 and len(regions_of(problem)) == 2


def _x_coef(p: int, k: int, sound: bool) -> tuple[float, float]:
    """(ka, kb) with X_k = ka a_k + kb b_k (the formula's doubling; none when sound)."""
    if p == 1:
        return 0.0, 0.0
    if k == 0:
        return (1.0 if (p <= 3 or sound) else 2.0), 0.0
    if k == p - 1:
        return 0.0, (1.0 if sound else 2.0)
    return 1.0, 1.0


def _ring_vec(pieces: np.ndarray, n: int, coef: tuple[float, ...]) -> np.ndarray:
    """2 (n - 1) t(piece / n) elementwise (0 for a 0 piece), -inf where the fit is not well-conditioned."""
    x = pieces / n
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lx = np.log2(np.where(x > 0, x, 1.0) / 1e6)
        k = len(coef)
        bw = sum(c * lx ** (k - i - 1) for i, c in enumerate(coef))
        mag = sum(abs(c) * np.abs(lx) ** (k - i - 1) for i, c in enumerate(coef))
        t = np.where(bw > CONDITION_REL * mag, 2 * (n - 1) * ((x / 1e9) / bw), -math.inf)
    return np.where(pieces > 0, t, 0.0)


def _bucketed_vec(size: np.ndarray, n: int, coef: tuple[float, ...]) -> np.ndarray:
    """The formula's bucketed all-reduce elementwise: the loop ``piece = B if rem > B else rem; rem -= piece`` replayed
    with the same float operations; -inf where a piece's fit is not well-conditioned."""
    total = np.zeros_like(size)
    rem = size.copy()
    while bool((rem > 0).any()):
        piece = np.where(rem > BUCKET_BYTES, float(BUCKET_BYTES), np.maximum(rem, 0.0))
        total = total + _ring_vec(piece, n, coef)
        rem = rem - piece
    return total


def _seen_after(seen: int | None, lab: int) -> int:
    """The labels seen once a stage of label ``lab`` follows ``seen`` (None: no stage yet)."""
    if lab == LABEL_M or seen == SEEN_BOTH:
        return SEEN_BOTH
    if seen is None:
        return SEEN_A if lab == LABEL_A else SEEN_B
    return seen if (seen == SEEN_A) == (lab == LABEL_A) else SEEN_BOTH


def _times(k: int, y: float) -> float:
    """k y (k >= 0), and inf when y is inf (no split holds a plan; not the nan of 0 inf)."""
    return math.inf if y == math.inf else k * y


def _mul(k: float, v: np.ndarray) -> np.ndarray:
    """k v with 0 v = 0 (also where v is inf)."""
    return k * v if k else np.zeros_like(v)


class _Bounds:
    """The tables of one setting (one kind, two regions): sends per micro-batch size, weights, rings per D."""

    def __init__(self, problem: HeteroProblem) -> None:
        self.problem = problem
        cols = [c for c in problem.cluster.columns if c.count > 0]
        self.kind = cols[0].kind
        self.zones = [c.zone for c in cols]
        self.regions = regions_of(problem)
        self.region_devices = [sum(c.count for c in cols if region_of(c.zone) == r) for r in self.regions]
        self.n_devices = sum(c.count for c in cols)
        self.L = problem.model.layers
        self.sound = problem.objective == "sound"
        self.memcap = problem.cluster.memory_of(self.kind)
        tps = {b: [t for t in TP_DEGREES if problem.replica_valid(self.kind, b, t)] for b in problem.micro_batches()}
        self.tps = {b: ts for b, ts in tps.items() if ts}
        all_tps = sorted({t for ts in self.tps.values() for t in ts})
        # W[t][s][e]: the all-reduce bytes of layers s..e-1 at least tp t, summed as the formula sums them
        w1 = problem.model.params_floats[1]
        L = self.L
        self.weights: dict[int, np.ndarray] = {}
        for t in all_tps:
            w = np.zeros((L + 1, L + 1))
            for s in range(L):
                for e in range(s + 1, L + 1):
                    w[s, e] = sum(FLOAT_BYTES * w1[ly] / min(4, t) for ly in range(s, e))
            self.weights[t] = w
        # count-1 ring fits: every one, within region A, within B, between them
        self.ring_parts: dict[str, tuple[tuple[float, ...], ...]] = {}
        groups: dict[str, dict[tuple[float, ...], None]] = {"all": {}, "A": {}, "B": {}, "M": {}}
        for z, z2 in itertools.product(self.zones, repeat=2):
            fit = problem.cluster.link_fits.get((z, self.kind, 1, z2, self.kind, 1))
            if fit is None:
                continue
            r, r2 = region_of(z), region_of(z2)
            which = "M" if r != r2 else ("A" if r == self.regions[0] else "B")
            for part in fit_parts(fit):
                groups["all"][part] = None
                groups[which][part] = None
        self.ring_parts = {k: tuple(v) for k, v in groups.items()}
        self.send_cache: dict[tuple[int, int | None], dict[str, np.ndarray]] = {}
        self.fit_cache: dict[tuple[int, int, int], np.ndarray] = {}
        self.ring_cache: dict[tuple[str, int], dict[int, np.ndarray]] = {}
        self.ar_cache: dict[int, list[float]] = {}
        self.label_ar_cache: dict[tuple[int, int], float] = {}
        self.split_cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    # ---- sends ----
    def least_send(self, mbs: int, tp: int | None, nbytes: float, cross: bool) -> float:
        """The least seconds of ``nbytes`` sent by a replica of tp ``tp`` (None: any tp of ``mbs``) to a replica of any
        tp of ``mbs``, over every fit between two zones (``cross``: of different regions); inf when there is none."""
        best = math.inf
        fits = self.problem.cluster.link_fits
        senders = self.tps[mbs] if tp is None else [tp]
        for z, z2 in itertools.product(self.zones, repeat=2):
            if cross and region_of(z) == region_of(z2):
                continue
            for t, t2 in itertools.product(senders, self.tps[mbs]):
                fit = fits.get((z, self.kind, t, z2, self.kind, t2))
                if fit is not None:
                    best = min(best, fit.seconds(nbytes))
        return best

    def send_rows(self, mbs: int, tp: int | None = None) -> dict[str, np.ndarray]:
        """Per end e the least forward send of a stage ending at e ("a"; "ax": between regions), per first layer s the
        least backward send of a stage starting at s ("b", "bx"), sent by a replica of tp ``tp`` (None: any; a stage's
        sends are at least those of its replica of least tp); cached per (micro-batch size, tp)."""
        got = self.send_cache.get((mbs, tp))
        if got is not None:
            return got
        out = self.problem.model.act_output_floats
        L = self.L
        rows = {k: np.zeros(L + 1) for k in ("a", "ax", "b", "bx")}
        for e in range(1, L + 1):
            size = FLOAT_BYTES * mbs * out[e - 1]
            rows["a"][e], rows["ax"][e] = self.least_send(mbs, tp, size, False), self.least_send(mbs, tp, size, True)
        for s in range(1, L):
            size = FLOAT_BYTES * mbs * (out[s - 1] if self.sound else out[s])
            rows["b"][s], rows["bx"][s] = self.least_send(mbs, tp, size, False), self.least_send(mbs, tp, size, True)
        self.send_cache[(mbs, tp)] = rows
        return rows

    # ---- compute ----
    def comp(self, mbs: int, t: int, in_flight: int) -> np.ndarray:
        """[s][e]: the compute of layers s..e-1 at (mbs, t) per micro-batch (prefix differences); inf where a replica
        of tp t does not hold them with ``in_flight`` micro-batches, or e <= s."""
        key = (mbs, t, in_flight)
        got = self.fit_cache.get(key)
        if got is not None:
            return got
        L = self.L
        times = self.problem.model.times[(self.kind, mbs, t)]
        pre = np.concatenate([[0.0], np.cumsum([f + b for f, b, _u in times])])
        ok = np.zeros((L + 1, L + 1), dtype=bool)
        for s in range(L):
            for e in range(s + 1, L + 1):
                if memory_bytes(self.problem, mbs, t, s, e, in_flight) > self.memcap * (1 + 1e-12):
                    break  # memory grows with e
                ok[s, e] = True
        got = self.fit_cache[key] = np.where(ok, pre[None, :] - pre[:, None], math.inf)
        return got

    def split(self, mbs: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Per tp budget b = 0..4P (sum_i t_i <= b): the least max y and least sum y over every split into p stages
        (no labels, every send at sigma); inf where none fits."""
        key = (mbs, p)
        got = self.split_cache.get(key)
        if got is not None:
            return got
        L, inf, bmax = self.L, math.inf, 4 * p
        gmax, gsum = np.full((L + 1, bmax + 1), inf), np.full((L + 1, bmax + 1), inf)
        gmax[0, 0], gsum[0, 0] = -inf, 0.0
        for k in range(p):
            ka, kb = _x_coef(p, k, self.sound)
            rows, ends = slice(k, L - p + k + 1), slice(k + 1, L - p + k + 2)
            nmax, nsum = np.full((L + 1, bmax + 1), inf), np.full((L + 1, bmax + 1), inf)
            for t in self.tps[mbs]:
                sends = self.send_rows(mbs, t)
                x = _mul(ka, sends["a"])[None, :] + _mul(kb, sends["b"])[:, None]
                yk = (self.comp(mbs, t, p - k) + x)[rows, ends][:, :, None]
                cm = np.maximum(yk, gmax[rows, None, : bmax + 1 - t]).min(axis=0)
                cs = (yk + gsum[rows, None, : bmax + 1 - t]).min(axis=0)
                nmax[ends, t:] = np.minimum(nmax[ends, t:], cm)
                nsum[ends, t:] = np.minimum(nsum[ends, t:], cs)
            gmax, gsum = nmax, nsum
        got = self.split_cache[key] = (np.minimum.accumulate(gmax[L]), np.minimum.accumulate(gsum[L]))
        return got

    # ---- all-reduce ----
    def rings(self, d: int, which: str) -> dict[int, np.ndarray]:
        """Per least tp t, [s][e]: the least bucketed ring of layers s..e-1 over D = d members on the count-1 fits
        ``which`` ("all", "A", "B", "M": between regions), at least 0; inf for e <= s or no fit."""
        key = (which, d)
        got = self.ring_cache.get(key)
        if got is not None:
            return got
        L, inf = self.L, math.inf
        upper = np.arange(L + 1)[None, :] > np.arange(L + 1)[:, None]
        got = {}
        for t, w in self.weights.items():
            least = np.full((L + 1, L + 1), inf)
            if d <= 1:
                least = np.zeros((L + 1, L + 1))
            else:
                for coef in self.ring_parts[which]:
                    least = np.minimum(least, _bucketed_vec(w, d, coef))
                least = np.maximum(least, 0.0)  # each stage's all-reduce is a maximum starting at 0
            got[t] = np.where(upper, least, inf)
        self.ring_cache[key] = got
        return got

    def ar_rows(self, d: int) -> list[float]:
        """[P]: a lower bound on T_sync of every plan with D = d and P stages: the least, over the splits and least tps
        t_i with sum_i t_i <= N // d, of the largest stage's least ring over every count-1 fit (index 0 unused)."""
        got = self.ar_cache.get(d)
        if got is not None:
            return got
        L, inf = self.L, math.inf
        pmax = max(1, min(L, self.n_devices // d))
        bmax = min(self.n_devices // d, 4 * pmax)
        table = self.rings(d, "all")
        g = np.full((L + 1, bmax + 1), inf)  # g[e][b]: stages over layers 0..e-1 within tp budget b
        g[0, :] = -inf
        out = [inf]
        for _p in range(pmax):
            nxt = np.full((L + 1, bmax + 1), inf)
            for t, arr in table.items():
                if t > bmax:
                    continue
                cand = np.maximum(arr[:, :, None], g[:, None, : bmax + 1 - t]).min(axis=0)  # [e][b - t]
                nxt[:, t:] = np.minimum(nxt[:, t:], cand)
            g = nxt
            out.append(float(g[L].min()))
        self.ar_cache[d] = out
        return out

    def labelled_ar(self, d: int, p: int) -> float:
        """A lower bound on T_sync of every plan in both regions with D = d and P = p: the least, over the labelled
        splits that use both regions (the A stages' least tps within N_A // d, the B stages' within N_B // d, every
        stage's within N // d), of the largest stage's least ring over its label's fits (within A, within B, between
        them for M; module docstring); cached per (d, p) (the same for every micro-batch size)."""
        got = self.label_ar_cache.get((d, p))
        if got is None:
            got = self.label_ar_cache[(d, p)] = self._labelled_ar(d, p)
        return got

    def _labelled_ar(self, d: int, p: int) -> float:
        """:meth:`labelled_ar`'s program."""
        L, inf = self.L, math.inf
        na = min(self.region_devices[0] // d, 4 * p)
        nb = min(self.region_devices[1] // d, 4 * p)
        nt = min(self.n_devices // d, 4 * p)
        labels = (LABEL_A, LABEL_B, LABEL_M) if d >= 2 else (LABEL_A, LABEL_B)
        which = {LABEL_A: "A", LABEL_B: "B", LABEL_M: "M"}
        tps = sorted(self.weights)
        shape = (L + 1, na + 1, nb + 1, nt + 1)
        g: dict[int | None, np.ndarray] = {None: np.full(shape, inf)}
        g[None][0, 0, 0, 0] = -inf
        for k in range(p):
            rows, ends = slice(k, L - p + k + 1), slice(k + 1, L - p + k + 2)
            nxt: dict[int | None, np.ndarray] = {}
            for seen, arr in g.items():
                for lab in labels:
                    seen2 = _seen_after(seen, lab)
                    for t in tps:
                        da, db = (t if lab == LABEL_A else 0), (t if lab == LABEL_B else 0)
                        if da > na or db > nb or t > nt:
                            continue
                        ring = self.rings(d, which[lab])[t][rows, ends][:, :, None, None, None]
                        src = arr[rows, None, : na + 1 - da, : nb + 1 - db, : nt + 1 - t]
                        cand = np.maximum(ring, src).min(axis=0)
                        if seen2 not in nxt:
                            nxt[seen2] = np.full(shape, inf)
                        to = (ends, slice(da, None), slice(db, None), slice(t, None))
                        nxt[seen2][to] = np.minimum(nxt[seen2][to], cand)
            g = nxt
        return float(g[SEEN_BOTH][L].min()) if SEEN_BOTH in g else inf

    # ---- the labelled program ----
    def labelled(self, mbs: int, d: int, p: int, theta: float, full: bool = True) -> tuple[float, float]:
        """(least max y, least sum y) over the labelled splits into p stages that use both regions, every stage's
        label's least ring below ``theta``, the A stages' least tps within N_A // d, the B stages' within N_B // d and
        every stage's within N // d (module docstring); inf when there is none.  A dynamic program over (stage, first
        layer, A budget, B budget, total budget, labels of the previous, this and the next stage, labels seen);
        ``full=False``: the total budget only, each A or B stage's tp within its region's (a relaxation: no higher,
        far cheaper)."""
        L, inf = self.L, math.inf
        na_stage = min(self.region_devices[0] // d, 4 * p)
        nb_stage = min(self.region_devices[1] // d, 4 * p)
        na, nb = (na_stage, nb_stage) if full else (0, 0)
        nt = min(self.n_devices // d, 4 * p)
        labels = (LABEL_A, LABEL_B, LABEL_M) if d >= 2 else (LABEL_A, LABEL_B)
        which = {LABEL_A: "A", LABEL_B: "B", LABEL_M: "M"}
        allowed = {lab: {t: self.rings(d, which[lab])[t] < theta for t in self.tps[mbs]} for lab in labels}

        shape = (L + 1, na + 1, nb + 1, nt + 1)
        # state: (label of the previous stage, label of this stage, labels seen up to this stage)
        gmax: dict[tuple[int, int, int], np.ndarray] = {}
        gsum: dict[tuple[int, int, int], np.ndarray] = {}
        for lab in labels:
            key = (lab, lab, _seen_after(None, lab))
            gmax[key], gsum[key] = np.full(shape, inf), np.full(shape, inf)
            gmax[key][0, 0, 0, 0], gsum[key][0, 0, 0, 0] = -inf, 0.0
        for k in range(p):
            ka, kb = _x_coef(p, k, self.sound)
            rows, ends = slice(k, L - p + k + 1), slice(k + 1, L - p + k + 2)
            nmax: dict[tuple[int, int, int], np.ndarray] = {}
            nsum: dict[tuple[int, int, int], np.ndarray] = {}
            for (prev, cur, seen), gm in gmax.items():
                gs = gsum[(prev, cur, seen)]
                nexts = labels if k < p - 1 else (cur,)
                for t in self.tps[mbs]:
                    if t > nt or (cur == LABEL_A and t > na_stage) or (cur == LABEL_B and t > nb_stage):
                        continue
                    da, db = (t if cur == LABEL_A and full else 0), (t if cur == LABEL_B and full else 0)
                    sends = self.send_rows(mbs, t)
                    b_row = _mul(kb, sends["bx" if prev != cur else "b"])
                    base = np.where(allowed[cur][t], self.comp(mbs, t, p - k), inf) + b_row[:, None]
                    cut = (rows, None, slice(0, na + 1 - da), slice(0, nb + 1 - db), slice(0, nt + 1 - t))
                    src_m, src_s = gm[cut], gs[cut]  # [s][1][bA][bB][bT]
                    for nxt in nexts:
                        a_row = _mul(ka, sends["ax" if nxt != cur else "a"])
                        yk = (base + a_row[None, :])[rows, ends][:, :, None, None, None]
                        cm = np.maximum(yk, src_m).min(axis=0)  # [e][bA][bB][bT]
                        cs = (yk + src_s).min(axis=0)
                        nkey = (cur, nxt, _seen_after(seen, nxt))
                        if nkey not in nmax:
                            nmax[nkey], nsum[nkey] = np.full(shape, inf), np.full(shape, inf)
                        to = (ends, slice(da, None), slice(db, None), slice(t, None))
                        nmax[nkey][to] = np.minimum(nmax[nkey][to], cm)
                        nsum[nkey][to] = np.minimum(nsum[nkey][to], cs)
            gmax, gsum = nmax, nsum
        ymax = min((float(g[L].min()) for (_p, _c, seen), g in gmax.items() if seen == SEEN_BOTH), default=inf)
        ysum = min((float(g[L].min()) for (_p, _c, seen), g in gsum.items() if seen == SEEN_BOTH), default=inf)
        return ymax, ysum


def _labelled_low(
    tb: _Bounds,
    mbs: int,
    d: int,
    p: int,
    m: int,
    floors: tuple[float, float, float],
    ar: float,
    t_lo: float,
    best: float,
) -> float:
    """The triple's bound below ``best`` (module docstring): T_sync at least ``ar_lo`` (the larger of the unlabelled
    and the labelled all-reduce floors); the plans with T_sync >= theta = best - t_lo are at least ``best``; the others
    are split by T_sync into :data:`LEVELS` classes [lo, hi), each bounded by the labelled program with every stage's
    ring below hi, plus lo (a class with a low T_sync keeps its stages' rings low, which costs y)."""
    ymax_lb, ysum_lb, umin = floors
    ar_lo = max(ar, tb.labelled_ar(d, p))
    theta = best - t_lo
    if ar_lo >= theta:
        return best
    low, lo = math.inf, ar_lo
    for frac in LEVELS:
        hi = ar_lo + (theta - ar_lo) * frac
        value = -math.inf
        for full in (False, True):  # the one-budget program first: it often reaches ``best`` alone
            ym, ys = tb.labelled(mbs, d, p, hi, full)
            value = max(value, _times(m - 1, max(ymax_lb, ym)) + max(ysum_lb, ys) + umin + lo)
            if value >= best:
                break
        low, lo = min(low, value), hi
    return min(best, low)


def spanning_bound(problem: HeteroProblem, budget: Budget, cap_s: float = math.inf) -> SpanningBound | None:
    """A lower bound on the iteration seconds of every plan of ``problem`` with replicas in both regions, at most
    ``cap_s`` (module docstring); ``None`` when it does not apply (:func:`applies`).  ``bound_s`` is ``None`` when the
    budget ran out first."""
    if not applies(problem):
        return None
    tb = _Bounds(problem)
    mod, n, L = problem.model, tb.n_devices, tb.L
    best, triples, labelled = cap_s, 0, 0
    for mbs, tps in tb.tps.items():
        times = {t: mod.times[(tb.kind, mbs, t)] for t in tps}
        ctot = sum(min(times[t][ly][0] + times[t][ly][1] for t in tps) for ly in range(L))
        dev_s = sum(min(t * (times[t][ly][0] + times[t][ly][1]) for t in tps) for ly in range(L))
        umin = min(times[t][0][2] for t in tps)
        rows = tb.send_rows(mbs)
        amin = float(rows["a"][1:].min())
        bmin = float(rows["b"][1:L].min()) if L > 1 else 0.0
        for d in range(1, n + 1):
            if budget.expired():
                return SpanningBound(None, triples, labelled)
            m = math.ceil(problem.global_batch / (mbs * d))
            theta_dev = d * dev_s / n
            for p in range(1, min(L, n // d) + 1):
                if p == 1 and d == 1:
                    continue  # one replica: one zone
                triples += 1
                xs = [ka * amin + kb * bmin for ka, kb in (_x_coef(p, k, tb.sound) for k in range(p))]
                ymax_lb, ysum_lb = max(theta_dev, ctot / p) + min(xs), ctot + sum(xs)
                if (m - 1) * ymax_lb + ysum_lb + umin >= best:
                    continue
                m0, s0 = tb.split(mbs, p)
                b = min(4 * p, n // d)
                ymax_lb, ysum_lb = max(ymax_lb, float(m0[b])), max(ysum_lb, float(s0[b]))
                if not (math.isfinite(ymax_lb) and math.isfinite(ysum_lb)):
                    continue  # no split fits: no plan
                t_lo = (m - 1) * ymax_lb + ysum_lb + umin
                ar = tb.ar_rows(d)[p]
                if t_lo + ar >= best:
                    continue
                labelled += 1
                best = min(best, _labelled_low(tb, mbs, d, p, m, (ymax_lb, ysum_lb, umin), ar, t_lo, best))
    return SpanningBound(best * (1 - SLACK_REL), triples, labelled)
