"""Issue 40: Sailor's heterogeneous problem: reader, formula, verifier, exact search (brute force), CLI."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from milp_partition.budget import Budget
from milp_partition.cli.dispatch import main
from milp_partition.cluster import kinds_cluster
from milp_partition.errors import InputError
from milp_partition.hetero.cost import evaluate, memory_bytes
from milp_partition.hetero.problem import HeteroModel, HeteroPlan, HeteroProblem, Replica, plan_from_sailor, plan_to_sailor
from milp_partition.hetero.search import _Search, _Tables, search
from milp_partition.io.sailor import read_sailor
from milp_partition.verifiers.hetero import verify_hetero

HETERO = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hetero"
pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


def _formula():
    spec = importlib.util.spec_from_file_location("sailor_formula", HETERO / "tools" / "formula.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _random_plan(problem: HeteroProblem, rng: random.Random) -> HeteroPlan:
    mod = problem.model
    mbs = rng.choice(problem.micro_batches())
    p = rng.randint(1, 5)
    cuts = sorted(rng.sample(range(1, mod.layers), p - 1))
    bounds = [0, *cuts, mod.layers]
    stages = tuple((bounds[i], bounds[i + 1]) for i in range(p))
    d = rng.randint(1, 6)
    cfgs = [(c.kind, c.zone, tp) for c in problem.cluster.columns for tp in (1, 2, 4) if problem.replica_valid(c.kind, mbs, tp)]
    reps = tuple(tuple(Replica(*rng.choice(cfgs)) for _ in range(d)) for _ in stages)
    return HeteroPlan(mbs, stages, reps)


@pytest.mark.parametrize("setting", ["opt350-a32-v96", "gptneo-a32-v96"])
def test_cost_and_verifier_match_tools_formula_on_random_plans(setting: str) -> None:
    formula = _formula()
    problem = read_sailor(HETERO, setting=setting)
    data = formula.Data(problem.model.name, problem.global_batch, str(HETERO))
    rng = random.Random(7)
    for _ in range(40):
        plan = _random_plan(problem, rng)
        want = formula.evaluate(plan_to_sailor(plan), data)["iteration_time"]
        got = evaluate(problem, plan).iteration_s
        assert got == pytest.approx(want, rel=1e-12)
        rep = verify_hetero(
            replace(
                problem, cluster=replace(problem.cluster, columns=tuple(replace(c, count=10**6) for c in problem.cluster.columns))
            ),
            plan_to_sailor(plan),
        )
        fits = all(x["fits"] for row in formula.memory(plan_to_sailor(plan), data) for x in row)
        assert rep.feasible == fits
        if fits:
            assert rep.iteration_s == pytest.approx(want, rel=1e-12)


def test_sailor_reference_plan_and_the_moved_layer() -> None:
    problem = read_sailor(HETERO, setting="opt350-a32-v96")
    ref = json.loads((HETERO / "reference/runs/opt350-a32-v96/SAILOR.json").read_text())
    rep = verify_hetero(problem, ref["plan"])
    assert rep.feasible and rep.throughput_it_s == pytest.approx(ref["throughput_it_s"], rel=1e-12)
    moved = json.loads((HETERO / "reference/examples/opt350-a32-v96_sailor_layer13_moved.json").read_text())
    rep2 = verify_hetero(problem, moved.get("plan", moved))
    assert rep2.feasible and rep2.throughput_it_s == pytest.approx(0.17255, abs=5e-6)
    assert (
        plan_to_sailor(plan_from_sailor(ref["plan"]))["pipeline_list"][0]["layers_per_stage"]
        == ref["plan"]["pipeline_list"][0]["layers_per_stage"]
    )


def test_sound_objective_differs_only_in_sends() -> None:
    problem = read_sailor(HETERO, setting="opt350-a32-v96")
    sound = read_sailor(HETERO, setting="opt350-a32-v96", objective="sound")
    plan = plan_from_sailor(json.loads((HETERO / "reference/runs/opt350-a32-v96/SAILOR.json").read_text())["plan"])
    a, b = evaluate(problem, plan), evaluate(sound, plan)
    assert a.compute_s == b.compute_s and a.allreduce_s == b.allreduce_s
    assert b.iteration_s < a.iteration_s  # the last stage's gradient send is no longer doubled
    assert verify_hetero(sound, plan_to_sailor(plan)).iteration_s == pytest.approx(b.iteration_s, rel=1e-12)


def _tiny(objective: str = "sailor", count: int = 2, blocks: int = 1) -> HeteroProblem:
    """Layers embedding, ``blocks`` blocks, head of OPT-350 on count A100-40 + count V100-16, mbs 1 and 2, B = 8."""
    full = read_sailor(HETERO, setting="opt350-a8-v16", objective=objective)
    m = full.model
    keep = (0, *range(1, 1 + blocks), m.layers - 1)
    times = {k: tuple(v[i] for i in keep) for k, v in m.times.items() if k[1] in (1, 2)}
    model = HeteroModel(
        "tiny",
        len(keep),
        1,
        m.optimizer_bytes_per_param,
        times,
        {g: tuple(b for b in ks if b in (1, 2, 4)) for g, ks in m.mbs_keys.items()},
        {t: tuple(v[i] for i in keep) for t, v in m.params_floats.items()},
        {t: tuple(v[i] for i in keep) for t, v in m.act_mem_floats.items()},
        tuple(m.act_output_floats[i] for i in keep),
    )
    cols = tuple(replace(c, count=count) for c in full.cluster.columns)
    cluster = kinds_cluster(full.cluster.kinds, cols, full.cluster.link_fits)
    return HeteroProblem(model, cluster, 8, objective, "tiny", "test")


def _plans(problem: HeteroProblem) -> Iterator[HeteroPlan]:
    """Every feasible plan of a tiny problem (brute force)."""
    cols = problem.cluster.columns
    for mbs in problem.micro_batches():
        # a tp above the column's count never fits the budget; D * P <= devices (every replica takes one at least)
        cfgs = [
            (c.kind, c.zone, tp) for c in cols for tp in (1, 2, 4) if tp <= c.count and problem.replica_valid(c.kind, mbs, tp)
        ]
        n = problem.model.layers
        for p in range(1, n + 1):
            for cuts in itertools.combinations(range(1, n), p - 1):
                b = [0, *cuts, n]
                stages = tuple((b[i], b[i + 1]) for i in range(p))
                for d in range(1, problem.cluster.device_count // p + 1):
                    for reps in itertools.product(itertools.product(cfgs, repeat=d), repeat=p):
                        used: dict[tuple[str, str], int] = {}
                        for row in reps:
                            for k, z, tp in row:
                                used[(k, z)] = used.get((k, z), 0) + tp
                        if any(used.get((c.kind, c.zone), 0) > c.count for c in cols):
                            continue
                        if any(
                            memory_bytes(problem, mbs, tp, s, e, p - i) > problem.cluster.memory_of(k)
                            for i, ((s, e), row) in enumerate(zip(stages, reps))
                            for k, _z, tp in row
                        ):
                            continue
                        yield HeteroPlan(mbs, stages, tuple(tuple(Replica(*r) for r in row) for row in reps))


def _brute(problem: HeteroProblem) -> float:
    return min(evaluate(problem, plan).iteration_s for plan in _plans(problem))


@pytest.mark.parametrize(
    ("objective", "count", "blocks"),
    [("sailor", 2, 1), ("sound", 2, 1), ("sailor", 3, 1), ("sailor", 2, 3), ("sound", 2, 3), ("sailor", 3, 3)],
)
def test_search_matches_brute_force_on_a_tiny_setting(objective: str, count: int, blocks: int) -> None:
    """Every plan enumerated; 5 layers (blocks = 3) reach P = 4, where the first and last sends are doubled and the
    bottleneck programs' splits matter."""
    problem = _tiny(objective, count, blocks)
    want = _brute(problem)
    got = search(problem, Budget.starting_now(60.0))
    assert got.complete
    assert got.value == pytest.approx(want, rel=1e-12)
    assert got.bound <= want * (1 + 1e-12)
    assert got.bound == pytest.approx(want, rel=1e-9)  # proven: every leaf resolved here
    rep = verify_hetero(problem, plan_to_sailor(got.plan))
    assert rep.feasible and rep.iteration_s == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("objective", ["sailor", "sound"])
def test_search_with_cap_levels_from_the_first_node_matches_brute_force(objective: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The later stages' tighter caps (levels) used from the first node: they prune here (some device check under a
    level fails), and the search still finds the optimum and bound of every plan enumerated, from no incumbent and
    from one just above the optimum."""
    import milp_partition.hetero.search as hs

    monkeypatch.setattr(hs, "LEVEL_AFTER_NODES", -1)
    monkeypatch.setattr(hs, "LAGRANGE_BOUND", False)  # the Lagrangian bound off: it prunes these nodes first
    monkeypatch.setattr(hs, "NATIVE_TREE", False)  # rec, whose level_fits is counted (tests/test_hetero_tree.py: C = rec)
    results: list[bool] = []
    level_fits = hs._Triple.level_fits

    def counted(self: hs._Triple, *args: object) -> bool:
        results.append(level_fits(self, *args))  # type: ignore[arg-type]
        return results[-1]

    monkeypatch.setattr(hs._Triple, "level_fits", counted)
    problem = _tiny(objective, 3, 3)
    want = _brute(problem)
    for start in (math.inf, want * 1.05):
        got = search(problem, Budget.starting_now(60.0), start)
        assert got.complete
        assert got.value == pytest.approx(want, rel=1e-12)
        assert got.bound <= want * (1 + 1e-12) and got.bound == pytest.approx(want, rel=1e-9)
    assert False in results  # a level pruned a node


@pytest.mark.parametrize(("objective", "count"), [("sailor", 2), ("sound", 2), ("sailor", 3)])
def test_outer_bounds_hold_for_every_plan_of_their_triple(objective: str, count: int) -> None:
    """The (mbs, D, P) bound, its T_sync bound (split and tp budget) and the bottleneck split bounds (least max and least sum of y_i = C_i + X_i) are at most
    the value (and the terms) of every plan of that triple, enumerated; and the split's least sum is above the least
    per-layer compute (the bound before it) on some triple."""
    problem = _tiny(objective, count, 3)
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    best: dict[tuple[int, int, int], float] = {}
    ymax: dict[tuple[int, int], float] = {}
    ysum: dict[tuple[int, int], float] = {}
    sync: dict[tuple[int, int, int], float] = {}
    ymax_d: dict[tuple[int, int, int], float] = {}
    ysum_d: dict[tuple[int, int, int], float] = {}
    for plan in _plans(problem):
        t = evaluate(problem, plan)
        p, d = len(plan.stages), len(plan.replicas[0])
        y = [c + x for c, x in zip(t.compute_s, t.sends_s)]
        key = (plan.mbs, d, p)
        best[key] = min(best.get(key, math.inf), t.iteration_s)
        sync[key] = min(sync.get(key, math.inf), t.t_sync_s)
        ymax_d[key] = min(ymax_d.get(key, math.inf), max(y))
        ysum_d[key] = min(ysum_d.get(key, math.inf), sum(y))
        ymax[(plan.mbs, p)] = min(ymax.get((plan.mbs, p), math.inf), max(y))
        ysum[(plan.mbs, p)] = min(ysum.get((plan.mbs, p), math.inf), sum(y))
    assert len(best) > 10
    stronger = 0
    for key, v in best.items():
        mbs, d, p = key
        tb = tables[mbs]
        lb = srch.triple_bound(tb, d, p)
        assert lb <= v * (1 + 1e-12)
        assert srch.ar_split(tb, d, p) <= sync[(mbs, d, p)] * (1 + 1e-12)
        lo_max, lo_sum = srch.root_split(tb, p)
        assert lo_max <= ymax[(mbs, p)] * (1 + 1e-12) and lo_sum <= ysum[(mbs, p)] * (1 + 1e-12)
        lo_max, lo_sum = srch.root_split(tb, p, d)  # under the device budget: only plans with this D
        assert lo_max <= ymax_d[key] * (1 + 1e-12) and lo_sum <= ysum_d[key] * (1 + 1e-12)
        stronger += lo_sum > tb.cminpre[tb.L] * (1 + 1e-6)
    assert stronger > 0


def test_search_proves_the_smallest_setting_above_sailor() -> None:
    problem = read_sailor(HETERO, setting="opt350-a8-v16")
    got = search(problem, Budget.starting_now(60.0))
    assert got.plan is not None and got.complete and not got.unresolved
    assert got.bound == got.value and 1 / got.value >= 0.0513  # Sailor's plan: 0.05128 it/s
    assert verify_hetero(problem, plan_to_sailor(got.plan)).iteration_s == pytest.approx(got.value, rel=1e-12)


@pytest.mark.parametrize("setting", ["opt350-a8-v16", "gptneo-a32-v96"])
def test_memory_fit_rows_equal_the_scalar_rule(setting: str) -> None:
    """:meth:`_Tables.fits` (every in-flight count's rows at once, in numpy) answers as :meth:`_Tables._fits` (the
    scalar rule) for every configuration, in-flight count, first layer and end; some ranges fit and some do not."""
    problem = read_sailor(HETERO, setting=setting)
    mbs = max(problem.micro_batches())
    tb = _Tables(problem, mbs)
    seen = set()
    for k in range(len(tb.cfgs)):
        for f in (tb.L, 3, 1, 7, 2):
            for s in range(tb.L):
                for e in range(s + 1, tb.L + 1):
                    got = tb.fits(k, s, e, f)
                    assert got == tb._fits(k, s, e, f), (k, f, s, e)
                    seen.add(got)
    assert seen == {True, False}


@pytest.mark.parametrize(("setting", "objective"), [("opt350-a8-v16", "sailor"), ("gptneo-a32-v96", "sound")])
def test_stage_tables_are_inf_where_a_stage_would_hold_no_layer(setting: str, objective: str) -> None:
    """Every stage table the search hands the C programs with ``upper`` (:meth:`_Search.stage_ylb_arr`, and the
    least-y tables :meth:`_Search.stage_ymin` the split programs stack) is inf wherever e <= s0
    (:func:`milp_partition.hetero.search._inf_below`), and finite somewhere above."""
    from milp_partition.hetero.search import _inf_below

    problem = read_sailor(HETERO, setting=setting, objective=objective)  # type: ignore[arg-type]
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    for mbs in problem.micro_batches():
        tb = _Tables(problem, mbs)
        for p in range(1, tb.L + 1):
            ylb = srch.stage_ylb_arr(tb, p)
            assert _inf_below(ylb), (mbs, p)
            assert all(_inf_below(srch.stage_ymin(tb, p, k)) for k in range(p)), (mbs, p)
        assert np.isfinite(srch.stage_ylb_arr(tb, 1)).any()


def test_the_solve_collects_garbage_less_often_and_puts_the_thresholds_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """During :func:`solve_hetero` the collector's first threshold is at least ``GC_THRESHOLD0`` and the objects found
    before are frozen; after it, the thresholds found before and nothing frozen (also when the solve raises)."""
    import gc

    from milp_partition.hetero import solve as hs

    problem = read_sailor(HETERO, setting="opt350-a8-v16")
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    run = hs.run_chain

    frozen: list[int] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        frozen.append(gc.get_freeze_count())
        return run(*args, **kwargs)

    assert gc.get_freeze_count() == 0

    monkeypatch.setattr(hs, "run_chain", spy)
    res = hs.solve_hetero(problem, hs.HeteroSolveSettings(time_limit_s=60.0))
    assert res.sailor_plan
    assert seen and seen[0][0] >= hs.GC_THRESHOLD0 > before[0] and seen[0][1:] == before[1:]
    assert frozen[0] > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(hs, "run_chain", boom)
    with pytest.raises(RuntimeError):
        hs.solve_hetero(problem)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_spent_budget_still_gives_a_sound_bound() -> None:
    """No time at all: the bound is the first (mbs, D, P) bound, below every plan (here Sailor's and the layer move)."""
    problem = read_sailor(HETERO, setting="opt350-a32-v96")
    got = search(problem, Budget.starting_now(0.0))
    assert got.stopped_by == "time_limit" and not got.complete
    ref = json.loads((HETERO / "reference/examples/opt350-a32-v96_sailor_layer13_moved.json").read_text())
    moved = evaluate(problem, plan_from_sailor(ref.get("plan", ref))).iteration_s
    assert 0 < got.bound <= moved


def test_nothing_fits_is_infeasible(tmp_path: Path) -> None:
    s = tmp_path / "one.json"
    s.write_text(json.dumps({"model": "GPT-Neo-2.7", "global_batch": 64, "gpus": {"V100-16_us-central1-a": 1}}))
    assert main(["solve", str(HETERO), "--setting-file", str(s), "-q"]) == 3


def test_bad_inputs_name_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no setting 'nope'"):
        read_sailor(HETERO, setting="nope")
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"model": "OPT-350", "global_batch": 1024, "gpus": {"A100-40": 8}}))
    with pytest.raises(InputError, match=r"s\.json.*not '<kind>_<zone>'"):
        read_sailor(HETERO, setting_file=bad)
    bad.write_text(json.dumps({"model": "OPT-350", "global_batch": 0, "gpus": {"A100-40_us-central1-a": 8}}))
    with pytest.raises(InputError, match="global_batch"):
        read_sailor(HETERO, setting_file=bad)
    bad.write_text(json.dumps({"model": "OPT-9", "gpus": {"A100-40_us-central1-a": 8}}))
    with pytest.raises(InputError, match="no model 'OPT-9'"):
        read_sailor(HETERO, setting_file=bad)
    with pytest.raises(InputError, match="row 9 does not exist"):
        read_sailor(HETERO, trace=HETERO / "clusters/gpu_trace_heterogeneous_imbalanced.csv", row=9, model="OPT-350")


def test_a_zone_or_link_without_a_network_fit_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A zone the network fits do not have for the kind is refused when the setting is read, naming the file, the
    column and the zones that have fits; a link the fits lack (RTX-2080's tp 2 to tp 1 in us-central1-a) stops the
    solve with exit 2 naming the link's kinds, counts and zones (it named only a raw key tuple before)."""
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"model": "OPT-350", "global_batch": 1024, "gpus": {"A100-40_mars": 8}}))
    with pytest.raises(InputError, match=r"s\.json.*gpus\.A100-40_mars.*zone 'mars'.*us-central1-a, us-central1-b"):
        read_sailor(HETERO, setting_file=bad)
    bad.write_text(json.dumps({"model": "OPT-350", "global_batch": 1024, "gpus": {"RTX-2080_us-central1-a": 8}}))
    assert main(["solve", str(HETERO), "--setting-file", str(bad), "-q"]) == 2
    err = capsys.readouterr().err
    assert "from RTX-2080 (count 2) in us-central1-a to RTX-2080 (count 1) in us-central1-a" in err
    assert "Traceback" not in err and "internal error" not in err


def test_cli_setting_file_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = tmp_path / "s.json"
    s.write_text(
        json.dumps(
            {
                "name": "mini",
                "model": "OPT-350",
                "global_batch": 64,
                "gpus": {"A100-40_us-central1-a": 2, "V100-16_us-central1-a": 2},
            }
        )
    )
    out = tmp_path / "r.json"
    assert main(["solve", str(HETERO), "--setting-file", str(s), "--time-limit", "20", "-q", "-o", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["status"] in ("optimal", "feasible") and res["sailor_plan"]["pipeline_list"]
    assert res["throughput_it_s"] == pytest.approx(1 / res["objective"])
    assert main(["evaluate", str(HETERO), str(out), "--setting-file", str(s)]) == 0
    assert main(["solve", str(HETERO), "--setting", "nope"]) == 2
    assert main(["solve", str(HETERO), "--setting", "opt350-a8-v16", "--objective", "memory"]) == 2
    assert "internal error" not in capsys.readouterr().err


def two_step_definition(nxt: Any, d: int, t0: int, t1: int) -> Any:
    """The two-column device table's step by its definition: for every row and budget ``a``, the least over ``n`` replicas
    of tp ``t0`` (and ``d - n`` of tp ``t1``) of ``nxt[:, a - n t0] + (d - n) t1``."""
    import numpy as np

    rows, width = nxt.shape
    want = np.full((rows, width), math.inf)
    for n in range(d + 1):
        if (n > 0 and not t0) or (n < d and not t1):
            continue
        for a in range(width):
            if a - n * t0 >= 0:
                want[:, a] = np.minimum(want[:, a], nxt[:, a - n * t0] + (d - n) * t1)
    return want


def test_two_column_step_is_its_definition() -> None:
    """The two-column device table's step (a running or window minimum per residue) against its definition, on random
    tables of whole device counts with holes (inf), every tp pair and D below and above the table's width."""
    import numpy as np

    from milp_partition.hetero.search import _two_step

    rng = np.random.default_rng(3)
    for _ in range(300):
        rows, width, d = int(rng.integers(1, 4)), int(rng.integers(1, 40)), int(rng.integers(1, 45))
        t0, t1 = int(rng.choice([0, 1, 2, 4])), int(rng.choice([0, 1, 2, 4]))
        nxt = rng.integers(0, 200, size=(rows, width)).astype(float)
        nxt[rng.random((rows, width)) < 0.3] = math.inf
        assert np.array_equal(_two_step(nxt, d, t0, t1), two_step_definition(nxt, d, t0, t1))


def test_info_shows_the_one_setting_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``info FOLDER --setting-file FILE`` (issue 40 item 1: info shows the setting) describes that setting, not the
    folder's named ones; ``--objective`` and ``--global-batch`` reach it; the options are refused on another problem."""
    s = tmp_path / "five.json"
    s.write_text(
        json.dumps({"model": "GPT-Neo-2.7", "global_batch": 1024, "gpus": {"A100-40_us-central1-a": 32, "A100-40_us-west1-b": 8}})
    )
    assert main(["info", str(HETERO), "--setting-file", str(s), "--objective", "sound", "--global-batch", "256"]) == 0
    out = capsys.readouterr().out
    assert "A100-40_us-west1-b: 8 devices" in out and "global batch 256, objective sound" in out
    assert "setting     opt350-a8-v16" not in out  # the named settings are listed by name only
    assert main(["info", str(HETERO)]) == 0
    assert "setting     opt350-a8-v16" in capsys.readouterr().out
    tiny = Path(__file__).resolve().parents[1] / "examples" / "tiny.json"
    assert main(["info", str(tiny), "--setting", "x"]) == 2
    assert "--setting: does not apply" in capsys.readouterr().err
