"""Speed of the joint planner beside Piper's C++ DP, both timed in the same run (issue 22, item 5).

For every configuration of the shared table (``../shared/benchmarks/README.md``, ``joint/``: BERT-32,
ResNet-50, GNMT; bandwidth 25 GiB/s, memory in GiB, N from the file) and ResNet with k=64 at 4 GiB,
and sixteen more (k, memory) of BERT-32 and ResNet that the table does not list (as held-back cases would be),
this runs, one after the other and never in parallel, Piper first:

- Piper's DP: ``benchmarks/piper_driver.cpp`` compiled against ``algo.cpp`` and ``nlohmann/json.hpp``
  copied out of a Piper checkout (``--piper-repo``: a normal checkout or a bare git directory; default
  the mirror at ``/work/.mirror/msr-fiddle+piper/repo`` when it exists) into ``scratch/piper_build/``
  with ``g++ -O3 -std=c++17`` (compiled once, rebuilt only when a source changes).  It reports the value
  of its plan (``getTPSForResult``) and the seconds of ``runDP()``; the process's wall time is kept too.
  Without a checkout the Piper columns say "not run" and the rest runs.
- ours: the whole process ``python -m milp_partition solve --problem joint FILE --devices K --memory XGiB
  --bandwidth 25GiB/s --threads 1 --quiet --output scratch/joint_speed/...json``, as a user runs it
  (interpreter start, imports, reading, solving, verifying, writing); its status, value and bound are
  read from the result JSON.

Writes ``results/joint_speed.md``, ``results/joint_speed.csv`` and the chart ``results/joint_speed.png``.
Run from the repository root in the venv (GNMT takes Piper's DP about 7-10 minutes per case)::

    python benchmarks/joint_speed.py [--only resnet.json] [--repeat 3] [--piper-timeout-s 900]
    python benchmarks/joint_speed.py --plot-only   # re-render the report and the chart from the CSV
    python benchmarks/joint_speed.py --only bert32a100.json --out scratch/joint_speed_short   # a short check

The target per case (on Piper's DP seconds P): ours <= max(1 s, P), and ours <= P/5 where P > 10 s.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_charts import grouped_bars, pyplot, read_csv, replot_note, save  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks" / "joint"
DRIVER = REPO / "benchmarks" / "piper_driver.cpp"
BUILD = REPO / "scratch" / "piper_build"
OUT_JSON = REPO / "scratch" / "joint_speed"
RESULTS = REPO / "results"
DEFAULT_PIPER_REPO = Path("/work/.mirror/msr-fiddle+piper/repo")
PIPER_SOURCES = ("algo.cpp", "nlohmann/json.hpp")
GXX_FLAGS = ["-O3", "-std=c++17", "-Wno-return-type"]
GIB = 2**30
BANDWIDTH = 25 * GIB
REL_TOL = 1e-9
#: (file, k, memory GiB, Piper's value in shared/benchmarks/README.md: a float, None = infeasible, "-" = not listed)
CASES: list[tuple[str, int, float, Any]] = [
    ("bert32a100.json", 8, 1, None),
    ("bert32a100.json", 8, 8, 0.16585575),
    ("bert32a100.json", 32, 2, 0.0665495),
    ("bert32a100.json", 64, 8, 0.0202005502945),
    ("bert32a100.json", 128, 1, 0.03887175),
    ("bert32a100.json", 512, 8, 0.00256112784601),
    ("bert32a100.json", 2048, 80, 0.00066371274),
    ("resnet.json", 8, 4, 73.4932860001),
    ("resnet.json", 8, 8, 63.4335366),
    ("resnet.json", 16, 1.5, None),
    ("resnet.json", 16, 4, 35.3334375),
    ("resnet.json", 32, 2, 24.6258985),
    ("resnet.json", 32, 8, 15.7580261),
    ("resnet.json", 64, 1, None),
    ("resnet.json", 128, 4, 4.30571356),
    ("resnet.json", 128, 16, 3.65985872),
    ("gnmt.json", 2, 2.5, 263.354289),
    ("gnmt.json", 4, 1.2, 137.130992),
    ("resnet.json", 64, 4, "-"),  # not in the shared table: the case issue 22 quotes
    # not in the shared table either: other devices and memories of the same models, as cases held back would be
    ("bert32a100.json", 4, 4, "-"),
    ("bert32a100.json", 16, 4, "-"),
    ("bert32a100.json", 16, 16, "-"),
    ("bert32a100.json", 32, 1.5, "-"),
    ("bert32a100.json", 256, 2, "-"),
    ("bert32a100.json", 1024, 16, "-"),
    ("bert32a100.json", 2048, 8, "-"),
    ("resnet.json", 4, 8, "-"),
    ("resnet.json", 8, 2, "-"),
    ("resnet.json", 16, 8, "-"),
    ("resnet.json", 32, 4, "-"),
    ("resnet.json", 48, 6, "-"),
    ("resnet.json", 64, 16, "-"),
    ("resnet.json", 128, 8, "-"),
    ("resnet.json", 256, 2, "-"),
    ("resnet.json", 256, 8, "-"),
]


# --- Piper: sources, build, one run ---------------------------------------------------------------


def piper_sources(repo: Path | None) -> dict[str, bytes] | str:
    """``algo.cpp`` and ``nlohmann/json.hpp`` from a Piper checkout or bare git directory, or why not (one line)."""
    if repo is None:
        return f"no Piper repository (none given with --piper-repo, and {DEFAULT_PIPER_REPO} does not exist)"
    if not repo.exists():
        return f"no Piper repository at {repo}"
    if (repo / "algo.cpp").is_file():
        missing = [name for name in PIPER_SOURCES if not (repo / name).is_file()]
        if missing:
            return f"{repo} has no {', '.join(missing)}"
        return {name: (repo / name).read_bytes() for name in PIPER_SOURCES}
    if shutil.which("git") is None:
        return f"{repo} has no algo.cpp and git is not installed to read it as a bare repository"
    sources = {}
    for name in PIPER_SOURCES:
        proc = subprocess.run(["git", "--git-dir", str(repo), "show", f"HEAD:{name}"], capture_output=True)
        if proc.returncode != 0:
            return f"{repo}: neither a checkout with algo.cpp nor a git directory holding HEAD:{name}"
        sources[name] = proc.stdout
    return sources


def build_piper(repo: Path | None, build: Path = BUILD) -> tuple[Path | None, str]:
    """The driver binary (compiled when missing or a source changed) and a note; ``(None, why)`` when it cannot be built."""
    sources = piper_sources(repo)
    if isinstance(sources, str):
        return None, sources
    if shutil.which("g++") is None:
        return None, "g++ is not installed"
    digest = hashlib.sha256(DRIVER.read_bytes() + " ".join(GXX_FLAGS).encode())
    for name in PIPER_SOURCES:
        digest.update(sources[name])
        target = build / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != sources[name]:
            target.write_bytes(sources[name])
    binary, stamp = build / "piper_driver", build / "piper_driver.sha256"
    if binary.is_file() and stamp.is_file() and stamp.read_text() == digest.hexdigest():
        return binary, f"reused {binary.relative_to(REPO)} (sources unchanged)"
    cmd = ["g++", *GXX_FLAGS, "-I", str(build), str(DRIVER), "-o", str(binary)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"compiling the Piper driver failed: {last}"
    stamp.write_text(digest.hexdigest())
    return binary, f"compiled {binary.relative_to(REPO)} with g++ {' '.join(GXX_FLAGS)}"


def parse_driver_line(stdout: str) -> dict[str, Any]:
    """The driver's JSON line (the last stdout line starting with ``{``); ``ValueError`` when there is none."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            data = json.loads(line)
            if "dp_s" not in data or "tps" not in data:
                raise ValueError(f"the driver's line lacks tps or dp_s: {line}")
            return data
    fail = [ln for ln in stdout.splitlines() if ln.startswith("FAIL")]
    raise ValueError(fail[-1] if fail else "the driver printed no JSON line")


def memory_bytes(memory_gib: float) -> int:
    """Bytes of ``memory_gib`` GiB as the CLI reads ``--memory XGiB`` (floored), given to both planners."""
    return math.floor(memory_gib * GIB)


def run_piper(binary: Path, case: tuple, timeout_s: float) -> dict[str, Any]:
    """One driver run: ``piper_value`` (None: infeasible), ``piper_dp_s``, ``piper_process_s``, ``piper_state``."""
    name, k, mem = case[0], case[1], case[2]
    cmd = [str(binary), str(SHARED / name), str(k), str(memory_bytes(mem)), repr(float(BANDWIDTH))]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:  # subprocess.run has killed the driver
        return {"piper_state": "timeout", "piper_value": None, "piper_dp_s": None, "piper_process_s": timeout_s}
    wall = time.perf_counter() - t0
    try:
        data = parse_driver_line(proc.stdout)
    except ValueError as exc:
        return {"piper_state": f"error: {exc}", "piper_value": None, "piper_dp_s": None, "piper_process_s": wall}
    return {"piper_state": "ran", "piper_value": data["tps"], "piper_dp_s": data["dp_s"], "piper_process_s": wall}


# --- ours: one whole process ----------------------------------------------------------------------


def ours_command(case: tuple, output: Path, time_limit_s: float) -> list[str]:
    """The CLI command a user runs for ``case`` (same venv as this script)."""
    name, k, mem = case[0], case[1], case[2]
    return [sys.executable, "-m", "milp_partition", "solve", "--problem", "joint", str(SHARED / name),
            "--devices", str(k), "--memory", f"{mem:g}GiB", "--bandwidth", "25GiB/s", "--threads", "1",
            "--time-limit", f"{time_limit_s:g}", "--output", str(output), "--quiet"]  # fmt: skip


def run_ours(case: tuple, time_limit_s: float) -> dict[str, Any]:
    """One whole CLI process: ``ours_status``, ``ours_value``, ``ours_bound``, ``ours_s`` (wall), ``ours_memory_bytes``."""
    OUT_JSON.mkdir(parents=True, exist_ok=True)
    output = OUT_JSON / f"{Path(case[0]).stem}_k{case[1]}_{case[2]:g}GiB.json"
    output.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run(ours_command(case, output, time_limit_s), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    row: dict[str, Any] = {"ours_s": wall, "ours_status": None, "ours_value": None, "ours_bound": None, "ours_memory_bytes": None}
    if not output.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        row["ours_status"] = f"error (exit {proc.returncode}): {last}"
        return row
    result = json.loads(output.read_text())
    row.update(ours_status=result.get("status"), ours_value=result.get("objective"), ours_bound=result.get("bound"),
               ours_memory_bytes=(result.get("instance") or {}).get("memory_bytes"))  # fmt: skip
    return row


# --- rules: the target, the values' agreement -----------------------------------------------------


def target_s(piper_dp_s: float) -> float:
    """Our allowed seconds for Piper's DP seconds P: P/5 where P > 10 s, else max(1 s, P)."""
    return piper_dp_s / 5 if piper_dp_s > 10 else max(1.0, piper_dp_s)


def target_text(piper_dp_s: float | None) -> str:
    """The target as the table states it."""
    if piper_dp_s is None:
        return "-"
    if piper_dp_s > 10:
        return f"<= Piper/5 = {target_s(piper_dp_s):.3g} s"
    return f"<= max(1 s, Piper) = {target_s(piper_dp_s):.3g} s"


def met(piper_state: str, piper_dp_s: float | None, ours_s: float, ours_status: Any, timeout_s: float) -> str:
    """``yes``/``no``; ``-`` when Piper did not run; a timed-out Piper counts as its timeout (a lower bound on it).

    A run whose status is not ``optimal`` or ``infeasible`` (no proof) never meets the target.
    """
    if piper_state == "timeout":
        piper_dp_s = timeout_s
    elif piper_state != "ran" or piper_dp_s is None:
        return "-"
    if ours_status not in ("optimal", "infeasible"):
        return "no"
    if ours_s <= target_s(piper_dp_s):
        return "yes"
    return "no (Piper timed out: its true time may allow this)" if piper_state == "timeout" else "no"


def agreement(ours_status: Any, ours_value: float | None, piper_state: str, piper_value: float | None) -> str:
    """Whether our value is at most Piper's (relative 1e-9); ours may be strictly better (Piper's knapsack is greedy)."""
    if piper_state != "ran":
        return "-"
    if ours_status == "infeasible":
        return "yes (both infeasible)" if piper_value is None else "NO (ours infeasible, Piper has a plan)"
    if ours_value is None:
        return "-" if piper_value is None else "NO (ours has no plan)"
    if piper_value is None:
        return "yes (ours better: Piper found no plan)"
    if ours_value <= piper_value * (1 + REL_TOL):
        return (
            "yes"
            if ours_value >= piper_value * (1 - REL_TOL)
            else f"yes (ours better by {(piper_value - ours_value) / piper_value:.2e})"
        )
    return f"NO (ours worse by {(ours_value - piper_value) / piper_value:.2e})"


def readme_agrees(piper_state: str, piper_value: float | None, readme: Any) -> bool | None:
    """Whether Piper's value here is the shared README's (relative 1e-7); None when not comparable."""
    if piper_state != "ran" or readme == "-":
        return None
    if readme is None or piper_value is None:
        return readme is None and piper_value is None
    return abs(piper_value - readme) <= 1e-7 * abs(readme)


# --- one case, all cases --------------------------------------------------------------------------


def _min_or_none(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return min(kept) if kept else None


def run_case(case: tuple, binary: Path | None, piper_note: str, args: argparse.Namespace) -> dict[str, Any]:
    """One CSV row: ``args.repeat`` runs of Piper then ours (alternating, never at once), times the minimum."""
    name, k, mem, readme = case
    piper_runs: list[dict[str, Any]] = []
    ours_runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        if binary is not None:
            piper_runs.append(run_piper(binary, case, args.piper_timeout_s))
        ours_runs.append(run_ours(case, args.time_limit))
    if piper_runs:
        piper = dict(piper_runs[0])
        if all(p["piper_state"] == piper["piper_state"] for p in piper_runs):
            piper["piper_dp_s"] = _min_or_none([p["piper_dp_s"] for p in piper_runs])
            piper["piper_process_s"] = _min_or_none([p["piper_process_s"] for p in piper_runs])
    else:
        piper = {"piper_state": "not run", "piper_value": None, "piper_dp_s": None, "piper_process_s": None}
    ours = dict(ours_runs[0])
    ours["ours_s"] = min(o["ours_s"] for o in ours_runs)
    row: dict[str, Any] = {"file": name, "k": k, "memory_gib": mem, "memory_bytes": memory_bytes(mem),
                           "readme_value": "" if readme is None else readme, **piper, **ours}  # fmt: skip
    row["ratio"] = None if not row["piper_dp_s"] or not row["ours_s"] else row["piper_dp_s"] / row["ours_s"]
    if row["piper_state"] == "timeout":
        row["ratio"] = args.piper_timeout_s / row["ours_s"]
    row["met"] = met(row["piper_state"], row["piper_dp_s"], row["ours_s"], row["ours_status"], args.piper_timeout_s)
    row["agree"] = agreement(row["ours_status"], row["ours_value"], row["piper_state"], row["piper_value"])
    row.update(repeat=args.repeat, piper_timeout_s=args.piper_timeout_s, time_limit_s=args.time_limit,
               piper_note=piper_note, machine=f"{platform.platform()}, {os.cpu_count()} CPUs",
               python=platform.python_version(), date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"))  # fmt: skip
    return row


def selected_cases(only: str | None) -> list[tuple]:
    """The cases whose ``file k=K M=XGiB`` label contains ``only`` (all without it)."""
    return [c for c in CASES if not only or only in f"{c[0]} k={c[1]} M={c[2]:g}GiB"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run only the cases whose 'FILE k=K M=XGiB' contains this (e.g. resnet.json, 'k=8 ')")
    ap.add_argument("--piper-repo", type=Path, default=DEFAULT_PIPER_REPO if DEFAULT_PIPER_REPO.exists() else None,
                    help="a Piper checkout or bare git directory (default: %(default)s)")  # fmt: skip
    ap.add_argument("--piper-timeout-s", type=float, default=900.0, help="kill a Piper run past this (default 900)")
    ap.add_argument("--time-limit", type=float, default=900.0, help="our CLI's --time-limit (default 900: time to the proof)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each, the minimum time is kept (default 1)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder of the report, CSV and chart (default results/)")
    ap.add_argument("--plot-only", action="store_true", help="re-render the report and the chart from the CSV; run nothing")
    args = ap.parse_args(argv)
    if args.plot_only:
        write_report(read_csv(args.out / "joint_speed.csv"), args.out, plot_only=True)
        return 0
    cases = selected_cases(args.only)
    if not cases:
        raise SystemExit(f"no case matches --only {args.only!r}")
    binary, piper_note = build_piper(args.piper_repo)
    print(f"Piper: {piper_note}" if binary is not None else f"Piper not run: {piper_note}", flush=True)
    rows = []
    for case in cases:
        row = run_case(case, binary, "" if binary is not None else piper_note, args)
        rows.append(row)
        print(f"{case[0]} k={case[1]} M={case[2]:g}GiB: Piper {row['piper_state']} {row['piper_value']} "
              f"dp {_s(row['piper_dp_s'])} s; ours {row['ours_status']} {row['ours_value']} {row['ours_s']:.2f} s; "
              f"met {row['met']}; agree {row['agree']}", flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "joint_speed.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    write_report(rows, args.out, plot_only=False)
    print(f"wrote {args.out / 'joint_speed.md'}, .csv and .png")
    return 0


# --- report and chart -----------------------------------------------------------------------------


def _s(x: Any, digits: int = 3) -> str:
    return "-" if x is None or x == "" else f"{x:.{digits}g}"


def _value(x: Any) -> str:
    return "infeasible" if x is None or x == "" else f"{x:.10g}"


def piper_cells(r: dict[str, Any]) -> tuple[str, str, str]:
    """Piper's value, DP seconds and process seconds as the table shows them."""
    state = r["piper_state"]
    if state == "not run":
        return "not run", "not run", "not run"
    if state == "timeout":
        return "-", f"> {r['piper_timeout_s']:g} s", f"> {r['piper_timeout_s']:g} s"
    if state != "ran":
        return state, "-", _s(r["piper_process_s"])
    return _value(r["piper_value"]), _s(r["piper_dp_s"]), _s(r["piper_process_s"])


def _ratio(r: dict[str, Any]) -> str:
    if r["ratio"] is None or r["ratio"] == "":
        return "-"
    return (">= " if r["piper_state"] == "timeout" else "") + f"{r['ratio']:.3g}"


def _ours_status(r: dict[str, Any]) -> str:
    status = r["ours_status"]
    return str(status) if status in ("optimal", "infeasible") else f"**{status}** (no proof)"


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown table, one line per case."""
    lines = [
        "| case | Piper value | Piper DP s | Piper process s | ours value | ours status | ours s (process) | Piper DP s / ours s | target | met | values agree |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        value, dp_s, proc_s = piper_cells(r)
        target = target_text(r["piper_timeout_s"] if r["piper_state"] == "timeout" else r["piper_dp_s"])
        ours_value = _value(r["ours_value"]) if r["ours_value"] not in (None, "") or r["ours_status"] == "infeasible" else "-"
        lines.append(f"| {r['file']} k={r['k']} {r['memory_gib']:g} GiB | {value} | {dp_s} | {proc_s} | {ours_value} | "
                     f"{_ours_status(r)} | {r['ours_s']:.3g} | {_ratio(r)} | {target} | {r['met']} | {r['agree']} |")  # fmt: skip
    return lines


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Cases met / total, values that disagree, Piper against the shared README's values."""
    judged = [r for r in rows if r["met"] != "-"]
    n_met = sum(1 for r in judged if r["met"] == "yes")
    lines = [
        f"**Target met in {n_met} / {len(judged)} cases**"
        + (f" ({len(rows) - len(judged)} not judged: Piper not run)" if len(judged) < len(rows) else "")
        + "."
    ]
    bad = [f"{r['file']} k={r['k']} {r['memory_gib']:g} GiB" for r in rows if str(r["agree"]).startswith("NO")]
    lines.append(f"Values: ours is worse than Piper's in {len(bad)} case(s)" + (f": {', '.join(bad)}." if bad else "."))
    unproven = [f"{r['file']} k={r['k']}" for r in rows if r["ours_status"] not in ("optimal", "infeasible")]
    if unproven:
        lines.append(f"Ours ended without a proof (status flagged in bold) in: {', '.join(unproven)}.")
    checks = [readme_agrees(r["piper_state"], _none(r["piper_value"]), _readme(r["readme_value"])) for r in rows]
    compared = [c for c in checks if c is not None]
    if compared:
        lines.append(f"Piper's values here equal `shared/benchmarks/README.md`'s (relative 1e-7, infeasible alike) in "
                     f"{sum(compared)} / {len(compared)} listed cases.")  # fmt: skip
    return lines


def _none(x: Any) -> Any:
    return None if x == "" else x


def _readme(x: Any) -> Any:
    """The README value as CASES holds it ("" in the CSV = infeasible)."""
    return None if x == "" or x is None else x


def chart(rows: list[dict[str, Any]], path: Path) -> str:
    """Seconds per case (Piper's DP, ours whole process; log scale) and the ratio Piper DP s / ours s with the target's."""
    plt = pyplot()
    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(15, 5.2))
    groups = [f"{Path(r['file']).stem} k={r['k']} {r['memory_gib']:g}G" for r in rows]
    timeout = [r["piper_state"] == "timeout" for r in rows]
    piper_s = [r["piper_timeout_s"] if t else _none(r["piper_dp_s"]) for r, t in zip(rows, timeout)]
    proven = [r["ours_status"] in ("optimal", "infeasible") for r in rows]
    grouped_bars(ax_t, groups, [("Piper's C++ DP (runDP)", piper_s, [not t for t in timeout]),
                                ("ours (whole CLI process)", [r["ours_s"] for r in rows], proven)])  # fmt: skip
    ax_t.set_ylabel("seconds (log scale)")
    ax_t.set_title("time per case (hatched: Piper timed out / ours without proof)", fontsize=9)
    ratios = [_none(r["ratio"]) for r in rows]
    needed = [None if p is None else p / target_s(p) for p in piper_s]
    colors = ["tab:green" if r["met"] == "yes" else "tab:red" for r in rows]
    for i, (ratio, need) in enumerate(zip(ratios, needed)):
        if ratio is not None:
            ax_r.bar(i, ratio, color=colors[i], width=0.6)
        if need is not None:
            ax_r.plot([i - 0.35, i + 0.35], [need, need], color="black", lw=2, label="target ratio" if i == 0 else None)
    ax_r.set_yscale("log")
    ax_r.axhline(1.0, color="gray", lw=0.8, ls=":")
    ax_r.set_xticks(range(len(groups)))
    ax_r.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)
    ax_r.set_ylabel("Piper DP s / ours s (log scale)")
    ax_r.set_title("speed-up over Piper (green: target met; black: ratio the target needs)", fontsize=9)
    ax_r.grid(axis="y", alpha=0.3)
    if any(n is not None for n in needed):
        ax_r.legend(fontsize=7)
    fig.suptitle("Joint planner: whole process against Piper's C++ DP, same run (bandwidth 25 GiB/s)")
    fig.tight_layout()
    return save(fig, path)


def write_report(rows: list[dict[str, Any]], out: Path, plot_only: bool) -> None:
    """``joint_speed.md`` and its chart from the rows."""
    first = rows[0] if rows else {}
    png = chart(rows, out / "joint_speed.png")
    note = first.get("piper_note") or ""
    lines = [
        "# Joint planner: speed beside Piper's C++ DP",
        "",
        f"Written by `benchmarks/joint_speed.py` on {first.get('machine', '?')} (Python {first.get('python', '?')}), "
        f"{first.get('date', '?')}. Both were timed in the same run, one after the other (Piper first, then ours, per case; "
        f"never at once), one thread each; times are the minimum of {first.get('repeat', '?')} run(s). Bandwidth 25 GiB/s, "
        "memory in GiB (floored to whole bytes, as the CLI reads `--memory XGiB`, and the same bytes given to Piper), "
        "N from the file.",
        "",
        "Piper: its `algo.cpp` (msr-fiddle/piper) driven by `benchmarks/piper_driver.cpp` (`g++ -O3 -std=c++17`): the "
        "instance is read as `algo.cpp` reads it, k, memory and bandwidth are set before the `Graph` is built, and "
        '"DP s" is `runDP()` alone (steady clock; the ideal enumeration in the `Graph` constructor and the file\'s '
        'reading are outside it, inside "process s", the driver process\'s wall time). Its value is '
        f'`getTPSForResult` of its plan. A run past {_s(first.get("piper_timeout_s"))} s is killed: "> X s", and the '
        "ratio is then a lower bound (`>=`)." + (f" **Piper not run: {note}**" if note else ""),
        "",
        "Ours: the wall time of the whole process `python -m milp_partition solve --problem joint FILE --devices K "
        f"--memory XGiB --bandwidth 25GiB/s --threads 1 --time-limit {_s(first.get('time_limit_s'))} --quiet --output "
        "...` (interpreter, imports, solve, verification, writing the JSON); value = the verifier's time per sample, "
        "status from the result JSON (`optimal` or `infeasible` = proven; anything else is flagged in bold).",
        "",
        "Target: ours s <= max(1 s, Piper DP s), and <= Piper DP s / 5 where Piper DP s > 10 s. Values agree when ours "
        "<= Piper's (1 + 1e-9); ours may be strictly better, since Piper picks configurations by a greedy knapsack.",
        "",
        *replot_note("`joint_speed.csv`", plot_only),
        *summary_lines(rows),
        "",
        f"![{png}]({png})",
        "",
        *table_lines(rows),
    ]
    (out / "joint_speed.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
