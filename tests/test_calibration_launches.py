"""``--calibration-launches K``: the planner reads the element-wise median of K calibrations (run/median_of.py).

The calibrations here are fakes (the structure ``--time-layers`` measures, numbers scaled per call), so that the test
checks which numbers the planner is given, not how long anything takes."""

from __future__ import annotations

import dataclasses
import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from milp_partition.cli.dispatch import main
from milp_partition.run.empty import EmptySteps
from milp_partition.run.median_of import median_of
from milp_partition.run.predict import SizeTimings


def test_the_median_is_taken_number_by_number_through_the_structure() -> None:
    rng = random.Random(7)
    runs = [
        {"sizes": {1: {"a": (rng.random(), rng.random())}}, "E": [(1, 2, 4, rng.random())], "name": "gloo", "k": 3}
        for _ in range(5)
    ]
    got = median_of(runs)
    assert got["sizes"][1]["a"] == (
        statistics.median(r["sizes"][1]["a"][0] for r in runs),
        statistics.median(r["sizes"][1]["a"][1] for r in runs),
    )
    assert got["E"] == [(1, 2, 4, statistics.median(r["E"][0][3] for r in runs))]  # the shape's integers as they were
    assert isinstance(got["E"][0][0], int) and got["name"] == "gloo" and got["k"] == 3
    assert median_of([2.0, 8.0]) == 5.0 and median_of([1.0]) == 1.0


def test_a_frozen_dataclass_keeps_its_type_and_its_flags() -> None:
    a = EmptySteps(((1, 1, 1, 0.001),), {"p2p_alpha_s": 1e-5}, 1, dtensor={"latency_in_module": True, "x": 1.0})
    b = dataclasses.replace(
        a, steps=((1, 1, 1, 0.004),), links={"p2p_alpha_s": 3e-5}, dtensor={"latency_in_module": True, "x": 2.0}
    )
    c = dataclasses.replace(
        a, steps=((1, 1, 1, 0.002),), links={"p2p_alpha_s": 2e-5}, dtensor={"latency_in_module": True, "x": 9.0}
    )
    got = median_of([a, b, c])
    assert isinstance(got, EmptySteps)
    assert got.steps == ((1, 1, 1, 0.002),) and got.links == {"p2p_alpha_s": 2e-5}
    assert got.dtensor == {"latency_in_module": True, "x": 2.0} and got.threads == 1


def test_measurements_of_different_shapes_are_refused() -> None:
    with pytest.raises(ValueError):
        median_of([[1.0, 2.0], [1.0]])
    with pytest.raises(ValueError):
        median_of([])


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    graph = tmp_path_factory.mktemp("graph") / "mlp.json"
    args = ["import", "torch", "milp_partition.importers.models:mlp_small_test", "--input", "8x32", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(graph)]) == 0
    return graph


def test_the_planner_reads_the_median_of_the_calibrations(graph: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import milp_partition.cli.joint_run as jr
    from milp_partition.io.imported_layers import read_layers

    nodes = list(read_layers(json.loads(graph.read_text()), str(graph)).layers)
    scales = iter([1.0, 3.0, 2.0, 1.0, 3.0, 2.0])  # the layer timings' three calls, then the empty steps' three
    calls: dict[str, Any] = {"layers": 0, "empty": 0, "seconds": []}

    def fake_layers(data: Any, source: str, sizes: list[int], threads: int = 1) -> SizeTimings:
        calls["layers"] += 1
        f = next(scales)
        times = {b: {v: (1e-4 * f * b, 2e-4 * f * b) for v in nodes} for b in sizes}
        return SizeTimings(times, 1e-5 * f, {b: {v: 64.0 for v in nodes} for b in sizes})

    def fake_empty(
        shapes: list[tuple[int, int, int, int]], threads: int = 1, model: Any = None, calibration_seconds: float = 0.0
    ) -> EmptySteps:
        calls["empty"] += 1
        calls["seconds"].append(calibration_seconds)
        f = next(scales)
        links = {"p2p_alpha_s": 1e-5 * f, "p2p_beta_s_per_byte": 1e-9 * f, "allreduce_alpha_s": 2e-5 * f,
                 "allreduce_beta_s_per_byte": 2e-9 * f}  # fmt: skip
        steps = tuple((p, d, m, 1e-3 * f * p * m) for p, d, m, t in shapes if t == 1)
        return EmptySteps(steps, links, threads)

    monkeypatch.setattr(jr, "time_layers_by_size", fake_layers)
    monkeypatch.setattr(jr, "calibrate_empty_steps", fake_empty)
    common = ["solve", str(graph), "--problem", "joint", "--objective", "run", "--devices", "2", "--memory", "1GiB"]
    common += ["--global-batch", "4", "--tp-degrees", "1"]
    out = tmp_path / "plan.json"
    timing = ["--time-layers", "--calibration-launches", "3", "--calibration-seconds", "2.5"]
    assert main([*common, *timing, "-o", str(out)]) == 0
    assert calls == {"layers": 3, "empty": 3, "seconds": [2.5, 2.5, 2.5]}  # each calibration spread over 2.5 s
    timed = json.loads(out.read_text())["cost_model"]["layer_times"]
    assert timed["calibration_launches"] == 3
    assert timed["calibration_seconds"] == 2.5
    # every number the median of 1x, 3x and 2x: the 2x calibration's
    assert timed["sizes"]["2"][nodes[0]] == pytest.approx([2e-4 * 2, 4e-4 * 2])
    assert timed["optimizer_s_per_param_tensor"] == pytest.approx(2e-5)
    assert all(e == pytest.approx(2e-3 * p * m) for p, d, m, e in timed["empty_steps"])
    assert timed["links"]["allreduce_alpha_s"] == pytest.approx(4e-5)
    # the plan priced from the median: the same price when the recorded (median) calibration is reused
    again = tmp_path / "again.json"
    parsed: list[str] = []
    parse = jr.parse_json
    monkeypatch.setattr(jr, "parse_json", lambda text, source: parsed.append(source) or parse(text, source))
    assert main([*common, "--layer-times", str(out), "-o", str(again)]) == 0
    assert parsed.count(str(out)) == 1  # the times, the calibration and the recorded settings from one read
    assert json.loads(again.read_text())["objective"] == pytest.approx(json.loads(out.read_text())["objective"], rel=1e-12)
    assert json.loads(again.read_text())["cost_model"]["layer_times"]["calibration_launches"] == 3
    assert json.loads(again.read_text())["cost_model"]["layer_times"]["calibration_seconds"] == 2.5


def test_calibration_launches_without_time_layers_is_refused(graph: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["solve", str(graph), "--problem", "joint", "--objective", "run", "--devices", "2", "--memory", "1GiB"]
    assert main([*common, "--calibration-launches", "3", "--coefficients", str(graph)]) == 2
    assert "--calibration-launches" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # at least one
        main([*common, "--time-layers", "--calibration-launches", "0"])
    assert stop.value.code == 2
    piper = ["solve", str(graph), "--problem", "joint", "--devices", "2", "--memory", "1GiB", "--calibration-launches", "2"]
    assert main(piper) == 2  # Piper's objective calibrates nothing
    assert "--objective run" in capsys.readouterr().err
    assert main([*common, "--calibration-seconds", "3", "--coefficients", str(graph)]) == 2  # nothing timed now
    assert "--calibration-seconds" in capsys.readouterr().err


def _fake_calibrations(monkeypatch: pytest.MonkeyPatch, nodes: list[str], scales: list[float]) -> None:
    """``--time-layers``' timers replaced by fakes whose every number is scaled by the next of ``scales`` (the layer
    timing and the runtime's calibration of one solve take one each); the runtime's calibration times the model's
    optimizer inside run's step at 0.6 ms x the scale over 6 parameter tensors."""
    import milp_partition.cli.joint_run as jr

    it = iter(scales)
    now: dict[str, float] = {}

    def fake_layers(data: Any, source: str, sizes: list[int], threads: int = 1) -> SizeTimings:
        now["f"] = f = next(it)
        times = {b: {v: (1e-4 * f * b, 2e-4 * f * b) for v in nodes} for b in sizes}
        return SizeTimings(times, 1e-5 * f, {b: {v: 64.0 for v in nodes} for b in sizes})

    def fake_empty(
        shapes: list[tuple[int, int, int, int]], threads: int = 1, model: Any = None, calibration_seconds: float = 0.0
    ) -> EmptySteps:
        f = now["f"]
        links = {"p2p_alpha_s": 1e-5 * f, "p2p_beta_s_per_byte": 1e-9 * f, "allreduce_alpha_s": 2e-5 * f,
                 "allreduce_beta_s_per_byte": 2e-9 * f}  # fmt: skip
        steps = tuple((p, d, m, 1e-3 * f * p * m) for p, d, m, t in shapes if t == 1)
        return EmptySteps(steps, links, threads, optimizer_in_step_s=6e-4 * f, optimizer_param_tensors=6)

    monkeypatch.setattr(jr, "time_layers_by_size", fake_layers)
    monkeypatch.setattr(jr, "calibrate_empty_steps", fake_empty)


def test_several_layer_times_results_are_read_as_the_median_of_their_calibrations(
    graph: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--layer-times A B C``: calibrations taken at different times, each number the median over them; the optimizer's
    price per tensor from the model's own step inside run's step where the calibration timed it."""
    from milp_partition.io.imported_layers import read_layers

    nodes = list(read_layers(json.loads(graph.read_text()), str(graph)).layers)
    _fake_calibrations(monkeypatch, nodes, [1.0, 3.0, 2.0])
    common = ["solve", str(graph), "--problem", "joint", "--objective", "run", "--devices", "2", "--memory", "1GiB"]
    common += ["--tp-degrees", "1"]
    results = [tmp_path / f"cal{k}.json" for k in range(3)]
    for out in results:
        assert main([*common, "--global-batch", "4", "--time-layers", "-o", str(out)]) == 0
    cost = json.loads(results[0].read_text())["cost_model"]
    assert cost["optimizer_s_per_param_tensor"] == pytest.approx(1e-4)  # 0.6 ms over 6 tensors, not the timer's 1e-5
    assert cost["layer_times"]["optimizer_in_step"] == [pytest.approx(6e-4), 6]
    merged = tmp_path / "merged.json"
    assert main([*common, "--global-batch", "4", "--layer-times", *map(str, results), "-o", str(merged)]) == 0
    got, middle = (json.loads(p.read_text()) for p in (merged, results[2]))  # the 2x calibration holds every median
    assert got["objective"] == pytest.approx(middle["objective"], rel=1e-12)
    assert got["cost_model"]["optimizer_s_per_param_tensor"] == pytest.approx(2e-4)
    timed = got["cost_model"]["layer_times"]
    assert timed["sizes"]["2"][nodes[0]] == pytest.approx([4e-4, 8e-4])
    assert timed["links"]["allreduce_alpha_s"] == pytest.approx(4e-5)
    assert timed["calibration_launches"] == 3 and timed["calibration_results"] == 3  # one each, in three solves
    # the merged result reused alone prices the plan alike
    again = tmp_path / "again.json"
    assert main([*common, "--global-batch", "4", "--layer-times", str(merged), "-o", str(again)]) == 0
    assert json.loads(again.read_text())["objective"] == pytest.approx(got["objective"], rel=1e-12)
    assert json.loads(again.read_text())["cost_model"]["layer_times"]["calibration_results"] == 3
    # a result of another global batch calibrated other shapes: refused, naming the files
    other = tmp_path / "other.json"
    _fake_calibrations(monkeypatch, nodes, [1.0])
    assert main([*common, "--global-batch", "8", "--time-layers", "-o", str(other)]) == 0
    capsys.readouterr()
    assert main([*common, "--global-batch", "4", "--layer-times", str(other), str(results[0]), "-o", str(again)]) == 2
    err = capsys.readouterr().err
    assert "different things" in err and "other.json" in err and "Traceback" not in err
