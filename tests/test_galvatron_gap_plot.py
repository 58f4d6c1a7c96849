"""``gap`` and ``plot`` on Galvatron's problem: rows of the baselines and the exact search on a shipped profile; the
stage chart of a solved plan (no timings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milp_partition.cli.dispatch import main
from milp_partition.galvatron import gap as galvatron_gap
from milp_partition.sweep.jobs import EXACT, GapJob
from milp_partition.sweep.registry import execute


@pytest.fixture(scope="module")
def root(shared_benchmarks: Path) -> Path:
    """Galvatron's shipped profiles in ../shared beside the repo (missing: the shared fixture fails, as for every benchmark)."""
    return shared_benchmarks / "galvatron"


def _setting(tmp_path: Path, root: Path, **over: object) -> Path:
    data = {
        "format": galvatron_gap.FORMAT,
        "model": str(root / "models/llama2-7b"),
        "hardware": str(root / "hardware"),
        "devices": 8,
        "memory": "48GiB",
        "global_batch": 64,
        **over,
    }
    path = tmp_path / "llama.json"
    path.write_text(json.dumps(data))
    return path


def test_gap_rows_baselines_never_beat_the_proven_optimum(tmp_path: Path, root: Path) -> None:
    path = _setting(tmp_path, root)
    assert galvatron_gap.recognize(path) is None and galvatron_gap.recognize(tmp_path) is not None
    rows = {
        m: execute(GapJob("galvatron", str(path), path.stem, "x", (), m, time_limit_s=120))
        for m in (*galvatron_gap.HEURISTICS, EXACT)
    }
    exact = rows[EXACT]
    assert exact["status"] == "optimal", exact
    assert float(exact["value"]) == pytest.approx(4.039489764, rel=1e-8)
    for m in galvatron_gap.HEURISTICS:
        assert rows[m]["status"] == "feasible", rows[m]
        assert float(rows[m]["value"]) >= float(exact["value"]) * (1 - 1e-12)
    # Galvatron's even split: its plan's sound T from the benchmark README
    assert float(rows["galvatron-even-split"]["value"]) == pytest.approx(4.094158, rel=1e-6)


def test_gap_point_overrides_devices_and_memory(tmp_path: Path, root: Path) -> None:
    path = _setting(tmp_path, root, global_batch=16)
    p = galvatron_gap.load(path, (("devices", "16"), ("memory", "36GiB")), {})
    assert (p.devices, p.memory_mb, p.global_batch) == (16, 36 * 1024, 16)


def test_plot_of_a_solved_plan(tmp_path: Path, root: Path) -> None:
    pytest.importorskip("matplotlib")
    from milp_partition.plots.galvatron import figure

    out = tmp_path / "plan.json"
    # the README's 36 GB / batch-16 setting: a plan of the same shape as at 48 GB / batch 64 (one stage of 32 layers),
    # proven in a second rather than in several
    rc = main(
        [
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
            "--quiet",
        ]
    )
    assert rc == 0
    result = json.loads(out.read_text())
    fig = figure(result, None, {})
    gids = [a.get_gid() for ax in fig.axes for a in ax.get_children() if a.get_gid()]
    stages = len(result["stages"])
    assert sorted(g for g in gids if g.startswith("time:")) == [f"time:{q + 1}" for q in range(stages)]
    assert sum(g.startswith("memory:") for g in gids) == stages and "limit" in gids
    assert sum(g.startswith("layer:") for g in gids) == 32
    # memory in MiB as the report prints it (its "MB" was MiB, the chart GiB); a one-stage plan keeps a sane x-axis
    # (it spanned -0.4..0.4, the two bars filling it)
    bars = {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}
    assert [bars[f"memory:{q + 1}"].get_height() for q in range(stages)] == [st["memory_mb"] for st in result["stages"]]
    assert "MiB" in fig.axes[1].get_ylabel()
    if stages == 1:
        for ax in fig.axes[:2]:
            lo, hi = ax.get_xlim()
            assert hi - lo >= 2.0 and bars["time:1"].get_width() / (hi - lo) <= 0.25
    assert stages == 1  # the README setting's plan: one stage, the case the x-axis check is for
    png = tmp_path / "plan.png"
    assert main(["plot", str(out), "--output", str(png)]) == 0 and png.stat().st_size > 0


def test_report_prints_mib(tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Galvatron's "MB" is 2**20 bytes: the report says MiB (the README's rule: MB = 10**6 bytes)."""
    rc = main(
        [
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
            "--progress",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "36864 MiB each (usable 29492 MiB)" in out and " MB " not in out
