"""Heuristic gaps on every problem, the placement gap table, example plots and a Ray check.

Writes, from the repository root (``python benchmarks/gap_bench.py``):

* ``results/gap.{csv,md}`` with ``gap_gap.png`` and ``gap_time.png``: ``milp-partition gap`` over the
  shared pipeline (Tarnawski's layer and operator graphs; 4 and 8
  accelerators of 8 and 16 GiB), strategy (PaSE's tables at their own p; 5.5 and 16 GiB
  per device, memory derived from layer shapes) and placement (Moirai) instances, exact
  solves at ``--time-limit`` (default 30 s), and joint (Piper's three files: BERT-32 at 8 and 32
  devices and ResNet-50 at 8 and 16 with two memories each, GNMT at 2 devices, 25 GiB/s;
  exact solves at ``--joint-time-limit``, default 60 s);
* ``results/placement_gap.{csv,md}`` (+ charts): the Moirai instances at 60 s;
* ``results/plots.md`` with ``plot_*.png``: ``milp-partition plot`` of the GoogLeNet
  optimum (Gantt), of the bundled BERT-24 training plan (stages), of PaSE's
  transformer_p8 strategy and of the joint optimum of Piper's BERT-32 on 32 devices;
* with ``--ray-check``, ``results/gap_ray.md``: the same grid without exact solves on the
  local executor and on a local Ray instance, rows compared (times aside).

Sweeps resume from their CSV only for rows written by the same code (other rows are run
again); ``--only PROBLEM`` re-runs one problem and merges into the CSV (``--only joint
--skip-placement-gap`` adds the joint rows alone).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from milp_partition.cli.dispatch import main as cli  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks"
RESULTS = REPO / "results"
ME = "benchmarks/gap_bench.py"


def rel(path: Path) -> str:
    """``path`` relative to the repository root (where the script works), e.g. ``../shared/benchmarks/...``."""
    return os.path.relpath(path, REPO)


def _files() -> dict[str, list[str]]:
    lg = SHARED / "pipeline" / "LayerGraphs"
    return {
        "pipeline": [rel(p) for p in sorted(lg.glob("*.json"))]
        + [rel(p) for p in sorted((SHARED / "pipeline" / "OperatorGraphs").glob("*.json"))],
        "strategy": [rel(p) for p in sorted((SHARED / "strategy").glob("*.json"))],  # optima.json is skipped
        "placement": [rel(p) for p in sorted((SHARED / "placement").glob("*.json"))],  # reference.json is skipped
        "joint": [rel(SHARED / "joint" / name) for name in JOINT_GRID],
    }


GRID = {
    "pipeline": ["--devices", "4,8", "--memory", "8GiB,16GiB"],
    "strategy": ["--devices", "4,8,32", "--memory", "5.5GiB,16GiB"],
    "placement": [],
}

#: The joint grid per file (Piper's files carry placeholder clusters): devices, memories; bandwidth 25 GiB/s.
#: GNMT only at k = 2: its exact solve (and Piper-style's DP) take the longest.
JOINT_GRID = {
    "bert32a100.json": ["--devices", "8,32", "--memory", "2GiB,8GiB"],
    "resnet.json": ["--devices", "8,16", "--memory", "4GiB,8GiB"],
    "gnmt.json": ["--devices", "2", "--memory", "2.5GiB"],
}
JOINT_BANDWIDTH = "25GiB/s"


NOTE = (
    f"Regenerate with `python {ME}` (from the repository root; it runs the gap commands). Machine: {platform.machine()}, "
    f"Python {platform.python_version()}, 2 cores shared with other work while it ran: times are noisy."
)


def run(cmd: list[str]) -> None:
    print("+ milp-partition " + " ".join(cmd), file=sys.stderr, flush=True)
    code = cli(cmd)
    if code != 0:
        raise SystemExit(f"{ME}: milp-partition {' '.join(cmd)} exited {code}")


def sweep(problems: list[str], args: argparse.Namespace) -> None:
    files = _files()
    for problem in problems:
        if problem == "joint":
            for path in files["joint"]:
                run(
                    ["gap", path, "--problem", "joint", *JOINT_GRID[Path(path).name], "--bandwidth", JOINT_BANDWIDTH,
                     "--time-limit", f"{args.joint_time_limit:g}", "--threads", "2", "--jobs", str(args.jobs),
                     "--output-dir", str(RESULTS), "--name", "gap", "--note", NOTE]
                )  # fmt: skip
            continue
        run(
            ["gap", *files[problem], "--problem", problem, *GRID[problem], "--time-limit", f"{args.time_limit:g}",
             "--threads", "2", "--jobs", str(args.jobs), "--output-dir", str(RESULTS), "--name", "gap", "--note", NOTE]
        )  # fmt: skip
    if "placement" in problems and not args.skip_placement_gap:
        run(
            ["gap", *files["placement"], "--problem", "placement", "--time-limit", "60", "--threads", "2",
             "--output-dir", str(RESULTS), "--name", "placement_gap", "--note", NOTE]
        )  # fmt: skip


def plots() -> None:
    """Solve three examples and draw them with ``milp-partition plot``; write results/plots.md."""
    tmp = Path(tempfile.mkdtemp())
    googlenet = SHARED / "placement" / "GoogLeNet.json"
    cases = [
        ("placement", googlenet, ["--time-limit", "120"], ["--instance", str(googlenet)], "plot_googlenet_gantt.png",
         "GoogLeNet (Moirai): the exact solve's schedule, a lane per device and per device pair (transfers, hatched)"),
        ("pipeline", REPO / "examples" / "bert24_training.json", ["--time-limit", "60"], [], "plot_bert24_stages.png",
         "BERT-24 training (bundled example), 6 accelerators + 1 CPU core: stage loads and memory against the limit"),
        ("strategy", SHARED / "strategy" / "transformer_p8.json", ["--time-limit", "120"], [], "plot_transformer_p8_strategy.png",
         "PaSE transformer, p = 8: the configuration of each layer (split factors per dimension)"),
        ("joint", SHARED / "joint" / "bert32a100.json",
         ["--devices", "32", "--memory", "2GiB", "--bandwidth", "25GiB/s", "--time-limit", "60"], [], "plot_bert32_joint.png",
         "Piper's BERT-32 on 32 devices of 2 GiB, 25 GiB/s: each stage's time per sample (bottleneck red) and one "
         "device's memory against the limit, stages labelled data-parallel x tensor-parallel degree"),
    ]  # fmt: skip
    lines = [f"<!-- written by {ME} -->", "", "# Plots of solved plans (`milp-partition plot`)", ""]
    lines.append(f"Machine: {platform.machine()}, Python {platform.python_version()}, 2 cores shared with other work.")
    lines.append("")
    for problem, instance, solve_args, plot_args, png, caption in cases:
        result = tmp / f"{png}.json"
        subprocess.run(
            [sys.executable, "-m", "milp_partition", "solve", str(instance), *solve_args, "-q", "-o", str(result)],
            check=False,
        )
        run(["plot", str(result), *plot_args, "--output", str(RESULTS / png)])
        summary = subprocess.run(
            [sys.executable, "-c", f"import json; d = json.load(open({str(result)!r})); "
             "print(d['status'], d['objective'], d['bound'], round(d['solve_seconds'], 1))"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        cmd = f"milp-partition solve {rel(instance)} {' '.join(solve_args)} -o r.json; milp-partition plot r.json "
        cmd += "".join(f"{a if a != str(googlenet) else rel(googlenet)} " for a in plot_args) + f"-o {png}"
        lines += [
            f"## {problem}: {instance.name}",
            "",
            f"{caption}. Status {summary[0]}, objective {summary[1]}, bound {summary[2]}, {summary[3]} s. `{cmd}`",
            "",
            f"![{png}]({png})",
            "",
        ]
    (RESULTS / "plots.md").write_text("\n".join(lines))


def ray_check(args: argparse.Namespace) -> None:
    """The grid without exact solves, on the local executor and on a local Ray instance; rows compared."""
    files = _files()
    tmp = Path(tempfile.mkdtemp())
    out = {}
    for executor in ("local", "ray"):
        for problem in ("pipeline", "strategy", "placement"):
            run(
                ["gap", *files[problem], "--problem", problem, *GRID[problem], "--no-exact", "--executor", executor,
                 "--output-dir", str(tmp / executor), "--name", "g", "--no-charts"]
            )  # fmt: skip
        for path in files["joint"]:  # the baselines (Piper-style converges well inside its limit on this grid)
            run(
                ["gap", path, "--problem", "joint", *JOINT_GRID[Path(path).name], "--bandwidth", JOINT_BANDWIDTH,
                 "--no-exact", "--executor", executor, "--output-dir", str(tmp / executor), "--name", "g", "--no-charts"]
            )  # fmt: skip
        with (tmp / executor / "g.csv").open(newline="") as f:
            rows = [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]
        out[executor] = sorted(rows, key=lambda r: tuple(r.values()))
    same = out["local"] == out["ray"]
    diff = [r for r in out["ray"] if r not in out["local"]]
    lines = [
        f"<!-- written by {ME} --ray-check -->",
        "",
        "# gap on the local executor and on Ray: same rows",
        "",
        "The grid of `results/gap.md` (pipeline, strategy, placement and joint) without the exact solves (`--no-exact`: "
        "heuristics, and placement's cheap bounds), run once "
        "with `--executor local` and once with `--executor ray` (a local Ray instance started by the command, all cores). "
        "Rows compared on every column but `seconds`.",
        "",
        f"- rows: local {len(out['local'])}, Ray {len(out['ray'])}",
        f"- identical: {'yes' if same else 'no'}",
        f"- errors: local {sum(r['status'] == 'error' for r in out['local'])}, Ray {sum(r['status'] == 'error' for r in out['ray'])}",
        "",
    ]
    if diff:
        lines += ["Rows that differ (Ray side):", ""] + [f"- {r}" for r in diff[:20]]
    (RESULTS / "gap_ray.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30.0, help="exact solve limit per run in results/gap (default 30)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--joint-time-limit", type=float, default=60.0, help="exact solve limit per joint run (default 60)")
    ap.add_argument("--only", action="append", choices=["pipeline", "strategy", "placement", "joint"], help="problem(s) to sweep")
    ap.add_argument("--skip-placement-gap", action="store_true", help="do not (re-)run results/placement_gap")
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--plots", action="store_true", help="write results/plots.md")
    ap.add_argument("--ray-check", action="store_true", help="write results/gap_ray.md")
    args = ap.parse_args()
    os.chdir(REPO)
    if not args.skip_sweep:
        sweep(args.only or ["pipeline", "strategy", "placement", "joint"], args)
    if args.plots:
        plots()
    if args.ray_check:
        ray_check(args)


if __name__ == "__main__":
    main()
