"""The pure-Python parts of ``benchmarks/plan_fidelity.py``: the shapes it forces and the rank correlation. No run,
no timing."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import statistics
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
    # (stages S, data-parallel D, tensor-parallel T, micro-batches N): S D T <= devices, T among the degrees, N among the
    # counts and dividing the global batch, D dividing N, N / D >= S (1F1B needs a micro-batch per stage on each replica)
    assert sorted(pf.shapes(2, [1, 2, 4], 8)) == [
        (1, 1, 1, 1), (1, 1, 1, 2), (1, 1, 1, 4), (1, 2, 1, 2), (1, 2, 1, 4), (2, 1, 1, 2), (2, 1, 1, 4)
    ]  # fmt: skip
    assert sorted(pf.shapes(2, [1, 2], 8, (1, 2))) == [
        (1, 1, 1, 1), (1, 1, 1, 2), (1, 1, 2, 1), (1, 1, 2, 2), (1, 2, 1, 2), (2, 1, 1, 2)
    ]  # fmt: skip
    got = pf.shapes(4, [1, 2, 3, 4, 8], 8, (1, 2, 4))
    want = [
        (s, d, t, n)
        for t in (1, 2, 4)
        for n in (1, 2, 3, 4, 8)
        for s in range(1, 5)
        for d in range(1, 5)
        if s * d * t <= 4 and 8 % n == 0 and n % d == 0 and n // d >= s
    ]
    assert sorted(got) == sorted(want) and len(got) == len(set(got))
    assert not any(n == 3 for *_, n in got)  # 3 does not divide the global batch


def test_spearman_against_the_definition_without_ties(pf: Any) -> None:
    # 1 - 6 sum d^2 / (n (n^2 - 1)) over every order of five values
    xs = [0.1, 0.5, 0.2, 0.9, 0.3]
    for perm in itertools.permutations(range(5)):
        ys = [float(p) for p in perm]
        rx = [sorted(xs).index(x) for x in xs]
        d2 = sum((a - b) ** 2 for a, b in zip(rx, perm))
        assert pf.spearman(xs, ys) == pytest.approx(1 - 6 * d2 / (5 * 24))
    assert pf.spearman([1.0, 2.0], [2.0, 1.0]) != pf.spearman([1.0, 2.0], [2.0, 1.0])  # NaN under 3 points


def _row(
    model: str, planned: float, measured: float, free: bool = False, memory: float = 1.05, spread: float = 0.02
) -> dict[str, Any]:
    return {
        "model": model,
        "held_back": True,
        "shape": "1x1",
        "microbatches": 1,
        "free_optimum": free,
        "planner_step_s": planned,
        "measured_step_s": measured,
        "planner_error": (planned - measured) / measured,
        "planned_empty_step_s": 0.0,
        "run_empty_step_s": 0.0,
        "planner_plus_empty_error": (planned - measured) / measured,
        "memory_planned_over_held_min": memory,
        "memory_planned_over_held_max": memory,
        "measured_spread": spread,
    }


def test_held_back_models_are_their_own_and_judged_by_the_bars(pf: Any) -> None:
    assert not set(pf.HELD_BACK) & set(pf.MODELS) and len(pf.HELD_BACK) >= 2
    good = [_row("X", 1.0, 1.05, free=True), _row("X", 2.0, 2.1), _row("X", 3.0, 2.9)]
    lines = pf.summary(good, "all held back")
    assert lines[2].startswith("| X | 3 |") and "| yes |" in lines[2] and lines[3].startswith("| all held back |")
    # one plan 30% off: the largest error's bar fails; memory below what a rank held fails too
    assert "**no**" in pf.summary([*good, _row("X", 1.3, 1.0)], "all held back")[2]
    assert "**no**" in pf.summary([*good[:2], _row("X", 3.0, 2.9, memory=0.97)], "all held back")[2]


def test_a_noisy_plan_is_counted_and_marked(pf: Any) -> None:
    """The spread of a plan's measured steps (IQR over median): counted per model over 10% and over 25%, and a row's
    spread is bold over the 25% bar."""
    rows = [_row("X", 1.0, 1.0, free=True), _row("X", 2.0, 2.0, spread=0.15), _row("X", 3.0, 3.0, spread=0.4)]
    assert pf.summary(rows, "all")[2].endswith("| 2, 1 | - |")  # no launches recorded: no per-launch column
    assert pf._spread(0.4) == "**40%**" and pf._spread(0.15) == "15%" and pf._spread(float("nan")) == "-"


def test_every_launch_is_judged_on_its_own_beside_the_runs_in_launch_prediction(pf: Any) -> None:
    """The per-launch column: over every launch of the model's plans, the planner's median |error| and the launches
    within 25%, then the same for the run's own prediction (its layers re-timed inside the launch)."""
    rows = [_row("X", 1.0, 1.0, free=True), _row("X", 2.0, 2.0)]
    rows[0].update(launch_planner_errors="0.1000 -0.3000 0.0500", launch_inrun_errors="0.0100 0.0200 -0.0300")
    rows[1].update(launch_planner_errors="0.2000 0.2600 -0.2000", launch_inrun_errors="0.0400 -0.0500 0.3000")
    # planner |errors| 0.05 0.1 0.2 0.2 0.26 0.3: median 20%, 4 of 6 within 25%; in-launch 0.01..0.3: median 3.5%, 5 of 6
    assert pf.summary(rows, "all")[2].endswith("| 20%, 4 of 6; 4%, 5 of 6 |")


def test_the_steps_own_compute_over_the_planned(pf: Any) -> None:
    """The slowest rank's passes in the step over m (F_q + B_q) of the dearest stage."""
    plan = {
        "instance": {"microbatches": 4},
        "stages": [
            {"data_parallel": 1, "terms_s": {"forward_s": 1.0, "backward_s": 2.0}},
            {"data_parallel": 1, "terms_s": {"forward_s": 2.0, "backward_s": 2.0}},
        ],
    }
    # m = 4: the dearest stage plans 16 s in its passes; the slowest rank measured 20 s
    assert pf.compute_ratio(plan, {"measured_compute_s": [12.0, 20.0]}) == pytest.approx(1.25)
    assert math.isnan(pf.compute_ratio(plan, {"measured_compute_s": [None, None]}))  # not timed
    assert math.isnan(pf.compute_ratio(plan, {}))  # a run.json written before it was measured
    halves = {**plan, "instance": {"microbatches": 4}, "stages": [{**st, "data_parallel": 2} for st in plan["stages"]]}
    assert pf.compute_ratio(halves, {"measured_compute_s": [8.0]}) == pytest.approx(1.0)  # m = 4 / 2


def test_step_spread_is_the_interquartile_range_over_the_median() -> None:
    from milp_partition.run.engine import step_spread

    got = step_spread([1.0, 2.0, 3.0, 4.0, 5.0])  # inclusive quartiles 2 and 4, median 3
    assert (got["q1_s"], got["q3_s"], got["min_s"], got["max_s"]) == (2.0, 4.0, 1.0, 5.0)
    assert got["iqr_over_median"] == pytest.approx(2.0 / 3.0)
    assert step_spread([0.5])["iqr_over_median"] == 0.0
    assert step_spread([])["iqr_over_median"] != step_spread([])["iqr_over_median"]  # NaN: nothing timed


@pytest.mark.parametrize("name", ["MLP-GELU (held back)", "Encoder (held back)"])
def test_held_back_factories_build_and_run_on_their_input(pf: Any, name: str) -> None:
    torch = pytest.importorskip("torch")
    from milp_partition.importers.torch_import import build_module

    ref, shape, _ = pf.HELD_BACK[name]
    model = build_module(ref)
    out = model(torch.randn(*(int(x) for x in shape.split("x"))))
    assert out.shape[0] == 8 and torch.isfinite(out).all()


def _launch(step: float, steps: list[float] | None = None, wait: float | None = None) -> dict[str, Any]:
    """A run.json with what :func:`median_launch` reads: the measured step, the timed steps, the ranks' waits."""
    return {
        "measured_step_s": step,
        "step_s": [9.0, *(steps or [step] * 5)],
        "warmup_steps": 1,
        "measured_runqueue_wait_s": [None, None] if wait is None else [wait, 0.0],
        "tag": step,
    }


def test_the_measured_step_is_the_median_over_launches_of_each_launchs_median(pf: Any) -> None:
    launches = [(_launch(0.02, wait=0.01), 1.5, "a"), (_launch(0.01, wait=0.0), 0.5, "a"), (_launch(0.012), 0.7, "a")]
    got = pf.median_launch(launches)
    assert got["measured_step_s"] == pytest.approx(0.012) and got["launches"] == 3
    assert got["across_launches"] == pytest.approx((0.02 - 0.01) / 0.012)
    assert got["median"][0]["tag"] == 0.012 and got["median"][1] == 0.7  # the median launch gives the row its figures
    assert got["launch_steps_s"] == [0.02, 0.01, 0.012] and got["launch_loads"] == [1.5, 0.5, 0.7]
    # the run-queue wait: the largest rank's over the launch's step, the median over the launches that measured it
    assert got["runqueue_wait_share"] == pytest.approx(statistics.median([0.5, 0.0]))
    # an even count: the median of the two middle steps; the lower middle launch's run.json
    two = pf.median_launch(launches[:2])
    assert two["measured_step_s"] == pytest.approx(0.015) and two["median"][0]["tag"] == 0.01
    # the in-run spread: the median over launches of each one's IQR / median of its timed steps
    noisy = pf.median_launch([(_launch(1.0, [1.0, 1.0, 2.0, 3.0, 3.0]), 1.0, "a"), (_launch(1.0), 1.0, "a")])
    assert noisy["in_run"] == pytest.approx(statistics.median([2.0 / 2.0, 0.0]))
    one = pf.median_launch(launches[:1])
    assert one["across_launches"] != one["across_launches"] and one["measured_step_s"] == 0.02  # NaN: nothing to compare


def test_a_plan_asked_for_more_launches_runs_only_the_missing_ones(
    pf: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = tmp_path / "m_G8_1x1_N1.json"
    plan.write_text("{}")
    ran: list[str] = []
    flags = ["--steps", "12", "--seconds", "3"]

    def fake_sh(args: list[str], check: bool = True) -> int:
        out = Path(args[args.index("-o") + 1])
        assert args[args.index("run") + 2 : args.index("-o")] == flags  # the run's flags of its steps, as given
        ran.append(out.name)
        out.write_text(json.dumps({"measured_step_s": 0.01 * len(ran)}))
        return 0

    monkeypatch.setattr(pf, "sh", fake_sh)
    monkeypatch.setattr(pf, "commit", lambda: "abc")
    got = pf.run_one(plan, flags, fresh=False, launches=1)
    assert ran == ["m_G8_1x1_N1_run.json"] and len(got) == 1  # the first launch keeps the name one launch always had
    got = pf.run_one(plan, flags, fresh=False, launches=3)
    assert ran == ["m_G8_1x1_N1_run.json", "m_G8_1x1_N1_run2.json", "m_G8_1x1_N1_run3.json"]
    assert [r["measured_step_s"] for r, _, _ in got] == pytest.approx([0.01, 0.02, 0.03])
    assert all(at == "abc" for _, _, at in got)
    pf.run_one(plan, flags, fresh=False, launches=3)
    assert len(ran) == 3  # all there: nothing run
    pf.run_one(plan, flags, fresh=True, launches=2)
    assert len(ran) == 5  # --fresh: every launch asked for runs again
    monkeypatch.setattr(pf, "CACHED_ONLY", True)
    assert len(pf.run_one(plan, flags, fresh=False, launches=5)) == 3  # --cached-only: the launches there, none run
    assert pf.run_one(tmp_path / "other.json", flags, fresh=False, launches=2) is None


def test_plans_whose_launches_disagree_are_counted_and_marked(pf: Any) -> None:
    rows = [
        {**_row("X", 1.0, 1.0, free=True), "launch_spread": 0.05, "launches": 3},
        {**_row("X", 2.0, 2.0), "launch_spread": 0.15, "launches": 3},
        {**_row("X", 3.0, 3.0), "launch_spread": 0.5, "launches": 3},
    ]
    assert pf.summary(rows, "all")[2].endswith("| 2, 1 | 0, 0 | - |")  # launches over 10%, over 25%; then the in-run spread
    assert pf.summary([_row("X", 1.0, 1.0, free=True)], "all")[2].endswith("| - | 0, 0 | - |")  # one launch: nothing to compare
    assert pf._apart(0.15, 3) == "**15%**" and pf._apart(0.05, 3) == "5%" and pf._apart(0.0, 1) == "-"


def test_the_header_says_how_many_launches_and_calibrations(pf: Any) -> None:
    rows = [{"model": "A", "launches": 3, "calibration_launches": 3}, {"model": "B", "launches": 1}]
    assert pf.launch_counts(rows) == "1 to 3" and pf.launch_counts(rows[:1]) == "3"
    assert pf.calibrations(rows[:1]).startswith("3 time(s)")
    assert pf.calibrations(rows).startswith("A: 3 time(s) (back to back); B: 1 time(s)")  # written before they were repeated: 1
    spread = [{"model": "A", "calibration_launches": 3, "calibration_seconds": 6.0}]
    assert pf.calibrations(spread).startswith("3 time(s) (each timing over at least 6 s, its shapes or sizes in turn)")


def test_calibrations_apart_go_model_by_model_in_turn_then_the_launches_in_rounds(
    pf: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--calibrate-apart: every model's first calibration, then every model's second, ...; then launch k of every plan
    for k = 1, 2, 3; the free solve reads the model's separate calibrations (``--layer-times`` of each)."""
    import argparse

    order: list[tuple[Any, ...]] = []
    monkeypatch.setattr(pf, "forget", lambda m, a, w: order.append(("forget", m, 0)))
    monkeypatch.setattr(pf, "calibrate_once", lambda m, a, w, p, k: order.append(("cal", m, k)))
    # bench_model must not be asked to start afresh: it would remove the calibrations just taken
    monkeypatch.setattr(pf, "bench_model", lambda m, a, w, p: order.append(("launch", m, a.launches, a.fresh)) or [])
    args = argparse.Namespace(calibration_launches=3, launches=3, fresh=True)
    pf.spread_over_models(["A", "B"], args, tmp_path, tmp_path / "cpu.json", (1.0, 1.0, 1.0))
    cals = [("cal", m, k) for k in (1, 2, 3) for m in ("A", "B")]
    launches = [("launch", m, k, False) for k in (1, 2, 3) for m in ("A", "B")]
    assert order == [("forget", "A", 0), ("forget", "B", 0), *cals, *launches]
    assert args.launches == 3 and args.fresh is False

    # the free solve of a model calibrated apart: the median over its calibrations, each a solve of its own
    monkeypatch.undo()
    ran: list[list[str]] = []

    def fake_sh(cmd: list[str], check: bool = True) -> int:
        ran.append(cmd)
        Path(cmd[cmd.index("-o" if "-o" in cmd else "--output") + 1]).write_text("{}")
        return 0

    monkeypatch.setattr(pf, "sh", fake_sh)
    monkeypatch.setattr(pf, "shapes", lambda *a: [])
    monkeypatch.setattr(pf, "run_one", lambda *a, **k: None)
    monkeypatch.setattr(pf, "plan_key", lambda p: p.name)
    name = next(iter(pf.ALL_MODELS))
    args = argparse.Namespace(
        calibration_launches=2, calibration_seconds=6.0, devices=2, global_batch=8, fresh=False, calibrate_apart=True,
        microbatches=[2], tensor_parallel=[1], steps=12, seconds=3.0, warmup_seconds=1.5, launches=1,
    )  # fmt: skip
    pf.calibrate_once(name, args, tmp_path, tmp_path / "cpu.json", 1)
    pf.calibrate_once(name, args, tmp_path, tmp_path / "cpu.json", 2)
    pf.calibrate_once(name, args, tmp_path, tmp_path / "cpu.json", 2)  # there already: not again
    assert [next(w for w in c if w in ("import", "solve")) for c in ran] == ["import", "solve", "solve"]
    assert all("--time-layers" in c and c[c.index("--calibration-seconds") + 1] == "6.0" for c in ran[1:])
    assert pf.bench_model(name, args, tmp_path, tmp_path / "cpu.json") == []
    free = ran[-1]
    cals = [str(pf.calibration_file(name, args, tmp_path, k)) for k in (1, 2)]
    assert "--time-layers" not in free and free[free.index("--layer-times") + 1 : free.index("-o")] == cals
