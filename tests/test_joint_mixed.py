"""The joint problem on a cluster of kinds (issue 40 item 4): the exact DP against brute force, one kind against the
homogeneous solver, memory that sends the big layers to the kind with more of it, the CLI."""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_joint_bruteforce import random_problem

from milp_partition.budget import Budget
from milp_partition.cli import main
from milp_partition.joint.mixed_dp import solve_mixed_dp
from milp_partition.joint.mixed_problem import MixedJointProblem, MixedKind, MixedPlan, MixedStage
from milp_partition.joint.mixed_solve import MixedSolveSettings, solve_mixed
from milp_partition.joint.problem import JointConfig, JointEdge, JointNode, JointProblem, JointSolveSettings
from milp_partition.joint.solve import solve_joint
from milp_partition.verifiers.joint_mixed import verify_joint_mixed

GiB = 2**30


def _table(rng: random.Random, ids: list[str], edges: list[JointEdge], degrees: list[int], speed: float) -> JointProblem:
    """One kind's configurations of the graph: random times (divided by ``speed``), bytes, sync bytes."""
    preds = {v: [e.source for e in edges if e.target == v] for v in ids}
    succs = {v: [e.target for e in edges if e.source == v] for v in ids}
    same_w = rng.random() < 0.5  # the DP's d-independent knapsack applies when every option has the same w
    same_b = rng.random() < 0.5  # ... and its one frontier for every y when every option has the same b
    nodes = []
    for v in ids:
        w, b = float(rng.randint(0, 3)), float(rng.randint(0, 3))
        configs = {}
        for t in degrees:
            configs[t] = tuple(
                JointConfig(
                    id=f"c{j}",
                    time_per_sample_s=float(rng.randint(1, 8)) / t / speed,
                    parameter_bytes=w if same_w else float(rng.randint(0, 3)),
                    activation_bytes=float(rng.randint(0, 3)),
                    fixed_bytes=b if same_b else float(rng.randint(0, 3)),
                    sync_fw_bytes={u: float(rng.randint(0, 2) * (t - 1)) for u in preds[v]},
                    sync_bw_bytes={u: float(rng.randint(0, 2) * (t - 1)) for u in succs[v]},
                )
                for j in range(rng.randint(1, 2))
            )
        nodes.append(JointNode(v, f"n{v}", configs))
    base = random_problem(0)
    return JointProblem(tuple(nodes), tuple(edges), base.cluster, base.microbatches)


def random_mixed(seed: int) -> MixedJointProblem:
    """Two kinds on a random DAG of 1 to 4 nodes: counts 1 to 3, one or two degrees, memory from tight to loose."""
    rng = random.Random(1000 + seed)
    n = rng.randint(1, 4)
    ids = [str(v) for v in range(n)]
    edges = [JointEdge(ids[u], ids[v], float(rng.randint(0, 4))) for v in range(1, n) for u in range(v) if rng.random() < 0.5]
    degrees = [1] if rng.random() < 0.4 else [1, 2]
    kinds, tables = [], {}
    for name, speed in (("fast", 2.0), ("slow", 1.0)):
        tables[name] = _table(rng, ids, edges, degrees, speed)
        kinds.append(
            MixedKind(
                name,
                rng.randint(1, 3),
                float(rng.randint(2, 14)),
                rng.choice([1, 2]),
                float(rng.choice([1, 2, 4])),
            )
        )
    return MixedJointProblem(tuple(kinds), tables, rng.choice([1, 2, 4]), source=f"mixed seed {seed}")


def all_mixed_plans(problem: MixedJointProblem):
    """Every plan: ordered partitions into stages that respect the edges, every (kind, d, t) per stage within the
    counts, every configuration (the verifier judges the rest)."""
    graph = problem.graph
    ids = [v.id for v in graph.nodes]
    N = problem.microbatches
    choices = [
        (k.name, d, t)
        for k in problem.kinds
        for d in range(1, k.count + 1)
        if N % d == 0
        for t in graph.degrees
        if t <= k.devices_per_node and d * t <= k.count
    ]
    for stages in range(1, len(ids) + 1):
        for labels in itertools.product(range(stages), repeat=len(ids)):
            if set(labels) != set(range(stages)):
                continue
            where = dict(zip(ids, labels, strict=True))
            if any(where[e.source] > where[e.target] for e in graph.edges):
                continue
            groups = [tuple(v for v in ids if where[v] == q) for q in range(stages)]
            for picks in itertools.product(choices, repeat=stages):
                if any(sum(d * t for kk, d, t in picks if kk == k.name) > k.count for k in problem.kinds):
                    continue
                per_stage = []
                for g, (kind, _, t) in zip(groups, picks, strict=True):
                    table = problem.tables[kind]
                    options = [[c.id for c in table.node(v).configs[t]] for v in g]
                    per_stage.append([dict(zip(g, pick, strict=True)) for pick in itertools.product(*options)])
                for cfgs in itertools.product(*per_stage):
                    yield MixedPlan(tuple(MixedStage(g, k, d, t, c) for g, (k, d, t), c in zip(groups, picks, cfgs, strict=True)))


def brute_force(problem: MixedJointProblem) -> float:
    best = math.inf
    for plan in all_mixed_plans(problem):
        rep = verify_joint_mixed(problem, plan)
        if rep.feasible:
            best = min(best, rep.objective)
    return best


@pytest.mark.parametrize("seed", range(60))
def test_dp_matches_brute_force_with_two_kinds(seed: int) -> None:
    problem = random_mixed(seed)
    expected = brute_force(problem)
    result = solve_mixed(problem, MixedSolveSettings(time_limit_s=600.0))
    if math.isinf(expected):
        assert result.status == "infeasible" and result.objective is None
        return
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert result.bound is not None and result.bound <= result.objective
    assert result.bound == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert {st["kind"] for st in result.stages} <= {"fast", "slow"}


def test_the_random_instances_use_both_kinds_and_bind_memory() -> None:
    """The brute-force set is not trivial: some optima mix the kinds, some instances are infeasible."""
    mixed = infeasible = 0
    for seed in range(60):
        problem = random_mixed(seed)
        dp = solve_mixed_dp(problem)
        if dp.plan is None:
            infeasible += 1
        elif len({st.kind for st in dp.plan.stages}) == 2:
            mixed += 1
    assert mixed >= 3 and infeasible >= 3


def test_more_kinds_never_hurt() -> None:
    """The optimum on both kinds is at most the optimum on either kind alone (its plans are plans of both)."""
    from milp_partition.joint.mixed_layers import one_kind

    compared = 0
    for seed in range(30):
        problem = random_mixed(seed)
        both = solve_mixed_dp(problem).value
        for kind in problem.kinds:
            alone = solve_mixed_dp(one_kind(problem, kind.name)).value
            assert both <= alone * (1 + 1e-12) or math.isinf(alone)
            compared += math.isfinite(alone)
    assert compared >= 10


def _one_kind(problem: JointProblem) -> MixedJointProblem:
    cl = problem.cluster
    kind = MixedKind("only", cl.device_count, cl.memory_bytes, 8, cl.bandwidth_bytes_per_s)
    return MixedJointProblem((kind,), {"only": problem}, problem.microbatches)


@pytest.mark.parametrize("seed", range(40))
def test_one_kind_equals_the_homogeneous_solver(seed: int) -> None:
    problem = random_problem(seed)
    homogeneous = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    mixed = solve_mixed(_one_kind(problem), MixedSolveSettings(time_limit_s=600.0))
    if homogeneous.status == "infeasible":
        assert mixed.status == "infeasible"
        return
    assert homogeneous.status == mixed.status == "optimal"
    assert mixed.objective == pytest.approx(homogeneous.objective, rel=1e-12)


def test_stopped_by_the_budget_reports_a_proven_bound() -> None:
    """A budget already spent: no proof, a lower bound not above the optimum, a verified plan where one is found."""
    for seed in range(20):
        problem = random_mixed(seed)
        expected = brute_force(problem)
        dp = solve_mixed_dp(problem, Budget.starting_now(0.0))
        assert not dp.complete
        assert dp.bound <= expected * (1 + 1e-12)
        if dp.plan is not None:
            rep = verify_joint_mixed(problem, dp.plan)
            assert rep.feasible and rep.objective >= expected * (1 - 1e-12)
        result = solve_mixed(problem, MixedSolveSettings(time_limit_s=0.0))
        assert result.status in ("feasible", "unknown") and result.stopped_by == "time_limit"
        if result.objective is not None:
            assert result.bound <= result.objective


def _chain(tables: dict[str, list[tuple[float, float, float]]]) -> dict[str, JointProblem]:
    """Per kind, a chain of layers with one configuration each: (p, a, b) per layer; w = 0, edges of 0 bytes."""
    out = {}
    for name, rows in tables.items():
        ids = [f"L{i}" for i in range(len(rows))]
        nodes = tuple(
            JointNode(v, v, {1: (JointConfig("vanilla", p, 0.0, a, b),)}) for v, (p, a, b) in zip(ids, rows, strict=True)
        )
        edges = tuple(JointEdge(ids[i], ids[i + 1], 0.0) for i in range(len(ids) - 1))
        base = random_problem(0)
        out[name] = JointProblem(nodes, edges, base.cluster, base.microbatches)
    return out


def test_memory_sends_the_big_layers_to_the_kind_with_more_memory() -> None:
    """Four layers; the middle two hold 60 GB each.  The fast kind has 40 GB, the slow one 80 GB: the big layers go to
    the slow kind although it is three times slower, and without its memory no plan exists."""
    rows = [(1.0, 0.0, 1e9), (1.0, 0.0, 60e9), (1.0, 0.0, 60e9), (1.0, 0.0, 1e9)]
    tables = _chain({"H100": [(p, a, b) for p, a, b in rows], "V100": [(3 * p, a, b) for p, a, b in rows]})
    kinds = (MixedKind("H100", 4, 40e9, 8, 1e11), MixedKind("V100", 4, 80e9, 8, 1e11))
    problem = MixedJointProblem(kinds, tables, 4)
    result = solve_mixed(problem, MixedSolveSettings(time_limit_s=600.0))
    assert result.status == "optimal"
    kind_of = {v: st["kind"] for st in result.stages for v in st["nodes"]}
    assert kind_of["L1"] == kind_of["L2"] == "V100"
    assert brute_force(problem) == pytest.approx(result.objective)
    # the fast kind alone holds L1 or L2 nowhere: no plan
    small = replace(problem, kinds=(kinds[0], replace(kinds[1], memory_bytes=40e9)))
    assert solve_mixed(small, MixedSolveSettings(time_limit_s=600.0)).status == "infeasible"
    # with enough memory on the fast kind, the slow kind is not needed
    roomy = replace(problem, kinds=(replace(kinds[0], memory_bytes=80e9), kinds[1]))
    fast = solve_mixed(roomy, MixedSolveSettings(time_limit_s=600.0))
    assert fast.status == "optimal" and fast.objective < result.objective


# -- imported graphs and the command line -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from milp_partition.importers.build import write_imported
    from milp_partition.importers.models import GPT
    from milp_partition.importers.settings import ImportSettings
    from milp_partition.importers.torch_import import import_torch_model, make_inputs, parse_input_shape

    model = GPT(vocab=256, d_model=64, layers=2, heads=4, max_len=32)
    args, kwargs = make_inputs([parse_input_shape("2x32:int64")], "float32", model=model)
    imported = import_torch_model(model, args, ImportSettings(granularity="layer", training=True, layer_depth=2), kwargs=kwargs)
    path = tmp_path_factory.mktemp("mixed") / "gpt.json"
    write_imported(imported, str(path))
    return path


@pytest.mark.parametrize(
    ("spec", "count", "memory", "N"),
    [
        ("H100", 4, 80 * GiB, 8),
        ("A100", 4, 2**22, 4),
        ("V100", 4, 2**21, 2),
        ("H100", 4, 2**20, 8),  # four stages, two recomputed layers
        ("H100", 2, 1200 * 2**10, 8),  # recomputation in both stages
        ("A100", 8, 600 * 2**10, 8),  # t = 2 and recomputation
    ],
)
def test_one_kind_of_an_import_equals_the_homogeneous_solve(gpt_path: Path, spec: str, count: int, memory: int, N: int) -> None:
    from milp_partition.joint.layers import LayerPlanSettings, joint_from_imported
    from milp_partition.joint.mixed_layers import KindSpec, mixed_from_imported

    data: Any = json.loads(gpt_path.read_text())
    mixed = mixed_from_imported(data, str(gpt_path), (KindSpec(spec, count, memory),), microbatches=N)
    homogeneous = joint_from_imported(
        data, str(gpt_path), LayerPlanSettings(devices=count, memory_bytes=memory, profile=spec, microbatches=N)
    )
    h = solve_joint(homogeneous, JointSolveSettings(time_limit_s=600.0))
    m = solve_mixed(mixed, MixedSolveSettings(time_limit_s=600.0))
    assert h.status == m.status == "optimal"
    assert m.objective == pytest.approx(h.objective, rel=1e-12)


def test_cli_plans_an_import_on_two_kinds(gpt_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    argv = ["solve", str(gpt_path), "--problem", "joint", "--kinds", "H100:2:4MiB,V100:4:2MiB", "--microbatches", "4"]
    assert main([*argv, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "OPTIMAL" in text and "(verified)" in text and "per global batch" in text
    r = json.loads(out.read_text())
    assert r["status"] == "optimal" and r["bound"] <= r["objective"]
    assert r["step_s"] == pytest.approx(4 * r["objective"])
    assert [k["name"] for k in r["instance"]["kinds"]] == ["H100", "V100"]
    # the verifier re-checks the written plan on the problem rebuilt from the same flags
    from milp_partition.joint.mixed_layers import mixed_from_imported, parse_kinds

    problem = mixed_from_imported(
        json.loads(gpt_path.read_text()), str(gpt_path), parse_kinds("H100:2:4MiB,V100:4:2MiB"), microbatches=4
    )
    plan = MixedPlan(
        tuple(
            MixedStage(tuple(s["nodes"]), s["kind"], s["data_parallel"], s["tensor_parallel"], s["configs"]) for s in r["stages"]
        )
    )
    rep = verify_joint_mixed(problem, plan)
    assert rep.feasible and rep.objective == pytest.approx(r["objective"], rel=1e-12)
    # 2 MiB per V100 does not hold the whole model (4 V100s alone would win with every message priced with its
    # latency, as the one price has it): memory binds, so the kinds are mixed
    assert len(r["stages"]) >= 2 and {s["kind"] for s in r["stages"]} == {"H100", "V100"}
    # evaluate re-checks the file: its plan on the same kinds, on too few devices, and a claim the verifier contradicts
    evaluate = ["evaluate", str(gpt_path), str(out), "--problem", "joint", "--microbatches", "4"]
    assert main([*evaluate, "--kinds", "H100:2:4MiB,V100:4:2MiB"]) == 0
    assert "feasible; time_per_sample" in capsys.readouterr().out
    assert main([*evaluate, "--kinds", "H100:1:4MiB,V100:1:16MiB"]) == 3
    assert "INFEASIBLE plan" in capsys.readouterr().out
    r["objective"] *= 0.9
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(r))
    assert (
        main(
            [
                "evaluate",
                str(gpt_path),
                str(tampered),
                "--problem",
                "joint",
                "--microbatches",
                "4",
                "--kinds",
                "H100:2:4MiB,V100:4:2MiB",
            ]
        )
        == 2
    )
    assert "objective" in capsys.readouterr().err


def test_cli_kind_profile_prices_a_named_kind(gpt_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kind priced from a profile file (here the A100 datasheet written out) plans as the datasheet name does."""
    from milp_partition.calibration.profile import resolve_profile, write_profile

    write_profile(resolve_profile("A100"), tmp_path / "mine.json")
    values = []
    for kinds, extra in (
        ("H100:2:4MiB,A100:2:4MiB", []),
        ("H100:2:4MiB,MINE:2:4MiB", ["--kind-profile", f"MINE={tmp_path / 'mine.json'}"]),
    ):
        out = tmp_path / "r.json"
        assert (
            main(["solve", str(gpt_path), "--problem", "joint", "--kinds", kinds, *extra, "--microbatches", "4", "-o", str(out)])
            == 0
        )
        r = json.loads(out.read_text())
        assert r["status"] == "optimal"
        values.append(
            (
                r["objective"],
                [(st["kind"].replace("MINE", "A100"), st["data_parallel"], st["tensor_parallel"]) for st in r["stages"]],
            )
        )
    capsys.readouterr()
    assert values[0] == values[1]
    assert "A100" in {k for k, _, _ in values[0][1]}  # the profiled kind is used, so its prices matter


def test_cli_infeasible_exits_3(gpt_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "none.json"
    argv = ["solve", str(gpt_path), "--problem", "joint", "--kinds", "H100:2:100KiB,A100:2:100KiB", "-o", str(out)]
    assert main(argv) == 3
    assert "INFEASIBLE" in capsys.readouterr().out
    r = json.loads(out.read_text())
    assert r["status"] == "infeasible" and r["objective"] is None and r["stages"] == []


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--kinds", "B300:4"], "--kinds"),
        (["--kinds", "H100:0"], "--kinds"),
        (["--kinds", "H100:2,H100:4"], "--kinds"),
        (["--kinds", "H100:four"], "--kinds"),
        (["--kinds", "H100:4:80GB:1", "--tp-degrees", "2,4"], "--tp-degrees"),
        (["--kinds", "H100:4", "--devices", "4"], "--devices"),
        (["--kinds", "H100:4", "--stages", "2"], "--stages"),
        (["--kinds", "H100:4", "--coefficients", "c.json"], "--coefficients"),
        (["--kinds", "H100:4", "--kind-profile", "A100=x.json"], "--kind-profile"),
        (["--devices", "4", "--memory", "1GiB", "--kind-profile", "H100=x.json"], "--kind-profile"),
    ],
)
def test_cli_refuses_bad_kinds(gpt_path: Path, extra: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", str(gpt_path), "--problem", "joint", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err


def test_too_many_ideals_leaves_the_heuristic_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the ideals' cap the DP proves nothing: the one-stage plan stands, not proven."""
    from milp_partition.joint import mixed_solve
    from milp_partition.joint.mixed_dp import TooManyIdeals, ideals_of

    with pytest.raises(TooManyIdeals):
        ideals_of([str(v) for v in range(6)], [], max_ideals=10)  # six independent nodes: 64 ideals
    assert len(ideals_of([str(v) for v in range(6)], [])) == 64

    def refuse(*args: object, **kwargs: object) -> None:
        raise TooManyIdeals("the graph has more than 1 ideals")

    monkeypatch.setattr(mixed_solve, "solve_mixed_dp", refuse)
    for seed in range(10):
        problem = random_mixed(seed)
        result = solve_mixed(problem, MixedSolveSettings(time_limit_s=600.0))
        assert result.status in ("feasible", "unknown") and result.bound is None
        if result.objective is not None:
            assert result.objective >= brute_force(problem) * (1 - 1e-12)


def test_an_incumbent_prunes_without_changing_the_optimum() -> None:
    """With a known plan's value the DP skips slower stages: same optimum; with a value below the optimum (no such
    plan: only a rounding could cause it) it runs again without pruning, still exact."""
    checked = 0
    for seed in range(12):
        problem = random_mixed(seed)
        expected = brute_force(problem)
        if math.isinf(expected):
            continue
        for upper in (expected, 2 * expected, 0.5 * expected):
            dp = solve_mixed_dp(problem, upper=upper)
            assert dp.complete and dp.value == pytest.approx(expected, rel=1e-9, abs=1e-12)
            assert dp.plan is not None and verify_joint_mixed(problem, dp.plan).feasible
        checked += 1
    assert checked >= 5
