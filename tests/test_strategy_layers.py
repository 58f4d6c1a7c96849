"""Strategy problems generated from layer shapes and a device profile: enumeration, costs by hand, exactness, errors, CLI."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from milp_partition.calibration.profile import datasheet_profile
from milp_partition.cli.dispatch import main
from milp_partition.errors import CycleError, InputError
from milp_partition.io.strategy_tables import read_strategy_tables
from milp_partition.strategy.dp import pase_dp
from milp_partition.strategy.layers import (
    LayerGraph,
    LayerSpec,
    StrategyGenerationSettings,
    generate_strategy_problem,
    layer_graph_to_dict,
    transformer_layer_graph,
)
from milp_partition.strategy.problem import StrategySolution
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
from milp_partition.verifiers.strategy import verify_strategy

H100 = datasheet_profile("H100")


def _one(kind: str, dims: dict[str, int], p: int = 4, **kw):
    graph = LayerGraph((LayerSpec("L", kind, dims),), ())
    return generate_strategy_problem(graph, H100, StrategyGenerationSettings(devices=p, **kw)).nodes[0]


def test_linear_configurations_are_every_power_of_two_split_within_p() -> None:
    node = _one("linear", {"b": 64, "n_in": 32, "n_out": 16}, p=4)
    # (i, j, k) exponents with i + j + k <= 2: C(5, 3) = 10
    assert len(node.configs) == 10
    assert set(node.configs) == {f"{2**i}x{2**j}x{2**k}" for i, j, k in itertools.product(range(3), repeat=3) if i + j + k <= 2}
    # a dimension shorter than p caps its factor
    assert all(int(c.split("x")[0]) <= 2 for c in _one("linear", {"b": 2, "n_in": 32, "n_out": 16}, p=8).configs)


def test_linear_costs_and_memory_by_hand() -> None:
    b, n_in, n_out, bpe = 64, 32, 16, 4
    node = _one("linear", {"b": b, "n_in": n_in, "n_out": n_out}, p=4)
    flops, w, i, o = 2.0 * b * n_in * n_out, n_in * n_out * bpe, b * n_in * bpe, b * n_out * bpe
    cost = dict(zip(node.configs, node.cost))
    memory = dict(zip(node.configs, node.memory_bytes))
    # unsplit: three times the forward's roofline time, nothing to all-reduce
    assert cost["1x1x1"] == pytest.approx(3 * H100.compute_time_s(flops, w + i + o))
    assert memory["1x1x1"] == 4 * w + o
    # data parallel over 4: a quarter of the work plus the ring all-reduce of all gradients
    assert cost["4x1x1"] == pytest.approx(3 * H100.compute_time_s(flops / 4, (w + i + o) / 4) + H100.allreduce_time_s(w, 4))
    assert memory["4x1x1"] == 4 * w + o // 4
    # split of the contraction dim n_in by 2: weights halved, partial sums all-reduced forward and backward
    assert cost["1x2x1"] == pytest.approx(3 * H100.compute_time_s(flops / 2, (w + i + o) / 2) + 2 * H100.allreduce_time_s(o, 2))
    assert memory["1x2x1"] == 4 * w // 2 + o


def test_redistribution_cost_by_hand() -> None:
    b, n = 64, 32
    graph = LayerGraph(
        (LayerSpec("a", "elementwise", {"b": b, "n": n}), LayerSpec("c", "elementwise", {"b": b, "n": n})), (("a", "c"),)
    )
    problem = generate_strategy_problem(graph, H100, StrategyGenerationSettings(devices=2))
    a, c = problem.nodes
    m = problem.edges[0].cost
    tensor = b * n * 4
    assert all(m[i, i] == 0 for i in range(len(a.configs)))  # same layout: nothing moves
    i, j = a.configs.index("2x1"), c.configs.index("1x2")
    # consumer tile T/2, half of it already local -> T/4 moves, forward and backward
    assert m[i, j] == pytest.approx(2 * H100.transfer_time_s(tensor / 4))
    i, j = a.configs.index("2x1"), c.configs.index("1x1")
    assert m[i, j] == pytest.approx(2 * H100.transfer_time_s(tensor / 2))  # all-gather: the missing half


def test_generated_problem_dp_and_models_agree() -> None:
    graph = transformer_layer_graph(2, batch_tokens=2 * 128, seq=128, hidden=256, heads=4, vocab=1000)
    problem = generate_strategy_problem(graph, H100, StrategyGenerationSettings(devices=4))
    dp = pase_dp(problem)
    assert dp.exact
    for solver in ("cpsat", "cbc"):
        res = solve_strategy(problem, StrategySolveSettings(solver=solver, threads=1, time_limit_s=60, heuristics=False))
        assert res.status == "optimal", res.message
        assert res.objective == pytest.approx(dp.value, rel=1e-9)


def test_tiny_generated_problem_matches_brute_force_with_memory() -> None:
    graph = LayerGraph(
        (
            LayerSpec("fc1", "linear", {"b": 32, "n_in": 64, "n_out": 128}),
            LayerSpec("act", "elementwise", {"b": 32, "n": 128}),
            LayerSpec("fc2", "linear", {"b": 32, "n_in": 128, "n_out": 64}),
        ),
        (("fc1", "act"), ("act", "fc2")),
    )
    free = generate_strategy_problem(graph, H100, StrategyGenerationSettings(devices=4))
    best_free = pase_dp(free)
    need = verify_strategy(free, best_free.solution).memory_bytes
    least = sum(int(n.memory_bytes.min()) for n in free.nodes)
    problem = free.with_memory_limit((least + int(need)) // 2)
    best = math.inf
    for picks in itertools.product(*[n.configs for n in problem.nodes]):
        report = verify_strategy(problem, StrategySolution(dict(zip([n.id for n in problem.nodes], picks))))
        if report.feasible:
            best = min(best, report.objective)
    assert best > best_free.value  # the limit binds
    res = solve_strategy(problem, StrategySolveSettings(threads=1, time_limit_s=30))
    assert res.status == "optimal" and res.objective == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize(
    ("layers", "edges", "p", "match"),
    [
        ([LayerSpec("x", "lstm", {"b": 1})], [], 2, r"layer 'x'.*unknown kind 'lstm'"),
        ([LayerSpec("x", "linear", {"b": 4, "n_in": 4})], [], 2, r"layer 'x'.*'n_out' must be a whole number from 1 to"),
        ([LayerSpec("x", "linear", {"b": 4, "n_in": 4, "n_out": 0})], [], 2, r"'n_out' must be a whole number from 1 to"),
        ([LayerSpec("x", "norm", {"b": 4, "n": 4, "k": 2})], [], 2, r"unknown dimension\(s\) k"),
        ([LayerSpec("x", "norm", {"b": 4, "n": 4})], [("x", "y")], 2, r"unknown layer 'y'"),
        ([LayerSpec("x", "norm", {"b": 4, "n": 4})], [], 3, r"power of two"),
    ],
)
def test_bad_layer_graphs_are_named(layers, edges, p, match) -> None:
    with pytest.raises(InputError, match=match):
        generate_strategy_problem(
            LayerGraph(tuple(layers), tuple(edges)), H100, StrategyGenerationSettings(devices=p), source="f.json"
        )


def test_cycle_is_refused() -> None:
    graph = LayerGraph(
        (LayerSpec("a", "norm", {"b": 4, "n": 4}), LayerSpec("b", "norm", {"b": 4, "n": 4})), (("a", "b"), ("b", "a"))
    )
    with pytest.raises(CycleError):
        generate_strategy_problem(graph, H100, StrategyGenerationSettings(devices=2))


def test_cli_solves_a_layer_file_and_writes_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = transformer_layer_graph(2, batch_tokens=4 * 128, seq=128, hidden=256, heads=4)
    path = tmp_path / "layers.json"
    path.write_text(json.dumps(layer_graph_to_dict(graph)))
    tables, out = tmp_path / "tables.json", tmp_path / "result.json"
    code = main(
        [
            "solve",
            str(path),
            "--devices",
            "4",
            "--profile",
            "A100",
            "--write-tables",
            str(tables),
            "-o",
            str(out),
            "--progress",
            "0",
        ]
    )
    assert code == 0, capsys.readouterr()
    result = json.loads(out.read_text())
    assert result["status"] == "optimal"
    problem = read_strategy_tables(tables)
    assert len(problem.nodes) == len(graph.layers) and problem.cost_unit == "s"
    assert verify_strategy(problem, StrategySolution(result["assignment"])).objective == pytest.approx(
        result["objective"], rel=1e-12
    )
    # liveness with a limit: generated problems carry activation_bytes
    code = main(["solve", str(path), "--devices", "4", "--memory-model", "liveness", "--memory-limit", "1GiB", "-q"])
    assert code == 0
    # no --devices: one clear line, exit 2
    assert main(["solve", str(path)]) == 2
    assert "needs --devices" in capsys.readouterr().err
