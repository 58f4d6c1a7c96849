"""Benchmark of Galvatron's problem (per-layer hybrid parallelism) on its own profiles (shared/benchmarks/galvatron/).

Writes ``results/galvatron.md``, ``results/galvatron.csv`` and the chart ``results/galvatron.png``:

1. The six settings of the benchmark README: our proven optimum (sound 1F1B time T), Galvatron's own estimate of our
   plan, the status and the whole-process seconds of ``milp-partition solve`` run as a subprocess (import, reading
   the profiles, the chain, writing the JSON), beside Galvatron's plan's sound T and its search seconds (README table).
2. A grid of our own (8 and 16 GPUs; 16, 24, 36, 48, 80 GiB; global batch 16 and 64; Llama-2-7B, BERT-large, T5-3B),
   solved in-process (``solve_galvatron``; seconds are the chain's), beside Galvatron's even-split search
   re-implemented (``heuristics/galvatron_even.py``) as its stand-in: its plan's sound T, status and seconds.

Run from the repository root::

    python benchmarks/galvatron_bench.py [--quick] [--six-only] [--time-limit 60] [--galvatron-workdir DIR [--galvatron-search]]

``--quick``: two README settings and four grid points (a smoke test).  ``--six-only``: the README settings, no grid.
``--galvatron-workdir``: a work dir built by the benchmark's ``tools/setup.sh``; our six plans are then re-scored with
Galvatron's own code (``score_plan.py``, run as a subprocess with the work dir's venv: the project never imports
Galvatron): its memory rule, its estimate and the sound T from its stage costs.  ``--galvatron-search`` (with a work
dir): Galvatron's search is also run per setting (``run_search.py``, minutes each) and ``compare.py`` judges the pair.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_charts import pyplot, save  # noqa: E402
from milp_partition.heuristics.galvatron_even import galvatron_even_split  # noqa: E402

from milp_partition.galvatron.solve import GalvatronSolveSettings, solve_galvatron  # noqa: E402
from milp_partition.io.galvatron import read_galvatron  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks" / "galvatron"
#: (model folder, GPUs, GiB, global batch, Galvatron's estimate, its plan's sound T, its search seconds): README table.
README_SETTINGS = [
    ("llama2-7b", 8, 36, 16, 1.086046, 1.086046, 169),
    ("llama2-7b", 8, 48, 16, 0.998328, 0.998328, 257),
    ("llama2-7b", 16, 36, 16, 0.542717, 0.542717, 201),
    ("llama2-7b", 8, 48, 64, 3.968756, 4.094158, 211),
    ("bert-large", 8, 8, 64, 1.141356, 1.141356, 61),
    ("t5-3b", 8, 16, 32, 0.450094, 0.450094, 153),
]
GRID_MODELS = ("llama2-7b", "bert-large", "t5-3b")
GRID_GPUS = (8, 16)
GRID_MEM = (16, 24, 36, 48, 80)
GRID_BATCH = (16, 64)


def _cli_solve(model: str, gpus: int, mem: int, batch: int, limit: float, out: Path) -> dict[str, Any]:
    """``milp-partition solve`` as a subprocess: its whole-process seconds and its result JSON."""
    cmd = [
        sys.executable,
        "-m",
        "milp_partition",
        "solve",
        str(SHARED / "models" / model),
        "--hardware",
        str(SHARED / "hardware"),
        "--devices",
        str(gpus),
        "--memory",
        f"{mem}GiB",
        "--global-batch",
        str(batch),
        "--time-limit",
        str(limit),
        "--output",
        str(out),
        "--quiet",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    secs = time.perf_counter() - t0
    data = json.loads(out.read_text()) if out.is_file() else {}
    return {"seconds": secs, "rc": proc.returncode, "result": data, "stderr": proc.stderr[-400:]}


def _sound_from_score(sc: dict[str, Any]) -> float:
    """The sound 1F1B time of a plan from ``score_plan.py``'s numbers, the formula of the tools' ``compare.py``
    (``sound``): C_i = stage compute + the re-layout cost Galvatron's DP charges, plus the gradient-sync tail."""
    C = [
        c + max(0.0, d - r - e)
        for c, d, r, e in zip(sc["stage_compute_s"], sc["dp_objective_per_stage"], sc["stage_sync_s"], sc["emb_time_sync"])
    ]
    tail = max(0.0, max(r - sum(C[: i + 1]) for i, r in enumerate(sc["stage_sync_s"])))
    return sum(C) + (sc["chunks"] - 1) * max(C) + tail


def _galv_tool(workdir: Path, *argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """One of the benchmark's tools, run as a subprocess with the work dir's own venv (the project never imports
    Galvatron)."""
    return subprocess.run(
        [str(workdir / "venv" / "bin" / "python"), *argv], capture_output=True, text=True, cwd=workdir, timeout=timeout
    )


def _rescore(
    workdir: Path | None, result_path: Path, model: str, gpus: int, mem: int, g_sound: float, search: bool, tmp: Path
) -> dict[str, Any]:
    """Galvatron's own score of our plan (``score_plan.py`` in a ``tools/setup.sh`` work dir): whether it fits
    Galvatron's memory rule, its estimate, its per-GPU memory, and the sound T recomputed from Galvatron's own stage
    costs (``compare.py``'s formula), checked against Galvatron's plan's sound T.  With ``search``, Galvatron's search
    is also run (``run_search.py``) and ``compare.py`` compares the two plans itself.  {} without a work dir."""
    if workdir is None:
        return {}
    res = json.loads(result_path.read_text())
    cfg = res.get("galvatron_config")
    if not cfg:
        return {"rescore_note": f"no galvatron_config (status {res.get('status')})"}
    plan_path = tmp / f"plan_{result_path.name}"
    plan_path.write_text(json.dumps(dict(cfg, model=model, gpus=gpus, mem_gb=mem)))
    proc = _galv_tool(workdir, "score_plan.py", str(plan_path))
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"rescore_note": "score_plan.py failed: " + proc.stderr.strip()[-300:]}
    sc = json.loads(lines[-1])
    sound = _sound_from_score(sc)
    out: dict[str, Any] = {
        "galv_fits": bool(sc.get("feasible")),
        "galv_mem_used_MB": max(sc.get("mem_used_MB") or [0]),
        "galv_usable_MB": sc.get("usable_MB"),
        "galv_mem_cache_MB": sc.get("mem_cache_MB"),
        "galv_est_s": sc.get("est_iter_s"),
        "galv_sound_T_s": sound,
        "galv_no_slower": sound <= g_sound * (1 + 1e-6),
        "rescore_note": sc.get("note", ""),
    }
    if search:
        run_json = tmp / f"galv_{result_path.name}"
        t0 = time.perf_counter()
        s = _galv_tool(
            workdir,
            "run_search.py",
            "--model",
            model,
            "--gpus",
            str(gpus),
            "--mem",
            str(mem),
            "--gbsz",
            str(res["galvatron_config"]["global_bsz"]),
            "--json",
            str(run_json),
        )
        out["galv_search_s"] = round(time.perf_counter() - t0, 1)
        if s.returncode == 0 and run_json.is_file():
            c = _galv_tool(workdir, "compare.py", str(result_path), str(run_json))
            out["compare"] = (c.stdout.strip().splitlines() or [c.stderr.strip()[-300:]])[-1]
        else:
            out["compare"] = "run_search.py failed: " + s.stderr.strip()[-300:]
    return out


def readme_rows(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    settings = README_SETTINGS[:2] if args.quick else README_SETTINGS
    for model, gpus, mem, batch, g_est, g_sound, g_secs in settings:
        out = tmp / f"{model}_{gpus}_{mem}_{batch}.json"
        got = _cli_solve(model, gpus, mem, batch, args.time_limit, out)
        res = got["result"]
        rows.append(
            {
                "part": "readme",
                "model": model,
                "gpus": gpus,
                "mem_gib": mem,
                "global_batch": batch,
                "status": res.get("status", f"rc {got['rc']}"),
                "ours_T_s": res.get("objective"),
                "ours_galvatron_estimate_s": res.get("galvatron_estimate_s"),
                "bound_s": res.get("bound"),
                "seconds": round(got["seconds"], 2),
                "target_s": max(10.0, g_secs / 10),
                "pp": (res.get("galvatron_config") or {}).get("pp_deg"),
                "chunks": (res.get("galvatron_config") or {}).get("chunks"),
                "theirs_T_s": g_sound,
                "theirs_estimate_s": g_est,
                "theirs_seconds": g_secs,
                "theirs_status": "README",
                "load": round(os.getloadavg()[0], 2),
            }
        )
        if out.is_file():
            rows[-1].update(_rescore(args.galvatron_workdir, out, model, gpus, mem, g_sound, args.galvatron_search, tmp))
        print(
            f"readme {model} {gpus}x{mem}GiB b{batch}: {rows[-1]['status']} T={rows[-1]['ours_T_s']} in {rows[-1]['seconds']} s",
            flush=True,
        )
    return rows


def grid_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    points = [(m, g, mem, b) for m in GRID_MODELS for g in GRID_GPUS for mem in GRID_MEM for b in GRID_BATCH]
    if args.quick:
        points = [("bert-large", 8, 16, 16), ("bert-large", 16, 24, 64), ("llama2-7b", 8, 24, 16), ("t5-3b", 16, 80, 16)]
    for model, gpus, mem, batch in points:
        p = read_galvatron(SHARED / "models" / model, SHARED / "hardware", devices=gpus, memory_mb=mem * 1024, global_batch=batch)
        t0 = time.perf_counter()
        res = solve_galvatron(p, GalvatronSolveSettings(time_limit_s=args.time_limit))
        ours_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        plan, _est, sound = galvatron_even_split(p)
        even_s = time.perf_counter() - t0
        cfg = res.galvatron_config or {}
        rows.append(
            {
                "part": "grid",
                "model": model,
                "gpus": gpus,
                "mem_gib": mem,
                "global_batch": batch,
                "status": res.status,
                "ours_T_s": res.objective,
                "ours_galvatron_estimate_s": res.galvatron_estimate_s,
                "bound_s": res.bound,
                "seconds": round(ours_s, 2),
                "target_s": "",
                "pp": cfg.get("pp_deg"),
                "chunks": cfg.get("chunks"),
                "theirs_T_s": sound if plan is not None else None,
                "theirs_estimate_s": _est if plan is not None else None,
                "theirs_seconds": round(even_s, 2),
                "theirs_status": "plan" if plan is not None else "no plan",
                "load": round(os.getloadavg()[0], 2),
            }
        )
        print(
            f"grid {model} {gpus}x{mem}GiB b{batch}: {res.status} T={res.objective} ({ours_s:.1f} s); even-split {sound} ({even_s:.1f} s)",
            flush=True,
        )
    return rows


def _f(x: Any, d: int = 6) -> str:
    return (
        "-"
        if x is None or x == "" or (isinstance(x, float) and math.isinf(x))
        else (f"{x:.{d}f}" if isinstance(x, float) else str(x))
    )


def _excess(theirs: Any, ours: Any) -> str:
    if not isinstance(theirs, (int, float)) or not isinstance(ours, (int, float)) or not ours:
        return "-"
    pct = 100 * (theirs / ours - 1)
    return f"{0.0 if abs(pct) < 0.005 else pct:+.2f} %"


def chart(rows: list[dict[str, Any]], path: Path) -> str:
    """Left: whole-process seconds against Galvatron's search seconds (README settings).  Right: the even-split
    stand-in's excess over the optimum on the grid."""
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, 5))
    rd = [r for r in rows if r["part"] == "readme"]
    xs = range(len(rd))
    a1.bar([x - 0.2 for x in xs], [r["seconds"] for r in rd], 0.4, label="ours (whole process)")
    a1.bar([x + 0.2 for x in xs], [r["theirs_seconds"] for r in rd], 0.4, label="Galvatron's search")
    a1.set_yscale("log")
    a1.set_xticks(list(xs))
    a1.set_xticklabels([f"{r['model']}\n{r['gpus']}x{r['mem_gib']}GiB b{r['global_batch']}" for r in rd], fontsize=7)
    a1.set_ylabel("seconds (log)")
    a1.set_title("README settings: time to a proven optimum vs Galvatron's search")
    a1.legend(fontsize=8)
    gd = [r for r in rows if r["part"] == "grid" and isinstance(r["ours_T_s"], float) and isinstance(r["theirs_T_s"], float)]
    a2.bar(range(len(gd)), [100 * (r["theirs_T_s"] / r["ours_T_s"] - 1) for r in gd], color="tab:orange")
    a2.set_xticks(range(len(gd)))
    a2.set_xticklabels([f"{r['model'][:5]} {r['gpus']}x{r['mem_gib']} b{r['global_batch']}" for r in gd], rotation=90, fontsize=6)
    a2.set_ylabel("even-split stand-in's T over the optimum (%)")
    a2.set_title("grid: Galvatron's even-split search (re-implemented) vs the proven optimum")
    fig.tight_layout()
    return save(fig, path)


def _flags(args: argparse.Namespace) -> str:
    return "".join(f" --{n.replace('_', '-')}" for n in ("quick", "six_only", "galvatron_search") if getattr(args, n)) + (
        " --galvatron-workdir DIR" if args.galvatron_workdir else ""
    )


def write(rows: list[dict[str, Any]], out: Path, args: argparse.Namespace, total_s: float) -> None:
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with out.with_suffix(".csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)
    png = chart(rows, out.with_suffix(".png"))
    lines = [
        "# Galvatron's problem: proven optima vs Galvatron's search",
        "",
        f"Written by `benchmarks/galvatron_bench.py{_flags(args)}` (time limit {args.time_limit} s per solve) "
        f"on {platform.machine()} with {os.cpu_count()} CPUs, shared with other work (1-minute load average per row, "
        f"`load`); the whole run took {total_s:.0f} s.  T is the sound 1F1B time (README of the benchmark), scored by the "
        "independent verifier; Galvatron's estimate is its own pipeline formula of the same plan.",
        "",
        "## The six README settings (ours: `milp-partition solve` as a subprocess, whole-process seconds)",
        "",
        "| model | GPUs | GiB | batch | status | our T (s) | Galvatron's estimate of our plan (s) | pp / chunks | our seconds | target (s) | Galvatron's plan's T (s) | its search (s) | Galvatron's T over ours | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["part"] == "readme":
            lines.append(
                f"| {r['model']} | {r['gpus']} | {r['mem_gib']} | {r['global_batch']} | {r['status']} | {_f(r['ours_T_s'])} | "
                f"{_f(r['ours_galvatron_estimate_s'])} | {r['pp']} / {r['chunks']} | {r['seconds']:.1f} | {r['target_s']:.1f} | "
                f"{_f(r['theirs_T_s'])} | {r['theirs_seconds']} | {_excess(r['theirs_T_s'], r['ours_T_s'])} | {r['load']} |"
            )
    rescored = [r for r in rows if r["part"] == "readme" and "galv_fits" in r]
    lines += ["", "## Our six plans re-scored with Galvatron's own code", ""]
    if rescored:
        lines += [
            "`score_plan.py` of the benchmark's tools (Galvatron's unmodified cost functions and memory rule, run as a "
            "subprocess in the `tools/setup.sh` work dir's venv; the project never imports Galvatron).  Fits: its DP's "
            "memory rule (per-GPU MB it charges incl. its cache, against usable + cache).  Sound T: `compare.py`'s formula "
            "on Galvatron's own stage costs of our plan, against Galvatron's plan's sound T (README table)"
            + (
                " and, where run, `compare.py` itself against a fresh `run_search.py` run."
                if any("compare" in r for r in rescored)
                else "."
            ),
            "",
            "| model | GPUs | GiB | batch | fits Galvatron's memory rule (MB charged / allowed) | Galvatron's estimate of our plan (s) | "
            "sound T of our plan, Galvatron's code (s) | our solver's T (s) | Galvatron's plan's sound T (s) | no slower | compare.py |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rescored:
            allowed = (r["galv_usable_MB"] or 0) + (r["galv_mem_cache_MB"] or 0)
            lines.append(
                f"| {r['model']} | {r['gpus']} | {r['mem_gib']} | {r['global_batch']} | "
                f"{'yes' if r['galv_fits'] else '**no**'} ({r['galv_mem_used_MB']:.0f} / {allowed:.0f}) | "
                f"{_f(r['galv_est_s'])} | {_f(r['galv_sound_T_s'])} | {_f(r['ours_T_s'])} | {_f(r['theirs_T_s'])} | "
                f"{'yes' if r['galv_no_slower'] else '**no**'} | {r.get('compare', 'not run (no `--galvatron-search`)')} |"
            )
        bad = [r for r in rescored if not (r["galv_fits"] and r["galv_no_slower"])]
        lines += [
            "",
            (
                "All six plans fit Galvatron's memory rule and are no slower than its plans under the sound formula."
                if not bad and len(rescored) == 6
                else "Findings: "
                + (
                    "; ".join(
                        f"{r['model']} {r['gpus']}x{r['mem_gib']} b{r['global_batch']}: fits={r['galv_fits']}, "
                        f"sound T {r['galv_sound_T_s']:.6f} vs {r['theirs_T_s']:.6f}"
                        for r in bad
                    )
                    or "none"
                )
                + f" ({len(rescored)} of 6 settings re-scored)."
            ),
        ]
    else:
        notes = [r.get("rescore_note") for r in rows if r["part"] == "readme" and r.get("rescore_note")]
        lines += [
            "not run (no `--galvatron-workdir`; the tools of the benchmark README were not set up)."
            + (" " + "; ".join(notes) if notes else "")
        ]
    lines += [
        "",
        "## Grid (in-process `solve_galvatron`; the even-split search re-implemented as Galvatron's stand-in)",
        "",
        "| model | GPUs | GiB | batch | status | our T (s) | pp / chunks | our seconds | even-split T (s) | even-split status | its seconds | even-split over ours | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["part"] == "grid":
            lines.append(
                f"| {r['model']} | {r['gpus']} | {r['mem_gib']} | {r['global_batch']} | {r['status']} | {_f(r['ours_T_s'])} | "
                f"{r['pp']} / {r['chunks']} | {r['seconds']:.1f} | {_f(r['theirs_T_s'])} | {r['theirs_status']} | "
                f"{r['theirs_seconds']} | {_excess(r['theirs_T_s'], r['ours_T_s'])} | {r['load']} |"
            )
    lines += ["", f"![chart]({png})", ""]
    out.write_text("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two README settings and four grid points")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    ap.add_argument("--galvatron-workdir", type=Path, help="a work dir of the benchmark's tools/setup.sh (re-scores our plans)")
    ap.add_argument(
        "--galvatron-search",
        action="store_true",
        help="with --galvatron-workdir: also run Galvatron's search per README setting (60-260 s each) and compare.py",
    )
    ap.add_argument("--six-only", action="store_true", help="the six README settings only, no grid")
    ap.add_argument("--output", type=Path, default=REPO / "results" / "galvatron.md")
    args = ap.parse_args()
    if not SHARED.is_dir():
        raise SystemExit(f"{SHARED} is missing")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = readme_rows(args, Path(tmp)) + ([] if args.six_only else grid_rows(args))
    write(rows, args.output, args, time.perf_counter() - t0)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
