"""The strategy-tables/1 reader and writer on PaSE's eleven tables and on broken inputs."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from milp_partition.errors import InputError
from milp_partition.io.strategy_tables import (
    STRATEGY_FORMAT,
    looks_like_strategy_tables,
    read_strategy_tables,
    strategy_from_dict,
    strategy_to_dict,
    write_strategy_tables,
)
from milp_partition.strategy.problem import StrategyProblem, StrategySolution
from milp_partition.verifiers.strategy import verify_strategy

STRATEGY = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "strategy"
OPTIMA = {entry["file"]: entry for entry in json.loads((STRATEGY / "optima.json").read_text())}
FILES = sorted(OPTIMA)
SMALL = STRATEGY / "alexnet_p4.json"


@pytest.fixture(scope="module")
def problems() -> dict[str, StrategyProblem]:
    return {name: read_strategy_tables(STRATEGY / name) for name in FILES}


def test_all_eleven_files_are_listed() -> None:
    assert len(FILES) == 11
    assert sorted(p.name for p in STRATEGY.glob("*_p*.json")) == FILES


@pytest.mark.parametrize("name", FILES)
def test_counts_match_raw_json_and_optima(name: str, problems: dict[str, StrategyProblem]) -> None:
    raw = json.loads((STRATEGY / name).read_text())
    problem = problems[name]
    assert len(problem.nodes) == len(raw["nodes"]) == OPTIMA[name]["nodes"]
    assert len(problem.edges) == len(raw["edges"]) == OPTIMA[name]["edges"]
    assert problem.total_configs == sum(len(n["configs"]) for n in raw["nodes"]) == OPTIMA[name]["total_configs"]
    assert problem.devices == raw["devices"]
    assert problem.name == raw["name"]
    assert problem.cost_unit == raw["cost_unit"]
    assert problem.extra["source_text"] == raw["source"]
    assert problem.source == str(STRATEGY / name)
    assert problem.memory_limit_bytes is None
    for node, obj in zip(problem.nodes, raw["nodes"]):
        assert node.id == obj["id"] and node.name == obj["name"] and list(node.configs) == obj["configs"]
        assert node.cost.dtype == np.float64 and node.cost.tolist() == obj["cost"]
        assert node.memory_bytes is None
    for edge, obj in zip(problem.edges, raw["edges"]):
        assert (edge.source, edge.target) == (obj["source"], obj["target"])
        assert edge.cost.dtype == np.float64
        assert edge.cost.shape == (len(obj["cost"]), len(obj["cost"][0]))
        assert edge.cost.tolist() == obj["cost"]


@pytest.mark.parametrize("name", FILES)
def test_pase_choice_costs_the_reference_optimum(name: str, problems: dict[str, StrategyProblem]) -> None:
    report = verify_strategy(problems[name], StrategySolution(OPTIMA[name]["pase_choice"]))
    assert report.feasible, report.violations
    assert math.isclose(report.objective, OPTIMA[name]["optimum"], rel_tol=1e-9)


def _assert_equal_problems(a: StrategyProblem, b: StrategyProblem) -> None:
    assert (a.name, a.devices, a.cost_unit, a.memory_limit_bytes) == (b.name, b.devices, b.cost_unit, b.memory_limit_bytes)
    assert a.extra["source_text"] == b.extra["source_text"]
    assert len(a.nodes) == len(b.nodes) and len(a.edges) == len(b.edges)
    for x, y in zip(a.nodes, b.nodes):
        assert (x.id, x.name, x.configs) == (y.id, y.name, y.configs)
        np.testing.assert_array_equal(x.cost, y.cost)
        assert (x.memory_bytes is None) == (y.memory_bytes is None)
        if x.memory_bytes is not None:
            assert y.memory_bytes.dtype == np.int64
            np.testing.assert_array_equal(x.memory_bytes, y.memory_bytes)
    for x, y in zip(a.edges, b.edges):
        assert (x.source, x.target) == (y.source, y.target)
        np.testing.assert_array_equal(x.cost, y.cost)


@pytest.mark.parametrize("name", ["alexnet_p4.json", "rnnlm_p32.json", "inception3_p4.json", "transformer_p4.json"])
def test_round_trip(name: str, problems: dict[str, StrategyProblem], tmp_path: Path) -> None:
    path = tmp_path / name
    write_strategy_tables(problems[name], path)
    back = read_strategy_tables(path)
    _assert_equal_problems(problems[name], back)
    assert back.source == str(path)


def test_round_trip_keeps_memory_and_limit_and_awkward_floats(tmp_path: Path) -> None:
    problem = strategy_from_dict(
        {
            "format": STRATEGY_FORMAT,
            "name": "tiny",
            "source": "hand-made",
            "devices": 2,
            "cost_unit": "s",
            "memory_limit_bytes": 1000,
            "nodes": [
                {"id": "a", "name": "A", "configs": ["1", "2"], "cost": [0.1, 1e-300], "memory_bytes": [7, 3]},
                {"id": "b", "name": "B", "configs": ["x"], "cost": [1 / 3], "memory_bytes": [0]},
            ],
            "edges": [{"source": "a", "target": "b", "cost": [[2.0 / 3.0], [123456789.123456789]]}],
        }
    )
    path = tmp_path / "tiny.json"
    write_strategy_tables(problem, path)
    back = read_strategy_tables(path)
    _assert_equal_problems(problem, back)
    assert back.memory_limit_bytes == 1000
    assert strategy_to_dict(back) == strategy_to_dict(problem)


def test_looks_like_strategy_tables() -> None:
    assert looks_like_strategy_tables({"format": STRATEGY_FORMAT})
    assert looks_like_strategy_tables({"format": "strategy-tables/2"})
    assert not looks_like_strategy_tables({"format": "milp-partition/1"})
    assert not looks_like_strategy_tables({"nodes": []})
    assert not looks_like_strategy_tables([1, 2])


def test_name_defaults_to_file_stem(tmp_path: Path) -> None:
    data = json.loads(SMALL.read_text())
    del data["name"]
    path = tmp_path / "noname.json"
    path.write_text(json.dumps(data))
    assert read_strategy_tables(path).name == "noname"


# ---------------------------------------------------------------------------
# Broken inputs: each gives an InputError naming the file and the field
# ---------------------------------------------------------------------------


def _base() -> dict[str, Any]:
    return json.loads(SMALL.read_text())


def _set(data: dict[str, Any], *keys: Any, value: Any) -> dict[str, Any]:
    obj = data
    for key in keys[:-1]:
        obj = obj[key]
    obj[keys[-1]] = value
    return data


def _without(data: dict[str, Any], *keys: Any) -> dict[str, Any]:
    obj = data
    for key in keys[:-1]:
        obj = obj[key]
    del obj[keys[-1]]
    return data


def _bad_cases() -> list[tuple[str, dict[str, Any], tuple[str, ...]]]:
    b = _base
    e0 = b()["edges"][0]
    n0_len = len(b()["nodes"][0]["configs"])
    n1_len = len(b()["nodes"][1]["configs"])
    return [
        ("wrong-format", _set(b(), "format", value="strategy-tables/2"), ("field 'format'", "strategy-tables/1")),
        ("other-format", _set(b(), "format", value="pase"), ("field 'format'",)),
        ("missing-format", _without(b(), "format"), ('"format"',)),
        ("missing-nodes", _without(b(), "nodes"), ("'nodes'",)),
        ("missing-edges", _without(b(), "edges"), ("'edges'",)),
        ("missing-devices", _without(b(), "devices"), ("'devices'",)),
        ("zero-devices", _set(b(), "devices", value=0), ("field 'devices'", "positive integer")),
        ("unknown-top-field", _set(b(), "nodez", value=[]), ("'nodez'", "did you mean 'nodes'")),
        ("nodes-not-list", _set(b(), "nodes", value={"0": {}}), ("field 'nodes'", "JSON array")),
        ("duplicate-node", _set(b(), "nodes", 1, "id", value="0"), ("nodes[1]", "'0'", "duplicate node id")),
        ("missing-node-id", _without(b(), "nodes", 2, "id"), ("nodes[2]", "'id'")),
        ("missing-configs", _without(b(), "nodes", 2, "configs"), ("node '2'", "'configs'")),
        ("missing-node-cost", _without(b(), "nodes", 2, "cost"), ("node '2'", "'cost'")),
        ("empty-configs", _set(b(), "nodes", 3, "configs", value=[]), ("node '3' field 'configs'", "empty")),
        (
            "duplicate-config",
            _set(b(), "nodes", 0, "configs", 1, value=b()["nodes"][0]["configs"][0]),
            ("node '0' field 'configs'", "twice"),
        ),
        ("config-not-string", _set(b(), "nodes", 0, "configs", 1, value=12), ("node '0' field 'configs'", "[1]")),
        ("short-cost", _set(b(), "nodes", 0, "cost", value=[1.0] * (n0_len - 1)), ("node '0' field 'cost'", f"{n0_len}")),
        ("nan-cost", _set(b(), "nodes", 4, "cost", 0, value=float("nan")), ("node '4' field 'cost'", "[0]", "nan")),
        ("inf-cost", _set(b(), "nodes", 4, "cost", 1, value=float("inf")), ("node '4' field 'cost'", "[1]", "inf")),
        ("negative-cost", _set(b(), "nodes", 4, "cost", 2, value=-1.0), ("node '4' field 'cost'", "[2]", "non-negative")),
        ("string-cost", _set(b(), "nodes", 5, "cost", 0, value="12"), ("node '5' field 'cost'", "[0]", "number")),
        ("bool-cost", _set(b(), "nodes", 5, "cost", 1, value=True), ("node '5' field 'cost'", "[1]", "number")),
        ("null-cost", _set(b(), "nodes", 5, "cost", 1, value=None), ("node '5' field 'cost'", "[1]", "number")),
        ("huge-int-cost", _set(b(), "nodes", 5, "cost", 1, value=10**400), ("node '5' field 'cost'",)),
        ("unknown-node-field", _set(b(), "nodes", 0, "costs", value=[]), ("node '0'", "'costs'")),
        (
            "matrix-rows",
            _set(b(), "edges", 0, "cost", value=e0["cost"][:-1]),
            ("edge '0' -> '1'", "field 'cost'", f"expected shape {n0_len}x{n1_len}", f"got {n0_len - 1} rows"),
        ),
        (
            "matrix-row-length",
            _set(b(), "edges", 0, "cost", 2, value=e0["cost"][2][:-1]),
            ("edge '0' -> '1'", "field 'cost'", "row 2", f"expected shape {n0_len}x{n1_len}", f"length {n1_len - 1}"),
        ),
        ("matrix-row-not-list", _set(b(), "edges", 0, "cost", 1, value=3.0), ("edge '0' -> '1'", "row 1")),
        ("matrix-nan", _set(b(), "edges", 1, "cost", 1, 2, value=float("nan")), ("edge '1' -> '2'", "[1][2]", "nan")),
        ("matrix-inf", _set(b(), "edges", 1, "cost", 0, 0, value=float("-inf")), ("edge '1' -> '2'", "[0][0]", "inf")),
        ("matrix-negative", _set(b(), "edges", 1, "cost", 0, 1, value=-5), ("edge '1' -> '2'", "[0][1]", "non-negative")),
        ("matrix-string", _set(b(), "edges", 2, "cost", 1, 0, value="x"), ("edge '2' -> '3'", "[1][0]", "number")),
        ("unknown-target", _set(b(), "edges", 0, "target", value="99"), ("edges[0] field 'target'", "'99'")),
        ("unknown-source", _set(b(), "edges", 3, "source", value="nope"), ("edges[3] field 'source'", "'nope'")),
        ("missing-edge-source", _without(b(), "edges", 1, "source"), ("edges[1]", "'source'")),
        ("missing-edge-cost", _without(b(), "edges", 1, "cost"), ("edge '1' -> '2'", "'cost'")),
        (
            "duplicate-edge",
            _set(b(), "edges", value=[*b()["edges"], copy.deepcopy(e0)]),
            ("edge '0' -> '1'", "duplicates edges[0]"),
        ),
        (
            "self-loop",
            _set(b(), "edges", value=[*b()["edges"], {"source": "3", "target": "3", "cost": [[0.0]]}]),
            ("edge '3' -> '3'", "self-loop"),
        ),
        ("memory-length", _set(b(), "nodes", 0, "memory_bytes", value=[1]), ("node '0' field 'memory_bytes'", "1 entries")),
        (
            "memory-fraction",
            _set(b(), "nodes", 0, "memory_bytes", value=[1.5] * n0_len),
            ("node '0' field 'memory_bytes'[0]", "whole number"),
        ),
        (
            "memory-negative",
            _set(b(), "nodes", 0, "memory_bytes", value=[-1] * n0_len),
            ("node '0' field 'memory_bytes'", "[0]", "[0, 2**63)"),
        ),
        ("limit-fraction", _set(b(), "memory_limit_bytes", value=0.5), ("field 'memory_limit_bytes'", "whole number")),
        ("limit-negative", _set(b(), "memory_limit_bytes", value=-4), ("field 'memory_limit_bytes'", "non-negative")),
        ("limit-string", _set(b(), "memory_limit_bytes", value="1GB"), ("field 'memory_limit_bytes'",)),
    ]


BAD = _bad_cases()


@pytest.mark.parametrize(("label", "data", "needles"), BAD, ids=[case[0] for case in BAD])
def test_bad_input_names_file_and_field(label: str, data: dict[str, Any], needles: tuple[str, ...], tmp_path: Path) -> None:
    path = tmp_path / f"{label}.json"
    path.write_text(json.dumps(data))  # json.dumps writes NaN and Infinity literals, as a careless exporter would
    with pytest.raises(InputError) as err:
        read_strategy_tables(path)
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    for needle in needles:
        assert needle in message, (needle, message)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(InputError, match="no such file"):
        read_strategy_tables(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "strategy-tables/1", "nodes": [')
    with pytest.raises(InputError, match=r"broken\.json: invalid JSON at line 1"):
        read_strategy_tables(broken)
    array = tmp_path / "array.json"
    array.write_text("[1, 2]")
    with pytest.raises(InputError, match=r"array\.json: top level: must be a JSON object"):
        read_strategy_tables(array)


def test_write_rejects_nan(tmp_path: Path) -> None:
    problem = read_strategy_tables(SMALL)
    bad_cost = problem.nodes[0].cost.copy()
    bad_cost[0] = np.nan
    nodes = (type(problem.nodes[0])(problem.nodes[0].id, "", problem.nodes[0].configs, bad_cost), *problem.nodes[1:])
    broken = StrategyProblem(nodes, problem.edges, cluster=problem.cluster)
    path = tmp_path / "out.json"
    with pytest.raises(InputError, match="NaN or infinite"):
        write_strategy_tables(broken, path)
