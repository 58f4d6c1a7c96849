"""``evaluate`` recomputes every claim of a result file and fails on a contradiction (issue 20 item 5)."""

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

TINY = REPO / "examples" / "tiny.json"
PLACEMENT = SHARED / "placement" / "example-1.json"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("claims")
    piper = folder / "piper.json"
    piper.write_text(json.dumps(_tiny_piper()))
    out = {}
    for name, instance in (("joint", piper), ("pipeline", TINY), ("placement", PLACEMENT)):
        path = folder / f"{name}.json"
        assert main(["solve", str(instance), "-q", "--progress", "0", "-o", str(path)]) == 0
        out[name] = (instance, json.loads(path.read_text()))
    return out


def _evaluate(results, name: str, mutate: Callable[[dict[str, Any]], None], tmp_path: Path) -> tuple[int, str]:
    instance, data = results[name]
    fake = copy.deepcopy(data)
    mutate(fake)
    path = tmp_path / "fake.json"
    path.write_text(json.dumps(fake))
    rc, out, err = run_cli(["evaluate", str(instance), str(path)])
    return rc, err + out


@pytest.mark.parametrize("name", ["joint", "pipeline", "placement"])
def test_an_honest_result_passes(results, name: str, tmp_path: Path) -> None:
    rc, text = _evaluate(results, name, lambda d: None, tmp_path)
    assert rc == 0 and "feasible" in text


FAKES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("objective", lambda d: d.update(objective=d["objective"] * 0.5), "objective"),
    ("status infeasible", lambda d: d.update(status="infeasible"), "status 'infeasible'"),
    ("status unknown", lambda d: d.update(status="unknown"), "status 'unknown'"),
    ("bound above", lambda d: d.update(bound=d["objective"] * 2), "bound"),
    ("optimal with a low bound", lambda d: d.update(bound=d["objective"] * 0.5, gap=None), "does not meet"),
    ("gap", lambda d: d.update(gap=0.5), "gap"),
    ("problem", lambda d: d.update(problem="strategy"), "problem 'strategy'"),
    ("loads", lambda d: d["loads"].update({next(iter(d["loads"])): 123.0}), "loads"),
    ("memory", lambda d: d["memory_bytes"].update({next(iter(d["memory_bytes"])): 1.0}), "memory_bytes"),
]


@pytest.mark.parametrize("name", ["joint", "pipeline", "placement"])
@pytest.mark.parametrize(("what", "mutate", "named"), FAKES, ids=[f[0] for f in FAKES])
def test_a_faked_claim_fails(results, name: str, what: str, mutate, named: str, tmp_path: Path) -> None:
    rc, text = _evaluate(results, name, mutate, tmp_path)
    assert rc == 2 and "contradict" in text and named in text, text


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (lambda d: d["stages"][0].update(devices=999), "stages[0]['devices'] 999"),
        (lambda d: d["stages"][0].update(memory_bytes=0.5), "stages[0]['memory_bytes']"),
        (lambda d: d["instance"].update(devices=999), "instance.devices 999"),
        (lambda d: d.update(time_per_sample=0.1), "time_per_sample"),
        (lambda d: d["stages"][-1].update(nodes="2"), "'nodes' must be a list"),  # was read per character
        (lambda d: d["stages"][0].update(data_parallel=True), "'data_parallel'"),
    ],
)
def test_joint_stage_claims_are_recomputed(results, mutate, named: str, tmp_path: Path) -> None:
    rc, text = _evaluate(results, "joint", mutate, tmp_path)
    assert rc == 2 and named in text, text


def test_a_bare_joint_stage_list_claims_nothing(results, tmp_path: Path) -> None:
    instance, data = results["joint"]
    bare = [{k: st[k] for k in ("nodes", "data_parallel", "tensor_parallel", "configs")} for st in data["stages"]]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(bare))
    assert main(["evaluate", str(instance), str(path)]) == 0


@pytest.mark.parametrize("name", ["joint", "pipeline", "placement"])
@pytest.mark.parametrize("fmt", [None, "something-else"])
def test_a_result_without_its_format_is_still_checked(results, name: str, fmt: str | None, tmp_path: Path) -> None:
    """Removing (or changing) ``format`` once switched every claim check off: status "infeasible" and a halved
    objective passed with exit 0."""

    def mutate(d: dict[str, Any]) -> None:
        if fmt is None:
            d.pop("format")
        else:
            d["format"] = fmt
        d.update(status="infeasible", objective=d["objective"] * 0.5)

    rc, text = _evaluate(results, name, mutate, tmp_path)
    assert rc == 2 and "status 'infeasible'" in text and "objective" in text, text
