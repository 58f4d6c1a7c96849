"""``solve --space torchtitan|megatron``: the best joint plan among those a training engine can run, proven.

An engine runs every stage with the same data- and tensor-parallel degrees (d, t) and, for torchtitan, checkpoints
every transformer block or none (Megatron-LM can also recompute the first r blocks of each stage; this search covers
its every-or-none plans only, a part of its space, and says so).  The search solves the problem once per candidate:
each (d, t) forced on every stage (:class:`~milp_partition.joint.problem.JointShape`), times the blocks restricted to
their plain configurations or to their recomputing ones (:data:`~milp_partition.io.export.layout.RECOMPUTE`).  Every
plan of the space lies in one candidate, so

- the best verified plan over the candidates is the space's best found, and
- the least of the candidates' proven bounds (a proven-infeasible candidate: none; one without a bound: 0) is a
  proven bound over the whole space:

the result is optimal exactly when every candidate is settled (optimal or infeasible).  The time limit is shared
evenly among the candidates left.  The plan's stages follow the blocks' order where the blocks form a chain (a
transformer's do), which the engines also need; the export checks it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from milp_partition.budget import Budget
from milp_partition.chain import PROOF_REL_TOL, gap_of
from milp_partition.io.export.layout import RECOMPUTE, block_ids
from milp_partition.joint.problem import JointConfig, JointProblem, JointShape, JointSolveSettings
from milp_partition.joint.solve import JointResult, solve_joint
from milp_partition.result import Status

#: Engines whose space the search knows.
SPACES = ("torchtitan", "megatron")


def with_recomputation(problem: JointProblem, recompute: bool) -> JointProblem | None:
    """The problem with every block restricted to its recomputing (or its plain) configurations, on the tensor-parallel
    degrees where every block has one; ``None`` when no degree is left."""
    blocks = set(block_ids(problem))

    def kept(cs: tuple[JointConfig, ...]) -> tuple[JointConfig, ...]:
        return tuple(c for c in cs if (c.id == RECOMPUTE) == recompute)

    degrees = [t for t in problem.degrees if all(kept(n.configs[t]) for n in problem.nodes if n.id in blocks)]
    if not degrees:
        return None
    nodes = [
        replace(n, configs={t: kept(n.configs[t]) if n.id in blocks else n.configs[t] for t in degrees}) for n in problem.nodes
    ]
    return replace(problem, nodes=tuple(nodes))


def candidates(problem: JointProblem) -> list[tuple[str, JointProblem]]:
    """``(label, problem)`` per candidate: each (d, t) on every stage (within a shape the problem already forces), with
    the blocks plain or recomputing."""
    k = problem.cluster.device_count
    forced = problem.shape or JointShape()
    out = []
    for recompute in (False, True):
        variant = with_recomputation(problem, recompute)
        if variant is None:
            continue
        for t in variant.degrees:
            if forced.tensor_parallel not in (None, t):
                continue
            for d in range(1, k // t + 1):
                if forced.data_parallel not in (None, d):
                    continue
                shape = JointShape(stages=forced.stages, data_parallel=d, tensor_parallel=t)
                label = f"d={d} t={t} {'recompute' if recompute else 'plain'}"
                out.append((label, replace(variant, shape=shape)))
    return out


def solve_in_space(problem: JointProblem, settings: JointSolveSettings, engine: str) -> JointResult:
    """The best plan of ``engine``'s space (module docstring), with a bound proven over the whole space."""
    if engine not in SPACES:
        raise ValueError(f"unknown engine space {engine!r}; known: {', '.join(SPACES)}")
    budget = Budget.starting_now(settings.time_limit_s)
    todo = candidates(problem)
    best: JointResult | None = None
    bound, settled, stopped = math.inf, True, None
    tried: list[dict[str, object]] = []
    for i, (label, sub) in enumerate(todo):
        share = max(1.0, budget.left() / (len(todo) - i)) if math.isfinite(budget.left()) else settings.time_limit_s
        res = solve_joint(sub, replace(settings, time_limit_s=share))
        tried.append({"candidate": label, "status": str(res.status), "objective": res.objective, "bound": res.bound})
        stopped = stopped or res.stopped_by
        if res.status is Status.INFEASIBLE:
            continue
        settled = settled and res.status is Status.OPTIMAL
        bound = min(bound, res.bound if res.bound is not None else 0.0)
        if res.objective is not None and (best is None or best.objective is None or res.objective < best.objective):
            best = res
    notes = {"engine": engine, "candidates": tried}
    if best is None or best.objective is None:
        status = Status.INFEASIBLE if settled and todo and all(t["status"] == "infeasible" for t in tried) else Status.UNKNOWN
        base = JointResult(problem="joint", solver=settings.solver, status=status, time_unit="s")
        base.message = f"no plan in {engine}'s space" + (" (proven)" if status is Status.INFEASIBLE else " found")
        base.solver_notes = {"space": notes}
        base.solve_seconds = budget.elapsed()
        return base
    proven = settled and best.objective <= bound * (1 + PROOF_REL_TOL) + 1e-12
    status = Status.OPTIMAL if proven else Status.FEASIBLE
    message = f"the best plan in {engine}'s space over {len(todo)} candidates" + (" (proven)" if proven else "")
    if engine == "megatron":
        message += "; recomputation every block or none (Megatron's first-r-blocks plans are not searched)"
    return replace(
        best,
        status=status,
        bound=min(bound, best.objective),
        gap=gap_of(best.objective, min(bound, best.objective)),
        message=message,
        stopped_by=None if proven else stopped,
        solve_seconds=budget.elapsed(),
        solver_notes={**best.solver_notes, "space": notes},
    )
