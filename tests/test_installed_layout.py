"""The source tree runs as the installed package does (issue 41, item 7).

``formulations/`` and ``heuristics/`` are top-level folders of the repository and install as
``milp_partition.formulations`` / ``.heuristics`` (pyproject's package-dir).  From the repository root, ``import
milp_partition`` finds the source tree's package first (the root is on ``sys.path``: ``python -c``, ``python -m``, a
Ray worker); ``milp_partition/__init__.py`` then maps the two names to the top-level folders.  These tests build a
wheel of the project (a regular, non-editable install) into a fresh virtual environment that borrows the test
environment's third-party packages (no network) and run it from the repository root.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from milp_partition.cli.dispatch import main
from milp_partition.cli.exit_codes import EXIT_ERROR
from milp_partition.sweep import executors
from milp_partition.sweep.registry import execute

ROOT = Path(__file__).resolve().parents[1]
#: What a wheel is built from (tests, benchmarks and results are not in it).
PROJECT_FILES = ("pyproject.toml", "setup.py", "README.md", "milp_partition", "formulations", "heuristics")


def _bin(env_dir: Path, name: str) -> Path:
    return env_dir / ("Scripts" if os.name == "nt" else "bin") / name


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding a regular install of a wheel of this tree; the test environment's site-packages (OR-Tools,
    PuLP, Ray, ...) are on its path, its editable install of the project is not (.pth files of a borrowed folder are
    not run)."""
    pytest.importorskip("setuptools", reason="building the wheel without network needs setuptools in this environment")
    base = tmp_path_factory.mktemp("installed")
    src = base / "src"
    src.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info", "build")
    for name in PROJECT_FILES:
        (shutil.copytree(ROOT / name, src / name, ignore=skip) if (ROOT / name).is_dir() else shutil.copy(ROOT / name, src))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(base / "wheel"), str(src)], check=True)
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=False)
    python = _bin(env_dir, "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(purelib, "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next((base / "wheel").glob("milp_partition-*.whl"))
    done = subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True
    )
    if done.returncode != 0 and "no such option: --python" in done.stderr:
        pytest.skip("pip is older than 22.3 (no --python): cannot install into the fresh venv")
    assert done.returncode == 0, done.stderr
    return env_dir


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "RAY_ADDRESS")}


def test_imports_from_the_repository_root_with_a_regular_install(installed: Path) -> None:
    code = (
        "import milp_partition, milp_partition.formulations.pipeline as f, milp_partition.heuristics.pipeline_dp as h\n"
        "from milp_partition import solve_pipeline\n"
        "print(milp_partition.__file__); print(f.__file__); print(h.__file__)"
    )
    done = subprocess.run([_bin(installed, "python"), "-c", code], cwd=ROOT, env=_clean_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    package, formulation, heuristic = (Path(line) for line in done.stdout.split())
    # from the root the source tree wins (the root is sys.path[0]); its two top-level folders are the subpackages
    assert package == ROOT / "milp_partition" / "__init__.py"
    assert formulation == ROOT / "formulations" / "pipeline.py"
    assert heuristic == ROOT / "heuristics" / "pipeline_dp.py"
    # and away from the root, the installed wheel: the folders inside the package, nothing mapped
    done = subprocess.run(
        [_bin(installed, "python"), "-c", code], cwd=installed, env=_clean_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    package, formulation, _ = (Path(line) for line in done.stdout.split())
    assert package.is_relative_to(installed) and formulation == package.parent / "formulations" / "pipeline.py"


def test_a_subprocess_from_the_root_solves(installed: Path) -> None:
    done = subprocess.run(
        [_bin(installed, "python"), "-m", "milp_partition", "solve", "examples/bert24_training.json", "--time-limit", "600"],
        cwd=ROOT,
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "optimal" in done.stdout


@pytest.mark.slow  # a local Ray instance starts (5-10 s of the test's 10-15 s)
def test_ray_gap_from_the_root_with_a_regular_install(installed: Path, shared_benchmarks: Path, tmp_path: Path) -> None:
    """Ray workers import the project from the root (Ray puts the driver's folder on their path): every run answers.

    The limit is far above the proof's time (seconds quiet): at 20 s, two busy processes beside the suite left the
    exact row feasible, not optimal; the solve stops as soon as it proves."""
    pytest.importorskip("ray")
    instance = shared_benchmarks / "placement" / "example-1.json"
    done = subprocess.run(
        [_bin(installed, "milp-partition"), "gap", str(instance), "--executor", "ray", "--heuristics", "heft",
         "--time-limit", "600", "--no-charts", "--quiet", "--output-dir", str(tmp_path)],
        cwd=ROOT, env=_clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "0 failed" in done.stdout, done.stdout
    with (tmp_path / "gap.csv").open(newline="") as f:
        rows = {r["method"]: r for r in csv.DictReader(f)}
    assert rows["exact"]["status"] == "optimal" and float(rows["exact"]["value"]) == 30.0  # example-1's optimum
    assert rows["heft"]["status"] == "feasible" and float(rows["heft"]["value"]) >= 30.0


def _gap(shared: Path, out: Path, *extra: str) -> int:
    instance = shared / "placement" / "example-1.json"
    return main(["gap", str(instance), "--heuristics", "heft,m-topo", "--no-exact", "--no-charts", "--quiet",
                 "--output-dir", str(out), *extra])  # fmt: skip


def test_a_sweep_in_which_every_run_fails_exits_non_zero(shared_benchmarks, tmp_path, monkeypatch, capsys) -> None:
    """Every run (two heuristics and the cheap bounds) reads a file that is gone: a table of errors is written, and the exit code says so."""
    gone = str(tmp_path / "gone.json")
    real = executors.run_jobs

    def failing(jobs, settings, progress, runner=execute):
        return real(jobs, settings, progress, lambda job: runner(dataclasses.replace(job, path=gone)))

    monkeypatch.setattr("milp_partition.cli.gap.run_jobs", failing)
    assert _gap(shared_benchmarks, tmp_path / "all") == EXIT_ERROR
    captured = capsys.readouterr()
    assert "3 failed" in captured.out and "every run of the sweep failed" in captured.err and "gone.json" in captured.err

    def one_failing(jobs, settings, progress, runner=execute):
        return real(
            jobs, settings, progress, lambda job: runner(dataclasses.replace(job, path=gone) if job.method == "heft" else job)
        )

    monkeypatch.setattr("milp_partition.cli.gap.run_jobs", one_failing)
    assert _gap(shared_benchmarks, tmp_path / "one") == 0  # one error among answers: the table is the answer
    assert "1 failed" in capsys.readouterr().out
