r"""The exact DP of the run-objective planning problem (:mod:`milp_partition.costmodel.plan`).

Minimise the step of :mod:`milp_partition.costmodel` over every plan shape (``p`` stages, data-parallel degree
``d`` and tensor-parallel degree ``t`` in ``problem.tensor_degrees`` with ``p d t <= k``, ``m >= p`` micro-batches per replica with ``d m | G`` (1F1B as ``run`` executes it,
torch's ``Schedule1F1B``, needs a micro-batch per stage), not ``m = p`` where ``p >= 2`` stages are data parallel under
DDP (``d >= 2``, ``t = 1``: torch's DDP inside ``Schedule1F1B`` fails there, :func:`ddp_pipeline_runs`), and the layers
timed at ``b = G / (d m)``), every split of the layers into ``p`` contiguous stages and every set of recomputed layers::

    min  sum_q u_q + (m - 1) max_q u_q + E + max_q (AR_q + O_q)     (E: the shape's, ``coefficients.fixed_for(p, d, m)``;
                                                                 where it was measured, ``u_q`` and ``AR_q`` leave out
                                                                 the latencies E holds: ``latencies_in_empty``)
    s.t. mem_q(R) <= M                                          (c) memory, every stage

Two facts make it exact:

1. For a stage (its layers, its position ``q``, ``p``, ``d``, ``m``), the tail ``AR_q + O_q`` does not depend on
   recomputation, and the objective does not decrease when ``u_q`` grows; so each stage takes its least ``u_q``
   over the recomputed sets that fit (c), independently of the others.  That is a covering knapsack: with
   ``t`` an upper end on the largest recomputed layer's activations (it enters the temporaries), choose
   ``R subseteq {v : a_v <= t}`` of least ``sum_R f_v`` whose savings ``(p_q b) sum_R (a_v - in_v)`` cover the
   excess; its exact Pareto frontier (time added, bytes saved) over the stage's layers gives the least time, and
   the least over every ``t`` in ``{a_v}`` is the stage's optimum (the optimal set is found at its own ``t``;
   every other ``t`` over-counts the temporaries, so what it admits fits).
2. Over the splits, a state after ``j`` layers in ``q`` stages keeps the Pareto set of
   ``(sum u, max u, max tail)``: every term of the objective is non-decreasing in each, so a dominated triple
   never completes to a better plan.  A partial plan whose value already reaches the best complete one is
   dropped (the terms only grow).

At ``t > 1`` a layer's passes, parameters and optimizer step are those of :mod:`milp_partition.costmodel.tensor`
(its passes as timed split on the ``t``-rank mesh at ``b`` where they were, else its split share divided by ``t``, its
activation all-reduces, DTensor's hooks: :func:`~milp_partition.costmodel.tensor.split_pass_s`), and ``a_v`` is each rank's
``a_v(t, b)`` (measured on the ``t``-rank mesh where it was, else the ``t = 1`` count) in every memory term and in what
recomputation saves, as is what a later stage keeps of what it receives; the two facts hold unchanged.

Every shape is enumerated: when the loop ends the best plan is optimal and its value is the bound (exhaustive).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from milp_partition.costmodel.plan import RunPlan, RunPlanProblem
from milp_partition.costmodel.tensor import collective_alpha_s, split_pass_s


@dataclass(frozen=True)
class RunDPResult:
    """The best plan, its step (seconds), the proven bound, whether the search was exhaustive, shapes explored."""

    plan: RunPlan | None
    step_s: float
    bound_s: float
    complete: bool
    shapes: int


def _divisors(n: int) -> list[int]:
    return [x for x in range(1, n + 1) if n % x == 0]


class _Need:
    """Bytes per in-flight sample a stage must save given ``t`` (see :func:`_least_recompute`)."""

    def __init__(self, base: float, b: int, per_sample: float, memory: float) -> None:
        self.base, self.b, self.per_sample, self.memory = base, b, per_sample, memory

    def __call__(self, t: float) -> float:
        return (self.base + self.b * t - self.memory) / self.per_sample


def _least_recompute(items: list[tuple[float, float, float]], need_for: _Need) -> tuple[float, tuple[int, ...]] | None:
    """Least added time over recomputed sets that fit: ``items`` = (added time, saved bytes per in-flight sample, a_v).

    For each ``t`` in ``{a_v}``: the covering knapsack over ``{v : a_v <= t}`` (at least one layer), solved exactly
    by :func:`_cover`.
    """
    best: tuple[float, tuple[int, ...]] | None = None
    for t in sorted({a for _, _, a in items}):
        need = need_for(t)
        allowed = [i for i, (_, save, a) in enumerate(items) if a <= t and save > 0]
        found = _cover([(items[i][0], items[i][1]) for i in allowed], max(need, 0.0), math.inf if best is None else best[0])
        if found is not None and (best is None or found[0] < best[0]):
            best = (found[0], tuple(allowed[x] for x in found[1]))
    return best


def _cover(items: list[tuple[float, float]], need: float, above: float) -> tuple[float, tuple[int, ...]] | None:
    """Least ``sum cost`` over non-empty subsets with ``sum save >= need`` and cost below ``above`` (branch and bound).

    Items in order of cost per byte saved; the bound of a node is its cost plus the fractional (LP) cover of what is
    still needed by the items not yet decided, a lower bound on every completion, so the search is exact.
    """
    if not items or sum(save for _, save in items) < need:
        return None
    order = sorted(range(len(items)), key=lambda i: (items[i][0] / items[i][1], i))
    cost = [items[i][0] for i in order]
    save = [items[i][1] for i in order]
    best_cost, best_set = above, None
    chosen: list[int] = []
    suffix = [0.0] * (len(order) + 1)
    for j in range(len(order) - 1, -1, -1):
        suffix[j] = suffix[j + 1] + save[j]

    def lp(j: int, left: float) -> float:
        extra = 0.0
        while left > 0 and j < len(order):
            if save[j] >= left:  # a fraction of item j covers the rest (no float residue left to spoil it)
                return extra + cost[j] * (left / save[j])
            extra += cost[j]
            left -= save[j]
            j += 1
        return extra if left <= 0 else math.inf

    stack: list[tuple[int, float, float, int]] = [(0, 0.0, need, 0)]  # (next item, cost so far, still needed, chosen)
    while stack:
        j, c, left, n_chosen = stack.pop()
        del chosen[n_chosen:]
        if left <= 0 and n_chosen > 0:
            if c < best_cost:
                best_cost, best_set = c, tuple(chosen)
            continue
        if j == len(order) or suffix[j] < left or c + lp(j, left) >= best_cost:
            continue
        if left <= 0:  # need met but nothing chosen yet: the cheapest single item completes it
            stack.append((j + 1, c, left, n_chosen))
            chosen.append(order[j])
            stack.append((len(order), c + cost[j], left - save[j], n_chosen + 1))
            continue
        stack.append((j + 1, c, left, n_chosen))  # without item j (explored second)
        chosen.append(order[j])
        stack.append((j + 1, c + cost[j], left - save[j], n_chosen + 1))  # with item j (first)
    if best_set is None:
        return None
    return best_cost, best_set


class _Stages:
    """Stage costs of one shape (``d``, ``m``, ``p``, ``t``; micro-batches of ``b`` samples), each computed once."""

    def __init__(self, problem: RunPlanProblem, d: int, m: int, p: int, t: int = 1) -> None:
        self.problem, self.d, self.m, self.p, self.t = problem, d, m, p, t
        self.b = b = problem.global_batch // (d * m)
        c = problem.coefficients
        self.in_empty = c.latencies_in_empty(p, d, m, t)
        ar_alpha = collective_alpha_s(c.tensor, c.allreduce_alpha_s)  # (in o_dt where measured with the pairs)
        self.split = [v.split_at(t) for v in problem.layers]
        # timed with p d t ranks at once where measured; at t > 1 split as run splits it (costmodel.tensor)
        self.f = [
            split_pass_s(
                v.forward_at(b, p * d * t), s, t, b, False, ar_alpha, c.allreduce_beta_s_per_byte, c.tensor.dtensor_module_s
            )
            for v, s in zip(problem.layers, self.split, strict=True)
        ]
        self.g = [
            split_pass_s(
                v.backward_at(b, p * d * t), s, t, b, True, ar_alpha, c.allreduce_beta_s_per_byte, c.tensor.dtensor_module_s
            )
            for v, s in zip(problem.layers, self.split, strict=True)
        ]
        self.a = [v.saved_at(b, t) for v in problem.layers]  # a_v(t, b): measured at this size and degree where measured
        self.cache: dict[tuple[int, int, int], tuple[float, float, tuple[int, ...]] | None] = {}

    def cost(self, i: int, e: int, q: int) -> tuple[float, float, tuple[int, ...]] | None:
        """``(u_q, AR_q + O_q, recomputed positions)`` of layers ``i..e-1`` as stage ``q``; ``None`` if nothing fits."""
        problem, b, d, p = self.problem, self.b, self.d, self.p
        flight = min(self.m, p - q) + (self.problem.coefficients.memory.first_stage_extra_microbatches if q == 0 else 0)
        key = (i, e, flight if q < p - 1 else -flight)  # the last stage sends nothing; stage 0 alone starts at i = 0
        if key in self.cache:
            return self.cache[key]
        c, mc = problem.coefficients, problem.coefficients.memory
        k_opt = mc.optimizer_state_bytes_per_param_byte
        span = problem.layers[i:e]
        weights = sum(s.param_bytes for s in self.split[i:e])  # each rank's share at t
        tensors = sum(v.param_tensors for v in span)
        lat = self.in_empty  # the latencies E already holds: every message's, one bucket's all-reduce (t = 1)
        alpha = 0.0 if lat else c.p2p_alpha_s
        send = alpha + b * problem.cut_bytes_per_sample[e - 1] * c.p2p_beta_s_per_byte if q < p - 1 else 0.0
        unit = sum(self.f[i:e]) + sum(self.g[i:e]) + 2.0 * send
        tail = tensors * c.optimizer_s_per_param_tensor + weights * c.optimizer_s_per_param_byte
        tail += sum(s.split_tensors for s in self.split[i:e]) * c.tensor.dtensor_optimizer_tensor_s
        if d > 1:  # at t > 1 run all-reduces by hand, no DDP in E: every bucket's latency here, and no rho (DDP's)
            buckets = max(1, math.ceil(weights / c.ddp_bucket_bytes)) - int(lat and self.t == 1)
            rho = c.ddp_in_step_for(d, b) if self.t == 1 else 0.0
            tail += buckets * c.allreduce_alpha_s + weights * (c.allreduce_beta_s_per_byte + rho)
        base = (  # (c) memory without recomputation
            weights * (2.0 + k_opt)
            + sum(v.buffer_bytes for v in span)
            + flight * b * (sum(self.a[i:e]) + problem.received_bytes_per_sample(i, e, b, self.t))  # + its copy of its input
            + b * mc.transient_factor * max(self.a[i:e])
            + tensors * (2 + math.ceil(k_opt)) * mc.rounding_bytes
            + mc.workspace_bytes
            + problem.batch_inputs_bytes(q, flight, b)  # (the first stage holds the global batch's inputs)
        )
        out: tuple[float, float, tuple[int, ...]] | None = None
        if base <= problem.memory_bytes:
            out = (unit, tail, ())
        elif problem.recompute:
            idx = [i + j for j, v in enumerate(span) if v.recomputable_at(b, self.t)]
            items = [(self.f[x], self.a[x] - problem.layers[x].input_bytes_per_sample, self.a[x]) for x in idx]
            found = _least_recompute(items, _Need(base, b, flight * b, problem.memory_bytes)) if items else None
            if found is not None:
                out = (unit + found[0], tail, tuple(idx[x] for x in found[1]))
        self.cache[key] = out
        return out


def ddp_pipeline_runs(p: int, d: int, m: int, t: int) -> bool:
    """Whether ``run`` can execute a shape of ``p`` stages, data-parallel degree ``d``, ``m`` micro-batches per replica
    and tensor-parallel degree ``t`` as far as DDP inside torch's ``Schedule1F1B`` goes: not at ``m = p`` with ``p >= 2``
    and ``d >= 2`` at ``t = 1`` (DDP wraps each stage only at ``t = 1``).  There torch 2.13's DDP reducer asserts in the
    second step's first forward ("rebuilt parameter indices size is not same as original model parameters size", its
    bucket rebuild after the first step; measured: 2 x 2 at m = 2 and 3 x 2 at m = 3 fail, 2 x 2 at m = 3, 4, 6 and
    3 x 2 at m = 4 run), in ``run``'s own empty step and so in any plan of that shape (issue 42 item 4: the planner
    does not propose what cannot run)."""
    return not (p >= 2 and d >= 2 and t == 1 and m == p)


def run_shapes(problem: RunPlanProblem) -> list[tuple[int, int, int, int]]:
    """Every ``(d, m, p, t)`` the problem allows (``p d t <= k``, ``m >= p``, ``d m | G``, ``b`` timed, ``t`` among
    ``problem.tensor_degrees``, the forced shape, :func:`ddp_pipeline_runs`)."""
    G, k, n, shape = problem.global_batch, problem.devices, len(problem.layers), problem.shape
    sizes = set(problem.sizes)
    out = []
    for t in sorted(set(problem.tensor_degrees)):
        if t > k or shape.tensor_parallel not in (None, t):
            continue
        for d in _divisors(G):
            if d * t > k or shape.data_parallel not in (None, d):
                continue
            for m in _divisors(G // d):
                if G // (d * m) not in sizes or shape.microbatches not in (None, m):
                    continue
                for p in range(1, min(k // (d * t), n, m) + 1):  # m >= p
                    if shape.stages in (None, p) and ddp_pipeline_runs(p, d, m, t):
                        out.append((d, m, p, t))
    return out


def solve_run_dp(problem: RunPlanProblem, time_limit_s: float | None = None) -> RunDPResult:
    """The optimal plan of ``problem`` (see the module docstring); past ``time_limit_s`` the best so far, no proof."""
    start = time.perf_counter()
    n = len(problem.layers)
    best_value, best_plan = math.inf, None
    explored = 0
    complete = True
    for d, m, p, t in run_shapes(problem):
        if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
            complete = False
            break
        explored += 1
        fixed = problem.coefficients.fixed_for(p, d, m, t)  # E of this shape
        stages = _Stages(problem, d, m, p, t)
        # states[j]: Pareto list of (sum u, max u, max tail, back pointer) after j layers in q stages
        states: list[list[_Entry]] = [[] for _ in range(n + 1)]
        states[0] = [(0.0, 0.0, 0.0, None)]
        for q in range(p):
            nxt: list[list[_Entry]] = [[] for _ in range(n + 1)]
            for i in range(n):
                ends = [n] if q == p - 1 else range(i + 1, n - (p - q - 1) + 1)
                for e in ends if states[i] else ():
                    st = stages.cost(i, e, q)
                    if st is None:
                        continue
                    u, tail, rec = st
                    for su, mu, mt, back in states[i]:
                        entry = (su + u, max(mu, u), max(mt, tail), (back, (i, e, rec)))
                        if entry[0] + (m - 1) * entry[1] + fixed + entry[2] < best_value:  # the terms only grow
                            nxt[e].append(entry)
            states = [_pareto(x) for x in nxt]
        for su, mu, mt, back in states[n]:
            value = su + (m - 1) * mu + fixed + mt
            if value < best_value:
                best_value, best_plan = value, _plan(back, d, m, problem, t)
    return RunDPResult(best_plan, best_value, best_value if complete else 0.0, complete, explored)


_Entry = tuple[float, float, float, object]


def _pareto(entries: list[tuple[float, float, float, object]]) -> list[tuple[float, float, float, object]]:
    entries.sort(key=lambda x: (x[0], x[1], x[2]))
    kept: list[tuple[float, float, float, object]] = []
    for e in entries:
        if not any(k[0] <= e[0] and k[1] <= e[1] and k[2] <= e[2] for k in kept):
            kept.append(e)
    return kept


def _plan(back: Any, d: int, m: int, problem: RunPlanProblem, t: int = 1) -> RunPlan:
    stages: list[tuple[int, int]] = []
    recomputed: set[str] = set()
    while back is not None:
        back, last = back
        i, e, rec = last
        stages.append((i, e))
        recomputed |= {problem.layers[x].id for x in rec}
    return RunPlan(tuple(reversed(stages)), d, m, frozenset(recomputed), t)
