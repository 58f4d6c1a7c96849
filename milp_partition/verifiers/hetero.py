"""Independent verifier of heterogeneous plans: Sailor's simulator formula recomputed from the profiles.

Reads a plan in Sailor's plan format (a dict, as ``tools/score_plan.py`` takes it) and the problem's data
(profiles, memory, network fits); shares no code with :mod:`milp_partition.hetero.cost` or the search.
Checks the space's rules (one pipeline, one VM entry per replica, one D for all stages, contiguous stages
covering every layer, tp in {1, 2, 4} within the node and profiled, the devices per (kind, zone), memory per
replica) and recomputes the iteration time (``objective="sailor"``: the simulator's; ``"sound"``: gradients
sized by the stage's input, no doubled sends).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from milp_partition.hetero.problem import HeteroProblem


@dataclass
class HeteroReport:
    """The verifier's findings: feasibility, violations and the recomputed time (seconds)."""

    feasible: bool
    violations: list[str] = field(default_factory=list)
    iteration_s: float | None = None
    throughput_it_s: float | None = None
    compute_s: list[float] = field(default_factory=list)
    sends_s: list[float] = field(default_factory=list)
    allreduce_s: list[float] = field(default_factory=list)
    memory_bytes: list[list[float]] = field(default_factory=list)


def _link_time(problem: HeteroProblem, key: tuple[str, str, int, str, str, int], nbytes: float) -> float:
    fit = problem.cluster.link_fits[key].coefficients
    if nbytes == 0:
        return 0.0
    x = math.log2(nbytes / 1e6)
    bw = sum(c * x ** (len(fit) - k - 1) for k, c in enumerate(fit))
    return (nbytes / 1e9) / bw


def _allreduce(problem: HeteroProblem, key: tuple[str, str, int, str, str, int], nbytes: float, n: int) -> float:
    total, left = 0.0, nbytes
    while left > 0:
        piece = 500000000 if left > 500000000 else left
        if piece != 0 and n > 1:
            total += 2 * (n - 1) * _link_time(problem, key, piece / n)
        left -= piece
    return total


def _replicas(problem: HeteroProblem, reps: Any, mbs: int, v: list[str]) -> list[list[tuple[str, str, int]]]:
    """Each stage's replicas as (kind, zone, tp), checked against the space's rules and the per-column device counts
    (what breaks a rule is appended to ``v``)."""
    model = problem.model
    used: dict[tuple[str, str], int] = {}
    parsed: list[list[tuple[str, str, int]]] = []
    for i, row in enumerate(reps):
        prow = []
        for r, rep in enumerate(row):
            vms, tp = rep[0], int(rep[1])
            if len(vms) != 1:
                v.append(f"stage {i} replica {r}: {len(vms)} VM entries (the space has one)")
                continue
            kind, per_node, zone = str(vms[0][0]), int(vms[0][1]), str(vms[0][2])
            if kind not in problem.cluster.kinds:
                v.append(f"stage {i} replica {r}: kind {kind!r} not in the cluster")
                continue
            node = problem.cluster.kinds[kind].devices_per_node
            if tp not in (1, 2, 4) or tp > node:
                v.append(f"stage {i} replica {r}: tp {tp} not in {{1, 2, 4}} within {node} per node")
            if per_node < tp:
                v.append(f"stage {i} replica {r}: gpus_per_node {per_node} below tp {tp}")
            if tp not in model.mbs_keys.get(kind, ()) or (kind, mbs, tp) not in model.times:
                v.append(f"stage {i} replica {r}: ({kind}, mbs {mbs}, tp {tp}) is not profiled")
            used[(kind, zone)] = used.get((kind, zone), 0) + tp
            prow.append((kind, zone, tp))
        parsed.append(prow)
    avail = {(c.kind, c.zone): c.count for c in problem.cluster.columns}
    for key, n in sorted(used.items()):
        if n > avail.get(key, 0):
            v.append(f"{key[0]}_{key[1]}: uses {n} devices, {avail.get(key, 0)} available")
    return parsed


def _memory(
    problem: HeteroProblem, stages: list[list[int]], parsed: list[list[tuple[str, str, int]]], mbs: int, v: list[str]
) -> list[list[float]]:
    """Each replica's memory under the simulator's rule (a replica over its kind's memory is appended to ``v``)."""
    model, p = problem.model, len(stages)
    mem: list[list[float]] = []
    mult = model.optimizer_bytes_per_param
    for i, (stage, row) in enumerate(zip(stages, parsed)):
        mrow = []
        for r, (kind, _zone, tp) in enumerate(row):
            params = sum(model.params_floats[tp][ly] for ly in stage)
            act = sum(model.act_mem_floats[tp][ly] for ly in stage) * mbs * 4
            b = params * mult + act * (p - i) + (2.0e9 if tp == 1 else 3.0e9)
            mrow.append(b)
            if b > problem.cluster.memory_of(kind):
                v.append(f"stage {i} replica {r} ({kind}, tp {tp}): {b:.0f} bytes over {problem.cluster.memory_of(kind)}")
        mem.append(mrow)
    return mem


def verify_hetero(problem: HeteroProblem, plan: dict[str, Any]) -> HeteroReport:
    """Check ``plan`` (Sailor's format) against the space's rules and recompute its iteration time."""
    v: list[str] = []
    model = problem.model
    try:
        pls = plan["pipeline_list"]
        mbs = int(plan["mbs"])
    except (KeyError, TypeError, ValueError) as exc:
        return HeteroReport(False, [f"not a plan in Sailor's format: {exc}"])
    if len(pls) != 1:
        return HeteroReport(False, [f"{len(pls)} pipelines; the space has one"])
    pl = pls[0]
    stages = [list(s) for s in pl["layers_per_stage"]]
    reps = pl["tmp_per_stage"]
    p = len(stages)
    if p == 0 or len(reps) != p or int(pl.get("num_stages", p)) != p:
        return HeteroReport(False, ["stage lists disagree in length"])
    flat = [x for s in stages for x in s]
    if flat != list(range(model.layers)) or any(not s for s in stages):
        return HeteroReport(False, [f"stages must be non-empty, contiguous and cover layers 0..{model.layers - 1} in order"])
    dps = [len(r) for r in reps]
    if len(set(dps)) != 1 or dps[0] < 1:
        return HeteroReport(False, [f"every stage needs the same number of replicas >= 1, got {dps}"])
    if list(pl.get("dp", dps)) != dps:
        v.append(f"dp {pl.get('dp')} disagrees with the replicas listed {dps}")
    d = dps[0]
    parsed = _replicas(problem, reps, mbs, v)
    if v:
        return HeteroReport(False, v)
    mem = _memory(problem, stages, parsed, mbs, v)
    if v:
        return HeteroReport(False, v, memory_bytes=mem)
    sound = problem.objective == "sound"
    m = math.ceil(problem.global_batch / (mbs * d))
    comp, upd = [], []
    for stage, row in zip(stages, parsed):
        best = 0.0
        for kind, _zone, tp in row:
            prof = model.times[(kind, mbs, tp)]
            best = max(best, sum(prof[ly][0] + prof[ly][1] for ly in stage))
            upd.append(prof[stage[0]][2])
        comp.append(best)
    o = model.act_output_floats
    sends = []
    for i in range(p):
        fwd = bwd = 0.0
        if i < p - 1:
            for (k1, z1, t1), (k2, z2, t2) in zip(parsed[i], parsed[i + 1]):
                fwd = max(fwd, _link_time(problem, (z1, k1, t1, z2, k2, t2), o[stages[i][-1]] * 4 * mbs))
        if i > 0:
            size = (o[stages[i - 1][-1]] if sound else o[stages[i][0]]) * 4 * mbs
            for (k1, z1, t1), (k2, z2, t2) in zip(parsed[i], parsed[i - 1]):
                bwd = max(bwd, _link_time(problem, (z1, k1, t1, z2, k2, t2), size))
        if p == 1:
            sends.append(0.0)
        elif i == 0:
            sends.append(fwd if (p <= 3 or sound) else 2 * fwd)
        elif i == p - 1:
            sends.append(bwd if sound else 2 * bwd)
        else:
            sends.append(fwd + bwd)
    t_pp = (m - 1) * max(c + x for c, x in zip(comp, sends)) + sum(sends) + sum(comp) + max(upd)
    ars = []
    for stage, row in zip(stages, parsed):
        tp_min = min([4] + [t for _k, _z, t in row])
        size = sum(model.params_floats[1][ly] * 4 / tp_min for ly in stage)
        best = 0.0
        for (k1, z1, _t1), (k2, z2, _t2) in itertools.pairwise(row):
            best = max(best, _allreduce(problem, (z1, k1, 1, z2, k2, 1), size, d))
        ars.append(best)
    t = t_pp + max(ars)
    return HeteroReport(True, [], t, 1.0 / t, comp, sends, ars, mem)
