"""Every plan shape runs: stages with different (data, tensor) degrees (:mod:`milp_partition.run.mixed`) and data with
tensor parallelism on one ``(pp, dp, tp)`` mesh; the losses equal one process's on the same data.

The schedule's arithmetic (:mod:`milp_partition.run.layout`) is checked without torch: every replica runs its
micro-batches once forward and once backward within the planner's micro-batches in flight, and the replicas'
orders with the messages between them form no cycle (so blocking receives after non-blocking sends cannot deadlock).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from milp_partition.run.layout import RankLayout, one_f_one_b


def _planner_in_flight(degrees: list[tuple[int, int]]) -> list[int]:
    """Piper's ``y_i = ceil((d_i + ... + d_last) / d_i)`` (the planner's micro-batches in flight)."""
    return [-(-sum(d for d, _ in degrees[q:]) // degrees[q][0]) for q in range(len(degrees))]


def _acyclic(layout: RankLayout, order: dict[tuple[int, int], list[tuple[str, int]]]) -> bool:
    """Kahn's algorithm over the passes: each replica's order, and forward q-1 -> q, backward q+1 -> q per micro-batch."""
    S = layout.stages
    edges: dict[tuple[str, int, int], list[tuple[str, int, int]]] = {}
    indegree: dict[tuple[str, int, int], int] = {}
    for (q, _), passes in order.items():
        for kind, j in passes:
            indegree.setdefault((kind, q, j), 0)
        for (k1, j1), (k2, j2) in itertools.pairwise(passes):
            edges.setdefault((k1, q, j1), []).append((k2, q, j2))
    for j in range(layout.microbatches):
        for q in range(S):
            if q > 0:
                edges.setdefault(("F", q - 1, j), []).append(("F", q, j))
            if q < S - 1:
                edges.setdefault(("B", q + 1, j), []).append(("B", q, j))
            edges.setdefault(("F", q, j), []).append(("B", q, j))
    for targets in edges.values():
        for v in targets:
            indegree[v] += 1
    ready = [v for v, n in indegree.items() if n == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for w in edges.get(v, []):
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return seen == len(indegree)


@pytest.mark.parametrize("seed", range(60))
def test_the_schedule_runs_every_micro_batch_once_within_the_planned_in_flight_and_cannot_deadlock(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 4, 6, 8, 12])
    S = rng.randint(1, 4)
    degrees = [(rng.choice([d for d in (1, 2, 3, 4) if n % d == 0]), rng.choice([1, 2])) for _ in range(S)]
    layout = RankLayout(tuple(degrees), n)
    in_flight = _planner_in_flight(degrees)
    order = one_f_one_b(layout, in_flight)
    assert _acyclic(layout, order)
    for q, (d, _) in enumerate(degrees):
        covered: list[int] = []
        for r in range(d):
            passes = order[(q, r)]
            mine = list(range(r, n, d))
            assert [j for k, j in passes if k == "F"] == mine and [j for k, j in passes if k == "B"] == mine
            live = 0
            for kind, _ in passes:
                live += 1 if kind == "F" else -1
                assert 0 <= live <= in_flight[q]
            covered += mine
        assert sorted(covered) == list(range(n))


@pytest.mark.parametrize(("stages", "m"), [(2, 4), (3, 6), (4, 3), (4, 8)])
def test_equal_degrees_give_the_classic_1f1b_warm_up(stages: int, m: int) -> None:
    # one replica per stage and y_q = S - q: stage q runs min(S - q, m) forwards before its first backward
    layout = RankLayout(((1, 1),) * stages, m)
    order = one_f_one_b(layout, [stages - q for q in range(stages)])
    for q in range(stages):
        passes = order[(q, 0)]
        assert [k for k, _ in passes].index("B") == min(stages - q, m)


def test_layout_places_ranks_stage_by_stage() -> None:
    layout = RankLayout(((2, 1), (1, 2), (2, 2)), 4)
    assert layout.world_size == 8
    places = [layout.place(r) for r in (0, 1, 2, 3, 4, 7)]
    assert [(p.stage, p.replica, p.tp_index) for p in places] == [
        (0, 0, 0),
        (0, 1, 0),
        (1, 0, 0),
        (1, 0, 1),
        (2, 0, 0),
        (2, 1, 1),
    ]
    assert layout.ranks(2, 1) == [6, 7] and layout.data_groups(2) == [[4, 6], [5, 7]]
    assert layout.microbatches_of(0, 1) == [1, 3] and layout.replica_of(2, 3) == 1
    with pytest.raises(ValueError, match="does not divide"):
        RankLayout(((3, 1),), 4)


# -- runs on gloo (CPU) ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test MLP imported for training at a batch of 8 (layer granularity): once for this module's runs."""
    pytest.importorskip("torch")
    from milp_partition.cli.dispatch import main

    graph = tmp_path_factory.mktemp("mesh") / "m.json"
    args = ["import", "torch", "milp_partition.importers.models:mlp_small_test", "--input", "8x32", "--training"]
    assert main([*args, "--granularity", "layer", "--output", str(graph)]) == 0
    return graph


@pytest.fixture(scope="module")
def two_stage_plan(mlp_graph: Path) -> dict:
    """The planner's 2-stage plan of the test MLP (d = t = 1), solved once: the runs below give its stages their degrees."""
    from milp_partition.cli.dispatch import main

    plan = mlp_graph.parent / "plan2.json"
    # solved for 4 devices (run refuses stages that use more devices than the plan was solved for)
    solve = ["solve", str(mlp_graph), "--problem", "joint", "--devices", "4", "--memory", "1GiB", "--microbatches", "4"]
    assert main([*solve, "--stages", "2", "--data-parallel", "1", "--tensor-parallel", "1", "--quiet", "-o", str(plan)]) == 0
    return json.loads(plan.read_text())


def _mlp_plan(tmp_path: Path, two_stage_plan: dict, degrees: list[tuple[int, int]]) -> Path:
    """A copy of the planner's 2-stage plan of the test MLP in ``tmp_path``, its stages given ``degrees`` (and the
    planner's in-flight)."""
    assert len(degrees) == len(two_stage_plan["stages"])
    data = json.loads(json.dumps(two_stage_plan))
    for st, (d, t), y in zip(data["stages"], degrees, _planner_in_flight(degrees)):
        st.update(data_parallel=d, tensor_parallel=t, microbatches_in_flight=y)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    return plan


@pytest.mark.parametrize(
    "degrees",
    [
        [(2, 1), (1, 2)],  # 4 ranks: two replicas feed one tensor-parallel replica (the LM-head-like last layer split)
        [(1, 1), (2, 1)],  # 3 ranks: one replica scatters micro-batches to two
    ],
)
def test_a_plan_with_different_degrees_per_stage_matches_one_process(
    tmp_path: Path, two_stage_plan: dict, degrees: list[tuple[int, int]]
) -> None:
    from milp_partition.run.launch import run_plan
    from milp_partition.run.spec import read_run_spec

    spec = read_run_spec(_mlp_plan(tmp_path, two_stage_plan, degrees))
    assert not spec.uniform and spec.world_size == sum(d * t for d, t in degrees)
    run = run_plan(spec, 2)
    assert run["ranks"] == spec.world_size and len(run["losses"]) == 2
    assert run["loss_max_rel_diff"] <= 1e-6
    assert [(g["data_parallel"], g["tensor_parallel"]) for g in run["stage_degrees"]] == degrees
    assert sorted(m["stage"] for m in run["memory"]) == sorted(q + 1 for q, (d, t) in enumerate(degrees) for _ in range(d * t))
    assert any("different degrees" in n for n in run["notes"])


def _one_stage_mlp_plan(tmp_path: Path, mlp_graph: Path, devices: int, microbatches: int, d: int, t: int) -> Path:
    """The test MLP (imported for training) planned by the joint problem as one stage of degrees ``(d, t)``."""
    from milp_partition.cli.dispatch import main

    plan = tmp_path / "plan.json"
    solve = ["solve", str(mlp_graph), "--problem", "joint", "--devices", str(devices), "--memory", "1GiB"]
    shape = ["--microbatches", str(microbatches), "--stages", "1", "--data-parallel", str(d), "--tensor-parallel", str(t)]
    assert main([*solve, *shape, "--quiet", "-o", str(plan)]) == 0
    return plan


def test_data_and_tensor_parallel_together_match_one_process(tmp_path: Path, mlp_graph: Path) -> None:
    # a 2-D (dp, tp) mesh: DDP takes no DTensor parameters, so the run all-reduces the gradients over dp itself
    from milp_partition.run.launch import run_plan
    from milp_partition.run.spec import read_run_spec

    spec = read_run_spec(_one_stage_mlp_plan(tmp_path, mlp_graph, 4, 4, 2, 2))
    assert spec.uniform and spec.shape == (1, 2, 2)
    run = run_plan(spec, 2)
    assert run["ranks"] == 4 and run["loss_max_rel_diff"] <= 1e-6
    assert len(run["losses"]) == 2


def test_recomputed_layers_are_split_as_planned_and_match_one_process(tmp_path: Path, mlp_graph: Path) -> None:
    """A tensor-parallel stage whose every layer is recomputed: the split comes before the checkpoint wrapper (which
    would hide a recomputed Linear from ColwiseParallel, and move a recomputed block's inner paths), so every planned
    split is applied and the losses are one process's."""
    from milp_partition.run.launch import run_plan
    from milp_partition.run.spec import read_run_spec

    plan = _one_stage_mlp_plan(tmp_path, mlp_graph, 2, 2, 1, 2)
    data = json.loads(plan.read_text())
    data["stages"][0]["configs"] = {v: "activation recomp" for v in data["stages"][0]["nodes"]}
    plan.write_text(json.dumps(data))
    spec = read_run_spec(plan)
    assert spec.stages[0].recomputed and spec.shape == (1, 1, 2)
    run = run_plan(spec, 2)
    assert run["ranks"] == 2 and run["loss_max_rel_diff"] <= 1e-6
    assert not [n for n in run["notes"] if "not in this stage's module" in n]
