"""The run-objective problem of an imported training graph (joint/run_layers.py), priced by the one cost model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from milp_partition.calibration.torch_ops import OperatorCoefficients
from milp_partition.cli.dispatch import main
from milp_partition.costmodel.plan import RunCoefficients, RunPlan, RunShape
from milp_partition.errors import InputError
from milp_partition.joint.run_dp import solve_run_dp
from milp_partition.joint.run_layers import run_problem_from_imported
from milp_partition.verifiers.joint_run import verify_run_plan

# fixed coefficients (not measured: the test must not depend on this machine's speed)
OPS = OperatorCoefficients(forward_overhead_s=1e-5, backward_overhead_s=2e-5, matmul_flops_per_s=5e10, memory_s_per_byte=1e-10)
COEFFS = RunCoefficients(p2p_alpha_s=1e-4, p2p_beta_s_per_byte=1e-9, allreduce_alpha_s=2e-4, allreduce_beta_s_per_byte=1e-9)


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("rl") / "gpt.json"
    args = ["import", "torch", "milp_partition.importers.models:gpt_small_test", "--input", "2x32:int64", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(out)]) == 0
    return json.loads(Path(out).read_text())


def _problem(graph: dict, **kw: object):
    args = dict(devices=2, memory_bytes=1 << 30, global_batch=8, sizes=(1, 2, 4, 8), coefficients=COEFFS, operators=OPS)
    return run_problem_from_imported(graph, "gpt.json", **{**args, **kw})


def test_layers_costs_and_memory_of_an_imported_gpt(graph: dict) -> None:
    problem = _problem(graph)
    layers = problem.layers
    params = graph["layers"]["ops"]
    assert sum(v.param_bytes for v in layers) == pytest.approx(sum(op.get("param_bytes", 0) for op in params))
    for v in layers:  # the per-operator overhead does not scale: a larger micro-batch is cheaper per sample
        assert v.forward_s[8] < 8 * v.forward_s[1]
        assert v.backward_s[8] < 8 * v.backward_s[1] or v.backward_s[1] == 0.0  # a layer with nothing to differentiate
        assert v.forward_s[1] >= OPS.forward_overhead_s
    assert all(c > 0 for c in problem.cut_bytes_per_sample)
    assert problem.coefficients.memory.optimizer_state_bytes_per_param_byte == pytest.approx(2.0)  # Adam: f = 3


def test_planned_and_forced_plans_verify(graph: dict) -> None:
    problem = _problem(graph)
    free = solve_run_dp(problem)
    assert free.complete and free.plan is not None
    report = verify_run_plan(problem, free.plan)
    assert report.feasible and report.step_s == pytest.approx(free.step_s, rel=1e-9)
    for shape in (RunShape(1, 2, 4), RunShape(2, 1, 8), RunShape(1, 1, 1)):
        forced = solve_run_dp(_problem(graph, shape=shape))
        assert forced.plan is not None
        assert (len(forced.plan.stages), forced.plan.data_parallel, forced.plan.microbatches) == (
            shape.stages,
            shape.data_parallel,
            shape.microbatches,
        )
        assert forced.step_s >= free.step_s * (1 - 1e-12)
    # the same plan priced by the verifier: one sample per micro-batch costs more than eight on one device
    one = verify_run_plan(problem, RunPlan(((0, len(problem.layers)),), 1, 8))
    eight = verify_run_plan(problem, RunPlan(((0, len(problem.layers)),), 1, 1))
    assert one.step_s > eight.step_s


def test_memory_binds_and_recomputation_or_stages_answer(graph: dict) -> None:
    roomy = _problem(graph)
    plan = solve_run_dp(roomy).plan
    assert plan is not None
    need = max(m.total_bytes for m in verify_run_plan(roomy, plan).memory)
    tight = _problem(graph, memory_bytes=need * 0.9)
    got = solve_run_dp(tight)
    assert got.plan is not None and got.plan != plan
    assert max(m.total_bytes for m in verify_run_plan(tight, got.plan).memory) <= need * 0.9
    nothing = solve_run_dp(_problem(graph, memory_bytes=1.0))
    assert nothing.plan is None and nothing.complete  # infeasible is an answer


def test_a_size_without_times_is_refused(graph: dict) -> None:
    with pytest.raises(InputError, match="no time for layer"):
        _problem(graph, operators=None)


def test_cli_plans_for_the_run_and_forces_a_shape(graph: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gpt.json"
    path.write_text(json.dumps(graph))
    coeffs = tmp_path / "ops.json"
    coeffs.write_text(
        json.dumps(
            {k: getattr(OPS, k) for k in ("forward_overhead_s", "backward_overhead_s", "matmul_flops_per_s", "memory_s_per_byte")}
        )
    )
    common = ["solve", str(path), "--problem", "joint", "--objective", "run", "--devices", "2", "--memory", "1GiB"]
    common += ["--global-batch", "8", "--coefficients", str(coeffs)]
    out = tmp_path / "plan.json"
    assert main([*common, "-o", str(out)]) == 0
    report = capsys.readouterr().out
    assert "OPTIMAL" in report and "global batch of 8 samples" in report
    assert "not gloo's fit" in report  # the import's H100 datasheet link, said so
    free = json.loads(out.read_text())
    assert free["objective"] == pytest.approx(free["bound"]) and free["instance"]["global_batch"] == 8
    n, b = free["instance"]["microbatches"], free["instance"]["microbatch_size"]
    assert n * b == 8 and free["time_per_sample"] * n == pytest.approx(free["objective"])  # run's planner_step_s
    forced = tmp_path / "forced.json"
    assert main([*common, "--stages", "1", "--data-parallel", "2", "--microbatches", "8", "-o", str(forced)]) == 0
    plan = json.loads(forced.read_text())
    assert [(st["data_parallel"], st["tensor_parallel"]) for st in plan["stages"]] == [(2, 1)]
    assert plan["instance"]["microbatches"] == 8 and plan["instance"]["microbatch_size"] == 1
    assert plan["objective"] >= free["objective"]
    assert main([*common, "--memory", "1MiB"]) == 3  # infeasible is an answer
    assert main([*common, "--microbatches", "8"]) == 2  # N without d is ambiguous
    assert main(["solve", str(path), "--problem", "joint", "--devices", "2", "--memory", "1GiB", "--global-batch", "8"]) == 2


def test_time_layers_measures_the_models_own_layers_per_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--time-layers: every layer timed at every candidate size (positive, real seconds); the plan verifies."""
    graph = tmp_path / "mlp.json"
    args = ["import", "torch", "milp_partition.importers.models:mlp_small_test", "--input", "8x32", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(graph)]) == 0
    out = tmp_path / "plan.json"
    common = ["solve", str(graph), "--problem", "joint", "--objective", "run", "--devices", "2", "--memory", "1GiB"]
    assert main([*common, "--global-batch", "4", "--time-layers", "-o", str(out)]) == 0
    assert "timed on this CPU" in capsys.readouterr().out
    plan = json.loads(out.read_text())
    assert plan["status"] == "optimal" and plan["objective"] > 0
    assert sum(len(st["nodes"]) for st in plan["stages"]) == len(
        [n for n in json.loads(graph.read_text())["nodes"] if not n["id"].endswith(":bwd")]
    )
    # E of every candidate shape, measured on CPU ranks before planning (run's own empty step), and gloo's fits
    timed = plan["cost_model"]["layer_times"]
    table = {(p, d, m): e for p, d, m, e in timed["empty_steps"]}
    want = {(p, d, m) for d in (1, 2) for m in (1, 2, 4) if 4 % (d * m) == 0 for p in (1, 2) if p * d <= 2 and p <= m}
    assert set(table) == want and all(e > 0 for e in table.values())
    assert timed["threads"] == 1 and timed["links"]["allreduce_alpha_s"] > 0
    assert plan["cost_model"]["p2p_alpha_s"] == timed["links"]["p2p_alpha_s"]  # the messages priced with gloo's fit
    shape_of = (len(plan["stages"]), plan["stages"][0]["data_parallel"])
    m_of = plan["instance"]["microbatches"] // shape_of[1]
    assert plan["empty_step_s"] == table[(*shape_of, m_of)]
    # the layers timed again while two ranks run at once, at the sizes of the two-rank shapes (b = 1, 2; and 4: the
    # t = 2 shapes run the whole micro-batch on each of their two ranks)
    assert set(timed["busy"]) == {"1", "2"} and set(timed["busy"]["2"]) == {"1", "2", "4"}
    # and on one rank inside run's own step (run/inrun.py), at the one-rank shapes' sizes (b = 4, 2, 1), every node that
    # the lockstep timing has, never negative, and a one-rank plan prices its passes with them
    assert set(timed["busy"]["1"]) == {"1", "2", "4"}
    assert all(set(timed["busy"]["1"][b]) == set(timed["busy"]["2"][b]) for b in ("1", "2", "4"))
    assert all(f >= 0 and g >= 0 for t in timed["busy"]["1"].values() for f, g in t.values())
    # their factors over the layer timer, recorded for run's prediction (run/predict.py: planned_in_step_factors)
    assert sorted(b for b, _, _ in timed["in_step_factors"]) == [1, 2, 4]
    assert plan["cost_model"]["in_step_factors"] == timed["in_step_factors"]
    assert all(kf > 0 and kb > 0 for _, kf, kb in timed["in_step_factors"])
    # the model's optimizer step timed there too: the planner's price per parameter tensor is its share
    opt_s, tensors = timed["optimizer_in_step"]
    assert opt_s > 0 and tensors > 0
    assert plan["cost_model"]["optimizer_s_per_param_tensor"] == pytest.approx(opt_s / tensors, rel=1e-12)
    one = tmp_path / "one.json"
    force = ["--stages", "1", "--data-parallel", "1", "--tensor-parallel", "1", "--microbatches", "2"]
    assert main([*common, "--global-batch", "4", "--layer-times", str(out), *force, "-o", str(one)]) == 0
    terms = json.loads(one.read_text())["stages"][0]["terms_s"]
    assert terms["forward_s"] == pytest.approx(sum(f for f, _ in timed["busy"]["1"]["2"].values()), rel=1e-9)
    assert terms["backward_s"] == pytest.approx(sum(g for _, g in timed["busy"]["1"]["2"].values()), rel=1e-9)
    assert set(timed["saved_bytes_per_sample_at"]) == {"1", "2", "4"}
    # t = 2 (run splits the MLP's last linear module): E of (1, 1, 2, m) on two ranks, DTensor's hooks measured with it,
    # and a plan forced to t = 2 from the same measurement prices them
    tp_table = {(p, d, t, m): e for p, d, t, m, e in timed["tensor_empty_steps"]}
    assert set(tp_table) == {(1, 1, 2, m) for m in (1, 2, 4)} and all(e > 0 for e in tp_table.values())
    assert timed["dtensor"]["dtensor_module_s"] > 0 and timed["dtensor"]["latency_in_module"] == 1.0  # on the 2-rank mesh
    split = tmp_path / "split.json"
    force = ["--tensor-parallel", "2", "--stages", "1", "--data-parallel", "1", "--microbatches", "2"]
    assert main([*common, "--global-batch", "4", "--layer-times", str(out), *force, "-o", str(split)]) == 0
    split_plan = json.loads(split.read_text())
    assert [st["tensor_parallel"] for st in split_plan["stages"]] == [2]
    assert split_plan["empty_step_s"] == tp_table[(1, 1, 2, 2)]
    assert split_plan["cost_model"]["tensor"]["dtensor_module_s"] == timed["dtensor"]["dtensor_module_s"]
    assert split_plan["cost_model"]["tensor"]["latency_in_module"] is True
    # each layer's saved bytes on one rank of the 2-rank mesh at the t = 2 shapes' sizes, priced in that plan's memory:
    # one stage, 2 micro-batches of b = 2 in flight (1F1B's 1 and the first stage's one more)
    at_t = timed["saved_bytes_per_sample_tp"]["2"]
    assert set(at_t) == {"1", "2", "4"} and set(timed["reused_bytes_per_sample_tp"]["2"]) == {"1", "2", "4"}
    activations = split_plan["stages"][0]["memory_terms"]["activations_bytes"]
    assert activations == pytest.approx(2 * 2 * sum(at_t["2"].values()), rel=1e-12)
    said = split_plan["cost_model"]["saved_activations_at_t"]["2"]
    assert said == "measured on one rank of the 2-rank mesh at micro-batch sizes [1, 2, 4]"
    older = json.loads(out.read_text())  # layer times recorded before DTensor was calibrated: measured at solve time
    del older["cost_model"]["layer_times"]["dtensor"]
    (tmp_path / "older.json").write_text(json.dumps(older))
    assert main([*common, "--global-batch", "4", "--layer-times", str(tmp_path / "older.json"), *force, "-o", str(split)]) == 0
    tensor = json.loads(split.read_text())["cost_model"]["tensor"]
    assert tensor["dtensor_module_s"] > 0 and tensor["latency_in_module"] is False
    # recorded before the saved bytes at t were measured: the t = 1 count, said so
    del older["cost_model"]["layer_times"]["saved_bytes_per_sample_tp"]
    (tmp_path / "older.json").write_text(json.dumps(older))
    assert main([*common, "--global-batch", "4", "--layer-times", str(tmp_path / "older.json"), *force, "-o", str(split)]) == 0
    said = json.loads(split.read_text())["cost_model"]["saved_activations_at_t"]["2"]
    assert said.startswith("not measured; the t = 1 count (an upper bound)")
    # what DDP over the 2 ranks added to the model's pass, at the sizes of the d = 2 shapes (b = 2, 1), and its price
    # per parameter byte beyond gloo's fit (never negative)
    assert sorted((d, b) for d, b, _ in timed["ddp_in_step"]) == [(2, 1), (2, 2)]
    assert all(x >= 0 for *_, x in timed["ddp_in_step"])
    rho = {(d, b): x for d, b, x in plan["cost_model"]["ddp_in_step_s_per_byte"]}
    assert set(rho) == {(2, 1), (2, 2)} and all(x >= 0 for x in rho.values())
    two = tmp_path / "two.json"
    force = ["--stages", "1", "--data-parallel", "2", "--microbatches", "2"]  # d = 2, one micro-batch of 2 each
    assert main([*common, "--global-batch", "4", "--layer-times", str(out), *force, "-o", str(two)]) == 0
    terms = json.loads(two.read_text())["stages"][0]["terms_s"]
    mlp = run_problem_from_imported(
        json.loads(graph.read_text()), "mlp.json", devices=2, memory_bytes=1 << 30, global_batch=4, sizes=(1, 2, 4),
        coefficients=COEFFS, operators=OPS,
    )  # fmt: skip
    weights = sum(v.param_bytes for v in mlp.layers)
    c = plan["cost_model"]
    # one bucket, its latency in E: W (beta + rho(2, 2))
    assert terms["allreduce_s"] == pytest.approx(weights * (c["allreduce_beta_s_per_byte"] + rho[(2, 2)]), rel=1e-9)
    assert terms["forward_s"] == pytest.approx(sum(f for f, _ in timed["busy"]["2"]["2"].values()), rel=1e-9)
    assert terms["backward_s"] == pytest.approx(sum(g for _, g in timed["busy"]["2"]["2"].values()), rel=1e-9)
    assert main([*common, "--time-layers", "--coefficients", str(out)]) == 2  # one source of layer times
    # the same measurement reused: the free optimum's shape, forced, has the free optimum's price
    shape = ["--stages", str(len(plan["stages"])), "--data-parallel", str(plan["stages"][0]["data_parallel"])]
    shape += ["--microbatches", str(plan["instance"]["microbatches"])]
    forced = tmp_path / "forced.json"
    assert main([*common, "--global-batch", "4", "--layer-times", str(out), *shape, "-o", str(forced)]) == 0
    assert json.loads(forced.read_text())["objective"] == pytest.approx(plan["objective"], rel=1e-12)
    assert main([*common, "--global-batch", "8", "--layer-times", str(out)]) == 2  # size 8 was not timed
    broken = json.loads(out.read_text())
    broken["cost_model"]["layer_times"]["empty_steps"] = [[1, 1, 1, "soon"]]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken))
    assert main([*common, "--global-batch", "4", "--layer-times", str(bad)]) == 2
    assert "cost_model.layer_times.empty_steps" in capsys.readouterr().err
    broken = json.loads(out.read_text())
    broken["cost_model"]["layer_times"]["ddp_in_step"] = [[1, 2, 0.1]]  # DDP over one rank: no such measure
    bad.write_text(json.dumps(broken))
    assert main([*common, "--global-batch", "4", "--layer-times", str(bad)]) == 2
    assert "cost_model.layer_times.ddp_in_step" in capsys.readouterr().err


def test_run_reads_a_plan_of_micro_batches_above_one_sample(graph: dict, tmp_path: Path) -> None:
    """run executes the plan's micro-batch size: a plan with b = 8 is read as one micro-batch of the global batch of 8
    (tests/test_run_microbatch_size.py runs such plans)."""
    from milp_partition.run.spec import read_run_spec

    path = tmp_path / "gpt.json"
    path.write_text(json.dumps(graph))
    out = tmp_path / "plan.json"
    common = ["solve", str(path), "--problem", "joint", "--objective", "run", "--devices", "1", "--memory", "1GiB"]
    coeffs = tmp_path / "ops.json"
    coeffs.write_text(
        json.dumps(
            {k: getattr(OPS, k) for k in ("forward_overhead_s", "backward_overhead_s", "matmul_flops_per_s", "memory_s_per_byte")}
        )
    )
    assert main([*common, "--global-batch", "8", "--coefficients", str(coeffs), "-o", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["instance"]["microbatch_size"] == 8  # one device, no pipeline: one micro-batch of the whole batch
    spec = read_run_spec(out, str(path))
    assert (spec.microbatches, spec.microbatch_size, spec.global_batch) == (1, 8, 8)
    assert spec.predicted_step_s == pytest.approx(plan["objective"])  # run.json's planner_step_s: the planned step


@pytest.mark.parametrize(
    ("factory", "shape"),
    [("mlp_small_test", "8x32"), ("gpt_small_test", "8x32:int64"), ("convnet_small_test", "8x3x32x32")],
)
def test_planned_memory_bounds_what_the_run_counts_at_each_size(factory: str, shape: str, tmp_path: Path) -> None:
    """Saved bytes counted per micro-batch size (not the largest over the sizes): one rank, one micro-batch of b samples
    under torch's Schedule1F1B as run drives it (one counter over two steps, each its own batch, as run.json counts
    them), at two sizes: the planned stage memory is at least what the rank held (saved activations' peak plus
    weights, gradients and optimizer state), at most 20% above it (issue 42's bar) and, the backward's transient term
    aside (which run.json's CPU count leaves out), within 5% of it."""
    import os

    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    from milp_partition.run.engine import SavedActivations, tensor_bytes_of
    from milp_partition.run.model import batch, build_model, loss_fn, optimizer
    from milp_partition.run.predict import time_layers_by_size
    from milp_partition.run.spec import RunSpec

    graph = tmp_path / "model.json"
    args = ["import", "torch", f"milp_partition.importers.models:{factory}", "--input", shape, "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(graph)]) == 0
    data = json.loads(graph.read_text())
    sizes = [2, 8]
    timed = time_layers_by_size(data, str(graph), sizes, repeats=1)
    layers = data["layers"]
    if factory == "convnet_small_test":  # conv 4.0 saves its input, which relu 3.1 saved first; relu 2.1 saves its output
        again = timed.reused_bytes_per_sample[8]
        assert again["4.0"] == {"3.1": timed.saved_bytes_per_sample[8]["3.1"]} and "2.1" not in again
    dist.init_process_group("gloo", store=dist.FileStore(os.path.join(tmp_path, "store"), 1), rank=0, world_size=1)
    try:
        for b in sizes:
            problem = run_problem_from_imported(
                data, str(graph), devices=1, memory_bytes=1e12, global_batch=b, sizes=[b], coefficients=RunCoefficients(),
                times=timed.times, saved_bytes_per_sample_at=timed.saved_bytes_per_sample,
            )  # fmt: skip
            planned = verify_run_plan(problem, RunPlan(((0, len(problem.layers)),), 1, 1)).memory[0]
            factor = float(layers.get("optimizer_state_bytes_per_param_byte", 0.0))
            spec = RunSpec(
                layers["model"]["reference"], tuple(layers["model"]["inputs"]), "float32", (), (), b, 0.0, factor, "", ""
            )
            model = build_model(spec, 0)
            params = list(model.parameters())
            opt = optimizer(spec, params)
            schedule = Schedule1F1B(PipelineStage(model, 0, 1, torch.device("cpu")), 1, loss_fn=loss_fn, scale_grads=True)
            counter = SavedActivations({p.untyped_storage().data_ptr() for p in params})
            for step in range(2):
                a, kw, target = batch(spec, model, step, 0)
                with torch.autograd.graph.saved_tensors_hooks(counter.pack, counter.unpack):
                    schedule.step(*a, target=target, losses=[], **kw)
                opt.step()
            held = sum(tensor_bytes_of(params, opt)) + counter.peak
            # measured here: 1.003-1.125 of what the rank held (the transient term aside 1.0000-1.0035)
            assert held <= planned.total_bytes <= 1.20 * held, (b, planned, held)
            assert planned.total_bytes - planned.temporaries_bytes <= 1.05 * held, (b, planned, held)
    finally:
        dist.destroy_process_group()


def test_empty_steps_from_run_json_price_each_shape(graph: dict, tmp_path: Path) -> None:
    """--empty-steps RUN_JSON...: each run's measured empty step is E of its shape in the planned step."""
    path = tmp_path / "gpt.json"
    path.write_text(json.dumps(graph))
    coeffs = tmp_path / "ops.json"
    coeffs.write_text(
        json.dumps(
            {k: getattr(OPS, k) for k in ("forward_overhead_s", "backward_overhead_s", "matmul_flops_per_s", "memory_s_per_byte")}
        )
    )
    common = ["solve", str(path), "--problem", "joint", "--objective", "run", "--devices", "2", "--memory", "1GiB"]
    common += ["--global-batch", "8", "--coefficients", str(coeffs), "--quiet", "--stages", "2", "--data-parallel", "1"]
    common += ["--microbatches", "4"]
    runs = []
    for m, e in ((4, 0.5), (4, 0.7), (2, 9.0)):  # two runs of the shape: their median
        runs.append(tmp_path / f"run{len(runs)}.json")
        shape = {"stages": 2, "data_parallel": 1, "tensor_parallel": 1}
        runs[-1].write_text(json.dumps({"shape": shape, "microbatches": m, "prediction": {"costs": {"empty_step_s": e}}}))
    plain, priced = tmp_path / "plain.json", tmp_path / "priced.json"
    assert main([*common, "-o", str(plain)]) == 0
    assert main([*common, "--empty-steps", *map(str, runs), "-o", str(priced)]) == 0
    a, b = json.loads(plain.read_text()), json.loads(priced.read_text())
    assert [st["nodes"] for st in b["stages"]] == [st["nodes"] for st in a["stages"]]
    # a measured E holds the messages' latency: the stage boundary's send is priced without alpha there
    alpha = a["cost_model"]["p2p_alpha_s"]
    assert alpha > 0 and b["stages"][0]["terms_s"]["send_s"] == pytest.approx(a["stages"][0]["terms_s"]["send_s"] - alpha)
    units, tails = [st["unit_s"] for st in b["stages"]], [st["tail_s"] for st in b["stages"]]
    assert b["empty_step_s"] == pytest.approx(0.6) and a["empty_step_s"] == 0.0
    assert b["objective"] == pytest.approx(sum(units) + 3 * max(units) + 0.6 + max(tails), rel=1e-12)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"shape": {"stages": 2, "data_parallel": 1}, "microbatches": 4, "prediction": {}}))
    assert main([*common, "--empty-steps", str(bad)]) == 2  # no measured E: named, not priced as 0
    split = tmp_path / "split.json"  # a tensor-parallel run's E holds its DTensor pairs: not the planner's E
    shape = {"stages": 2, "data_parallel": 1, "tensor_parallel": 2}
    split.write_text(json.dumps({"shape": shape, "microbatches": 4, "prediction": {"costs": {"empty_step_s": 0.5}}}))
    assert main([*common, "--empty-steps", str(split)]) == 2
    assert (
        main(["solve", str(path), "--problem", "joint", "--devices", "2", "--memory", "1GiB", "--empty-steps", str(runs[0])]) == 2
    )


def test_the_model_inputs_are_counted_where_the_first_operator_views_them(tmp_path: Path) -> None:
    """torch's TransformerEncoder first transposes its input (a view: the import records no bytes for it), yet run keeps
    the batch it views: the model's inputs per sample are the import's example input, 16 x 64 float32 = 4096 bytes (not
    0), the first layer's input (what recomputing it keeps) likewise, and one stage of m = 8 micro-batches of b = 1 keeps
    max(2 G - 2 b, 0) x 4096 = 14 x 4096 = 57344 bytes of inputs beyond its 2 micro-batches in flight (G = 8)."""
    graph = tmp_path / "enc.json"
    args = ["import", "torch", "milp_partition.importers.models:encoder_heldout_test", "--input", "8x16x64", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(graph)]) == 0
    data = json.loads(graph.read_text())
    problem = run_problem_from_imported(
        data, str(graph), devices=1, memory_bytes=1e12, global_batch=8, sizes=(1,), coefficients=COEFFS, operators=OPS
    )
    assert problem.input_bytes_per_sample == 4096.0 and problem.layers[0].input_bytes_per_sample == 4096.0
    report = verify_run_plan(problem, RunPlan(((0, len(problem.layers)),), 1, 8))
    assert report.memory[0].batch_inputs_bytes == 57344.0
