"""The held-back section of ``benchmarks/hetero_bench.py`` (``--held-back``): issue 40's bars on settings held back.

Not a script of its own: ``python benchmarks/hetero_bench.py --held-back [--sailor-work DIR] [--only NAME ...]`` runs
:func:`run_held_back`, which writes ``results/hetero_heldback.md``, ``results/hetero_heldback.csv`` and our plans in
``results/hetero_heldback_plans/``.  The settings are the files of ``benchmarks/hetero_heldback/`` (chosen by the rule
of ``benchmarks/hetero_heldback_settings.py``), run smallest first.  Per setting:

- our solve through the CLI in its own process (``milp-partition solve ../shared/benchmarks/hetero --setting-file
  FILE --time-limit T``): its status, verified objective, proven bound and gap, the chain's ``solve_seconds`` (our
  search: heuristics and the exact search, after reading the folder; Sailor's timer likewise leaves out its
  constructor) and the process's wall seconds (Python start, imports, reading the folder, the solve, writing);
- the plan re-checked here by the independent verifier (``verify_hetero``) and ``tools/formula.py``;
- where Sailor's tools are built: the plan scored by Sailor's own simulator (``tools/score_plan.py``; it must equal
  our objective to relative 1e-9, else ``MISMATCH``), and Sailor's planner re-run right after (``tools/run_planner.py
  SAILOR``: its simulator's throughput, its search seconds, its constructor's seconds); the tools find the setting
  through ``$HETERO_SETTINGS`` (a temporary ``{"settings": [...]}`` file of the held-back settings);
- the 1-minute load average before each timed run (the machine is shared: compare times as ratios);
- the bars: **proof** (optimal, or gap <= 1 %), **>= Sailor** (our throughput under Sailor's simulator at least its
  planner's, to relative 1e-9), **time** (search seconds <= max(1 s, Sailor's search seconds) and <= 60 s), and a **sound bound**
  check (our proven ceiling at least every valid plan's throughput seen: ours and Sailor's; a ceiling below one is a
  false proof).
"""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hetero_bench as hb

from milp_partition.hetero.problem import plan_from_sailor
from milp_partition.io.sailor import read_sailor
from milp_partition.verifiers.hetero import verify_hetero

SETTINGS_DIR = hb.ROOT / "benchmarks" / "hetero_heldback"
RESULTS = hb.ROOT / "results"
COMMAND = "benchmarks/hetero_bench.py --held-back"
#: Issue 40's bars: within 1 % of the proven bound; at most max(1 s, Sailor's search) and never over 60 s.
GAP_BAR = 0.01
TIME_FLOOR_S = 1.0
TIME_CAP_S = 60.0
PLANNER_TIMEOUT_S = 900.0


def held_back_settings(only: list[str] | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """(file, setting) of ``benchmarks/hetero_heldback/*.json``, fewest devices first (then by name)."""
    out = []
    for path in sorted(SETTINGS_DIR.glob("*.json")):
        s = json.loads(path.read_text())
        if not only or s["name"] in only:
            out.append((path, s))
    return sorted(out, key=lambda ps: (sum(ps[1]["gpus"].values()), ps[1]["name"]))


def _load1() -> float:
    return os.getloadavg()[0]


def solve_cli(path: Path, limit_s: float, out: Path) -> tuple[int, float, dict[str, Any] | None, str]:
    """Our solve in its own process: exit code, wall seconds, the result JSON (None when none was written), stderr."""
    cmd = [sys.executable, "-m", "milp_partition", "solve", str(hb.HETERO), "--setting-file", str(path)]
    cmd += ["--time-limit", f"{limit_s:g}", "-q", "-o", str(out)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(hb.ROOT), check=False)
    wall = time.monotonic() - t0
    res = json.loads(out.read_text()) if out.is_file() else None
    return proc.returncode, wall, res, proc.stderr.strip()[-400:]


def bars(row: dict[str, Any]) -> None:
    """Issue 40's bars on one row (None where the inputs are missing)."""
    status, gap = row.get("status"), row.get("gap")
    row["bar_proof"] = status == "optimal" or (gap is not None and gap <= GAP_BAR)
    ours = row.get("sim_it_s") if row.get("sim_it_s") is not None else row.get("throughput_it_s")
    sailor = row.get("sailor_it_s")
    # equal plans may differ in the last bits between the simulator's runs: relative 1e-9, as for the match
    row["bar_vs_sailor"] = None if sailor is None or ours is None else ours >= sailor * (1 - hb.SIM_REL)
    secs = row.get("search_s")
    sailor_s = row.get("sailor_search_s")
    if secs is None:
        row["bar_time"] = None
    else:
        limit = TIME_CAP_S if sailor_s is None else min(TIME_CAP_S, max(TIME_FLOOR_S, sailor_s))
        row["bar_time"] = (secs <= limit) if sailor_s is not None else None
        row["time_limit_bar_s"] = limit
    # a proven ceiling below a valid plan's throughput would be a false proof
    ceiling = row.get("bound_it_s")
    seen = [
        x
        for x in (row.get("throughput_it_s"), row.get("sim_it_s"), row.get("sailor_it_s") if row.get("sailor_valid") else None)
        if x
    ]
    row["bound_sound"] = None if ceiling is None else all(ceiling >= x * (1 - 1e-9) for x in seen)


def run_one(path: Path, setting: dict[str, Any], limit_s: float, work: Path, py: Path | None, planner: bool) -> dict[str, Any]:
    """One held-back setting: solve, re-check, score under Sailor's simulator, re-run Sailor's planner."""
    name = setting["name"]
    row: dict[str, Any] = {
        "setting": name,
        "model": setting["model"],
        "global_batch": setting["global_batch"],
        "gpus": ", ".join(f"{n} {c}" for c, n in setting["gpus"].items()),
        "devices": sum(setting["gpus"].values()),
        "columns": len(setting["gpus"]),
    }
    plans = RESULTS / "hetero_heldback_plans"
    plans.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        row["load1_ours"] = _load1()
        rc, wall, res, err = solve_cli(path, limit_s, Path(tmp) / "r.json")
    row["exit_code"], row["process_s"] = rc, wall
    if res is None:
        row["status"] = f"exit {rc}: {err}"
        print(f"{name}: no result ({row['status']})", file=sys.stderr, flush=True)
        return row
    row["status"] = res["status"]
    row["iteration_s"] = res["objective"]
    row["throughput_it_s"] = res.get("throughput_it_s")
    row["bound_s"] = res.get("bound")
    row["bound_it_s"] = (1.0 / res["bound"]) if res.get("bound") else None
    row["gap"] = res.get("gap")
    row["search_s"] = res.get("solve_seconds")
    row["exact_s"] = next((h["seconds"] for h in res.get("heuristics", []) if h.get("exact")), None)
    notes = res.get("solver_notes") or {}
    row["nodes"], row["outer_triples"] = notes.get("nodes"), notes.get("outer_triples")
    plan = res.get("sailor_plan")
    if not plan:
        return row
    p = plan_from_sailor(plan)
    row["plan"] = f"mbs {p.mbs}, {len(p.stages)} x {p.dp}, stages {[b - a for a, b in p.stages]}"
    plan_path = plans / f"{name}.json"
    plan_path.write_text(json.dumps(plan) + "\n")
    # the independent verifier and the benchmark's formula, here
    problem = read_sailor(hb.HETERO, setting_file=path)
    rep = verify_hetero(problem, plan)
    row["verifier_it_s"] = rep.throughput_it_s if rep.feasible else None
    formula = hb._formula()
    data = formula.Data(problem.model.name, problem.global_batch, str(hb.HETERO))
    row["formula_it_s"] = 1.0 / formula.evaluate(plan, data)["iteration_time"]
    if py is not None:
        sc = hb.sailor_score(py, work, plan_path, name)
        row["sim_it_s"], row["sim_valid"] = sc.get("throughput_it_s"), sc.get("valid")
        ours = float(row["formula_it_s"])
        sim = float(sc.get("throughput_it_s") or 0.0)
        row["sim_match"] = bool(sc.get("valid")) and abs(sim - ours) <= hb.SIM_REL * ours
        if not row["sim_match"]:
            print(f"MISMATCH {name}: Sailor's simulator {sc}, ours {ours!r}", file=sys.stderr, flush=True)
        if planner:
            row["load1_sailor"] = _load1()
            try:
                r = sailor_planner(py, work, name)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                row["sailor_error"] = str(exc)[-300:]
            else:
                row["sailor_it_s"] = r.get("throughput_it_s")
                row["sailor_search_s"] = r.get("search_time_s")
                row["sailor_init_s"] = r.get("init_time_s")
                rescore = r.get("rescore") or {}
                row["sailor_valid"] = rescore.get("valid")
                viol = rescore.get("violations") or []
                row["sailor_violations"] = "; ".join(str(v) for v in viol)[:300] or None
                pl = r.get("plan")
                if pl:
                    (plans / f"{name}.sailor.json").write_text(json.dumps(pl) + "\n")
                    sp = plan_from_sailor(pl)
                    row["sailor_plan"] = f"mbs {sp.mbs}, {len(sp.stages)} x {sp.dp}"
    bars(row)
    return row


def sailor_planner(py: Path, work: Path, setting: str) -> dict[str, Any]:
    """Sailor's planner re-run here (``tools/run_planner.py SAILOR``), with a timeout."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sailor.json"
        hb._tool(py, work, ["tools/run_planner.py", "SAILOR", "--setting", setting, "-o", str(out)], PLANNER_TIMEOUT_S)
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def run_held_back(limit_s: float, only: list[str] | None, work: Path, py: Path | None, *, planner: bool) -> int:
    """Benchmark the held-back settings; write ``results/hetero_heldback.*``."""
    settings = held_back_settings(only)
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "heldback_settings.json"
        listing.write_text(json.dumps({"settings": [s for _p, s in settings]}))
        os.environ["HETERO_SETTINGS"] = str(listing)  # the tools look --setting NAME up there
        rows = []
        for path, s in settings:
            row = run_one(path, s, limit_s, work, py, planner)
            rows.append(row)
            print(
                f"{row['setting']}: {row['status']} {_f(row.get('throughput_it_s'), 5)} it/s, ceiling "
                f"{_f(row.get('bound_it_s'), 5)}, search {_f(row.get('search_s'), 1)} s (process {_f(row.get('process_s'), 1)} s, "
                f"load {row['load1_ours']:.1f}); Sailor {_f(row.get('sailor_it_s'), 5)} it/s in "
                f"{_f(row.get('sailor_search_s'), 2)} s",
                flush=True,
            )
    write(rows, limit_s, None if py is None else work, planner and py is not None)
    return 0


def _f(x: object, nd: int = 4) -> str:
    return "-" if x is None else f"{float(x):.{nd}f}"  # type: ignore[arg-type]


def _yes(x: object) -> str:
    return "-" if x is None else ("yes" if x else "**no**")


def _gap(x: object) -> str:
    return "-" if x is None else f"{100 * float(x):.2f}%"  # type: ignore[arg-type]


COLUMNS = (
    "setting", "model", "global_batch", "gpus", "devices", "columns", "status", "iteration_s", "throughput_it_s",
    "bound_s", "bound_it_s", "gap", "search_s", "exact_s", "process_s", "load1_ours", "nodes", "outer_triples",
    "verifier_it_s", "formula_it_s", "sim_it_s", "sim_valid", "sim_match", "sailor_it_s", "sailor_search_s",
    "sailor_init_s", "sailor_valid", "sailor_violations", "load1_sailor", "sailor_error", "time_limit_bar_s", "bar_proof",
    "bar_vs_sailor", "bar_time", "bound_sound", "plan", "sailor_plan",
)  # fmt: skip


def write(rows: list[dict[str, Any]], limit_s: float, work: Path | None, planner: bool) -> None:
    """``results/hetero_heldback.md`` and ``.csv``."""
    head = [
        f"<!-- written by {COMMAND}; do not edit by hand -->",
        "",
        "# Heterogeneous clusters (issue 40): the held-back settings",
        "",
        f"Settings: `benchmarks/hetero_heldback/` (the rule: `benchmarks/hetero_heldback_settings.py`). Machine: "
        f"{platform.machine()}, {os.cpu_count()} CPUs shared with other work; Python {sys.version.split()[0]}; time limit "
        f"{limit_s:g} s per solve. Load: the 1-minute load average just before each timed run (ours, Sailor's).",
        "",
        "Ours: one `milp-partition solve ../shared/benchmarks/hetero --setting-file FILE` process per setting; "
        "'search s' is the chain's `solve_seconds` (heuristic starts and the exact search, after reading the folder), "
        "'process s' the whole process (Python start, imports, reading the folder, solve, writing). The plan is "
        "re-checked by the independent verifier and `tools/formula.py` (equal on every row unless marked).",
        "",
    ]
    if work is None:
        head += [
            "Sailor's simulator and planner were **not run** (no work dir of `tools/setup.sh`): their columns read '-' "
            "and the bars that need them too.",
            "",
        ]
    else:
        head += [
            "'Sailor's simulator': our plan scored by Sailor's own, unmodified simulator (`tools/score_plan.py`); "
            f"'=' when valid and equal to ours to relative {hb.SIM_REL:g}, else MISMATCH. "
            + (
                "'SAILOR here': Sailor's planner re-run right after our solve (`tools/run_planner.py SAILOR`): its "
                "plan's throughput under its simulator (its search seconds; its constructor's seconds left out, as "
                "Sailor's timer leaves them out, are in the csv); `*`: its plan is not valid in the benchmark's space "
                "(`score_plan.py`'s rules; the bar still compares against it, as issue 40 counts every anchor)."
                if planner
                else "Sailor's planner was not re-run (`--no-planner`)."
            ),
            "",
        ]
    head += [
        "Bars (issue 40): **proof**: optimal, or gap <= 1 %; **>= Sailor**: our throughput under Sailor's simulator at "
        "least its planner's; **time**: search s <= max(1 s, Sailor's search s) and <= 60 s; **bound**: our proven "
        "ceiling at least every valid plan's throughput seen (ours, Sailor's): 'no' there would be a false proof.",
        "",
        "| setting | GPUs | ours it/s | proven ceiling it/s | status (gap) | search s (load) | process s "
        "| Sailor's simulator on ours | SAILOR here it/s (search s, load) | proof | >= Sailor | time | bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines = list(head)
    for r in rows:
        sim = "-"
        if r.get("sim_it_s") is not None:
            sim = f"{float(r['sim_it_s']):.5f} " + ("=" if r.get("sim_match") else "**MISMATCH**")
        here = "-"
        if r.get("sailor_error"):
            here = "failed"
        elif r.get("sailor_it_s") is not None:
            out_of_space = "" if r.get("sailor_valid") in (True, None) else "*"
            here = (
                f"{float(r['sailor_it_s']):.5f}{out_of_space} ({_f(r.get('sailor_search_s'), 2)}, {_f(r.get('load1_sailor'), 1)})"
            )
        lines.append(
            f"| {r['setting']} | {r['gpus']} | {_f(r.get('throughput_it_s'), 5)} | {_f(r.get('bound_it_s'), 5)} | "
            f"{r['status']} ({_gap(r.get('gap'))}) | {_f(r.get('search_s'), 1)} ({_f(r.get('load1_ours'), 1)}) | "
            f"{_f(r.get('process_s'), 1)} | {sim} | {here} | {_yes(r.get('bar_proof'))} | {_yes(r.get('bar_vs_sailor'))} | "
            f"{_yes(r.get('bar_time'))} | {_yes(r.get('bound_sound'))} |"
        )
    lines += [
        "",
        "Our plans: " + "; ".join(f"{r['setting']}: {r.get('plan', '-')}" for r in rows) + " (Sailor's format in "
        "`results/hetero_heldback_plans/`). Sailor's: "
        + "; ".join(f"{r['setting']}: {r.get('sailor_plan', '-')}" for r in rows)
        + ".",
        "",
    ]
    for r in rows:
        if r.get("sailor_violations") or r.get("sailor_valid") is False:
            lines.append(f"Sailor's plan on {r['setting']} is not valid in the space (`*`): {r.get('sailor_violations') or '-'}")
        if r.get("sailor_error"):
            lines.append(f"Sailor's planner on {r['setting']} failed: {r['sailor_error']}")
        if r.get("formula_it_s") and r.get("throughput_it_s"):
            if abs(r["formula_it_s"] - r["throughput_it_s"]) > 1e-9 * r["throughput_it_s"]:
                lines.append(f"{r['setting']}: tools/formula.py {r['formula_it_s']!r} differs from ours {r['throughput_it_s']!r}")
        v, t = r.get("verifier_it_s"), r.get("throughput_it_s")
        if t and (v is None or abs(v - t) > 1e-12 * t):
            lines.append(
                f"{r['setting']}: the verifier here gives {r.get('verifier_it_s')!r}, the result {r['throughput_it_s']!r}"
            )
    (RESULTS / "hetero_heldback.md").write_text("\n".join(lines).rstrip("\n") + "\n")
    with open(RESULTS / "hetero_heldback.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow(["" if r.get(k) is None else r.get(k) for k in COLUMNS])
