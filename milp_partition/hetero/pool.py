"""The pooled relaxation of a setting with several zones of one GPU kind: a proven bound and a plan to lift.

**Pooled problem.**  Every kind g's columns (g, z_1), ..., (g, z_n) become one column (g, ``POOL_ZONE``) with the sum
of their counts; the link between pooled columns (g, t) and (g', t') is :class:`MinLinkFit`: for every size x, the
least time over the fits (z, g, t, z', g', t') of every zone z of g and z' of g' in the setting.

**Claim: the pooled optimum is a lower bound on the setting's optimum (iteration seconds).**  Map a plan of the
setting to the pooled problem by renaming every replica's zone to ``POOL_ZONE``.  Stages, D, micro-batch size,
kinds and tps stay, so the compute C_i, the update U, the stages' least tps and every replica's memory are the
same, and the devices per pooled column are the sum over its zones, at most the pooled count.  Each send
t_k(x) of the plan is one of the fits the pooled link takes the least of, so the pooled send is no longer; each
all-reduce is a sum over buckets of 2 (D - 1) t_k(piece / D) with one fit k, and the pooled one sums the least
over the fits piece by piece, no more.  a_i, b_i, X_i, T_pp and T_sync are sums and maxima of these with
non-negative coefficients, so the pooled plan's iteration time is at most the plan's.  Hence every proven lower
bound of the pooled problem (its optimum, or its search's bound when time-limited) is a lower bound of the
setting: a sound upper bound on throughput.  (This holds also where fits give negative times: the pooled value
is the least.)

**Lift.**  A pooled plan is turned into plans of the setting by giving every replica a zone of its kind
(:func:`lift`): row r (replica r of every stage) stays in one zone where it can, so its sends stay on one zone's
links, and the zones are filled in several orders; or each stage's replicas of a pool in one zone, every such choice
where they are few; every lifted plan is priced exactly and checked against the
columns' counts by the caller's verifier.  A heuristic: it proves nothing.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from milp_partition.cluster import KindColumn, LinkFit, LinkKey, kinds_cluster
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.problem import TP_DEGREES, HeteroPlan, HeteroProblem, Replica

#: The zone name of the pooled columns.
POOL_ZONE = "pooled"


@dataclass(frozen=True)
class MinLinkFit(LinkFit):
    """The least time over several fits: ``seconds(x) = min_k parts[k].seconds(x)`` (``coefficients``: the first).

    Each part is evaluated with :meth:`LinkFit.seconds`'s arithmetic (log2 once per size); values are cached per size
    (a plan's sends and all-reduce pieces repeat a few sizes)."""

    parts: tuple[tuple[float, ...], ...] = ()
    _cache: dict[float, float] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def seconds(self, nbytes: float) -> float:
        """The least seconds over the parts to move ``nbytes`` (0 for 0 bytes)."""
        if nbytes == 0:
            return 0.0
        got = self._cache.get(nbytes)
        if got is None:
            lx = math.log2(nbytes / 1e6)
            got = math.inf
            powers: dict[int, list[float]] = {}  # per fit length: lx ** (n - k - 1) for k < n, once for every part
            for coef in self.parts:
                n = len(coef)
                pw = powers.get(n)
                if pw is None:
                    pw = powers[n] = [lx ** (n - k - 1) for k in range(n)]
                bw = sum(c * x for c, x in zip(coef, pw))  # (the same products, summed in the same order)
                got = min(got, (nbytes / 1e9) / bw)
            self._cache[nbytes] = got
        return got


def fit_parts(fit: LinkFit) -> tuple[tuple[float, ...], ...]:
    """The coefficient tuples a fit takes the least of (one for a plain fit)."""
    return fit.parts if isinstance(fit, MinLinkFit) else (fit.coefficients,)


def pool_groups(problem: HeteroProblem) -> dict[tuple[str, str], str]:
    """(kind, zone) -> the pooled zone of its column: every zone of a kind in one pool, :data:`POOL_ZONE` (any partition
    of a kind's zones is a sound relaxation; this one leaves the fewest columns)."""
    return {(c.kind, c.zone): POOL_ZONE for c in problem.cluster.columns if c.count > 0}


def poolable(problem: HeteroProblem) -> bool:
    """Whether the default pools (:func:`pool_groups`) merge two columns or more (else the pooled problem is the problem)."""
    groups = pool_groups(problem)
    return len({(k, z) for (k, _zz), z in groups.items()}) < len(groups)


def pooled_problem(problem: HeteroProblem, groups: dict[tuple[str, str], str] | None = None) -> HeteroProblem:
    """The pooled relaxation (module docstring): one column per (kind, pool), links the least over the pools' zones'
    fits.  ``groups``: (kind, zone) -> pool name for every column with devices (default :func:`pool_groups`)."""
    cl = problem.cluster
    groups = pool_groups(problem) if groups is None else groups
    cols = [c for c in cl.columns if c.count > 0]
    members: dict[tuple[str, str], list[str]] = {}
    for c in cols:
        members.setdefault((c.kind, groups[(c.kind, c.zone)]), []).append(c.zone)
    fits: dict[LinkKey, LinkFit] = {}
    for (g, pz), (g2, pz2) in itertools.product(members, repeat=2):
        for t, t2 in itertools.product(TP_DEGREES, repeat=2):
            parts: dict[tuple[float, ...], None] = {}
            for z, z2 in itertools.product(members[(g, pz)], members[(g2, pz2)]):
                fit = cl.link_fits.get((z, g, t, z2, g2, t2))
                if fit is None:
                    break  # a pair without a fit: the pooled link is left out (the search never prices it)
                parts[fit.coefficients] = None
            else:
                ps = tuple(parts)
                fits[(pz, g, t, pz2, g2, t2)] = MinLinkFit(ps[0], ps)
    pooled_cols = [
        KindColumn(g, pz, sum(c.count for c in cols if c.kind == g and groups[(g, c.zone)] == pz)) for g, pz in members
    ]
    cluster = kinds_cluster(cl.kinds, pooled_cols, fits)
    return HeteroProblem(problem.model, cluster, problem.global_batch, problem.objective, problem.setting, problem.source)


Orders = dict[tuple[str, str], tuple[str, ...]]


_REPLICAS: dict[tuple[str, str, int], Replica] = {}


def _replica(kind: str, zone: str, tp: int) -> Replica:
    """One shared :class:`Replica` per (kind, zone, tp): the fills make tens of thousands, and the pricing's row tests
    (:func:`milp_partition.hetero.cost.evaluate`) compare by identity first (equal either way: a frozen value)."""
    key = (kind, zone, tp)
    got = _REPLICAS.get(key)
    if got is None:
        got = _REPLICAS[key] = Replica(kind, zone, tp)
    return got


def _fill_rows(problem: HeteroProblem, plan: HeteroPlan, order: Orders) -> HeteroPlan | None:
    """Zones for the pooled plan's replicas, row by row (replica r of every stage): each row's devices of a pool in
    the first of the pool's zones (``order``) with room for all of them, else replica by replica in the first zone
    with room; None when the counts do not hold it.

    Rows equal to the one before are placed together where every pool of the row has a zone with room for the whole
    row: the first such zone takes the next rows until its room falls below the row's need (the counts only fall, so
    row by row would choose it for each of them, the same placement)."""
    left = {(c.kind, c.zone): c.count for c in problem.cluster.columns}
    d, p = plan.dp, len(plan.stages)
    out: list[list[Replica]] = [[] for _ in range(p)]
    rows = list(zip(*plan.replicas))  # row r: replica r of every stage
    r = 0
    while r < d:
        row = rows[r]
        same = 1  # rows r.. equal to row (tuples compare their items by identity first)
        while r + same < d and rows[r + same] == row:
            same += 1
        need: dict[tuple[str, str], int] = {}
        for rep in row:
            need[(rep.kind, rep.zone)] = need.get((rep.kind, rep.zone), 0) + rep.tp
        zone_of = {key: next((z for z in order[key] if left[(key[0], z)] >= n), "") for key, n in need.items()}
        batch = 1
        if all(zone_of.values()):
            # every pool's first zone with room holds floor(room / need) rows like this one
            batch = min(same, *(left[(key[0], zone_of[key])] // n if n > 0 else same for key, n in need.items()))
        for i, rep in enumerate(row):
            key = (rep.kind, rep.zone)
            if batch > 1:
                z = zone_of[key]
                left[(rep.kind, z)] -= rep.tp * batch
                out[i].extend([_replica(rep.kind, z, rep.tp)] * batch)
                continue
            z = zone_of[key] or next((z2 for z2 in order[key] if left[(rep.kind, z2)] >= rep.tp), "")
            if not z:
                return None
            left[(rep.kind, z)] -= rep.tp
            out[i].append(_replica(rep.kind, z, rep.tp))
        r += batch
    return HeteroPlan(plan.mbs, plan.stages, tuple(tuple(x) for x in out))


def _fill_rows_by_row(problem: HeteroProblem, plan: HeteroPlan, order: Orders) -> HeteroPlan | None:
    """:func:`_fill_rows` one row at a time (its definition; the tests compare both)."""
    left = {(c.kind, c.zone): c.count for c in problem.cluster.columns}
    d, p = plan.dp, len(plan.stages)
    out: list[list[Replica]] = [[] for _ in range(p)]
    for r in range(d):
        row = [plan.replicas[i][r] for i in range(p)]
        need: dict[tuple[str, str], int] = {}
        for rep in row:
            need[(rep.kind, rep.zone)] = need.get((rep.kind, rep.zone), 0) + rep.tp
        zone_of = {key: next((z for z in order[key] if left[(key[0], z)] >= n), "") for key, n in need.items()}
        for i, rep in enumerate(row):
            key = (rep.kind, rep.zone)
            z = zone_of[key] or next((z2 for z2 in order[key] if left[(rep.kind, z2)] >= rep.tp), "")
            if not z:
                return None
            left[(rep.kind, z)] -= rep.tp
            out[i].append(_replica(rep.kind, z, rep.tp))
    return HeteroPlan(plan.mbs, plan.stages, tuple(tuple(x) for x in out))


def _fill_stages(problem: HeteroProblem, plan: HeteroPlan, order: Orders) -> HeteroPlan | None:
    """Zones stage by stage, the stages with the most devices first, each replica in order in the first of its pool's
    zones (``order``) with room (the large tps are placed while the zones have room); None when they do not fit.

    Replicas equal to the one before are placed together: the first zone with room takes the next ones until its room
    falls below their tp (the counts only fall: one by one would choose it for each of them)."""
    left = {(c.kind, c.zone): c.count for c in problem.cluster.columns}
    p = len(plan.stages)
    out: list[tuple[Replica, ...]] = [() for _ in range(p)]
    for i in sorted(range(p), key=lambda i: -max(r.tp for r in plan.replicas[i])):
        row: list[Replica] = []
        reps = plan.replicas[i]
        j = 0
        while j < len(reps):
            rep = reps[j]
            same = 1
            while j + same < len(reps) and (reps[j + same] is rep or reps[j + same] == rep):
                same += 1
            z = next((z2 for z2 in order[(rep.kind, rep.zone)] if left[(rep.kind, z2)] >= rep.tp), "")
            if not z:
                return None
            batch = min(same, left[(rep.kind, z)] // rep.tp) if rep.tp > 0 else same
            left[(rep.kind, z)] -= rep.tp * batch
            row.extend([_replica(rep.kind, z, rep.tp)] * batch)
            j += batch
        out[i] = tuple(row)
    return HeteroPlan(plan.mbs, plan.stages, tuple(out))


def _fill_stages_by_replica(problem: HeteroProblem, plan: HeteroPlan, order: Orders) -> HeteroPlan | None:
    """:func:`_fill_stages` one replica at a time (its definition; the tests compare both)."""
    left = {(c.kind, c.zone): c.count for c in problem.cluster.columns}
    p = len(plan.stages)
    out: list[tuple[Replica, ...]] = [() for _ in range(p)]
    for i in sorted(range(p), key=lambda i: -max(r.tp for r in plan.replicas[i])):
        row = []
        for rep in plan.replicas[i]:
            z = next((z2 for z2 in order[(rep.kind, rep.zone)] if left[(rep.kind, z2)] >= rep.tp), "")
            if not z:
                return None
            left[(rep.kind, z)] -= rep.tp
            row.append(_replica(rep.kind, z, rep.tp))
        out[i] = tuple(row)
    return HeteroPlan(plan.mbs, plan.stages, tuple(out))


def _whole_stage_plans(
    problem: HeteroProblem, plan: HeteroPlan, members: dict[tuple[str, str], list[str]], max_plans: int
) -> list[HeteroPlan]:
    """Zones for the pooled plan's replicas, every stage's replicas of one pool in one zone of it: every such choice
    (per stage and pool, a zone) that the columns' counts hold, when there are at most ``max_plans`` choices (else
    none).  Unlike the two fills, this lets neighbouring stages sit in different zones in any pattern (on
    gptneo-a128x2-v128x2-b2048 the A100-40 stages alternating zones: 6.8730 s where both fills give 6.9067 s)."""
    counts = {(c.kind, c.zone): c.count for c in problem.cluster.columns}
    need: dict[tuple[int, tuple[str, str]], int] = {}
    for i, row in enumerate(plan.replicas):
        for r in row:
            need[(i, (r.kind, r.zone))] = need.get((i, (r.kind, r.zone)), 0) + r.tp
    slots = sorted(need)
    choices = [members[key] for _i, key in slots]
    if any(not c for c in choices) or math.prod(len(c) for c in choices) > max_plans:
        return []
    out = []
    for combo in itertools.product(*choices):
        used: dict[tuple[str, str], int] = {}
        for (_i, key), z in zip(slots, combo):
            used[(key[0], z)] = used.get((key[0], z), 0) + need[(_i, key)]
        if any(n > counts.get(k, 0) for k, n in used.items()):
            continue
        zone = dict(zip(slots, combo))
        reps = tuple(
            tuple(_replica(r.kind, zone[(i, (r.kind, r.zone))], r.tp) for r in row) for i, row in enumerate(plan.replicas)
        )
        out.append(HeteroPlan(plan.mbs, plan.stages, reps))
    return out


def lift(
    problem: HeteroProblem,
    plan: HeteroPlan,
    groups: dict[tuple[str, str], str] | None = None,
    max_orders: int = 720,
    max_whole: int = 1024,
) -> tuple[HeteroPlan | None, float]:
    """The best plan of ``problem`` found by giving the pooled plan's replicas zones of their pools (module
    docstring), with its iteration seconds (``inf``: none fits the counts).  Every order of each pool's zones is tried
    with both fills (up to ``max_orders`` combinations; beyond, the zones by count, largest first, and its reverse),
    and every choice of one zone per stage and pool (:func:`_whole_stage_plans`, up to ``max_whole`` choices)."""
    groups = pool_groups(problem) if groups is None else groups
    # the pooled plan's replicas as :func:`_replica`'s shared objects (equal ones are then the same object: the fills'
    # runs of equal rows and replicas are found by identity, at every order)
    plan = HeteroPlan(plan.mbs, plan.stages, tuple(tuple(_replica(r.kind, r.zone, r.tp) for r in row) for row in plan.replicas))
    counts = {(c.kind, c.zone): c.count for c in problem.cluster.columns}
    members: dict[tuple[str, str], list[str]] = {}
    for (g, z), pz in groups.items():
        members.setdefault((g, pz), []).append(z)
    keys = sorted(members)
    per_pool: list[list[tuple[str, ...]]] = [list(itertools.permutations(members[k])) for k in keys]
    if math.prod(len(x) for x in per_pool) > max_orders:
        per_pool = []
        for k in keys:
            weight = {z: -counts[(k[0], z)] for z in members[k]}
            by = tuple(sorted(members[k], key=weight.__getitem__))
            per_pool.append([by, by[::-1]])
    best, best_v = None, math.inf
    memo: dict[tuple[object, ...], float] = {}  # the sends' and all-reduces' seconds, shared by the candidates
    # a candidate equal to one priced before changes nothing (the same value, and only a lower one replaces the best):
    # not priced again.  The fills build their replicas from :func:`_replica`'s shared objects, so a plan's replicas
    # by identity are its key (two equal plans have the same objects)
    priced: set[tuple[tuple[int, ...], ...]] = set()

    def consider(got: HeteroPlan) -> None:
        nonlocal best, best_v
        key = tuple(tuple(map(id, row)) for row in got.replicas)
        if key in priced:
            return
        priced.add(key)
        v = evaluate(problem, got, memo).iteration_s
        if v < best_v:
            best, best_v = got, v

    for combo in itertools.product(*per_pool):
        order = dict(zip(keys, combo))
        for fill in (_fill_rows, _fill_stages):
            got = fill(problem, plan, order)
            if got is not None:
                consider(got)
    for got in _whole_stage_plans(problem, plan, members, max_whole):
        consider(got)
    return best, best_v


def device_split(problem: HeteroProblem) -> int | None:
    """Where the columns hold one GPU kind in two regions or more: the largest region's devices N_A (the split of
    :func:`capped_pool_problem`), else None."""
    cols = [c for c in problem.cluster.columns if c.count > 0]
    per: dict[str, int] = {}
    for c in cols:
        per[region_of(c.zone)] = per.get(region_of(c.zone), 0) + c.count
    if len({c.kind for c in cols}) != 1 or len(per) < 2:
        return None
    return max(per.values())


def capped_pool_problem(problem: HeteroProblem, cap: int) -> HeteroProblem:
    """The pooled relaxation of every plan of at most ``cap`` devices: every zone of a kind in one pool
    (:func:`pooled_problem` with :func:`pool_groups`), each pooled column's count cut to ``cap``.

    **Claim: its optimum (or its search's proven bound) is at most every plan of the setting that uses at most ``cap``
    devices of each kind.**  Such a plan, its zones renamed to the pool, is a plan of the pooled problem no slower (the
    module docstring's claim) that uses at most ``cap`` devices of each pooled column: a plan of this problem.

    With one kind in two regions and ``cap`` = N_A, the larger region's devices (:func:`device_split`), this covers
    every plan that stays in one region and every plan in both regions with at most N_A devices: the plans it leaves
    out hold more devices than either region, so they use both (``pooled.split_bound`` bounds them apart).  On the
    five-zone settings its optimum equals the us-central1 region's pooled optimum (the us-west1-b links and devices
    add nothing below N_A devices there), found in 0.4-2.1 CPU s."""
    pooled = pooled_problem(problem, pool_groups(problem))
    cols = [KindColumn(c.kind, c.zone, min(c.count, cap)) for c in pooled.cluster.columns]
    cluster = kinds_cluster(pooled.cluster.kinds, cols, pooled.cluster.link_fits)
    return HeteroProblem(pooled.model, cluster, pooled.global_batch, pooled.objective, pooled.setting, pooled.source)


def region_groups(problem: HeteroProblem) -> dict[tuple[str, str], str]:
    """(kind, zone) -> one pool per kind and region (``us-central1-a`` -> ``us-central1``): a tighter relaxation than
    :func:`pool_groups` where a kind spans regions (the links between regions are the slow ones)."""
    return {(c.kind, c.zone): POOL_ZONE + ":" + region_of(c.zone) for c in problem.cluster.columns if c.count > 0}


def region_of(zone: str) -> str:
    """A zone's region (``us-central1-a`` -> ``us-central1``)."""
    return zone.rsplit("-", 1)[0] if "-" in zone else zone


def region_subsettings(problem: HeteroProblem) -> list[HeteroProblem]:
    """Where the columns span two regions or more: per region, the setting restricted to that region's columns (the
    same columns and counts, the same links), most devices first; else none.  A plan of a sub-setting is a plan of the
    setting (it leaves the other regions' devices unused), so its lifted plans are incumbents; its bound covers only
    the plans that stay in the region, so it is no bound of the setting."""
    cols = [c for c in problem.cluster.columns if c.count > 0]
    regions: dict[str, list[KindColumn]] = {}
    for c in cols:
        regions.setdefault(region_of(c.zone), []).append(c)
    if len(regions) < 2:
        return []
    out = []
    for _name, rcols in sorted(regions.items(), key=lambda kv: -sum(c.count for c in kv[1])):
        cluster = kinds_cluster(problem.cluster.kinds, rcols, problem.cluster.link_fits)
        out.append(
            HeteroProblem(problem.model, cluster, problem.global_batch, problem.objective, problem.setting, problem.source)
        )
    return out


def groupings(problem: HeteroProblem) -> list[dict[tuple[str, str], str]]:
    """The pools the solve tries, coarsest first: one per kind, then one per kind and region where that differs and
    still merges two columns or more (a grouping that merges nothing is the problem itself)."""
    out, seen = [], set()
    for groups in (pool_groups(problem), region_groups(problem)):
        n = len({(k, z) for (k, _zone), z in groups.items()})  # columns of the pooled problem
        if n < len(groups) and n not in seen:  # the region pools refine the kind pools: the same count, the same pools
            seen.add(n)
            out.append(groups)
    return out


def rename(plan: HeteroPlan, groups: dict[tuple[str, str], str]) -> HeteroPlan:
    """The plan with every replica's zone renamed to its pool (a plan of the pooled problem, no slower there)."""
    reps = tuple(tuple(Replica(r.kind, groups[(r.kind, r.zone)], r.tp) for r in row) for row in plan.replicas)
    return HeteroPlan(plan.mbs, plan.stages, reps)
