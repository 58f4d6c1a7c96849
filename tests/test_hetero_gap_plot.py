"""``gap`` and ``plot`` on the heterogeneous problem (issue 40, item 3): baseline rows against the exact search on a
small setting, the setting file's errors, the stage chart of a solved plan (no timings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from milp_partition.heuristics.hetero_even import best_even_plan, best_uniform_plan

from milp_partition import registry
from milp_partition.cli.dispatch import main
from milp_partition.errors import InputError
from milp_partition.hetero import gap as hetero_gap
from milp_partition.hetero.problem import plan_to_sailor
from milp_partition.sweep.jobs import EXACT, STOPPED_AT_LIMIT, GapJob
from milp_partition.sweep.markdown import render_markdown
from milp_partition.sweep.registry import execute
from tests.test_hetero import _formula

HETERO = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hetero"
pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")
MINI = {"model": "OPT-350", "global_batch": 64, "gpus": {"A100-40_us-central1-a": 2, "V100-16_us-central1-a": 2}}


def _setting(tmp_path: Path, **over: object) -> Path:
    path = tmp_path / "mini.json"
    path.write_text(json.dumps({"format": hetero_gap.FORMAT, "folder": str(HETERO), **MINI, **over}))
    return path


def test_registry_names_gap_and_plot() -> None:
    entry = registry.problem("hetero")
    assert entry.gap_module() is hetero_gap
    assert "hetero" in registry.names("plot")


def test_gap_rows_baselines_never_beat_the_proven_optimum(tmp_path: Path) -> None:
    path = _setting(tmp_path)
    assert hetero_gap.recognize(path) is None and hetero_gap.recognize(tmp_path) is not None
    rows = {
        m: execute(GapJob("hetero", str(path), path.stem, "x", (), m, time_limit_s=60)) for m in (*hetero_gap.HEURISTICS, EXACT)
    }
    exact = rows[EXACT]
    assert exact["status"] == "optimal", exact
    assert float(exact["bound"]) <= float(exact["value"]) * (1 + 1e-12)
    problem = hetero_gap.load(path, (), {})
    formula = _formula()
    data = formula.Data(problem.model.name, problem.global_batch, str(HETERO))
    for m, fn in (("sailor-even", best_even_plan), ("uniform", best_uniform_plan)):
        assert rows[m]["status"] == "feasible", rows[m]
        value = float(rows[m]["value"])
        assert value >= float(exact["value"]) * (1 - 1e-12)  # no baseline beats the proven optimum
        plan = fn(problem)[0]
        assert plan is not None  # the row's value is that plan's, re-priced by the benchmark's own formula
        assert value == pytest.approx(formula.evaluate(plan_to_sailor(plan), data)["iteration_time"], rel=1e-12)
    # the Sailor-style split is strictly above the optimum here (the gap the exact search closes)
    assert float(rows["sailor-even"]["value"]) > float(exact["value"]) * (1 + 1e-6)


def test_gap_setting_by_name_and_bad_files(tmp_path: Path) -> None:
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"format": hetero_gap.FORMAT, "folder": str(HETERO), "setting": "opt350-a8-v16"}))
    p = hetero_gap.load(named, (), {})
    assert (p.model.name, p.global_batch, sum(c.count for c in p.cluster.columns)) == ("OPT-350", 1024, 24)
    sound = _setting(tmp_path, objective="sound")
    assert hetero_gap.load(sound, (), {}).objective == "sound"
    bad = _setting(tmp_path, objective="memory")
    with pytest.raises(InputError, match=r"mini\.json.*objective"):
        hetero_gap.load(bad, (), {})
    bad = _setting(tmp_path, folde="x")
    with pytest.raises(InputError, match="folde"):
        hetero_gap.load(bad, (), {})
    both = tmp_path / "both.json"
    both.write_text(json.dumps({"format": hetero_gap.FORMAT, "folder": str(HETERO), "setting": "opt350-a8-v16", **MINI}))
    with pytest.raises(InputError, match="not both"):
        hetero_gap.load(both, (), {})
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "milp-partition-galvatron/1"}))
    assert "hetero setting file" in str(hetero_gap.recognize(other))


def test_plot_of_a_solved_plan(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from milp_partition.plots.hetero import figure

    s = tmp_path / "s.json"
    s.write_text(json.dumps({"name": "mini", **MINI}))
    out = tmp_path / "r.json"
    assert main(["solve", str(HETERO), "--setting-file", str(s), "--time-limit", "60", "-q", "-o", str(out)]) == 0
    result = json.loads(out.read_text())
    stages = result["stages"]
    fig = figure(result, None, {})
    bars = {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}
    want_groups = [(q, g) for q, st in enumerate(stages) for g in st["groups"]]
    assert sum(k.startswith("time:") for k in bars) == len(want_groups) > 0
    assert sum(k.startswith("limit:") for k in bars) == len(want_groups)
    plan = result["sailor_plan"]["pipeline_list"][0]
    for q, st in enumerate(stages):
        assert sum(g["replicas"] for g in st["groups"]) == plan["dp"][q]  # every replica in one group
        assert max(g["compute_s"] for g in st["groups"]) == pytest.approx(st["compute_s"], rel=1e-12)  # C_i
        assert bars[f"sends:{q + 1}"].get_height() == st["sends_s"]
        for g in st["groups"]:
            lab = f"{g['kind']}_{g['zone']} tp{g['tp']}"
            assert bars[f"memory:{q + 1}:{lab}"].get_height() == pytest.approx(g["memory_bytes"] / 2**30)
            assert g["memory_bytes"] <= g["memory_limit_bytes"]
    png = tmp_path / "plan.png"
    assert main(["plot", str(out), "--output", str(png)]) == 0 and png.stat().st_size > 0


def test_a_baseline_cut_by_the_time_limit_is_a_feasible_row_that_says_so(tmp_path: Path) -> None:
    """With no time at all each baseline returns the first plan it priced (a feasible row, not 'failed': it was
    'failed, over the time limit' before, however good its plan) and the gap table shows that it was stopped."""
    path = _setting(tmp_path)
    for m in hetero_gap.HEURISTICS:
        row = execute(GapJob("hetero", str(path), path.stem, "x", (), m, time_limit_s=0.0))
        assert row["status"] == "feasible" and row["message"].startswith(STOPPED_AT_LIMIT), row
        assert float(row["value"]) > 0
        assert f"feasible ({STOPPED_AT_LIMIT}" in render_markdown([row], "gap", row["code"], [])
