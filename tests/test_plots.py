"""Plots read back from the matplotlib Figure: lanes, bars, labels and values, not only a file on disk."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("matplotlib")

from milp_partition.cli.dispatch import main
from milp_partition.io.placement_instance import read_placement_instance
from milp_partition.io.strategy_tables import read_strategy_tables
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement
from milp_partition.plots import pipeline as pipeline_plot
from milp_partition.plots import placement as placement_plot
from milp_partition.plots import strategy as strategy_plot
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
from milp_partition.sweep.charts import gap_figure, time_figure
from tests.conftest import random_pipeline_problem


def _bars(ax, prefix):
    return [p for p in ax.patches if (p.get_gid() or "").startswith(prefix)]


@pytest.fixture(scope="module")
def example_1(shared_benchmarks):
    path = shared_benchmarks / "placement" / "example-1.json"
    problem = read_placement_instance(path)
    result = solve_placement(problem, PlacementSolveSettings(time_limit_s=30))
    assert result.status == "optimal" and result.objective == 30.0
    return path, problem, result.to_json_dict()


def test_gantt_has_a_lane_per_device_and_device_pair_and_a_bar_per_task_and_transfer(example_1):
    path, problem, result = example_1
    fig = placement_plot.figure(result, str(path), {})
    ax = fig.axes[0]
    dev = {d: k for k, d in enumerate(problem.device_ids)}
    on = {t: dev[result["assignment"][t]] for t in problem.task_ids}
    busy = [t for i, t in enumerate(problem.task_ids) if problem.time[i, on[t]] > 0]
    tasks = _bars(ax, "task:")
    assert sorted(b.get_gid() for b in tasks) == sorted(f"task:{t}" for t in busy)
    for b in tasks:  # each bar spans [start, start + time on its device]
        t = b.get_gid()[5:]
        i = problem.task_ids.index(t)
        assert b.get_x() == pytest.approx(result["starts"][t]) and b.get_width() == pytest.approx(problem.time[i, on[t]])
    crossing = []
    for e in range(problem.num_edges):
        s, d = problem.task_ids[problem.edge_source[e]], problem.task_ids[problem.edge_target[e]]
        if on[s] != on[d] and problem.comm[e, on[s], on[d]] > 0:
            crossing.append((on[s], on[d]))
    assert len(_bars(ax, "transfer:")) == len(crossing) > 0
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[: problem.num_devices] == list(problem.device_ids)
    assert len(labels) == problem.num_devices + len(set(crossing)) and "→" in labels[-1]
    assert "makespan 30" in ax.get_title()
    ends = [b.get_x() + b.get_width() for b in _bars(ax, "")]
    assert max(ends) == pytest.approx(30.0)  # the schedule ends at the optimum


def test_pipeline_stage_chart_shows_loads_and_memory_against_the_limit():
    problem = random_pipeline_problem(3, max_nodes=8, devices=3)
    result = solve_pipeline(problem, SolveSettings(solver="none")).to_json_dict()
    fig = pipeline_plot.figure(result, None, {"memory": "1GiB"})
    loads_ax, mem_ax = fig.axes
    loads = _bars(loads_ax, "load:")
    assert {b.get_gid()[5:]: b.get_height() for b in loads} == pytest.approx(result["loads"])
    assert f"{result['objective']:.6g}" in loads_ax.get_title()
    mems = _bars(mem_ax, "memory:")
    assert len(mems) == len(result["memory_bytes"])
    limits = [c for c in mem_ax.collections if (c.get_gid() or "").startswith("limit:")]
    assert len(limits) == len([d for d in result["memory_bytes"] if not d.startswith("cpu")])
    assert all(seg[0][1] == pytest.approx(1.0) for c in limits for seg in c.get_segments())  # 1 GiB


def test_strategy_chart_has_a_row_per_layer_and_splits_adding_to_the_devices(shared_benchmarks):
    problem = read_strategy_tables(shared_benchmarks / "strategy" / "rnnlm_p8.json")
    result = solve_strategy(problem, StrategySolveSettings(time_limit_s=30)).to_json_dict()
    fig = strategy_plot.figure(result, None, {})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [n.id for n in problem.nodes]
    for node in problem.nodes:
        width = sum(b.get_width() for b in _bars(ax, f"layer:{node.id}:"))
        product = math.prod(int(x) for x in result["assignment"][node.id].split("x"))
        assert width == pytest.approx(math.log2(product))
    assert any(t.get_text() == result["assignment"][problem.nodes[0].id] for t in ax.texts)


def _row(problem, instance, method, value, bound="", size="10", seconds="0.5"):
    status = "optimal" if method == "exact" else "feasible"
    return {
        "problem": problem, "instance": instance, "sha": "s", "point": "default", "method": method, "options": "",
        "status": status, "value": value, "bound": bound, "seconds": seconds, "size": size, "unit": "", "code": "c",
        "message": "",
    }  # fmt: skip


def test_gap_chart_has_a_bar_per_heuristic_and_instance_with_the_gap_in_percent():
    rows = [
        _row("placement", "a", "heft", "12"), _row("placement", "a", "m-topo", "20"), _row("placement", "a", "exact", "10", "10"),
        _row("placement", "b", "heft", "5"), _row("placement", "b", "m-topo", "4"), _row("placement", "b", "exact", "4", "3"),
        _row("pipeline", "c", "greedy", "2"), _row("pipeline", "c", "exact", "1", "1", size="100", seconds="3"),
    ]  # fmt: skip
    fig = gap_figure(rows)
    assert len(fig.axes) == 2
    bars = {b.get_gid(): b.get_height() for ax in fig.axes for b in _bars(ax, "")}
    assert bars == pytest.approx(
        {
            "placement|a|heft": 100 * 2 / 12, "placement|a|m-topo": 50.0, "placement|b|heft": 40.0,
            "placement|b|m-topo": 25.0, "pipeline|c|greedy": 50.0,
        }
    )  # fmt: skip
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b"]
    tf = time_figure(rows)
    assert [ax.get_title() for ax in tf.axes] == ["placement: time against size", "pipeline: time against size"]
    lines = {ln.get_label(): list(ln.get_xdata()) for ln in tf.axes[1].get_lines()}
    assert lines == {"greedy": [10.0], "exact": [100.0]}


def test_plot_command(example_1, tmp_path, capsys):
    path, _, result = example_1
    res = tmp_path / "r.json"
    res.write_text(json.dumps(result))
    assert main(["plot", str(res), "--instance", str(path), "--output", str(tmp_path / "g.svg")]) == 0
    assert (tmp_path / "g.svg").read_text().lstrip().startswith("<?xml")
    assert main(["plot", str(res), "--output", str(tmp_path / "g.png")]) == 2
    assert "--instance" in capsys.readouterr().err
    assert main(["plot", str(res), "--instance", str(path), "--output", str(tmp_path / "g.pdf")]) == 2
    assert ".png or .svg" in capsys.readouterr().err
    res.write_text(json.dumps({"problem": "nope"}))
    assert main(["plot", str(res), "--output", str(tmp_path / "g.png")]) == 2
    assert "'nope'" in capsys.readouterr().err


def test_gap_chart_marks_a_heuristic_without_a_verified_answer():
    rows = [
        _row("pipeline", "c", "greedy", "2"),
        _row("pipeline", "c", "equal-split", ""),
        _row("pipeline", "c", "exact", "1", "1"),
    ]
    rows[1]["status"] = "rejected"
    fig = gap_figure(rows)
    ax = fig.axes[0]
    assert [b.get_gid() for b in _bars(ax, "")] == ["pipeline|c|greedy"]
    assert [ln.get_gid() for ln in ax.get_lines()] == ["missing|pipeline|c|equal-split"]


@pytest.fixture(scope="module")
def bert_k8(shared_benchmarks):
    from milp_partition.io.piper import read_joint
    from milp_partition.joint.problem import JointSolveSettings
    from milp_partition.joint.solve import solve_joint

    path = shared_benchmarks / "joint" / "bert32a100.json"
    problem = read_joint(path, devices=8, memory_bytes=8.0 * 2**30, bandwidth_bytes_per_s=25.0 * 2**30)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=120))
    assert result.status == "optimal" and result.objective == pytest.approx(0.16585575, rel=1e-7)  # Piper's value
    return path, result.to_json_dict()


def test_joint_stage_chart_has_a_bar_per_stage_the_bottleneck_and_memory_against_the_limit(bert_k8):
    from milp_partition.plots import joint as joint_plot

    _, result = bert_k8
    stages = result["stages"]
    assert len(stages) >= 2
    fig = joint_plot.figure(result, None, {})
    time_ax, mem_ax = fig.axes
    times = _bars(time_ax, "time:")
    assert [b.get_gid() for b in times] == [f"time:{q + 1}" for q in range(len(stages))]
    assert [b.get_height() for b in times] == pytest.approx([st["time_per_sample_s"] for st in stages])
    worst = max(b.get_height() for b in times)
    assert worst == pytest.approx(result["objective"])  # the bottleneck stage is the plan's time per sample
    red = [b for b in times if b.get_facecolor()[:3] == pytest.approx((0.8392, 0.1529, 0.1569), abs=1e-3)]
    assert [b.get_height() for b in red] == [worst]
    assert sum("bottleneck" in t.get_text() for t in time_ax.texts) == len(red)
    assert f"{result['objective']:.6g}" in time_ax.get_title() and f"{len(stages)} stages on " in time_ax.get_title()
    mems = _bars(mem_ax, "memory:")
    assert [b.get_height() for b in mems] == pytest.approx([st["memory_bytes"] / 2**30 for st in stages])
    assert all(b.get_height() <= 8.0 * (1 + 1e-12) for b in mems)
    (limit,) = [c for c in mem_ax.collections if c.get_gid() == "limit"]
    assert all(seg[0][1] == pytest.approx(8.0) for seg in limit.get_segments())  # 8 GiB, from the result's instance
    labels = [t.get_text() for t in mem_ax.get_xticklabels()]
    assert labels == [
        f"stage {q + 1}\n{st['data_parallel']} x {st['tensor_parallel']}\n{len(st['nodes'])} node{'' if len(st['nodes']) == 1 else 's'}"
        for q, st in enumerate(stages)
    ]
    fig2 = joint_plot.figure(result, None, {"memory": "16GiB"})  # --memory overrides the instance's limit
    (limit2,) = [c for c in fig2.axes[1].collections if c.get_gid() == "limit"]
    assert limit2.get_segments()[0][0][1] == pytest.approx(16.0)


def test_plot_command_on_a_joint_result(bert_k8, tmp_path):
    _, result = bert_k8
    res = tmp_path / "joint.json"
    res.write_text(json.dumps(result))
    assert main(["plot", str(res), "--output", str(tmp_path / "j.svg")]) == 0
    svg = (tmp_path / "j.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "time:1" in svg and "limit" in svg


def test_plot_finds_a_placement_results_instance_as_recorded_or_beside_the_result(
    shared_benchmarks, tmp_path, capsys, monkeypatch
):
    import shutil

    inst = tmp_path / "inst" / "example-1.json"
    inst.parent.mkdir()
    shutil.copy(shared_benchmarks / "placement" / "example-1.json", inst)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["solve", "inst/example-1.json", "--time-limit", "30", "-q", "--output", "out/r.json"]) == 0
    recorded = json.loads((out / "r.json").read_text())["instance"]
    assert recorded["source"] == "inst/example-1.json" and recorded["source_from_result"] == "../inst/example-1.json"
    assert main(["plot", "out/r.json", "--output", "g.svg"]) == 0  # as recorded, from the folder it was solved in
    monkeypatch.chdir(out)
    assert main(["plot", "r.json", "--output", "g.svg"]) == 0  # relative to the result file
    capsys.readouterr()
    inst.rename(tmp_path / "moved.json")
    assert main(["plot", "r.json", "--output", "g.svg"]) == 2
    err = capsys.readouterr().err
    assert "'inst/example-1.json' is not found" in err and "--instance" in err and len(err.strip().splitlines()) == 1
    assert main(["plot", "r.json", "--instance", str(tmp_path / "moved.json"), "--output", "g.svg"]) == 0


def test_strategy_chart_names_the_dimensions_and_stays_readable_for_204_layers(shared_benchmarks, tmp_path):
    from matplotlib.image import imread

    res = tmp_path / "r.json"
    path = shared_benchmarks / "strategy" / "transformer_p8.json"
    assert main(["solve", str(path), "--time-limit", "60", "-q", "--output", str(res)]) == 0
    result = json.loads(res.read_text())
    dims = result["instance"]["dimensions"]
    assert len(dims) == 204 and all(len(v) == len(result["assignment"][k].split("x")) for k, v in dims.items())
    fig = strategy_plot.figure(result, None, {})
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "batch" in legend and not any(t.startswith("dimension") for t in legend)
    assert sum(len(ax.get_yticklabels()) for ax in fig.axes) == 204
    assert main(["plot", str(res), "--output", str(tmp_path / "s.png")]) == 0
    height, width = imread(str(tmp_path / "s.png")).shape[:2]
    assert height < 2000 and width < 4000


def test_strategy_dimension_names_of_generated_layers():
    from milp_partition.calibration.datasheets import build_datasheet_profile
    from milp_partition.strategy.dimensions import dimension_names
    from milp_partition.strategy.layers import StrategyGenerationSettings, generate_strategy_problem, transformer_layer_graph

    graph = transformer_layer_graph(1, batch_tokens=64, seq=16, hidden=64, heads=4, ffn=128)
    problem = generate_strategy_problem(graph, build_datasheet_profile("H100"), StrategyGenerationSettings(devices=4))
    names = dimension_names(problem)
    kinds = {layer.id: layer.kind for layer in graph.layers}
    for lid, kind in kinds.items():
        if kind == "linear":
            assert names[lid] == ["batch", "in features", "out features"]
        if kind == "attention":
            assert names[lid][:2] == ["batch", "heads"]


def test_plot_without_matplotlib_is_one_line_naming_the_extra(tmp_path):
    import subprocess
    import sys

    res = tmp_path / "r.json"
    res.write_text(json.dumps({"problem": "joint", "stages": []}))
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from milp_partition.cli.dispatch import main\n"
        f"sys.exit(main(['plot', {str(res)!r}, '--output', {str(tmp_path / 'x.png')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "pip install 'milp-partition[plot]'" in proc.stderr


def test_plot_finds_a_galvatron_results_model_folder(shared_benchmarks, tmp_path, capsys):
    # a Galvatron model is a folder: the plot found no instance there and said it had moved
    root = shared_benchmarks / "galvatron"
    out = tmp_path / "plan.json"
    argv = [
        "solve",
        str(root / "models/llama2-7b"),
        "--hardware",
        str(root / "hardware"),
        "--devices",
        "8",
        "--memory",
        "36GiB",
        "--global-batch",
        "16",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["plot", str(out), "-o", str(tmp_path / "plan.svg")]) == 0
    err = capsys.readouterr().err
    assert "not found" not in err and (tmp_path / "plan.svg").stat().st_size > 0


def test_a_zero_gap_is_seen_and_the_time_legend_covers_no_point():
    """Issue 43 item 15: a 0% bar had no height (invisible) and the time chart's legend covered the exact point."""
    rows = [
        _row("placement", "a", "heft", "10"), _row("placement", "a", "m-topo", "12"),
        _row("placement", "a", "exact", "10", "10", size="10", seconds="100"),
    ]  # fmt: skip
    fig = gap_figure(rows)
    dashes = [ln.get_gid() for ax in fig.axes for ln in ax.get_lines() if (ln.get_gid() or "").startswith("zero|")]
    assert dashes == ["zero|placement|a|heft"]
    tf = time_figure(rows)
    ax = tf.axes[0]
    legend = ax.get_legend()
    tf.canvas.draw()
    box = legend.get_window_extent()
    axes_box = ax.get_window_extent()
    assert box.x0 >= axes_box.x1 - 1  # beside the panel, so over none of its points
