"""The run-objective planner (joint/run_dp.py) against enumeration of every shape, split, micro-batch count,
recomputed set and tensor-parallel degree under the same cost model (milp_partition.costmodel), priced by the
independent verifier; at t > 1 with each rank's saved activations a_v(t, b) measured at some sizes (the t = 1 count at
the others) and what a later stage keeps of what it receives measured at t at some sizes."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest

from milp_partition.costmodel.memory import MemoryCoefficients
from milp_partition.costmodel.plan import RunCoefficients, RunLayer, RunPlan, RunPlanProblem, RunShape
from milp_partition.costmodel.tensor import SplitCost, TensorParallelCoefficients
from milp_partition.joint.run_dp import run_shapes, solve_run_dp
from milp_partition.verifiers.joint_run import verify_run_plan


def _compositions(n: int, p: int) -> list[tuple[tuple[int, int], ...]]:
    out = []
    for cuts in itertools.combinations(range(1, n), p - 1):
        bounds = (0, *cuts, n)
        out.append(tuple(itertools.pairwise(bounds)))
    return out


def brute_force(problem: RunPlanProblem) -> tuple[float, RunPlan | None]:
    """The least verified step over every plan (shape, split, micro-batch count, recomputed set, tensor-parallel degree
    from 1 to the devices: the verifier refuses a degree the problem does not offer)."""
    n, G = len(problem.layers), problem.global_batch
    recomputable = [v.id for v in problem.layers] if problem.recompute else []  # the verifier refuses what is not
    subsets = [frozenset(c) for r in range(len(recomputable) + 1) for c in itertools.combinations(recomputable, r)]
    best, best_plan = math.inf, None
    for t in range(1, problem.devices + 1):
        if t > 1 and t not in problem.tensor_degrees:
            continue  # (the verifier refuses it: no split to price it by)
        for d in range(1, problem.devices // t + 1):
            for m in range(1, G + 1):
                if G % (d * m):
                    continue
                for p in range(1, min(problem.devices // (d * t), n) + 1):
                    for split in _compositions(n, p):
                        for rec in subsets:
                            plan = RunPlan(split, d, m, rec, t)
                            report = verify_run_plan(problem, plan)
                            if report.feasible and report.step_s < best:
                                best, best_plan = report.step_s, plan
    return best, best_plan


def _random_split(
    rng: random.Random,
    param_bytes: float,
    param_tensors: int,
    t: int,
    saved: float = 0.0,
    measured: tuple[set[int], set[int]] = (set(), set()),
    before: int = 0,
) -> SplitCost:
    """A layer at degree ``t``: some share of its time and parameters split, a few all-reduces, some split modules; its
    saved bytes per sample on one rank measured at the sizes ``measured[0]`` (mostly below the ``t = 1`` figure
    ``saved``, sometimes above), and what it saves again of the ``before`` earlier layers' at the sizes ``measured[1]``."""
    modules = rng.choice([0, 1, 1, 2])
    saved_at, reused_at = measured
    return SplitCost(
        split_share=rng.uniform(0.5, 1.0) if modules else 0.0,
        param_bytes=param_bytes * rng.uniform(1.0 / t, 1.0),
        param_tensors=param_tensors,
        split_tensors=min(param_tensors, 2 * modules),
        split_modules=modules,
        allreduce_forward_bytes_per_sample=tuple(rng.uniform(0.0, 1.0) for _ in range(rng.randint(0, modules))),
        allreduce_backward_bytes_per_sample=tuple(rng.uniform(0.0, 1.0) for _ in range(rng.randint(0, modules))),
        saved_bytes_per_sample_at={s: saved * rng.uniform(0.2, 1.2) for s in sorted(saved_at)},
        reused_from_at={s: {f"l{j}": rng.choice([0.0, rng.uniform(0.0, 3.0)]) for j in range(before)} for s in sorted(reused_at)},
    )


def random_problem(rng: random.Random, shape: RunShape | None = None) -> RunPlanProblem:
    n = rng.randint(2, 5)
    G = rng.choice([4, 6, 8])
    sizes = sorted({s for s in range(1, G + 1) if G % s == 0 and (s == 1 or rng.random() < 0.7)})
    layers = []
    heavy = rng.choice([1.0, 1.0, 20.0])  # large weights: where splitting them over t ranks is what fits
    # per degree: the sizes a_v(t, b) was measured at on the t-rank mesh, and those what a stage receives was (every layer)
    measured = {t: ({s for s in sizes if rng.random() < 0.6}, {s for s in sizes if rng.random() < 0.5}) for t in (2, 3)}
    for i in range(n):
        overhead, per_sample = rng.uniform(0.1, 1.0), rng.uniform(0.1, 2.0)
        saved = rng.uniform(1.0, 10.0)
        busy = rng.random() < 0.5  # timed with 1..4 ranks at once (1: inside run's step, run/inrun.py) for some sizes
        per_size = rng.random() < 0.5  # a_v measured per size, below or above the one figure
        param_bytes, param_tensors = heavy * rng.uniform(0.0, 4.0), rng.randint(0, 3)
        layers.append(
            RunLayer(
                f"l{i}",
                {s: overhead + per_sample * s for s in sizes},
                {s: 2 * overhead + 2 * per_sample * s * rng.uniform(0.8, 1.2) for s in sizes},
                param_bytes=param_bytes,
                param_tensors=param_tensors,
                buffer_bytes=rng.choice([0.0, 1.0]),
                saved_bytes_per_sample=saved,
                input_bytes_per_sample=saved * rng.choice([0.05, 0.3, 1.5]),
                busy_forward_s={
                    (r, s): rng.uniform(0.1, 3.0) * s for r in (1, 2, 3, 4) for s in sizes if busy and rng.random() < 0.7
                },
                busy_backward_s={
                    (r, s): rng.uniform(0.1, 6.0) * s for r in (1, 2, 3, 4) for s in sizes if busy and rng.random() < 0.7
                },
                saved_bytes_per_sample_at={s: saved * rng.uniform(0.2, 1.5) for s in sizes if per_size and rng.random() < 0.7},
                # what the layer saves again of earlier layers' (a stage starting between them keeps its own copy)
                reused_from_at={s: {f"l{j}": rng.choice([0.0, rng.uniform(0.0, 4.0)]) for j in range(i)} for s in sizes},
                splits={t: _random_split(rng, param_bytes, param_tensors, t, saved, measured[t], i) for t in (2, 3)},
            )
        )
    degrees = rng.choice([(1,), (1, 2), (1, 2, 3), (1, 3)])
    coeffs = RunCoefficients(
        p2p_alpha_s=rng.uniform(0.0, 0.5),
        p2p_beta_s_per_byte=rng.uniform(0.0, 0.1),
        allreduce_alpha_s=rng.uniform(0.0, 1.0),
        allreduce_beta_s_per_byte=rng.uniform(0.0, 0.2),
        optimizer_s_per_param_tensor=rng.uniform(0.0, 0.1),
        optimizer_s_per_param_byte=rng.uniform(0.0, 0.01),
        fixed_s=rng.uniform(0.0, 1.0),
        ddp_bucket_bytes=rng.choice([8.0, 1e9]),
        memory=MemoryCoefficients(
            rng.choice([0.0, 2.0]), rng.choice([0, 1]), rng.choice([1.0, 2.0]), rng.uniform(0, 5), rng.choice([0, 1])
        ),
        tensor=TensorParallelCoefficients(rng.uniform(0.0, 0.5), rng.uniform(0.0, 0.05), rng.random() < 0.5),
    )
    if rng.random() < 0.5:  # E measured for some shapes: their latencies are in it (latencies_in_empty)
        table = tuple(
            (p, d, m, rng.uniform(0.0, 2.0))
            for d in range(1, 5)
            for m in range(1, G + 1)
            for p in range(1, 5)
            if p <= m and rng.random() < 0.5
        )
        tensor_table = tuple(
            (p, d, t, m, rng.uniform(0.0, 2.0))
            for t in (2, 3)
            for d in range(1, 3)
            for m in range(1, G + 1)
            for p in range(1, 3)
            if p <= m and rng.random() < 0.5
        )
        coeffs = replace(coeffs, empty_step_s=table, tensor_empty_step_s=tensor_table)
    if rng.random() < 0.5:  # rho(d, b): DDP's all-reduce inside a step beyond the idle fit, for some (d, b)
        rho = tuple((d, s, rng.uniform(0.0, 0.5)) for d in range(2, 5) for s in sizes if rng.random() < 0.6)
        coeffs = replace(coeffs, ddp_in_step_s_per_byte=rho)
    total = sum(v.param_bytes for v in layers) * 4 + sum(v.saved_bytes_per_sample for v in layers) * G
    return RunPlanProblem(
        tuple(layers),
        tuple(rng.uniform(0.5, 5.0) for _ in range(n - 1)),
        G,
        rng.randint(1, 4),
        total * rng.uniform(0.1, 0.8),
        coeffs,
        recompute=rng.random() < 0.8,
        shape=shape or RunShape(),
        input_bytes_per_sample=rng.choice([0.0, rng.uniform(0.0, 3.0)]),
        received_measured=rng.random() < 0.5,  # else a later stage keeps the whole cut
        tensor_degrees=degrees,
    )


@pytest.mark.parametrize("seed", range(80))
def test_optimum_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    shape = None
    if seed % 4 == 3:  # a forced shape
        shape = RunShape(
            stages=rng.choice([None, 1, 2]),
            data_parallel=rng.choice([None, 1, 2]),
            microbatches=rng.choice([None, 1, 2]),
            tensor_parallel=rng.choice([None, 1, 2]),
        )
    problem = random_problem(rng, shape)
    want, _ = brute_force(problem)
    got = solve_run_dp(problem)
    assert got.complete
    if math.isinf(want):
        assert got.plan is None and math.isinf(got.step_s)
        return
    assert got.plan is not None
    report = verify_run_plan(problem, got.plan)
    assert report.feasible, report.violations
    assert report.step_s == pytest.approx(want, rel=1e-9)
    assert got.step_s == pytest.approx(report.step_s, rel=1e-9)
    assert got.bound_s <= report.step_s * (1 + 1e-9)  # the bound never above a feasible plan
    assert got.bound_s == pytest.approx(want, rel=1e-9)


def _forced_split(seed: int) -> RunPlanProblem:
    """A random problem forced to t = 2 on at least two devices (where a_v(t, b) is what its memory reads)."""
    problem = random_problem(random.Random(1000 + seed))
    return replace(problem, devices=max(problem.devices, 2), tensor_degrees=(1, 2), shape=RunShape(tensor_parallel=2))


@pytest.mark.parametrize("seed", range(40))
def test_optimum_at_t2_matches_enumeration_with_measured_saved_bytes(seed: int) -> None:
    """Forced to t = 2: each rank's a_v(t, b) (measured at some sizes, the t = 1 count at the others) and what a stage
    keeps of what it receives at t decide the memory; the DP's optimum and bound equal enumeration's."""
    _assert_t2_optimum_is_enumeration(_forced_split(seed))


def test_measured_saved_bytes_at_t2_change_the_answer() -> None:
    """The instances above exercise the new term: with a_v(t, b) and the received bytes at t dropped (the t = 1 count
    everywhere), some optima and some verdicts (feasible or not) change."""
    changed = 0
    for seed in range(40):
        problem = _forced_split(seed)
        layers = tuple(
            replace(v, splits={t: replace(x, saved_bytes_per_sample_at={}, reused_from_at={}) for t, x in v.splits.items()})
            for v in problem.layers
        )
        a, b = solve_run_dp(problem), solve_run_dp(replace(problem, layers=layers))
        changed += a.plan != b.plan or a.step_s != pytest.approx(b.step_s, rel=1e-9)
    assert changed >= 3


def test_enumeration_sees_binding_memory_and_recomputation() -> None:
    """The random instances exercise what the DP decides: some optima recompute, some use m > 1, some are infeasible."""
    recomputes = multi = infeasible = pipelines = tensor = 0
    for seed in range(80):
        problem = random_problem(random.Random(seed))
        got = solve_run_dp(problem)
        if got.plan is None:
            infeasible += 1
            continue
        recomputes += bool(got.plan.recomputed)
        multi += got.plan.microbatches > 1
        pipelines += len(got.plan.stages) > 1
        tensor += got.plan.tensor_parallel > 1
    assert recomputes and multi and infeasible and pipelines and tensor


def test_the_micro_batch_size_is_a_decision() -> None:
    """A per-operator overhead makes one large micro-batch cheaper on one stage; a pipeline wants several."""

    def layer(i: int) -> RunLayer:
        sizes = (1, 2, 4, 8)
        return RunLayer(f"l{i}", {s: 1.0 + 0.1 * s for s in sizes}, {s: 2.0 + 0.2 * s for s in sizes}, 0.0, 0, 0.0, 1.0, 1.0)

    one = RunPlanProblem((layer(0), layer(1)), (1.0,), 8, 1, 1e9)
    got = solve_run_dp(one)
    assert got.plan == RunPlan(((0, 2),), 1, 1)  # 8 samples at once: 2 (3 + 2.4) = 10.8 s, m = 8 would be 8 x 6.6
    assert got.step_s == pytest.approx(2 * (1.0 + 0.8 + 2.0 + 1.6))
    forced = solve_run_dp(RunPlanProblem((layer(0), layer(1)), (1.0,), 8, 1, 1e9, shape=RunShape(microbatches=8)))
    assert forced.plan is not None and forced.plan.microbatches == 8 and forced.step_s > got.step_s


@pytest.mark.parametrize("seed", range(200))
def test_covering_knapsack_matches_enumeration(seed: int) -> None:
    """The per-stage recomputation choice (branch and bound) against every non-empty subset."""
    from milp_partition.joint.run_dp import _cover

    rng = random.Random(seed)
    items = [
        (rng.choice([rng.uniform(0.1, 5.0), 1.0]), rng.choice([rng.uniform(0.1, 5.0), 2.0])) for _ in range(rng.randint(1, 8))
    ]
    need = rng.uniform(-1.0, sum(s for _, s in items) * 1.1)
    best = math.inf
    for r in range(1, len(items) + 1):
        for subset in itertools.combinations(range(len(items)), r):
            if sum(items[i][1] for i in subset) >= need:
                best = min(best, sum(items[i][0] for i in subset))
    got = _cover(items, need, math.inf)
    if math.isinf(best):
        assert got is None
    else:
        assert got is not None and got[0] == pytest.approx(best, rel=1e-12)
        assert sum(items[i][1] for i in got[1]) >= need and sum(items[i][0] for i in got[1]) == pytest.approx(got[0])


def test_verifier_names_what_a_bad_plan_breaks() -> None:
    sizes = {1: 1.0, 2: 1.5}
    layers = tuple(RunLayer(f"l{i}", sizes, sizes, 10.0, 2, 0.0, 4.0, 1.0 if i else 8.0) for i in range(3))
    problem = RunPlanProblem(layers, (1.0, 1.0), 4, 2, 1e6, shape=RunShape(data_parallel=1))
    cases = {
        RunPlan(((0, 1), (2, 3)), 1, 4): "must start at 1",
        RunPlan(((0, 3),), 2, 2): "forced shape",
        RunPlan(((0, 1), (1, 2), (2, 3)), 1, 4): "need 3 devices",
        RunPlan(((0, 3),), 1, 3): "does not divide",
        RunPlan(((0, 3),), 1, 1): "has no time at micro-batch size 4",
        RunPlan(((0, 3),), 1, 2, frozenset({"l0"})): "not offered",  # its input is larger than what it saves
        RunPlan(((0, 3),), 1, 2, frozenset({"x"})): "not a layer",
    }
    for plan, why in cases.items():
        report = verify_run_plan(problem, plan)
        assert not report.feasible and any(why in v for v in report.violations), (plan, report.violations)
    tight = RunPlanProblem(layers, (1.0, 1.0), 4, 2, 100.0)
    report = verify_run_plan(tight, RunPlan(((0, 3),), 1, 2))
    assert not report.feasible and "bytes per device" in report.violations[0]
    assert verify_run_plan(problem, RunPlan(((0, 2), (2, 3)), 1, 4)).feasible


def test_a_pipeline_gets_a_micro_batch_per_stage() -> None:
    """run executes 1F1B with torch's Schedule1F1B, which needs m >= p: with a per-operator overhead that favours one
    micro-batch of the whole batch, two stages on two devices still get two micro-batches (the verifier refuses one)."""
    sizes = (1, 2, 4, 8)
    layers = tuple(
        RunLayer(f"l{i}", {s: 1.0 + 0.01 * s for s in sizes}, {s: 2.0 + 0.02 * s for s in sizes}, 0.0, 0, 0.0, 1.0, 1.0)
        for i in range(2)
    )
    problem = RunPlanProblem(layers, (1.0,), 8, 2, 1e9, shape=RunShape(stages=2, data_parallel=1))
    got = solve_run_dp(problem)
    assert got.plan is not None and got.plan.microbatches == 2 and len(got.plan.stages) == 2
    assert not verify_run_plan(problem, RunPlan(((0, 1), (1, 2)), 1, 1)).feasible
    assert math.isinf(solve_run_dp(RunPlanProblem(layers, (1.0,), 8, 2, 1e9, shape=RunShape(2, 1, 1))).step_s)


def test_ddp_over_pipeline_stages_never_gets_exactly_one_micro_batch_per_stage() -> None:
    """Torch's DDP inside Schedule1F1B fails at m = p (p >= 2, d >= 2, t = 1): with a per-operator overhead that favours
    few micro-batches, 2 stages x d = 2 take m = 3, not 2; the verifier refuses m = 2 (and enumeration, which prices
    every plan with the verifier, agrees); the shapes the DP enumerates on 4 devices hold no such shape, and without
    data parallelism m = p = 2 stays a plan."""
    sizes = (1, 2, 3, 6)
    layers = tuple(
        RunLayer(f"l{i}", {s: 1.0 + 0.01 * s for s in sizes}, {s: 2.0 + 0.02 * s for s in sizes}, 0.0, 0, 0.0, 1.0, 1.0)
        for i in range(2)
    )
    forced = RunPlanProblem(layers, (1.0,), 12, 4, 1e9, shape=RunShape(stages=2, data_parallel=2))
    got = solve_run_dp(forced)
    assert got.plan is not None and got.plan.microbatches == 3 and got.plan.data_parallel == 2
    report = verify_run_plan(forced, RunPlan(((0, 1), (1, 2)), 2, 2))
    assert not report.feasible and any("m = p" in v for v in report.violations)
    assert brute_force(forced)[0] == pytest.approx(got.step_s, rel=1e-12)
    free = RunPlanProblem(layers, (1.0,), 12, 4, 1e9)
    shapes = run_shapes(free)
    assert (2, 3, 2, 1) in shapes and (1, 2, 2, 1) in shapes  # (d, m, p, t): 2 x 2 at m = 3; d = 1 at m = p = 2
    assert not [x for x in shapes if x[2] >= 2 and x[0] >= 2 and x[3] == 1 and x[1] == x[2]]
    assert verify_run_plan(free, RunPlan(((0, 1), (1, 2)), 1, 2)).feasible


def test_the_empty_step_of_each_shape_is_priced_and_can_move_the_optimum() -> None:
    """E per shape (the run's measured empty step): the DP, the verifier and enumeration agree, and an E that makes
    the pipeline's runtime dear moves the optimum to one stage."""
    sizes = (1, 2, 4, 8)
    layers = tuple(
        RunLayer(f"l{i}", {s: 1.0 * s for s in sizes}, {s: 2.0 * s for s in sizes}, 0.0, 0, 0.0, 1.0, 1.0) for i in range(2)
    )
    plain = RunPlanProblem(layers, (0.0,), 8, 2, 1e9)
    base = solve_run_dp(plain)
    assert base.plan is not None and (len(base.plan.stages), base.plan.data_parallel) != (1, 1)
    # every shape with d or p above 1 costs 100 s more; one stage on one device none
    table = tuple((p, d, m, 0.0 if p * d == 1 else 100.0) for d in (1, 2) for m in sizes for p in (1, 2))
    dear = RunPlanProblem(layers, (0.0,), 8, 2, 1e9, coefficients=RunCoefficients(fixed_s=7.0, empty_step_s=table))
    got = solve_run_dp(dear)
    want, _ = brute_force(dear)
    assert got.plan is not None and (len(got.plan.stages), got.plan.data_parallel) == (1, 1)
    assert got.step_s == pytest.approx(want) and got.bound_s == pytest.approx(want)
    assert verify_run_plan(dear, got.plan).step_s == pytest.approx(got.step_s)
    assert verify_run_plan(dear, base.plan).step_s == pytest.approx(base.step_s + 100.0)  # no alpha to take out here
    assert RunCoefficients(fixed_s=7.0, empty_step_s=table).fixed_for(3, 1, 1) == 7.0  # a shape not listed


def test_a_measured_empty_step_holds_the_latencies_it_sends() -> None:
    """Where E of a shape was measured, it holds every message's latency and one bucket's all-reduce latency: the
    verifier and the DP price the stages without them there, with them where E is the constant ``fixed_s``."""
    sizes = (1, 2)
    layers = tuple(RunLayer(f"l{i}", {s: 1.0 for s in sizes}, {s: 2.0 for s in sizes}, 8.0, 2, 0.0, 1.0, 1.0) for i in range(2))
    coeffs = RunCoefficients(p2p_alpha_s=0.5, p2p_beta_s_per_byte=0.0, allreduce_alpha_s=3.0, ddp_bucket_bytes=4.0)
    pipe, data = RunPlan(((0, 1), (1, 2)), 1, 2), RunPlan(((0, 2),), 2, 1)
    plain = RunPlanProblem(layers, (1.0,), 2, 2, 1e9, coeffs)
    # 2 stages, m = 2: u = 3 + 2 x 0.5 and 3; 4 + 3 + (2 - 1) x 4 = 11
    assert verify_run_plan(plain, pipe).step_s == pytest.approx(11.0)
    # d = 2, one stage of 16 bytes in buckets of 4: 4 latencies of 3 s after 6 s of compute
    assert verify_run_plan(plain, data).step_s == pytest.approx(6.0 + 12.0)
    table = ((2, 1, 2, 0.25), (1, 2, 1, 0.75))
    measured = RunPlanProblem(layers, (1.0,), 2, 2, 1e9, replace(coeffs, empty_step_s=table))
    assert verify_run_plan(measured, pipe).step_s == pytest.approx(3 + 3 + 3 + 0.25)
    assert verify_run_plan(measured, data).step_s == pytest.approx(6.0 + 3 * 3.0 + 0.75)
    got, (want, _) = solve_run_dp(measured), brute_force(measured)
    assert got.step_s == pytest.approx(want) == pytest.approx(6.0)  # one stage, one device, one micro-batch of 2
    assert got.bound_s == pytest.approx(want)


def test_a_later_stage_keeps_what_it_receives() -> None:
    """The received activations: a stage after the first saves its own copy of what crosses its cut (its first layer's
    input, counted at the sender too), once per micro-batch in flight; the DP and the verifier count it alike."""
    sizes = (1, 2)
    layers = tuple(
        RunLayer(f"l{i}", {s: 1.0 for s in sizes}, {s: 2.0 for s in sizes}, 0.0, 0, 0.0, saved, 100.0)
        for i, saved in enumerate((5.0, 10.0))
    )
    coeffs = RunCoefficients(memory=MemoryCoefficients(0.0, 0, 0.0, 0.0, 0))
    plan = RunPlan(((0, 1), (1, 2)), 1, 2)
    report = verify_run_plan(RunPlanProblem(layers, (7.0,), 2, 2, 1e9, coeffs), plan)
    # m = 2 micro-batches of 1 sample: the first stage holds 2 of 5 bytes, the last 1 of 10 + 7 received
    assert [mem.activations_bytes for mem in report.memory] == [10.0, 17.0]
    for memory, fits in ((16.0, False), (17.0, True)):  # the received bytes alone decide
        problem = RunPlanProblem(layers, (7.0,), 2, 2, memory, coeffs, shape=RunShape(stages=2, data_parallel=1, microbatches=2))
        assert verify_run_plan(problem, plan).feasible is fits
        assert solve_run_dp(problem).plan == (plan if fits else None)


def test_a_later_stage_keeps_what_its_layers_were_measured_to_save_again() -> None:
    """Measured reuse: a stage starting at layer 2 keeps what layers 2.. save of tensors layers 0..1 saved first (not the
    whole cut, nor what they save again of each other's)."""

    def layer(i: int, again: dict[str, float]) -> RunLayer:
        return RunLayer(f"l{i}", {1: 1.0, 2: 1.0}, {1: 2.0, 2: 2.0}, 0.0, 0, 0.0, 10.0, 100.0, reused_from_at={1: again})

    layers = (layer(0, {}), layer(1, {"l0": 3.0}), layer(2, {"l1": 4.0, "l0": 1.0}), layer(3, {"l2": 5.0, "l1": 0.5}))
    coeffs = RunCoefficients(memory=MemoryCoefficients(0.0, 0, 0.0, 0.0, 0))
    measured = RunPlanProblem(layers, (9.0, 9.0, 9.0), 2, 2, 1e9, coeffs, received_measured=True)
    assert measured.received_bytes_per_sample(2, 4, 1) == pytest.approx(4.0 + 1.0 + 0.5)
    assert measured.received_bytes_per_sample(0, 2, 1) == 0.0
    plan = RunPlan(((0, 2), (2, 4)), 1, 2)  # two micro-batches of one sample: the last stage holds one
    assert verify_run_plan(measured, plan).memory[1].activations_bytes == pytest.approx(20.0 + 5.5)
    whole_cut = RunPlanProblem(layers, (9.0, 9.0, 9.0), 2, 2, 1e9, coeffs)
    assert verify_run_plan(whole_cut, plan).memory[1].activations_bytes == pytest.approx(20.0 + 9.0)


@pytest.mark.parametrize("seed", range(30))
def test_forced_tensor_parallel_matches_enumeration(seed: int) -> None:
    """``--tensor-parallel 2`` forced: the DP's optimum and bound equal the enumeration's over every t = 2 plan."""
    problem = random_problem(random.Random(1000 + seed), RunShape(tensor_parallel=2))
    _assert_t2_optimum_is_enumeration(replace(problem, tensor_degrees=(1, 2), devices=max(problem.devices, 2)))


def _assert_t2_optimum_is_enumeration(problem: RunPlanProblem) -> None:
    """The DP on ``problem`` (forced to t = 2) is complete, and its optimum and bound equal enumeration's; its plan has
    t = 2 and the verifier accepts it at the same step (or there is no plan where enumeration finds none)."""
    want, _ = brute_force(problem)
    got = solve_run_dp(problem)
    assert got.complete
    if math.isinf(want):
        assert got.plan is None
        return
    assert got.plan is not None and got.plan.tensor_parallel == 2
    report = verify_run_plan(problem, got.plan)
    assert report.feasible, report.violations
    assert got.step_s == pytest.approx(want, rel=1e-9) and got.bound_s == pytest.approx(want, rel=1e-9)
    assert report.step_s == pytest.approx(want, rel=1e-9)


def test_a_tensor_parallel_layer_is_priced_by_hand() -> None:
    """One layer at t = 2 (costmodel.tensor): half its time split, one forward and one backward all-reduce, two split
    modules' DTensor hooks, each rank half the split weights; and a degree the problem does not offer is refused."""
    split = SplitCost(0.5, 6.0, 2, 2, 2, (3.0,), (1.0,))
    layer = RunLayer("l0", {1: 2.0}, {1: 4.0}, 8.0, 2, 0.0, 1.0, 1.0, splits={2: split})
    coeffs = RunCoefficients(
        allreduce_alpha_s=0.1,
        allreduce_beta_s_per_byte=0.01,
        tensor=TensorParallelCoefficients(dtensor_module_s=0.2, dtensor_optimizer_tensor_s=0.05),
        memory=MemoryCoefficients(2.0, 0, 1.0, 0.0, 0),
    )
    problem = RunPlanProblem((layer,), (), 1, 2, 1e9, coeffs, tensor_degrees=(1, 2))
    report = verify_run_plan(problem, RunPlan(((0, 1),), 1, 1, frozenset(), 2))
    assert report.feasible, report.violations
    # f = 2 (1 - 0.5 + 0.25) + (0.1 + 3 x 0.01) + 2 x 0.2 / 2; g = 4 x 0.75 + (0.1 + 0.01) + 0.2; optimizer 2 x 0.05
    assert report.step_s == pytest.approx(1.83 + 3.31 + 0.1)
    assert report.memory[0].weights_bytes == 6.0 and report.memory[0].optimizer_bytes == 12.0
    got = solve_run_dp(problem)
    assert got.plan == RunPlan(((0, 1),), 1, 1, frozenset(), 2) and got.step_s == pytest.approx(5.24)  # t = 1: 6 s
    # o_dt measured with the pairs on the t-rank mesh holds the all-reduces' latency: 2 x 0.1 s less
    paired = replace(coeffs, tensor=replace(coeffs.tensor, latency_in_module=True))
    plan = RunPlan(((0, 1),), 1, 1, frozenset(), 2)
    assert verify_run_plan(replace(problem, coefficients=paired), plan).step_s == pytest.approx(5.24 - 0.2)
    assert solve_run_dp(replace(problem, coefficients=paired)).step_s == pytest.approx(5.04)
    plain = replace(problem, tensor_degrees=(1,))
    refused = verify_run_plan(plain, RunPlan(((0, 1),), 1, 1, frozenset(), 2))
    assert not refused.feasible and "not offered" in refused.violations[0]
    assert solve_run_dp(plain).plan == RunPlan(((0, 1),), 1, 1)


def test_ddp_in_step_prices_the_data_parallel_tail_per_byte_at_its_size() -> None:
    """rho(d, b) adds W_q rho to the tail of a d > 1 plan at micro-batch size b only (d = 1 and other sizes unchanged);
    the DP, the verifier and enumeration agree, and a dear rho moves the optimum off data parallelism."""
    sizes = (1, 2, 4)
    layers = tuple(
        RunLayer(f"l{i}", {s: 1.0 * s for s in sizes}, {s: 2.0 * s for s in sizes}, 4.0, 2, 0.0, 1.0, 1.0) for i in range(2)
    )
    plain = RunPlanProblem(layers, (0.0,), 4, 2, 1e9)
    data = RunPlan(((0, 2),), 2, 1)  # d = 2, one micro-batch of 2 samples each: 2 x (2 + 4) = 12 s
    assert verify_run_plan(plain, data).step_s == pytest.approx(12.0)
    base = solve_run_dp(plain)
    assert base.plan is not None and base.plan.data_parallel == 2
    coeffs = RunCoefficients(ddp_in_step_s_per_byte=((2, 2, 1.0), (2, 1, 9.0)))
    assert coeffs.ddp_in_step_for(1, 2) == 0.0 and coeffs.ddp_in_step_for(2, 4) == 0.0 and coeffs.ddp_in_step_for(2, 2) == 1.0
    dear = RunPlanProblem(layers, (0.0,), 4, 2, 1e9, coeffs)
    assert verify_run_plan(dear, data).step_s == pytest.approx(12.0 + 8.0 * 1.0)  # W = 8 bytes
    one = RunPlan(((0, 2),), 1, 1)
    assert verify_run_plan(dear, one).step_s == pytest.approx(verify_run_plan(plain, one).step_s)
    got, (want, _) = solve_run_dp(dear), brute_force(dear)
    assert got.step_s == pytest.approx(want) and got.bound_s == pytest.approx(want)
    assert got.plan is not None and verify_run_plan(dear, got.plan).step_s == pytest.approx(want)
    # two stages of 1 + 2 s at b = 1 over m = 4: 3 + 3 + 3 x 3 = 15 s, now under d = 2's 20 s (d = 2 at b = 1: 84 s)
    assert got.plan == RunPlan(((0, 1), (1, 2)), 1, 4) and got.step_s == pytest.approx(15.0)
    assert base.step_s == pytest.approx(12.0)
