"""The ``gap`` command: each placement heuristic against the exact solver, as CSV and Markdown.

``milp-partition gap INSTANCES... [--heuristics heft,m-topo,m-etf,pardnn] [--time-limit S]
[--threads N] [--jobs N] [--output-dir results/] [--name NAME]``

For every instance (``placement-instance/1`` JSON) it runs each heuristic (its
schedule re-checked by :func:`~milp_partition.verify_placement.verify_placement`,
whose simulator gives the makespan) and the exact solve
(:func:`~milp_partition.solve_placement.solve_placement`: incumbent, proven bound,
status), and writes

* ``NAME.csv``: one row per instance, settings and method (a heuristic, ``exact``,
  or ``bound`` with ``--no-exact``), appended as each run finishes;
* ``NAME.md``: per instance the makespan of each method, its gap to the best proven
  bound ``(makespan - bound) / makespan``, its excess over the best makespan found,
  and the times, rebuilt from the whole CSV.

An interrupted sweep resumes: a row already in the CSV for the same instance (file
name and content hash), method and settings is not run again.  With ``--jobs N``
runs go to N worker processes (their times then share the cores).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import math
import os
import sys
import time
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from milp_partition.errors import InputError
from milp_partition.placement.problem import MemoryModel

EXACT = "exact"
BOUND = "bound"
CSV_FIELDS = ("instance", "sha", "settings", "method", "status", "makespan", "bound", "seconds", "message")


@dataclass(frozen=True)
class GapJob:
    """One run of the sweep."""

    path: str
    instance: str
    sha: str
    settings: str
    method: str
    time_limit_s: float
    threads: int
    seed: int
    link_contention: bool
    memory_model: MemoryModel

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.instance, self.sha, self.method, self.settings)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``gap`` command."""
    from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS

    p = subparsers.add_parser(
        "gap",
        help="run the placement heuristics and the exact solver on instances; write a gap table (CSV + Markdown)",
        description="Each heuristic and the exact placement solver on each instance: makespan, proven bound, gap, "
        "times, written to OUTPUT_DIR/NAME.csv and NAME.md.  Rows already in the CSV are skipped (resume).",
    )
    p.add_argument("instances", nargs="+", type=Path, help="placement-instance/1 JSON files")
    p.add_argument(
        "--heuristics",
        default=",".join(PLACEMENT_HEURISTICS),
        help=f"comma-separated heuristic names (default {','.join(PLACEMENT_HEURISTICS)})",
    )
    p.add_argument("--time-limit", type=float, default=60.0, help="exact solver time limit per instance in seconds (default 60)")
    p.add_argument("--threads", type=int, default=2, help="solver threads (default 2)")
    p.add_argument("--seed", type=int, default=0, help="solver seed (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel worker processes (default 1)")
    p.add_argument("--no-exact", action="store_true", help="skip the exact solve; report the cheap lower bounds instead")
    p.add_argument("--link-contention", action="store_true", help="serialize transfers per device port")
    p.add_argument("--memory-model", choices=["static", "liveness"], default="static", help="how memory is counted")
    p.add_argument("--output-dir", type=Path, default=Path("results"), help="where NAME.csv and NAME.md go (default results/)")
    p.add_argument("--name", default="placement_gap", help="file name stem (default placement_gap)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run_gap_command)


def _parse_heuristics(text: str) -> list[str]:
    from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS

    names = [x.strip() for x in text.split(",") if x.strip()]
    for name in names:
        if name not in PLACEMENT_HEURISTICS:
            raise InputError(
                f"unknown placement heuristic {name!r}; known: {', '.join(PLACEMENT_HEURISTICS)}", where="--heuristics"
            )
    return names


def _sha(path: Path) -> str:
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()[:12]
    except OSError as exc:
        raise InputError(f"cannot read the instance: {exc.strerror or exc}", source=str(path)) from None


def run_gap_command(args: argparse.Namespace) -> int:
    """Handler of ``milp-partition gap``; returns the exit code."""
    from milp_partition.io.placement_instance import read_placement_instance
    from milp_partition.placement.problem import PlacementSettings

    names = _parse_heuristics(args.heuristics)
    if args.time_limit <= 0 or args.threads < 1 or args.jobs < 1:
        raise InputError("--time-limit must be positive, --threads and --jobs at least 1", where="gap options")
    placement = PlacementSettings(link_contention=args.link_contention, memory_model=args.memory_model)
    for path in args.instances:
        read_placement_instance(path, placement)  # bad input fails here, before any run
    methods = [*names, BOUND if args.no_exact else EXACT]
    settings_key = f"contention={int(args.link_contention)};memory={args.memory_model}"
    exact_key = f"{settings_key};time_limit={args.time_limit:g};threads={args.threads};seed={args.seed}"
    jobs = []
    for path in args.instances:
        sha = _sha(path)
        for method in methods:
            jobs.append(
                GapJob(
                    str(path), path.stem, sha, exact_key if method == EXACT else settings_key, method,
                    args.time_limit, args.threads, args.seed, args.link_contention, args.memory_model,
                )
            )  # fmt: skip
    out_dir: Path = args.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / f"{args.name}.csv"
    done = {(r["instance"], r["sha"], r["method"], r["settings"]) for r in read_rows(csv_path)}
    todo = [j for j in jobs if j.key not in done]
    skipped = len(jobs) - len(todo)
    bar = _Progress(len(todo), enabled=not args.quiet)
    if skipped and not args.quiet:
        print(f"resuming: {skipped} run(s) already in {csv_path}", file=sys.stderr)
    for row in _run_all(todo, args.jobs, bar):
        append_row(csv_path, row)
    bar.close()
    md_path = out_dir / f"{args.name}.md"
    command = (
        f"milp-partition gap {' '.join(str(p) for p in args.instances)} --heuristics {','.join(names)} "
        f"--time-limit {args.time_limit:g} --threads {args.threads} --jobs {args.jobs}"
        + (" --no-exact" if args.no_exact else "")
        + (" --link-contention" if args.link_contention else "")
        + f" --memory-model {args.memory_model}"
    )
    md_path.write_text(render_markdown(read_rows(csv_path), command))
    print(f"{len(todo)} run(s), {skipped} skipped; wrote {csv_path} and {md_path}")
    return 0


def _run_all(todo: list[GapJob], jobs: int, bar: _Progress) -> Iterable[dict[str, str]]:
    if jobs == 1:
        for job in todo:
            bar.step(f"{job.instance} {job.method}")
            yield run_job(job)
            bar.done()
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        pending: dict[Future, GapJob] = {pool.submit(run_job, job): job for job in todo}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                job = pending.pop(fut)
                bar.step(f"{job.instance} {job.method}")
                yield fut.result()
                bar.done()


def run_job(job: GapJob) -> dict[str, str]:
    """Run one heuristic, the exact solve or the bounds on one instance; a CSV row."""
    from milp_partition.errors import MilpPartitionError
    from milp_partition.io.placement_instance import read_placement_instance
    from milp_partition.placement.problem import PlacementSettings

    problem = read_placement_instance(
        job.path, PlacementSettings(link_contention=job.link_contention, memory_model=job.memory_model)
    )
    row = {"instance": job.instance, "sha": job.sha, "settings": job.settings, "method": job.method}
    t0 = time.perf_counter()
    if job.method == EXACT:
        from milp_partition.placement.solve import PlacementSolveSettings, solve_placement

        result = solve_placement(
            problem, PlacementSolveSettings(solver="cpsat", time_limit_s=job.time_limit_s, threads=job.threads, seed=job.seed)
        )
        row.update(status=result.status, makespan=_num(result.objective), bound=_num(result.bound), message=result.message)
        row["seconds"] = f"{result.solve_seconds:.4g}"
        return row
    if job.method == BOUND:
        from milp_partition.placement.bounds import best_bound

        bounds = best_bound(problem)
        row.update(status="bound", makespan="", bound=_num(bounds.best), message="")
        row["seconds"] = f"{time.perf_counter() - t0:.4g}"
        return row
    from milp_partition.heuristics.placement import run_placement_heuristic
    from milp_partition.verifiers.placement import verify_placement

    try:
        solution = run_placement_heuristic(job.method, problem)
    except MilpPartitionError as exc:
        row.update(status="failed", makespan="", bound="", message=str(exc), seconds=f"{time.perf_counter() - t0:.4g}")
        return row
    seconds = time.perf_counter() - t0
    report = verify_placement(problem, solution)
    if report.feasible:
        row.update(status="feasible", makespan=_num(report.makespan), bound="", message="")
    else:
        row.update(status="error", makespan="", bound="", message="verifier rejected: " + "; ".join(report.violations[:3]))
    row["seconds"] = f"{seconds:.4g}"
    return row


def _num(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else repr(float(x))


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a gap CSV (none if it does not exist)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def append_row(path: Path, row: dict[str, str]) -> None:
    """Append one row (with the header when the file is new), flushed at once so an interruption keeps it."""
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in CSV_FIELDS})
        f.flush()
        os.fsync(f.fileno())


def render_markdown(rows: list[dict[str, str]], command: str) -> str:
    """The gap table of all rows, one section per instance and settings."""
    lines = [
        f"<!-- written by milp_partition/cli_gap.py: {command} -->",
        "",
        "# Placement heuristics against the exact solver",
        "",
    ]
    lines += [
        "Gap = (makespan - best proven bound) / makespan; excess = makespan / best makespan found - 1. "
        "Makespans are the verifier's simulator's; bounds are proven (exact solve, or the cheap bounds with --no-exact).",
        "",
    ]
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for r in rows:
        base = ";".join(x for x in r["settings"].split(";") if x.startswith(("contention", "memory")))
        groups.setdefault((r["instance"], r["sha"], base), []).append(r)
    for (instance, sha, base), rs in groups.items():
        bounds = [float(r["bound"]) for r in rs if r["bound"]]
        best_bound = max(bounds) if bounds else None
        spans = [float(r["makespan"]) for r in rs if r["makespan"]]
        best_span = min(spans) if spans else None
        lines += [f"## {instance} ({base}, sha {sha})", ""]
        lines += [
            "| method | status | makespan | bound | gap to bound | excess over best | seconds | settings |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rs:
            span = float(r["makespan"]) if r["makespan"] else None
            gap = f"{(span - best_bound) / span:.2%}" if span and best_bound is not None else ""
            excess = f"{span / best_span - 1:.2%}" if span and best_span else ""
            note = f" ({r['message'][:80]})" if r["status"] in ("failed", "error") else ""
            lines.append(
                f"| {r['method']} | {r['status']}{note} | {_fmt(r['makespan'])} | {_fmt(r['bound'])} | {gap} | {excess} | "
                f"{r['seconds']} | {r['settings']} |"
            )
        lines.append("")
    return "\n".join(lines)


def _fmt(x: str) -> str:
    return f"{float(x):.6g}" if x else ""


class _Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, *, enabled: bool, width: int = 30) -> None:
        self.total, self.enabled, self.width = total, enabled and total > 0, width
        self.count = 0
        self.start = time.monotonic()

    def _draw(self, label: str) -> None:
        if not self.enabled:
            return
        filled = int(self.width * self.count / self.total)
        elapsed = time.monotonic() - self.start
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.count}/{self.total} {elapsed:6.1f}s {label[:50]:<50}"
        )
        sys.stderr.flush()

    def step(self, label: str) -> None:
        self._draw(label)

    def done(self) -> None:
        self.count += 1
        self._draw("")

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()
