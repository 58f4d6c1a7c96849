"""Tiny random Galvatron settings and a brute force over every plan of the space, scored by the independent verifier.

The enumeration here is the test's own reading of the space (README of the benchmark): pp a power of 2 (<= max_pp,
<= layers, <= devices), chunks dividing the batch with pp <= chunks, every split into pp non-empty stages, per layer
a power-of-2 tp_sp <= min(8, devices / pp) whose dp = devices / pp / tp_sp divides the micro-batch, Megatron tp or
Ulysses sp (tp_sp > 1), ZeRO-2/3 (ZeRO-3 only with dp > 1), checkpointing on/off; one vocabulary strategy (tp_sp, sp,
ZeRO-3).  The global-buffer degree g needs no enumeration: the buffer grows with g, so the verifier's charge (the
plan's largest tp_sp when any Megatron tp is used, none otherwise) is the least over every admissible g.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import replace

from milp_partition.cluster import CollectiveTables, LatencyTable
from milp_partition.galvatron.problem import (
    GalvatronPlan,
    GalvatronProblem,
    LayerType,
    Strategy,
    Vocab,
    VocabStates,
    VocabStrategy,
    galvatron_cluster,
)
from milp_partition.verifiers.galvatron import verify_galvatron


def _latency(rng: random.Random, slow: float) -> LatencyTable:
    slope, icpt = rng.uniform(0.005, 0.05) * slow, rng.uniform(0.01, 0.1) * slow
    measured = {float(s): slope * s + icpt + rng.uniform(-0.005, 0.005) for s in (1, 2, 4, 8, 16) if rng.random() < 0.5}
    return LatencyTable(measured, slope, icpt)


def random_hardware(rng: random.Random, devices: int, slow: float = 1.0) -> CollectiveTables:
    """All-reduce ms/MB per group (``slow`` scales them: gradient sync dominates, pipelines pay off)."""
    coe: dict[str, float] = {"1": 0.0, "1_1": 0.0, "1_0": 0.0}
    d = devices
    while d >= 2:
        a = rng.uniform(0.005, 0.05) * slow * d / devices
        coe[f"{d}_1"] = a
        coe[f"{d}_0"] = a if d == devices else rng.uniform(0.005, 0.06) * slow * d / devices
        if d == devices:
            coe[str(d)] = a
        d //= 2
    p2p = {pp: rng.uniform(0.002, 0.05) for pp in (2, 4, 8)}
    return CollectiveTables(
        coe, p2p, rng.uniform(1.0, 1.3), {g: _latency(rng, slow) for g in (2, 4, 8)}, {g: _latency(rng, slow) for g in (2, 4, 8)}
    )


def random_problem(seed: int, cap: int = 12000) -> GalvatronProblem:
    """A setting of :func:`_random_problem` with layers dropped (one at a time) until at most ``cap`` plans."""
    p = _random_problem(seed)
    while count_plans(p) > cap and p.layers > 2:
        counts = [t.count for t in p.layer_types]
        k = counts.index(max(counts))
        if counts[k] == 1:
            break
        types = tuple(replace(t, count=t.count - 1) if i == k else t for i, t in enumerate(p.layer_types))
        p = replace(p, layer_types=types)
    return p


def _random_problem(seed: int) -> GalvatronProblem:
    """2-4 layers of 1-2 types, 2 or 4 GPUs, batch 2-8; memory from a range where it sometimes binds, sometimes
    admits nothing.  A few seeds scale memory above 20 GB (Galvatron's 20 % reserve)."""
    rng = random.Random(seed)
    devices = rng.choice([2, 4])
    ntypes = rng.choice([1, 2])
    big = rng.random() < 0.2
    sync_heavy = rng.random() < 0.4
    speed = 0.05 if sync_heavy else 1.0
    scale = 12.0 if big else 1.0
    max_layers = 4 if devices == 2 else 3
    counts = [1] * ntypes
    while sum(counts) < rng.randint(max(2, ntypes), max_layers):
        counts[rng.randrange(ntypes)] += 1
    types = []
    for t in range(ntypes):
        act1 = rng.uniform(20, 200) * scale
        act = {1: act1, 2: act1 * rng.uniform(0.5, 0.7), 4: act1 * rng.uniform(0.25, 0.4), 8: act1 * rng.uniform(0.12, 0.25)}
        act[0] = act1 * rng.uniform(0.03, 0.15)
        types.append(
            LayerType(
                f"layertype_{t}",
                counts[t],
                rng.choice([128, 256]),
                rng.uniform(30, 300) * scale,
                act,
                rng.uniform(0.5, 5.0) * speed,
                rng.uniform(0.0, 2.0) * speed,
            )
        )

    def states() -> VocabStates:
        ms = rng.uniform(50, 400) * scale
        a1 = rng.uniform(5, 60) * scale
        return VocabStates({1: ms, 2: ms / 2, 4: ms / 4, 8: ms / 8}, {1: a1, 2: a1 / 2, 4: a1 / 4, 8: a1 / 8})

    vocab = Vocab(rng.uniform(0.5, 4.0), rng.uniform(0.0, 1.0), states(), states(), states())
    batch = rng.choice([2, 4, 8])
    memory = int(1024 * scale + rng.uniform(200, 1600) * scale)
    return GalvatronProblem(
        model=f"synthetic-{seed}",
        source=f"synthetic:{seed}",
        hidden=rng.choice([256, 512]),
        layer_types=tuple(types),
        vocab=vocab,
        cluster=galvatron_cluster(random_hardware(rng, devices, 20.0 if sync_heavy else 1.0), devices, memory, devices),
        global_batch=batch,
        max_pp=rng.choice([2, 4, 8]),
    )


def _pow2_upto(n: int) -> list[int]:
    out, g = [], 1
    while g <= n:
        out.append(g)
        g *= 2
    return out


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    for cuts in itertools.combinations(range(1, total), parts - 1):
        bounds = (0, *cuts, total)
        yield tuple(bounds[i + 1] - bounds[i] for i in range(parts))


def _options(p: GalvatronProblem, pp: int, m: int) -> tuple[list[Strategy], list[VocabStrategy]]:
    """Layer and vocabulary strategies of one (pp, chunks)."""
    N, micro = p.devices, p.global_batch // m
    degs = [g for g in _pow2_upto(min(8, N // pp)) if micro % (N // pp // g) == 0]
    layer_opts = [
        Strategy(g, sp, z3, ck)
        for g in degs
        for sp in ((False, True) if g > 1 else (False,))
        for z3 in ((False, True) if N // pp // g > 1 else (False,))
        for ck in (False, True)
    ]
    return layer_opts, [VocabStrategy(s.tp_sp, s.sp, s.zero3) for s in layer_opts if not s.ckpt]


def _outer(p: GalvatronProblem) -> Iterator[tuple[int, int, tuple[int, ...]]]:
    for pp in _pow2_upto(min(p.max_pp, p.layers, p.devices)):
        for m in range(pp, p.global_batch + 1):
            if p.global_batch % m == 0:
                for div in _compositions(p.layers, pp):
                    yield pp, m, div


def space(p: GalvatronProblem) -> Iterator[GalvatronPlan]:
    """Every plan of the space (independent of the solver's enumeration)."""
    for pp, m, div in _outer(p):
        layer_opts, vocab_opts = _options(p, pp, m)
        for layers in itertools.product(layer_opts, repeat=p.layers):
            for v in vocab_opts:
                yield GalvatronPlan(pp, m, div, layers, v)


def count_plans(p: GalvatronProblem) -> int:
    total = 0
    for pp, m, _ in _outer(p):
        lo, vo = _options(p, pp, m)
        total += len(lo) ** p.layers * len(vo)
    return total


@functools.cache
def brute_force_seed(seed: int) -> tuple[float, GalvatronPlan | None, float]:
    """:func:`brute_force` of :func:`random_problem` (cached: several tests read it)."""
    return brute_force(random_problem(seed))


def brute_force(p: GalvatronProblem) -> tuple[float, GalvatronPlan | None, float]:
    """(optimum sound T or inf, an optimal plan, least T of every plan of the space ignoring memory)."""
    best, arg, unlimited = math.inf, None, math.inf
    for plan in space(p):
        rep = verify_galvatron(p, plan)
        if rep.feasible and rep.objective < best:
            best, arg = rep.objective, plan
        unlimited = min(unlimited, rep.objective)
    return best, arg, unlimited
