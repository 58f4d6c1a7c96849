"""Benchmark of the heterogeneous-cluster problem (issue 40) on Sailor's shared settings (shared/benchmarks/hetero/).

Writes ``results/hetero.md``, ``results/hetero.csv`` and the chart ``results/hetero.png``: per setting of
``reference/settings.json`` our verified throughput (1 / iteration time under Sailor's simulator formula), the
proven bound (as a throughput ceiling), the status and gap and the seconds of the solve (in-process
``solve_hetero``: the chain, after reading the folder), beside every anchor's throughput and search seconds from
``reference/summary.json`` (Sailor's own simulator scored those, on the machine recorded there), and the same for
``--objective sound`` (how far the two objectives differ on our plans).  Our plans are re-priced by
``tools/formula.py`` (the benchmark's formula as code) as a check.

Where Sailor's tools are set up (``tools/setup.sh`` built a work dir: ``--sailor-work DIR``, else ``$SAILOR_WORK``,
else ``${TMPDIR:-/tmp}/sailor-anchor``, the tools' own default), each of our plans is also scored by Sailor's own
simulator (``tools/score_plan.py``; column "Sailor's simulator it/s", which must equal ours to relative 1e-9), and
Sailor's planner is re-run on the setting right after our solve (``tools/run_planner.py SAILOR``: its throughput and
``search_time_s`` on this machine, under the same load; ``--no-planner`` skips it).  Without a work dir the table says
so and those columns read "-".

With ``--held-back`` it benchmarks instead the held-back settings of ``benchmarks/hetero_heldback/`` (written by
``benchmarks/hetero_heldback_settings.py`` by a fixed rule) into ``results/hetero_heldback.md`` and ``.csv`` (plans in
``results/hetero_heldback_plans/``): per setting one solve through the CLI in its own process (``milp-partition solve
--setting-file``: whole-process seconds, and the chain's ``solve_seconds`` as our search seconds), the plan re-checked
by the independent verifier and ``tools/formula.py``, re-scored by Sailor's simulator, Sailor's planner re-run right
after it, the 1-minute load average beside each time, and issue 40's bars (proven optimal or within 1 %; at least
Sailor's throughput; search seconds at most max(1 s, Sailor's search) and at most 60 s).

Run from the repository root::

    python benchmarks/hetero_bench.py [--time-limit 60] [--only NAME ...] [--sailor-work DIR] [--no-planner] [--held-back]
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from milp_partition.hetero.problem import plan_from_sailor
from milp_partition.hetero.solve import HeteroSolveSettings, solve_hetero
from milp_partition.io.sailor import read_sailor, setting_names

ROOT = Path(__file__).resolve().parents[1]
HETERO = ROOT.parent / "shared" / "benchmarks" / "hetero"
ANCHORS = ("SAILOR", "Metis", "FlashFlex", "AMP", "Galvatron", "Piper")
SCRIPT = "benchmarks/hetero_bench.py"
#: Relative agreement required between our objective and Sailor's simulator on our plans.
SIM_REL = 1e-9
#: 1-minute load average when the run started (written beside the one at the end: the timings are this machine's).
LOAD_AT_START = os.getloadavg()[0]


def default_sailor_work() -> Path:
    """The tools' default work dir (``tools/sailor_env.py``): ``$SAILOR_WORK``, else ``${TMPDIR:-/tmp}/sailor-anchor``."""
    return Path(os.environ.get("SAILOR_WORK") or Path(os.environ.get("TMPDIR", "/tmp")) / "sailor-anchor")


def sailor_python(work: Path) -> Path | None:
    """The Python of a work dir built by ``tools/setup.sh`` (None when it is not built)."""
    py = work / "venv" / "bin" / "python"
    return py if py.is_file() and (work / "sailor").is_dir() else None


def _tool(py: Path, work: Path, args: list[str], timeout_s: float) -> dict[str, object]:
    """Run one of the benchmark's tools under Sailor's venv; the last JSON object it prints (stdout)."""
    env = {**os.environ, "SAILOR_WORK": str(work)}
    proc = subprocess.run(
        [str(py), *args], capture_output=True, text=True, env=env, cwd=str(HETERO), timeout=timeout_s, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def sailor_score(py: Path, work: Path, plan_path: Path, setting: str) -> dict[str, object]:
    """Our plan scored by Sailor's own simulator (``tools/score_plan.py --brief``): throughput, valid, fits."""
    return _tool(py, work, ["tools/score_plan.py", str(Path(plan_path).resolve()), "--setting", setting, "--brief"], 300)


def sailor_planner(py: Path, work: Path, setting: str) -> dict[str, object]:
    """Sailor's planner re-run here (``tools/run_planner.py SAILOR``): its throughput and search seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sailor.json"
        _tool(py, work, ["tools/run_planner.py", "SAILOR", "--setting", setting, "-o", str(out)], 900)
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def whole_process_seconds(setting: str, limit_s: float) -> float:
    """Wall seconds of ``milp-partition solve`` in a fresh process (start-up, imports, reading, solve, writing)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "milp_partition", "solve", str(HETERO), "--setting", setting]
        cmd += ["--time-limit", f"{limit_s:g}", "-o", str(Path(tmp) / "plan.json")]
        t0 = time.monotonic()
        subprocess.run(cmd, capture_output=True, check=True, cwd=str(ROOT))
        return time.monotonic() - t0


def _formula():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("sailor_formula", HETERO / "tools" / "formula.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--sailor-work", type=Path, help="the work dir tools/setup.sh built (default: the tools' default)")
    ap.add_argument("--no-planner", action="store_true", help="do not re-run Sailor's planner (only score our plans)")
    ap.add_argument("--held-back", action="store_true", help="the held-back settings -> results/hetero_heldback.md")
    a = ap.parse_args()
    work = a.sailor_work or default_sailor_work()
    py = sailor_python(work)
    if py is None:
        print(f"note: Sailor's tools are not set up at {work} (run tools/setup.sh): no simulator column", flush=True)
    else:
        print(f"Sailor's tools at {work}: scoring our plans with its simulator", flush=True)
    if a.held_back:
        from hetero_heldback import run_held_back

        return run_held_back(a.time_limit, a.only, work, py, planner=not a.no_planner)
    names = [n for n in setting_names(HETERO) if not a.only or n in a.only]
    summary = json.loads((HETERO / "reference" / "summary.json").read_text())["rows"]
    anchors = {(r["setting"], r["planner"]): r for r in summary}
    formula = _formula()
    rows = []
    for name in names:
        row: dict[str, object] = {"setting": name}
        for objective in ("sailor", "sound"):
            problem = read_sailor(HETERO, setting=name, objective=objective)  # type: ignore[arg-type]
            t0 = time.monotonic()
            res = solve_hetero(problem, HeteroSolveSettings(time_limit_s=a.time_limit, progress_interval_s=None))
            secs = time.monotonic() - t0
            tag = "" if objective == "sailor" else "sound_"
            row[tag + "status"] = str(res.status)
            row[tag + "throughput_it_s"] = res.throughput_it_s
            row[tag + "iteration_s"] = res.objective
            row[tag + "bound_it_s"] = (1.0 / res.bound) if res.bound else None
            row[tag + "gap"] = res.gap
            row[tag + "search_s"] = secs
            if objective == "sailor":
                row["model"] = problem.model.name
                row["global_batch"] = problem.global_batch
                row["gpus"] = ", ".join(f"{c.count} {c.kind}" for c in problem.cluster.columns)
                plan = res.sailor_plan
                data = formula.Data(problem.model.name, problem.global_batch, str(HETERO))
                row["formula_iteration_s"] = formula.evaluate(plan, data)["iteration_time"]
                p = plan_from_sailor(plan)
                row["plan"] = f"mbs {p.mbs}, {len(p.stages)} x {p.dp}, stages {[b - a for a, b in p.stages]}"
                sailor_plan_path = ROOT / "results" / "hetero_plans" / f"{name}.json"
                sailor_plan_path.parent.mkdir(parents=True, exist_ok=True)
                sailor_plan_path.write_text(json.dumps(plan) + "\n")
                row["whole_process_s"] = whole_process_seconds(name, a.time_limit)
                row["sim_it_s"] = row["sim_valid"] = None
                if py is not None:
                    sc = sailor_score(py, work, sailor_plan_path, name)
                    row["sim_it_s"], row["sim_valid"] = sc.get("throughput_it_s"), sc.get("valid")
                    ours = 1.0 / float(row["formula_iteration_s"])  # type: ignore[arg-type]
                    sim = float(sc.get("throughput_it_s") or 0.0)  # type: ignore[arg-type]
                    if not sc.get("valid") or abs(sim - ours) > SIM_REL * ours:
                        print(f"MISMATCH {name}: Sailor's simulator {sc}, ours {ours!r}", file=sys.stderr, flush=True)
        row["sailor_here"] = None
        if py is not None and not a.no_planner:
            r = sailor_planner(py, work, name)
            row["sailor_here"] = (r.get("throughput_it_s"), r.get("search_time_s"), r.get("init_time_s"))
        for planner in ANCHORS:
            r = anchors.get((name, planner))
            ok = r is not None and r.get("throughput_it_s") is not None
            row[planner] = (r["throughput_it_s"], r.get("search_time_s") or 0.0, r.get("in_benchmark_space")) if ok else None  # type: ignore[index]
        rows.append(row)
        print(
            f"{name}: {row['status']} {row['throughput_it_s']:.6f} it/s, bound {row['bound_it_s']}, search {row['search_s']:.1f} s, whole process {row['whole_process_s']:.1f} s; "
            f"sound {row['sound_throughput_it_s']:.6f}",
            flush=True,
        )
    write(rows, a.time_limit, None if py is None else work, py is not None and not a.no_planner)
    return 0


def _f(x: object, nd: int = 4) -> str:
    return "-" if x is None else f"{float(x):.{nd}f}"  # type: ignore[arg-type]


def _sim(r: dict[str, object]) -> str:
    """Sailor's simulator on our plan: its throughput (``invalid`` when score_plan.py marks the plan not valid)."""
    if r.get("sim_it_s") is None:
        return "-"
    return f"{float(r['sim_it_s']):.5f}" + ("" if r.get("sim_valid") else " (invalid)")  # type: ignore[arg-type]


def _here(r: dict[str, object]) -> str:
    """Sailor's planner re-run here: throughput (search seconds)."""
    h = r.get("sailor_here")
    if not h:
        return "-"
    thr, secs, _init = h  # type: ignore[misc]
    return f"{_f(thr)} ({_f(secs, 2)})"


def write(rows: list[dict[str, object]], limit: float, work: Path | None, planner: bool) -> None:
    out = ROOT / "results"
    head = (
        f"<!-- written by {SCRIPT}; do not edit by hand -->\n\n# Heterogeneous clusters (issue 40): Sailor's problem\n\n"
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with other work (load average "
        f"{LOAD_AT_START:.1f} at the start, {os.getloadavg()[0]:.1f} at the end), Python {sys.version.split()[0]}; time limit {limit:g} s per solve.\n\n"
        "Throughput in it/s under Sailor's simulator formula (our objective, re-priced by `tools/formula.py`: column "
        "'formula'); bound: the proven ceiling 1/bound; 'search s': our solve in-process (`solve_hetero`: heuristics, "
        "branch and bound, verification; the counterpart of Sailor's `search_time_s`, its timer around `get_sorted_plans`, "
        "which leaves out start-up and the planner's constructor); 'whole s': `milp-partition solve` as a fresh process "
        "(start-up, imports, reading the folder, solve, writing the plan). "
        "Anchors: `reference/summary.json` (scored by Sailor's own simulator; `*` = plan outside the space; search seconds "
        "in brackets, measured on another loaded machine).\n\n"
    )
    if work is None:
        head += (
            "Sailor's own simulator and planner were **not run** (no work dir of `tools/setup.sh` found: give "
            "`--sailor-work DIR`): columns 'Sailor's simulator it/s' and 'SAILOR here' read '-'.\n\n"
        )
    else:
        head += (
            "'Sailor's simulator it/s': our plan scored by Sailor's own, unmodified simulator (`tools/score_plan.py`, "
            f"a valid plan in the space; it equals ours to relative {SIM_REL:g} on every row, else the script reports "
            "a mismatch). "
            + (
                "'SAILOR here': Sailor's planner re-run on this machine right after our solve (`tools/run_planner.py "
                "SAILOR`; its simulator's throughput, (its search seconds), its constructor's seconds left out as "
                "Sailor's timer leaves them out).\n\n"
                if planner
                else "Sailor's planner was not re-run (`--no-planner`).\n\n"
            )
        )
    lines = [
        head,
        "| setting | GPUs | ours it/s | proven ceiling it/s | status (gap) | search s | whole s | formula it/s | Sailor's simulator it/s "
        "| SAILOR here (s) | " + " | ".join(ANCHORS) + " |",
        "|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(ANCHORS),
    ]
    for r in rows:
        anchors = []
        for planner in ANCHORS:
            a = r[planner]
            anchors.append("-" if a is None else f"{a[0]:.4f}{'' if a[2] in (True, None) else '*'} ({a[1]:.2f})")  # type: ignore[index]
        gap = r["gap"]
        lines.append(
            f"| {r['setting']} | {r['gpus']} | {_f(r['throughput_it_s'], 5)} | {_f(r['bound_it_s'], 5)} | "
            f"{r['status']} ({'-' if gap is None else f'{100 * float(gap):.2f}%'}) | {_f(r['search_s'], 2)} | "
            f"{_f(r['whole_process_s'], 1)} | "  # type: ignore[arg-type]
            f"{_f(1 / float(r['formula_iteration_s']), 5)} | {_sim(r)} | {_here(r)} | " + " | ".join(anchors) + " |"
        )  # type: ignore[arg-type]
    lines += [
        "",
        "Our plans: " + "; ".join(f"{r['setting']}: {r['plan']}" for r in rows) + " (Sailor's format in "
        "`results/hetero_plans/`).",
        "",
        "## Sailor's objective against the sound one (`--objective sound`)",
        "",
        "| setting | sailor it/s | sound it/s | difference | sound status (gap) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r["throughput_it_s"], r["sound_throughput_it_s"]
        diff = "-" if a is None or b is None else f"{100 * (float(b) / float(a) - 1):+.2f}%"  # type: ignore[arg-type]
        gap = r["sound_gap"]
        lines.append(
            f"| {r['setting']} | {_f(a, 5)} | {_f(b, 5)} | {diff} | {r['sound_status']} "
            f"({'-' if gap is None else f'{100 * float(gap):.2f}%'}) |"
        )  # type: ignore[arg-type]
    (out / "hetero.md").write_text("\n".join(lines) + "\n")
    with open(out / "hetero.csv", "w", newline="") as fh:
        keys = [k for k in rows[0] if k not in (*ANCHORS, "sailor_here")]
        w = csv.writer(fh)
        w.writerow([*keys, *(f"{p}_it_s" for p in ANCHORS), "sailor_here_it_s", "sailor_here_search_s"])
        for r in rows:
            here = r.get("sailor_here") or ("", "", "")
            w.writerow(
                [r[k] for k in keys] + [("" if r[p] is None else r[p][0]) for p in ANCHORS] + [here[0], here[1]]  # type: ignore[index]
            )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return
    fig, ax = plt.subplots(figsize=(10, 4.5))
    names = [str(r["setting"]) for r in rows]
    width = 0.11
    series = [("ours", [r["throughput_it_s"] or 0.0 for r in rows]), ("proven ceiling", [r["bound_it_s"] or 0.0 for r in rows])]
    for planner in ANCHORS:
        series.append((planner, [(r[planner][0] if r[planner] else 0.0) for r in rows]))  # type: ignore[index]
    for k, (label, vals) in enumerate(series):
        ax.bar([i + (k - len(series) / 2) * width for i in range(len(rows))], vals, width, label=label)  # type: ignore[arg-type]
    ax.set_xticks(range(len(rows)), names, rotation=15)
    ax.set_ylabel("iterations / s (Sailor's simulator formula)")
    ax.set_title(f"Heterogeneous settings: ours, our proven ceiling, anchors ({SCRIPT})")
    ax.legend(ncol=4, fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "hetero.png", dpi=110)


if __name__ == "__main__":
    sys.exit(main())
