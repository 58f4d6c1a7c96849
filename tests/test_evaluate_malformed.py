"""``evaluate`` of a malformed plan is bad input (exit 2, one line naming the file and the stage, node or field), not an
infeasible plan (exit 3); a well-formed plan that breaks a limit of the instance stays infeasible (issue 43 item 2).

Each case mutates a result that ``solve`` just wrote, so the plan is otherwise valid.  On the main branch before this
test the joint cases exited 3 ("INFEASIBLE plan"), a placement start for an unknown task or an unknown transfer was
ignored (exit 0), a negative start exited 3, and a non-string pipeline or strategy entry was refused without its id.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from milp_partition.cli.dispatch import main
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO, SHARED, _tiny_piper

Mutation = Callable[[dict[str, Any]], object]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Problem -> (instance, the result ``solve`` wrote for it)."""
    folder = tmp_path_factory.mktemp("malformed")
    piper = folder / "piper.json"
    piper.write_text(json.dumps(_tiny_piper()))
    instances = {
        "joint": piper,
        "pipeline": REPO / "examples" / "tiny.json",
        "placement": SHARED / "placement" / "example-1.json",
        "strategy": SHARED / "strategy" / "alexnet_p4.json",
    }
    out = {}
    for name, instance in instances.items():
        path = folder / f"{name}.json"
        assert main(["solve", str(instance), "-q", "--progress", "0", "-o", str(path)]) == 0
        out[name] = (instance, json.loads(path.read_text()))
    # the joint plan these cases edit: two stages, ["0", "1"] then ["2"], d = 2 and t = 1 each, all vanilla
    stages = out["joint"][1]["stages"]
    assert [(st["nodes"], st["data_parallel"], st["tensor_parallel"]) for st in stages] == [(["0", "1"], 2, 1), (["2"], 2, 1)]
    return out


def _evaluate(results, name: str, mutate: Mutation, tmp_path: Path, *flags: str) -> tuple[int, str, str]:
    instance, data = results[name]
    fake = copy.deepcopy(data)
    mutate(fake)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(fake))
    rc, out, err = run_cli(["evaluate", str(instance), str(path), *flags])
    return rc, out, err


def _stage(q: int, **fields: Any) -> Mutation:
    return lambda d: d["stages"][q].update(fields)


def _add_node(q: int, node: str, config: str | None = "vanilla") -> Mutation:
    def mutate(d: dict[str, Any]) -> None:
        d["stages"][q]["nodes"].append(node)
        if config is not None:
            d["stages"][q]["configs"][node] = config

    return mutate


def _drop_node(q: int, node: str) -> Mutation:
    def mutate(d: dict[str, Any]) -> None:
        d["stages"][q]["nodes"].remove(node)
        d["stages"][q]["configs"].pop(node)

    return mutate


#: (case, problem, mutation, what the one error line must name besides the file)
MALFORMED: list[tuple[str, str, Mutation, str]] = [
    ("joint unknown node", "joint", _add_node(0, "99"), "stages[0]: unknown node id '99'"),
    ("joint unknown node without config", "joint", _add_node(0, "99", None), "stages[0]: unknown node id '99'"),
    ("joint node in two stages", "joint", _add_node(1, "0"), "stages[1]: node '0' is already in stages[0]"),
    ("joint node twice in a stage", "joint", _add_node(0, "0", None), "stages[0]: node '0' is already in this stage"),
    ("joint dropped node", "joint", _drop_node(0, "1"), "node '1' is in no stage"),
    (
        "joint empty stage",
        "joint",
        lambda d: d["stages"].append({"nodes": [], "data_parallel": 1, "tensor_parallel": 1, "configs": {}}),
        "stages[2]: the stage has no nodes",
    ),
    (
        "joint unknown configuration",
        "joint",
        lambda d: d["stages"][0]["configs"].update({"0": "bogus"}),
        "no configuration 'bogus'",
    ),
    ("joint missing configuration", "joint", lambda d: d["stages"][0]["configs"].pop("0"), "no configuration for node '0'"),
    (
        "joint configuration for a node not in the stage",
        "joint",
        lambda d: d["stages"][0]["configs"].update({"2": "vanilla"}),
        "stages[0]: 'configs' names node '2'",
    ),
    ("joint tensor degree not offered", "joint", _stage(1, data_parallel=1, tensor_parallel=3), "'tensor_parallel' 3"),
    ("joint stages out of order", "joint", lambda d: d["stages"].reverse(), "edge '1' -> '2' runs from stages[1] back"),
    ("joint zero data degree", "joint", _stage(0, data_parallel=0), "'data_parallel'"),
    ("joint negative data degree", "joint", _stage(0, data_parallel=-2), "'data_parallel'"),
    ("joint fractional data degree", "joint", _stage(0, data_parallel=1.5), "'data_parallel'"),
    ("joint zero tensor degree", "joint", _stage(0, tensor_parallel=0), "'tensor_parallel'"),
    ("placement start of an unknown task", "placement", lambda d: d["starts"].update({"999": 1.0}), "unknown task id '999'"),
    ("placement negative start", "placement", lambda d: d["starts"].update({"0": -5.0}), "task '0' start: must be at least 0"),
    ("placement starts not an object", "placement", lambda d: d.update(starts=[0.0]), "'starts' must be an object"),
    (
        "placement transfer of an unknown edge",
        "placement",
        lambda d: d.update(transfer_starts={"0->999": 1.0}),
        "unknown edge '0->999'",
    ),
    ("pipeline device not a string", "pipeline", lambda d: d["assignment"].update({"fc": 1}), "entry 'fc': must be a device id"),
    ("pipeline assignment a list", "pipeline", lambda d: d.update(assignment=["gpu0"]), "'assignment': must be an object"),
    (
        "strategy configuration not a string",
        "strategy",
        lambda d: d["assignment"].update({"0": 4}),
        "entry '0': must be a configuration id",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "named"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_plan_is_bad_input(results, name: str, mutate: Mutation, named: str, tmp_path: Path) -> None:
    rc, out, err = _evaluate(results, name, mutate, tmp_path)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1 and "INFEASIBLE" not in out, (rc, out, err)
    assert str(tmp_path / "plan.json") in lines[0] and named in lines[0], lines[0]


#: (case, problem, mutation, evaluate's extra flags, a violation the report must list)
INFEASIBLE: list[tuple[str, str, Mutation, tuple[str, ...], str]] = [
    ("joint more devices than the cluster", "joint", _stage(0, data_parallel=4), (), "the plan uses 6 devices"),
    ("joint d not dividing N", "joint", _stage(0, data_parallel=3), (), "data_parallel 3 does not divide N = 4"),
    ("joint over memory", "joint", lambda d: None, ("--memory", "5B"), "stage 1 needs 10 bytes"),
    (
        "placement overlapping starts",
        "placement",
        lambda d: d["starts"].update(dict.fromkeys(d["starts"], 0.0)),
        (),
        "input arrives",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "flags", "violation"), [m[1:] for m in INFEASIBLE], ids=[m[0] for m in INFEASIBLE])
def test_a_well_formed_plan_over_a_limit_is_infeasible(
    results, name: str, mutate: Mutation, flags: tuple[str, ...], violation: str, tmp_path: Path
) -> None:
    rc, out, err = _evaluate(results, name, mutate, tmp_path, *flags)
    assert rc == 3 and "INFEASIBLE" in out and violation in out and not err.strip(), (rc, out, err)


@pytest.mark.parametrize("name", ["joint", "pipeline", "placement", "strategy"])
def test_the_unmutated_result_passes(results, name: str, tmp_path: Path) -> None:
    rc, out, err = _evaluate(results, name, lambda d: None, tmp_path)
    assert rc == 0 and "feasible" in out, (rc, out, err)
