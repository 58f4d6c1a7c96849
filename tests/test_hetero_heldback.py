"""Issue 40 on the held-back settings (``benchmarks/hetero_heldback/``, chosen by ``benchmarks/hetero_heldback_settings.py``).

Two of the smallest setting files solved end to end through the CLI, the plan checked by the independent verifier
and by the benchmark's own ``tools/formula.py``, the proof checked against random feasible plans; and brute force
(every plan enumerated) on tiny settings derived from held-back trace rows of a shape the brute-force tests of
``test_hetero.py`` do not have: more than two (kind, zone) columns (two kinds in two zones; one kind in five zones) and
a single column.
"""

from __future__ import annotations

import importlib.util
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from test_hetero import _brute, _formula

from milp_partition.budget import Budget
from milp_partition.cli.dispatch import main
from milp_partition.cluster import kinds_cluster
from milp_partition.hetero import search as search_module
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.problem import HeteroModel, HeteroPlan, HeteroProblem, Replica, plan_from_sailor, plan_to_sailor
from milp_partition.hetero.search import search
from milp_partition.io.sailor import read_sailor
from milp_partition.verifiers.hetero import verify_hetero

ROOT = Path(__file__).resolve().parents[1]
HETERO = ROOT.parent / "shared" / "benchmarks" / "hetero"
HELD = ROOT / "benchmarks" / "hetero_heldback"
pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


def test_held_back_files_are_the_rule_s_and_none_is_a_shared_setting() -> None:
    """The committed files are what the rule writes (12, in the project's format, every one readable)."""
    spec = importlib.util.spec_from_file_location("heldback_settings", ROOT / "benchmarks" / "hetero_heldback_settings.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    want = {s["name"]: s for s in mod.held_back(HETERO)}
    files = {p.stem: json.loads(p.read_text()) for p in HELD.glob("*.json")}
    assert set(files) == set(want) and len(files) == 12
    shared = json.loads((HETERO / "reference" / "settings.json").read_text())["settings"]
    for name, data in files.items():
        assert data["format"] == "milp-partition-hetero/1"
        assert {k: data[k] for k in ("model", "global_batch", "gpus")} == {
            k: want[name][k] for k in ("model", "global_batch", "gpus")
        }
        assert all(
            (s["model"], s["global_batch"], s["gpus"]) != (data["model"], data["global_batch"], data["gpus"]) for s in shared
        )
        problem = read_sailor(HETERO, setting_file=HELD / f"{name}.json")
        assert problem.cluster.device_count == sum(data["gpus"].values())
    assert {d["model"] for d in files.values()} == {"OPT-350", "GPT-Neo-2.7"}
    assert max(len(d["gpus"]) for d in files.values()) > 2


def _neighbours(problem: HeteroProblem, plan: HeteroPlan, rng: random.Random) -> list[HeteroPlan]:
    """Plans near ``plan``: each stage end moved by one layer, each stage's first replica or all of its replicas set to
    another configuration, the other micro-batch sizes, and random plans."""
    out = []
    ends = [e for _s, e in plan.stages]
    for i in range(len(ends) - 1):
        for step in (-1, 1):
            b = [0, *ends]
            b[i + 1] += step
            if all(b[j] < b[j + 1] for j in range(len(b) - 1)):
                out.append(replace(plan, stages=tuple((b[j], b[j + 1]) for j in range(len(b) - 1))))
    cfgs = [(c.kind, c.zone, tp) for c in problem.cluster.columns for tp in (1, 2, 4)]
    for i, row in enumerate(plan.replicas):
        for cfg in cfgs:
            for new_row in ((Replica(*cfg), *row[1:]), tuple(Replica(*cfg) for _ in row)):
                out.append(replace(plan, replicas=(*plan.replicas[:i], new_row, *plan.replicas[i + 1 :])))
    out += [replace(plan, mbs=b) for b in problem.micro_batches() if b != plan.mbs]
    n = problem.model.layers
    for _ in range(100):
        p = rng.randint(1, 5)
        cuts = sorted(rng.sample(range(1, n), p - 1))
        b = [0, *cuts, n]
        d = rng.choice((1, 2, 4, 8))
        out.append(
            HeteroPlan(
                rng.choice(problem.micro_batches()),
                tuple((b[i], b[i + 1]) for i in range(p)),
                tuple(tuple(Replica(*rng.choice(cfgs)) for _ in range(d)) for _ in range(p)),
            )
        )
    return out


@pytest.mark.parametrize("name", ["opt350-a32-b512", "gptneo-a8-v24-b1024"])
def test_smallest_held_back_settings_solve_through_the_cli(name: str, tmp_path: Path) -> None:
    """Proven optimal; the verifier and ``tools/formula.py`` give our objective; no feasible plan near ours (or random)
    is faster."""
    path = HELD / f"{name}.json"
    out = tmp_path / "r.json"
    # a limit far above the seconds these take (they stop when proven), so a slow machine does not change the answer
    assert main(["solve", str(HETERO), "--setting-file", str(path), "--time-limit", "600", "-q", "-o", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["status"] == "optimal"
    value, bound = res["objective"], res["bound"]
    assert bound <= value * (1 + 1e-12) and bound == pytest.approx(value, rel=1e-9)
    problem = read_sailor(HETERO, setting_file=path)
    rep = verify_hetero(problem, res["sailor_plan"])
    assert rep.feasible and rep.iteration_s == pytest.approx(value, rel=1e-12)
    formula = _formula()
    data = formula.Data(problem.model.name, problem.global_batch, str(HETERO))
    assert formula.evaluate(res["sailor_plan"], data)["iteration_time"] == pytest.approx(value, rel=1e-12)
    assert res["throughput_it_s"] == pytest.approx(1 / value, rel=1e-12)
    assert main(["evaluate", str(HETERO), str(out), "--setting-file", str(path)]) == 0
    feasible = 0
    for plan in _neighbours(problem, plan_from_sailor(res["sailor_plan"]), random.Random(40)):
        r = verify_hetero(problem, plan_to_sailor(plan))
        if r.feasible:
            feasible += 1
            assert bound <= r.iteration_s * (1 + 1e-12), plan
    assert feasible >= 10


def _tiny_from(name: str, divisor: int, blocks: int, objective: str = "sailor") -> HeteroProblem:
    """A held-back setting's columns with every count divided by ``divisor``, on its model cut to embedding,
    ``blocks`` blocks and head, micro-batches 1 and 2, global batch 8."""
    full = read_sailor(HETERO, setting_file=HELD / f"{name}.json", objective=objective)  # type: ignore[arg-type]
    m = full.model
    keep = (0, *range(1, 1 + blocks), m.layers - 1)
    model = HeteroModel(
        "tiny",
        len(keep),
        1,
        m.optimizer_bytes_per_param,
        {k: tuple(v[i] for i in keep) for k, v in m.times.items() if k[1] in (1, 2)},
        {g: tuple(b for b in ks if b in (1, 2, 4)) for g, ks in m.mbs_keys.items()},
        {t: tuple(v[i] for i in keep) for t, v in m.params_floats.items()},
        {t: tuple(v[i] for i in keep) for t, v in m.act_mem_floats.items()},
        tuple(m.act_output_floats[i] for i in keep),
    )
    cols = tuple(replace(c, count=c.count // divisor) for c in full.cluster.columns)
    cluster = kinds_cluster(full.cluster.kinds, cols, full.cluster.link_fits)
    return HeteroProblem(model, cluster, 8, objective, f"tiny {name} / {divisor}", "test")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "divisor", "blocks", "objective"),
    [
        ("gptneo-a128x2-v128x2-b2048", 128, 1, "sailor"),  # A100-40 and V100-16 in two zones, 1 device each
        ("gptneo-a128x2-v128x2-b2048", 128, 3, "sailor"),
        ("opt350-a8x2-v8x2-b512", 8, 3, "sound"),
        ("gptneo-a32x5-b1024", 32, 1, "sailor"),  # A100-40 in five zones, 1 device each
        ("opt350-a32-b512", 8, 3, "sailor"),  # one column: 4 A100-40 (tp 1, 2, 4)
    ],
)
def test_search_matches_brute_force_on_tiny_held_back_shapes(name: str, divisor: int, blocks: int, objective: str) -> None:
    problem = _tiny_from(name, divisor, blocks, objective)
    assert len(problem.cluster.columns) in (1, 4, 5)  # shapes test_hetero.py's brute force (two columns) lacks
    want = _brute(problem)
    got = search(problem, Budget.starting_now(600.0))
    assert got.complete and got.plan is not None
    assert got.value == pytest.approx(want, rel=1e-12)
    assert got.bound <= want * (1 + 1e-12)
    assert got.bound == pytest.approx(want, rel=1e-9)
    assert evaluate(problem, got.plan).iteration_s == pytest.approx(want, rel=1e-12)
    rep = verify_hetero(problem, plan_to_sailor(got.plan))
    assert rep.feasible and rep.iteration_s == pytest.approx(want, rel=1e-12)


class _PastTheLimit(Exception):
    pass


def test_search_stops_within_a_few_leaves_of_its_limit() -> None:
    """A clock that advances one second per leaf priced (no wall-clock time): a search that honours its limit
    prices at most a bounded number of leaves once it has expired (here 200: ~2 s on the five-zone settings)."""
    full = read_sailor(HETERO, setting_file=HELD / "gptneo-a32x5-b1024.json")  # A100-40 in five zones
    cols = tuple(replace(c, count=c.count // 4) for c in full.cluster.columns)  # 8 per zone: quick to list
    problem = replace(full, cluster=kinds_cluster(full.cluster.kinds, cols, full.cluster.link_fits))
    clock = {"t": 0.0, "after": 0}
    budget = Budget(30.0, 0.0, lambda: clock["t"])
    leaf = search_module._Search.leaf

    def timed_leaf(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        clock["t"] += 1.0
        if budget.expired():
            clock["after"] += 1
            if clock["after"] > 200:
                raise _PastTheLimit  # stop here: the unpatched search would go on for thousands of leaves
        return leaf(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(search_module._Search, "leaf", timed_leaf)
        try:
            got = search(problem, budget)
        except _PastTheLimit:
            got = None
    assert clock["after"] <= 200, f"more than 200 leaves priced after the limit ({clock['t']:.0f} of {budget.limit_s:.0f} s)"
    assert got is not None and (got.complete or got.stopped_by == "time_limit")
