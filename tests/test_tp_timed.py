"""Tensor-parallel layers priced as they run (issue 42, the under-estimate at t = 2): each layer's forward and backward
timed split on the t-rank mesh (run/tp_timed.py, in the calibration launch of run/empty.py) and read as f_v(b, t),
g_v(b, t) by the one cost model (costmodel/tensor.py), the DP (joint/run_dp.py) and the verifier's own recomputation
(verifiers/joint_run.py); the analytic price where not timed.  Brute force: the DP's optimum and bound equal
enumeration with measured times at some sizes, forced to t = 2 and free."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from milp_partition.costmodel.memory import MemoryCoefficients
from milp_partition.costmodel.plan import RunCoefficients, RunLayer, RunPlan, RunPlanProblem, RunShape
from milp_partition.costmodel.tensor import SplitCost, TensorParallelCoefficients
from milp_partition.joint.run_dp import solve_run_dp
from milp_partition.verifiers.joint_run import verify_run_plan
from tests.test_run_dp_bruteforce import _assert_t2_optimum_is_enumeration, brute_force, random_problem


def _with_measured(problem: RunPlanProblem, rng: random.Random) -> RunPlanProblem:
    """``problem`` with each layer's passes at every offered degree timed split at some sizes (the same sizes for every
    layer, as the calibration times the whole model at a size): 0.2-4x the unsplit layer's, around what the analytic price would say, so measured
    and analytic prices disagree both ways."""
    degrees = [t for t in problem.tensor_degrees if t > 1] or [2]
    at = {t: [b for b in problem.sizes if rng.random() < 0.6] for t in (2, 3)}
    layers = []
    for v in problem.layers:
        splits = dict(v.splits)
        for t in degrees:
            sp = splits[t]
            fwd = {b: v.forward_s[b] * rng.uniform(0.2, 4.0) for b in at[t]}
            bwd = {b: v.backward_s[b] * rng.uniform(0.2, 4.0) for b in at[t]}
            splits[t] = replace(sp, forward_s_at=fwd, backward_s_at=bwd)
        layers.append(replace(v, splits=splits))
    return replace(problem, layers=tuple(layers))


def _forced(seed: int) -> RunPlanProblem:
    rng = random.Random(3000 + seed)
    problem = random_problem(rng)
    problem = replace(problem, devices=max(problem.devices, 2), tensor_degrees=(1, 2), shape=RunShape(tensor_parallel=2))
    return _with_measured(problem, rng)


@pytest.mark.parametrize("seed", range(30))
def test_optimum_at_t2_with_measured_split_times_matches_enumeration(seed: int) -> None:
    """Forced to t = 2, each layer's f_v(b, 2), g_v(b, 2) measured at some sizes (the analytic price at the others):
    the DP's optimum and bound equal enumeration's under the verifier's own pricing."""
    _assert_t2_optimum_is_enumeration(_forced(seed))


@pytest.mark.parametrize("seed", range(30))
def test_free_optimum_with_measured_split_times_matches_enumeration(seed: int) -> None:
    """Free shape (t among the offered degrees), measured split times at some sizes: optimum and bound = enumeration."""
    rng = random.Random(4000 + seed)
    problem = _with_measured(random_problem(rng), rng)
    want, _ = brute_force(problem)
    got = solve_run_dp(problem)
    assert got.complete
    if math.isinf(want):
        assert got.plan is None
        return
    assert got.plan is not None
    report = verify_run_plan(problem, got.plan)
    assert report.feasible, report.violations
    assert report.step_s == pytest.approx(want, rel=1e-9)
    assert got.bound_s == pytest.approx(want, rel=1e-9) and got.bound_s <= report.step_s * (1 + 1e-9)


def test_measured_split_times_change_the_answer() -> None:
    """The instances above exercise the measured times: with them dropped (the analytic price everywhere) some optima
    change their plan or step."""
    changed = 0
    for seed in range(30):
        for problem in (_forced(seed), _with_measured(random_problem(random.Random(4000 + seed)), random.Random(seed))):
            layers = tuple(
                replace(v, splits={t: replace(x, forward_s_at={}, backward_s_at={}) for t, x in v.splits.items()})
                for v in problem.layers
            )
            a, b = solve_run_dp(problem), solve_run_dp(replace(problem, layers=layers))
            changed += a.plan != b.plan or a.step_s != pytest.approx(b.step_s, rel=1e-9)
    assert changed >= 5


def test_a_measured_split_layer_is_priced_by_hand() -> None:
    """One layer at t = 2 timed split at b = 1 (forward 3.5 s, backward 2.5 s): the verifier and the DP price those as
    they are, no analytic term added (DTensor's hooks and the all-reduces are in them); at b = 2, not timed, the
    analytic price: f = 2 (1 - 0.5 + 0.25) + (0.1 + 2 x 3 x 0.01) + 0.2, g = 4 x 0.75 + (0.1 + 2 x 0.01) + 0.2.  Free,
    at b = 1: the analytic price (5.24 s) would choose t = 2 over t = 1 (6 s); as timed (6.1 s), t = 1."""
    split = SplitCost(0.5, 6.0, 2, 2, 2, (3.0,), (1.0,), forward_s_at={1: 3.5}, backward_s_at={1: 2.5})
    layer = RunLayer("l0", {1: 2.0, 2: 2.0}, {1: 4.0, 2: 4.0}, 8.0, 2, 0.0, 1.0, 1.0, splits={2: split})
    coeffs = RunCoefficients(
        allreduce_alpha_s=0.1,
        allreduce_beta_s_per_byte=0.01,
        tensor=TensorParallelCoefficients(dtensor_module_s=0.2, dtensor_optimizer_tensor_s=0.05),
        memory=MemoryCoefficients(2.0, 0, 1.0, 0.0, 0),
    )
    for G, want in ((1, 3.5 + 2.5 + 0.1), (2, 1.86 + 3.32 + 0.1)):
        problem = RunPlanProblem((layer,), (), G, 2, 1e9, coeffs, tensor_degrees=(1, 2), shape=RunShape(tensor_parallel=2))
        report = verify_run_plan(problem, RunPlan(((0, 1),), 1, 1, frozenset(), 2))
        assert report.feasible, report.violations
        assert report.step_s == pytest.approx(want)
        assert solve_run_dp(replace(problem, shape=RunShape(tensor_parallel=2, microbatches=1))).step_s == pytest.approx(want)
    free = RunPlanProblem((layer,), (), 1, 2, 1e9, coeffs, tensor_degrees=(1, 2))
    assert solve_run_dp(free).plan == RunPlan(((0, 1),), 1, 1) and solve_run_dp(free).step_s == pytest.approx(6.0)
    analytic = replace(free, layers=(replace(layer, splits={2: replace(split, forward_s_at={}, backward_s_at={})}),))
    assert solve_run_dp(analytic).plan == RunPlan(((0, 1),), 1, 1, frozenset(), 2)
    assert solve_run_dp(analytic).step_s == pytest.approx(5.24)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small MLP imported for training at a batch of 2."""
    pytest.importorskip("torch")
    from milp_partition.cli.dispatch import main

    out = tmp_path_factory.mktemp("tptimed") / "mlp.json"
    args = ["import", "torch", "milp_partition.importers.models:mlp_small_test", "--input", "2x32", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(out)]) == 0
    return out


def test_split_layers_timed_on_a_two_rank_mesh_are_what_the_plan_prices(mlp: Path, tmp_path: Path) -> None:
    """On a 2-rank gloo mesh (run/tp_timed.py): both ranks time every node of the model split as run splits it, one entry
    per pass, none negative, each rank's passes summing to more than 0; priced by their slowest rank
    (run/empty.slowest_rank_layers) and read into the problem (joint/run_layers.with_split_times), the 1 x 1 x 2 plan's
    stage forward and backward are their sums exactly, and the DP's step is the verifier's."""
    from milp_partition.importers.timing import load_profile_spec
    from milp_partition.io.imported_layers import read_layers
    from milp_partition.joint.run_layers import run_problem_from_imported, with_split_times
    from milp_partition.joint.run_split import offered_degrees
    from milp_partition.run.empty import slowest_rank_layers
    from milp_partition.run.launch import run_ranks
    from tests.tp_timed_workers import split_times_on_mesh

    data = json.loads(mlp.read_text())
    b, repeats = 2, 2
    run_ranks(split_times_on_mesh, 2, (2, str(tmp_path / "store"), str(mlp), b, repeats, str(tmp_path)), str(tmp_path))
    ranks = [json.loads((tmp_path / f"timed{r}.json").read_text()) for r in range(2)]
    nodes = [str(n["id"]) for n in data["nodes"] if not str(n["id"]).endswith(":bwd")]
    for r in ranks:  # the optimizer's step after each pass, on the split model's parameters (the head's two DTensors)
        opt = r.pop("optimizer")
        assert opt["dtensors"] == 2 and opt["params"] > opt["dtensors"]
        assert len(opt["seconds"][str(b)]) == repeats and min(opt["seconds"][str(b)]) > 0
    for r in ranks:
        assert sorted(r[str(b)]) == sorted(nodes)
        for f, g in r[str(b)].values():
            assert len(f) == len(g) == repeats and min(f) >= 0 and min(g) >= 0
        assert all(sum(fg[0][k] + fg[1][k] for fg in r[str(b)].values()) > 0 for k in range(repeats))
    timed = slowest_rank_layers([r[str(b)] for r in ranks])
    model = read_layers(data, str(mlp))
    splits, _ = offered_degrees(model, [2], load_profile_spec("H100"))
    problem = run_problem_from_imported(
        data, str(mlp), devices=2, memory_bytes=1e12, global_batch=b, sizes=[b], coefficients=RunCoefficients(),
        times={b: {v: (1.0, 1.0) for v in nodes}}, splits=splits, shape=RunShape(1, 1, 1, 2),
    )  # fmt: skip
    problem = with_split_times(problem, {2: {b: timed}})
    report = verify_run_plan(problem, RunPlan(((0, len(nodes)),), 1, 1, frozenset(), 2))
    assert report.feasible and report.prediction is not None
    stage = report.prediction.stages[0]
    assert stage.forward_s == pytest.approx(math.fsum(f for f, _ in timed.values()), rel=1e-12)
    assert stage.backward_s == pytest.approx(math.fsum(g for _, g in timed.values()), rel=1e-12)
    assert solve_run_dp(problem).step_s == pytest.approx(report.step_s, rel=1e-12)


def test_runs_prediction_reads_the_plans_split_times(mlp: Path, tmp_path: Path) -> None:
    """run's prediction at t = 2 takes each node's split passes from the plan's calibration (cost_model.layer_times.
    split_times_tp at its degree and size: none at t = 1, another size, or an unreadable plan) and prices them as they
    are: the stage's forward and backward are their sums, where the analytic split of the run's own unsplit timing
    (with its all-reduces) says otherwise."""
    from dataclasses import replace as copy

    from milp_partition.run.predict import LayerProfile, LinkFit, TorchCosts, planned_split_times, predict_step
    from milp_partition.run.spec import RunSpec, RunStage

    data = json.loads(mlp.read_text())
    nodes = tuple(str(n["id"]) for n in data["nodes"] if not str(n["id"]).endswith(":bwd"))
    timed = {v: (0.001 * (i + 1), 0.002 * (i + 1)) for i, v in enumerate(nodes)}
    plan = tmp_path / "plan.json"
    record = {"2": {"2": {v: list(fg) for v, fg in timed.items()}}}
    plan.write_text(json.dumps({"cost_model": {"layer_times": {"split_times_tp": record}}}))
    stage = RunStage(nodes=nodes, data_parallel=1, tensor_parallel=2, recomputed=(), predicted_memory_bytes=0.0)
    spec = RunSpec("m:f", ("2x32",), "float32", (stage,), nodes, 1, 1.0, 0.0, str(mlp), str(plan), graph=data, microbatch_size=2)
    assert planned_split_times(spec) == timed
    assert planned_split_times(copy(spec, microbatch_size=1)) == {}
    assert planned_split_times(copy(spec, stages=(copy(stage, tensor_parallel=1),))) == {}
    assert planned_split_times(copy(spec, plan_path=str(tmp_path / "missing.json"))) == {}
    layers = LayerProfile({v: 0.01 for v in nodes}, {v: 0.02 for v in nodes}, 0.0, 1)
    links = LinkFit(0.0, 0.0, 1e-3, 1e-6, empty_step_s=0.5)
    pred = predict_step(spec, layers, TorchCosts(0.1, 0.0), links)
    assert pred.stages[0].forward_s == pytest.approx(math.fsum(f for f, _ in timed.values()), rel=1e-12)
    assert pred.stages[0].backward_s == pytest.approx(math.fsum(g for _, g in timed.values()), rel=1e-12)
    analytic = predict_step(spec, layers, TorchCosts(0.1, 0.0), links, split_times={})
    assert analytic.stages[0].forward_s != pytest.approx(pred.stages[0].forward_s, rel=1e-3)


def test_dtensor_optimizer_overhead_from_the_split_models_own_step() -> None:
    """DTensor's optimizer overhead per DTensor parameter from the split model's optimizer step (cli/joint_run.py):
    (O_t - n o_opt - W_t k_opt) / n_dt by hand, never below 0; without a timed step the coefficient stays."""
    from milp_partition.cli.joint_run import _with_split_optimizer
    from milp_partition.run.empty import EmptySteps

    split = SplitCost(0.5, 6.0, 2, 2, 2)
    layer = RunLayer("l0", {1: 2.0}, {1: 4.0}, 8.0, 2, 0.0, 1.0, 1.0, splits={2: split})
    coeffs = RunCoefficients(
        optimizer_s_per_param_tensor=0.1,
        optimizer_s_per_param_byte=0.01,
        tensor=TensorParallelCoefficients(dtensor_optimizer_tensor_s=0.05),
    )
    problem = RunPlanProblem((layer,), (), 1, 2, 1e9, coeffs, tensor_degrees=(1, 2))
    timed = EmptySteps((), {}, split_optimizer={2: (1.0, 4, 2)})  # 1 s for 4 tensors, 2 of them DTensors
    got = _with_split_optimizer(problem, timed).coefficients.tensor.dtensor_optimizer_tensor_s
    assert got == pytest.approx((1.0 - 4 * 0.1 - 6.0 * 0.01) / 2)
    cheap = EmptySteps((), {}, split_optimizer={2: (0.1, 4, 2)})
    assert _with_split_optimizer(problem, cheap).coefficients.tensor.dtensor_optimizer_tensor_s == 0.0
    assert _with_split_optimizer(problem, EmptySteps((), {})).coefficients.tensor.dtensor_optimizer_tensor_s == 0.05
    report = verify_run_plan(_with_split_optimizer(problem, timed), RunPlan(((0, 1),), 1, 1, frozenset(), 2))
    assert report.prediction is not None
    assert report.prediction.stages[0].optimizer_s == pytest.approx(2 * 0.1 + 6.0 * 0.01 + 2 * got)
