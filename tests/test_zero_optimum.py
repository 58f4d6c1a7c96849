"""An optimum of 0 is proven like any other (issue 20 item 17): the policy, the gaps and every problem's chain."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from milp_partition.backends import relative_gap
from milp_partition.chain import Bound, Candidate, gap_of, meets, settle
from milp_partition.result import Status
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO, SHARED, _tiny_piper


def test_the_policy_proves_zero() -> None:
    assert meets(0.0, 0.0) and meets(0.0, -1e-22) and not meets(0.0, -1e-9)
    assert gap_of(0.0, 0.0) == 0.0 and gap_of(0.0, -1e-22) == 0.0  # was 1.8e278: a relative gap divided by 1e-300
    assert gap_of(0.0, -1.0) is None  # no relative gap at 0
    v = settle([Candidate(0.0, "s", "dp")], [Bound(-1e-22, "cbc")])
    assert v.status is Status.OPTIMAL and v.gap == 0.0
    assert relative_gap(0.0, 0.0) == 0.0 and relative_gap(0.0, -1e-22) == 0.0 and math.isinf(relative_gap(0.0, -1.0))
    assert relative_gap(10.0, 8.0) == pytest.approx(0.2)


def _zero_joint(path: Path) -> Path:
    d = _tiny_piper()
    for n in d["nodes"]:
        for cfgs in n["TMPCs"].values():
            for c in cfgs:
                c.update(timePerSample=0.0, parameterSize=0.0)
                c["syncTimeFw"] = dict.fromkeys(c["syncTimeFw"], 0.0)
                c["syncTimeBw"] = dict.fromkeys(c["syncTimeBw"], 0.0)
    for e in d["edges"]:
        e["communicationCost"] = 0.0
    path.write_text(json.dumps(d))
    return path


def _zero_pipeline(path: Path) -> Path:
    t = json.loads((REPO / "examples" / "tiny.json").read_text())
    for n in t["nodes"]:
        for k, v in list(n.items()):
            if "time" in k and isinstance(v, (int, float)):
                n[k] = 0.0
    for e in t["edges"]:
        e["bytes"] = 0
    path.write_text(json.dumps(t))
    return path


def _zero_placement(path: Path) -> Path:
    p = json.loads((SHARED / "placement" / "example-1.json").read_text())
    for t in p["tasks"]:
        t["time"] = [0.0] * len(t["time"])
    for e in p["edges"]:
        e["comm"] = [[0.0] * len(r) for r in e["comm"]]
    path.write_text(json.dumps(p))
    return path


@pytest.mark.parametrize(
    ("make", "solver"),
    [(_zero_joint, "cpsat"), (_zero_pipeline, "cbc"), (_zero_pipeline, "cpsat"), (_zero_placement, "cpsat")],
    ids=["joint-dp", "pipeline-cbc", "pipeline-cpsat", "placement"],
)
def test_every_chain_proves_an_optimum_of_zero(tmp_path: Path, make, solver: str) -> None:
    out = tmp_path / "r.json"
    rc, text, err = run_cli(
        ["solve", str(make(tmp_path / "zero.json")), "--solver", solver, "-q", "--progress", "0", "-o", str(out)]
    )
    assert rc == 0, err
    r = json.loads(out.read_text())
    assert r["status"] == "optimal" and r["objective"] == 0.0 and r["gap"] == 0.0, text
