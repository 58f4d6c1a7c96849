"""The iteration time of a plan, as Sailor's simulator computes it (or its sound variant), with tables for the search.

Formula (``../shared/benchmarks/hetero/README.md``; o, pi, alpha per layer, t_k a link fit's time):

* m = ceil(B / (beta D)); C_i = max_r sum_{l in S_i} (f + b)(l) of replica (i, r); U = max_{i,r} u(first layer of S_i);
* a_i = max_r t_k(4 beta o(last of S_i)) on the link replica (i, r) -> (i+1, r); b_i = max_r t_k(4 beta o(first of S_i))
  on (i, r) -> (i-1, r) (sound: o(last of S_{i-1}), the stage's input);
* X_0 = a_0 (2 a_0 if P >= 4), X_i = a_i + b_i, X_{P-1} = 2 b_{P-1} (sound: no doubling); P = 1: X_0 = 0;
* T_pp = (m - 1) max_i (C_i + X_i) + sum_i X_i + sum_i C_i + U;
* T_sync = max_i max_{r < D-1} ARB_k(W_i, D), W_i = sum_{l in S_i} 4 pi_1(l) / min(4, min_r tp_ir), k the count-1 link
  (i, r) -> (i, r+1); ARB cuts W into 5e8-byte buckets, each a ring all-reduce 2 (n-1) t_k(x / n);
* T = T_pp + T_sync; memory per replica: 24 sum pi_tp + 4 beta (P - i) sum alpha_tp + (2e9 if tp = 1 else 3e9)
  <= the kind's memory.

The search (:mod:`milp_partition.hetero.search`) prices plans with these functions; the verifier
(:mod:`milp_partition.verifiers.hetero`) recomputes them with its own code.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from milp_partition.cluster import LinkFit
from milp_partition.hetero.problem import BUCKET_BYTES, FLOAT_BYTES, HeteroPlan, HeteroProblem, Replica


def ring_seconds(fit: LinkFit, nbytes: float, n: int) -> float:
    """One ring all-reduce of ``nbytes`` over ``n`` members: 2 (n - 1) steps of nbytes / n."""
    if nbytes == 0 or n <= 1:
        return 0.0
    return 2 * (n - 1) * fit.seconds(nbytes / n)


def bucketed_seconds(fit: LinkFit, nbytes: float, n: int) -> float:
    """The all-reduce of ``nbytes`` cut into :data:`BUCKET_BYTES` pieces (each a full ring), as DeepSpeed's buckets."""
    t, rem = 0.0, nbytes
    while rem > 0:
        piece = BUCKET_BYTES if rem > BUCKET_BYTES else rem
        t += ring_seconds(fit, piece, n)
        rem -= piece
    return t


def memory_bytes(problem: HeteroProblem, mbs: int, tp: int, first: int, end: int, in_flight: int) -> float:
    """Memory the simulator charges one replica of tp ``tp`` holding layers first..end-1 with ``in_flight`` micro-batches."""
    m = problem.model
    params = sum(m.params_floats[tp][first:end])
    act = sum(m.act_mem_floats[tp][first:end]) * mbs * FLOAT_BYTES
    return params * m.optimizer_bytes_per_param + act * in_flight + (2.0e9 if tp == 1 else 3.0e9)


@dataclass(frozen=True)
class Terms:
    """The terms of a plan's iteration time (seconds)."""

    m: int
    compute_s: tuple[float, ...]
    sends_s: tuple[float, ...]
    update_s: float
    allreduce_s: tuple[float, ...]
    t_pp_s: float
    t_sync_s: float

    @property
    def iteration_s(self) -> float:
        return self.t_pp_s + self.t_sync_s


def combine(
    m: int, c: list[float] | tuple[float, ...], a: list[float], b: list[float], u: float, ar: list[float], sound: bool
) -> tuple[list[float], float, float]:
    """X_i from a_i and b_i, then T_pp and T_sync (the formula's last two lines)."""
    p = len(c)
    if p == 1:
        x = [0.0]
    else:
        x = []
        for i in range(p):
            if i == 0:
                x.append(a[0] if (p <= 3 or sound) else 2 * a[0])
            elif i == p - 1:
                x.append(b[i] if sound else 2 * b[i])
            else:
                x.append(a[i] + b[i])
    t_pp = (m - 1) * max(ci + xi for ci, xi in zip(c, x)) + sum(x) + sum(c) + u
    return x, t_pp, (max(ar) if ar else 0.0)


def _uniform(row: tuple[Replica, ...]) -> bool:
    """Whether every replica of a non-empty row equals the first (``tuple.count`` compares by identity first: the
    search and the heuristics repeat one object, so this is a fast test); then every maximum over the row's replicas
    or adjacent pairs has one distinct term, the same value as over all."""
    return bool(row) and row.count(row[0]) == len(row)


def evaluate(problem: HeteroProblem, plan: HeteroPlan, memo: dict[tuple[object, ...], float] | None = None) -> Terms:
    """The plan's terms under ``problem.objective`` (no feasibility check: see :func:`violations`).  ``memo``: a dict
    the caller keeps between plans of one problem (the lift prices hundreds that differ in zones only), holding each
    send's and all-reduce's seconds by (link, bytes, members): the same values, each computed once."""
    if memo is None:
        memo = {}
    mod = problem.model
    cl = problem.cluster
    mbs, stages, reps = plan.mbs, plan.stages, plan.replicas
    p, d = len(stages), len(reps[0])
    m = math.ceil(problem.global_batch / (mbs * d))
    sound = problem.objective == "sound"
    # every term is a max over replicas (or pairs) of a value that depends on the replica's (or pair's) kind, zone and
    # tp only: each distinct one is computed once (the same values, so the same maxima, as replica by replica)
    uniform = [_uniform(row) for row in reps]
    c, us = [], []
    for (s, e), row, uni in zip(stages, reps, uniform):
        ci = 0.0
        for kind, tp in ((row[0].kind, row[0].tp),) if uni else dict.fromkeys((r.kind, r.tp) for r in row):
            t = mod.times[(kind, mbs, tp)]
            ci = max(ci, sum(t[ly][0] + t[ly][1] for ly in range(s, e)))
            us.append(t[s][2])
        c.append(ci)
    out = mod.act_output_floats

    def send_s(key: tuple[str, str, int, str, str, int], size: float) -> float:
        mkey = (key, size)
        got = memo.get(mkey)
        if got is None:
            got = memo[mkey] = cl.link_fit(key).seconds(size)
        return got

    def worst_send(row: tuple[Replica, ...], other: tuple[Replica, ...], size: float, both_uniform: bool) -> float:
        if both_uniform:  # one distinct pair (the rows have one length, D)
            x, y = row[0], other[0]
            return send_s((x.zone, x.kind, x.tp, y.zone, y.kind, y.tp), size)
        pairs = dict.fromkeys((x.zone, x.kind, x.tp, y.zone, y.kind, y.tp) for x, y in zip(row, other))
        return max(send_s(key, size) for key in pairs)

    a, b = [0.0] * p, [0.0] * p
    for i in range(p):
        s, e = stages[i]
        if i < p - 1:
            a[i] = worst_send(reps[i], reps[i + 1], FLOAT_BYTES * mbs * out[e - 1], uniform[i] and uniform[i + 1])
        if i > 0:
            b[i] = worst_send(
                reps[i], reps[i - 1], FLOAT_BYTES * mbs * (out[s - 1] if sound else out[s]), uniform[i] and uniform[i - 1]
            )
    ar = []
    w1 = mod.params_floats[1]
    for (s, e), row, uni in zip(stages, reps, uniform):
        tp_min = min(4, row[0].tp) if uni else min([4] + [r.tp for r in row])
        size = sum(FLOAT_BYTES * w1[ly] / tp_min for ly in range(s, e))
        v = 0.0
        adjacent = (
            ((row[0].zone, row[0].kind, row[0].zone, row[0].kind),) * (len(row) > 1)
            if uni
            else dict.fromkeys((x.zone, x.kind, y.zone, y.kind) for x, y in itertools.pairwise(row))
        )
        for lz, lk, rz, rk in adjacent:
            akey = (lz, lk, rz, rk, size, d)
            got = memo.get(akey)
            if got is None:
                got = memo[akey] = bucketed_seconds(cl.link_fit((lz, lk, 1, rz, rk, 1)), size, d)
            v = max(v, got)
        ar.append(v)
    x, t_pp, t_sync = combine(m, c, a, b, max(us), ar, sound)
    return Terms(m, tuple(c), tuple(x), max(us), tuple(ar), t_pp, t_sync)
