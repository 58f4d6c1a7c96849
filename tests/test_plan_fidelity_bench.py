"""The pure-Python parts of ``benchmarks/plan_fidelity.py``: the shapes it forces, the rank correlation, and the
recomputed twin of a plan (priced by the joint verifier, as the planner prices it). No run, no timing."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "plan_fidelity.py"


@pytest.fixture(scope="module")
def pf() -> Any:
    spec = importlib.util.spec_from_file_location("plan_fidelity", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["plan_fidelity"] = module
    spec.loader.exec_module(module)
    return module


def test_shapes_are_every_product_that_fits(pf: Any) -> None:
    assert sorted(pf.shapes(2, 4)) == [(1, 1, 1), (1, 1, 2), (1, 2, 1), (2, 1, 1)]
    got = pf.shapes(4, 2)
    assert all(s * d * t <= 4 and 2 % d == 0 for s, d, t in got)
    assert (2, 2, 1) in got and (1, 4, 1) not in got and (1, 1, 4) in got and len(got) == len(set(got))


def test_spearman_against_the_definition_without_ties(pf: Any) -> None:
    # 1 - 6 sum d^2 / (n (n^2 - 1)) over every order of five values
    xs = [0.1, 0.5, 0.2, 0.9, 0.3]
    for perm in itertools.permutations(range(5)):
        ys = [float(p) for p in perm]
        rx = [sorted(xs).index(x) for x in xs]
        d2 = sum((a - b) ** 2 for a, b in zip(rx, perm))
        assert pf.spearman(xs, ys) == pytest.approx(1 - 6 * d2 / (5 * 24))
    assert pf.spearman([1.0, 2.0], [2.0, 1.0]) != pf.spearman([1.0, 2.0], [2.0, 1.0])  # NaN under 3 points


def test_the_recomputed_twin_is_the_same_plan_priced_by_the_verifier(pf: Any, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from milp_partition.cli.dispatch import main

    graph, plan, twin = tmp_path / "g.json", tmp_path / "p.json", tmp_path / "p_rc.json"
    imp = ["import", "torch", "milp_partition.importers.models:gpt_small_test", "--input", "2x16:int64", "--training"]
    assert main([*imp, "--granularity", "layer", "--output", str(graph)]) == 0
    solve = ["solve", str(graph), "--problem", "joint", "--devices", "2", "--memory", "1GiB", "--microbatches", "4"]
    assert main([*solve, "--stages", "2", "--quiet", "-o", str(plan)]) == 0
    assert pf.recomputed_plan(graph, plan, twin, 2, "1GiB", 4)
    base, rc = json.loads(plan.read_text()), json.loads(twin.read_text())
    assert [st["nodes"] for st in rc["stages"]] == [st["nodes"] for st in base["stages"]]
    assert pf.recomputes(twin) and not pf.recomputes(plan)
    # recomputation runs each recomputed forward again: slower, and the verifier (evaluate) agrees with its price
    assert rc["time_per_sample"] > base["time_per_sample"]
    assert main(["evaluate", str(graph), str(twin), *solve[2:]]) == 0
