"""Every phase checks the one budget: a spent budget stops the joint DP, its baselines and the pipeline model build.

No wall-clock assertions: budgets here are already spent, or run on a clock that advances one second per reading.
"""

from __future__ import annotations

import math

import pytest
from milp_partition.formulations import pipeline as pipeline_formulation
from milp_partition.heuristics.joint_baselines import all_data_parallel, pipedream_2bw_style, piper_style

from milp_partition.budget import Budget
from milp_partition.cluster import homogeneous_cluster
from milp_partition.joint.dp import JointDP, joint_data, search, work_bound
from milp_partition.joint.problem import JointConfig, JointNode, JointProblem, joint_cluster
from milp_partition.pipeline.generators import InceptionLikeSettings, inception_like
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings
from tests.test_joint_bruteforce import repeated_diamonds


class Ticking:
    """A clock that advances one second each time it is read."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


def spent() -> Budget:
    return Budget(0.0, 0.0, lambda: 1.0)


def edgeless(n: int) -> JointProblem:
    """``n`` nodes without edges (``2**n`` ideals), two configurations each."""
    nodes = tuple(
        JointNode(f"v{v}", f"n{v}", {1: (JointConfig("a", 1.0 + v, 1.0, 1.0, 1.0), JointConfig("b", 2.0 + v, 1.0, 0.0, 1.0))})
        for v in range(n)
    )
    return JointProblem(nodes, (), joint_cluster(devices=4, memory_bytes=40.0, bandwidth_bytes_per_s=1.0), 4)


def test_a_spent_budget_stops_the_search_at_once_with_the_work_bound_only() -> None:
    data = joint_data(repeated_diamonds(0))
    found = search(data, budget=spent())
    assert found.timed_out and found.plan is None and not found.optimal and not found.infeasible
    assert found.bound == work_bound(data)
    full = search(data)
    assert full.optimal and found.bound <= full.value


def test_a_spent_budget_stops_the_baselines_once_they_have_a_plan() -> None:
    """Piper-style stops at once; the cheap two stop once they have one plan (the chain always gets one)."""
    data = joint_data(repeated_diamonds(1))
    assert piper_style(data, budget=spent()) == (None, math.inf)
    assert all_data_parallel(data, budget=spent())[1] == all_data_parallel(data)[1]
    cut, full = pipedream_2bw_style(data, budget=spent()), pipedream_2bw_style(data)
    assert cut[0] is not None and cut[1] >= full[1]


def test_a_pass_stops_inside_the_candidate_work_of_one_ideal() -> None:
    """The clock is read at the start, at the first ideal, then every few candidates: the third reading stops the pass
    long before the full ideal's 255 candidates are done."""
    data = joint_data(edgeless(8))
    clock = Ticking()
    dp = JointDP(data)
    with pytest.raises(TimeoutError):
        dp.feasible(math.inf, budget=Budget(2.5, 0.0, clock))
    assert clock.reads == 3
    assert 0 < len(dp.pair_tables) < 255


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limit", [1.5, 3.5, 8.5, 40.5])
def test_a_search_cut_short_keeps_a_sound_bound(seed: int, limit: float) -> None:
    """Cut at any clock reading, the bound never passes the optimum and the plan is never better than it."""
    data = joint_data(repeated_diamonds(seed))
    full = search(data)
    cut = search(data, budget=Budget(limit, 0.0, Ticking()))
    if full.infeasible:
        assert cut.plan is None
        return
    assert cut.bound <= full.value * (1 + 1e-9)
    if cut.plan is not None:
        assert cut.value >= full.value * (1 - 1e-9)
    if cut.timed_out:
        assert not cut.optimal


def test_a_spent_budget_stops_the_pipeline_model_build() -> None:
    graph = inception_like(0, InceptionLikeSettings(blocks=30))
    problem = PipelineProblem(graph, homogeneous_cluster(3, None), PipelineSettings())
    with pytest.raises(TimeoutError):
        pipeline_formulation.build(problem, budget=spent())
    assert pipeline_formulation.build(problem, budget=Budget(math.inf, 0.0)).model is not None


def test_the_chain_settles_on_the_heuristics_when_the_build_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget spent before the model is built: no exact solve, a verified plan, ``stopped_by="time_limit"``."""
    from milp_partition import chain
    from milp_partition.pipeline.solve import SolveSettings, solve_pipeline

    graph = inception_like(2, InceptionLikeSettings(blocks=8))
    problem = PipelineProblem(graph, homogeneous_cluster(3, None), PipelineSettings())
    full = solve_pipeline(problem, SolveSettings(time_limit_s=60.0))
    monkeypatch.setattr(chain.Budget, "starting_now", classmethod(lambda cls, limit_s, clock=None: spent()))
    result = solve_pipeline(problem, SolveSettings(time_limit_s=60.0))
    assert result.stopped_by == "time_limit"
    assert result.status != "optimal"
    if result.bound is not None and full.objective is not None:
        assert result.bound <= full.objective * (1 + 1e-9)


def _small_pipeline_model():  # type: ignore[no-untyped-def]
    graph = inception_like(3, InceptionLikeSettings(blocks=3))
    problem = PipelineProblem(graph, homogeneous_cluster(2, None), PipelineSettings())
    return pipeline_formulation.build(problem).model


@pytest.mark.parametrize("solver", ["cpsat", "cbc"])
def test_a_spent_budget_stops_the_translation_of_the_model_for_the_solver(solver: str) -> None:
    """Issue 43 item 9: a model of a million rows took minutes to translate past the limit; the translation reads the
    budget (CP-SAT's integer scaling and model, CBC's scaling and PuLP problem)."""
    from milp_partition.backends import SolveParams, SolveStatus, get_backend
    from milp_partition.backends.scaling import scale_model

    model = _small_pipeline_model()
    with pytest.raises(TimeoutError):
        get_backend(solver).solve(model, SolveParams(threads=1, budget=spent()))
    if solver == "cpsat":
        with pytest.raises(TimeoutError):
            scale_model(model, 2.0**40, spent())
    out = get_backend(solver).solve(model, SolveParams(threads=1, time_limit_s=30, budget=Budget(math.inf, 0.0)))
    assert out.status is SolveStatus.OPTIMAL


def test_the_chain_hands_the_backend_its_budget_and_settles_when_the_translation_runs_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The back-end gets the run's budget; its TimeoutError ends the exact solve with the heuristics' plan and the
    load bound, ``stopped_by="time_limit"`` (no error, no lost answer)."""
    from milp_partition import chain
    from milp_partition.pipeline.solve import SolveSettings, solve_pipeline

    handed: list[object] = []

    class Translating:
        def solve(self, model: object, params: object) -> object:
            handed.append(params.budget)  # type: ignore[attr-defined]
            raise TimeoutError("the time limit ran out while the model was translated for the solver")

    graph = inception_like(4, InceptionLikeSettings(blocks=6))
    problem = PipelineProblem(graph, homogeneous_cluster(3, None), PipelineSettings())
    full = solve_pipeline(problem, SolveSettings(time_limit_s=60.0, threads=1))
    assert full.status == "optimal"
    monkeypatch.setattr(chain, "get_backend", lambda name: Translating())
    result = solve_pipeline(problem, SolveSettings(time_limit_s=60.0, threads=1))
    assert len(handed) == 1 and isinstance(handed[0], Budget)
    assert result.stopped_by == "time_limit" and result.status == "feasible"
    assert result.objective is not None and result.objective >= full.objective * (1 - 1e-9)
    assert result.bound is not None and result.bound <= full.objective * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_the_pipeline_load_bound_is_below_the_brute_force_optimum(seed: int) -> None:
    """The load bound the pipeline chain states without a model (so a run cut short still has a gap) is a proven
    bound: never above the brute-force optimum, on CPU cores and with forbidden kinds too."""
    from brute_force import brute_force_pipeline
    from conftest import random_pipeline_problem

    from milp_partition.pipeline.solve import SolveSettings, solve_pipeline

    problem = random_pipeline_problem(300 + seed, max_nodes=6, devices=2, cpu_cores=seed % 2, contiguous=seed % 3 != 0)
    best = brute_force_pipeline(problem)
    result = solve_pipeline(problem, SolveSettings(solver="none"))
    if math.isinf(best):
        return
    assert result.bound is not None and 0 < result.bound <= best * (1 + 1e-9)


def test_a_model_past_the_size_cap_is_not_built_and_the_heuristics_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 nodes on 4,096 devices made arrays of gigabytes before the first row: past
    MAX_ASSIGNMENT_VARIABLES the chain answers with the heuristics' plan and the load bound, and says why."""
    from milp_partition.pipeline import solve as pipeline_solve

    graph = inception_like(5, InceptionLikeSettings(blocks=6))
    problem = PipelineProblem(graph, homogeneous_cluster(3, None), PipelineSettings())
    full = pipeline_solve.solve_pipeline(problem, pipeline_solve.SolveSettings(time_limit_s=60.0, threads=1))
    monkeypatch.setattr(pipeline_solve, "MAX_ASSIGNMENT_VARIABLES", 3 * len(graph.nodes) - 1)
    monkeypatch.setattr(pipeline_formulation, "build", lambda *a, **k: pytest.fail("the model was built"))
    result = pipeline_solve.solve_pipeline(problem, pipeline_solve.SolveSettings(time_limit_s=60.0, threads=1))
    assert result.solver_notes["model_skipped"] == 3 * len(graph.nodes)
    assert result.status == "optimal" or "assignment variables" in result.message
    assert result.objective is not None and result.objective >= full.objective * (1 - 1e-9)
    assert result.bound is not None and result.bound <= full.objective * (1 + 1e-9)


def test_the_dps_do_not_start_once_their_share_is_spent() -> None:
    """On a large cluster the DPs' setup alone took seconds past their share; a spent share skips them."""
    from milp_partition.chain import chain_settings, run_chain
    from milp_partition.pipeline import solve as pipeline_solve

    graph = inception_like(6, InceptionLikeSettings(blocks=4))
    problem = PipelineProblem(graph, homogeneous_cluster(2, None), PipelineSettings())
    settings = pipeline_solve.SolveSettings(time_limit_s=10.0, threads=1, solver="none")
    result = run_chain(pipeline_solve.PipelineSteps(settings), problem, chain_settings(settings), budget=spent())
    by_name = {h.name: h for h in result.heuristics}
    assert "not run" in by_name["chain_dp"].message and "not run" in by_name["ideal_dp"].message
    assert result.objective is not None  # the balanced split still answers


@pytest.mark.parametrize("seed", range(40))
def test_the_verifiers_pruned_contiguity_check_matches_the_definition(seed: int) -> None:
    """The verifier explores only up to a device's last topological position (O(N + E) for stages, where it was
    O(N * D): 21 s of a 10 s limit on 4,096 devices); it must flag exactly the assignments with a forward path
    u -> w -> v, u and v on a device, w off it."""
    import random

    from milp_partition.graph import Edge, Node, make_graph
    from milp_partition.pipeline.problem import PipelineSolution
    from milp_partition.verifiers.pipeline import verify_pipeline

    rng = random.Random(seed)
    n = rng.randint(2, 7)
    nodes = [Node(id=f"v{i}", forward_time=1.0) for i in range(n)]
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.4]
    graph = make_graph(nodes, [Edge(f"v{u}", f"v{v}") for u, v in edges], name="g")
    problem = PipelineProblem(graph, homogeneous_cluster(3, None), PipelineSettings())
    succ = {u: [v for a, v in edges if a == u] for u in range(n)}

    def reach(u: int) -> set[int]:
        seen, stack = set(), list(succ[u])
        while stack:
            w = stack.pop()
            if w not in seen:
                seen.add(w)
                stack.extend(succ[w])
        return seen

    for _ in range(10):
        where = [rng.randrange(3) for _ in range(n)]
        broken = any(
            where[u] == where[v] and where[w] != where[u] and w in reach(u) and v in reach(w)
            for u in range(n)
            for v in range(n)
            for w in range(n)
        )
        solution = PipelineSolution({f"v{i}": f"gpu{where[i]}" for i in range(n)})
        flagged = any("not contiguous" in x for x in verify_pipeline(problem, solution).violations)
        assert flagged == broken, (edges, where)


def test_the_dps_refuse_a_cluster_whose_setup_would_take_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 nodes on 4,096 devices: the DPs' (nodes x devices) setup took 114 s of a 30 s limit before they refused
    the graph; past DP_MAX_SETUP_CELLS class-device pairs they refuse before any array is built."""
    from milp_partition.heuristics import pipeline_dp

    graph = inception_like(7, InceptionLikeSettings(blocks=4))
    problem = PipelineProblem(graph, homogeneous_cluster(4, None), PipelineSettings())
    assert pipeline_dp.chain_dp(problem).solution is not None
    monkeypatch.setattr(pipeline_dp, "DP_MAX_SETUP_CELLS", 4 * len(graph.nodes) - 1)
    monkeypatch.setattr(pipeline_dp, "_instance", lambda problem: pytest.fail("the DP was set up"))
    for dp in (pipeline_dp.chain_dp, pipeline_dp.ideal_dp):
        found = dp(problem)
        assert found.solution is None and "not run" in found.message and "class-device pairs" in found.message


def test_under_the_memory_objective_the_split_still_answers() -> None:
    """A 20,000-node chain under --objective memory ended "unknown": the DPs cannot take it and the balanced split
    gave up for that objective.  Its time-balanced split is scored by the verifier for peak memory (and the time
    bound), so the run has an answer."""
    from milp_partition.chain import chain_settings, run_chain
    from milp_partition.pipeline import solve as pipeline_solve
    from milp_partition.pipeline.problem import PipelineSolution
    from milp_partition.verifiers.pipeline import verify_pipeline

    graph = inception_like(8, InceptionLikeSettings(blocks=4))
    problem = PipelineProblem(graph, homogeneous_cluster(3, None), PipelineSettings(objective="memory", max_time_per_sample=1e9))
    settings = pipeline_solve.SolveSettings(time_limit_s=10.0, threads=1, solver="none")
    result = run_chain(pipeline_solve.PipelineSteps(settings), problem, chain_settings(settings), budget=spent())
    assert result.objective is not None and result.objective_name == "peak_memory_bytes"
    report = verify_pipeline(problem, PipelineSolution(result.assignment))
    assert report.feasible and report.objective == result.objective


def test_reading_the_instance_counts_against_the_time_limit(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line starts the budget before it reads the file: a read that takes longer than the limit (a
    20,000-node graph took 4-22 s on a loaded machine) leaves the solve nothing, so the DPs do not start."""
    import json as _json

    from milp_partition.cli import pipeline as cli_pipeline
    from milp_partition.cli.dispatch import main

    now = [0.0]
    monkeypatch.setattr(
        cli_pipeline.Budget, "starting_now", classmethod(lambda cls, limit_s, clock=None: Budget(limit_s, 0.0, lambda: now[0]))
    )
    reading = cli_pipeline.problem_from_args

    def slow_read(args):  # type: ignore[no-untyped-def]
        problem = reading(args)
        now[0] = 100.0  # the read took 100 s of a 30 s limit
        return problem

    monkeypatch.setattr(cli_pipeline, "problem_from_args", slow_read)
    out = tmp_path / "r.json"
    code = main(["solve", str(cli_pipeline.Path(__file__).parents[1] / "examples" / "tiny.json"), "--time-limit", "30",
                 "--solver", "none", "--quiet", "--output", str(out)])  # fmt: skip
    result = _json.loads(out.read_text())
    assert code == 0 and result["stopped_by"] == "time_limit"
    assert all("not run" in h["message"] for h in result["heuristics"] if h["name"] in ("chain_dp", "ideal_dp"))


def test_cbc_is_not_started_when_less_is_left_than_the_translation_took() -> None:
    """PuLP writes the model to an MPS file before CBC starts, in about as long as the translation took, and no
    time limit reaches that write (a 780,000-variable model ran 132 s of a 30 s limit)."""
    from milp_partition.backends import SolveParams, get_backend

    class AlmostSpent:  # not expired while the rows are translated, nothing left after
        def expired(self) -> bool:
            return False

        def left(self) -> float:
            return 0.0

    with pytest.raises(TimeoutError):
        get_backend("cbc").solve(_small_pipeline_model(), SolveParams(threads=1, budget=AlmostSpent()))  # type: ignore[arg-type]
