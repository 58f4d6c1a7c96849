"""The ``gap`` command: each heuristic of a problem against its exact solve, over a settings grid.

``milp-partition gap INSTANCES... [--problem auto|pipeline|strategy|placement|joint] [--heuristics a,b]
[--devices 4,8,16] [--memory 8GiB,16GiB] [--microbatches 4,8] [--memory-model static,1f1b]
[--bandwidth 25GiB/s]
[--time-limit S] [--threads N] [--no-exact] [--jobs N] [--executor local|ray [--address ADDR]]
[--output-dir scratch/] [--name gap]``

Each file goes to its problem (``auto``: the first whose format it has; with a named
problem, other files are skipped with a warning).  For each instance and each grid
point the problem uses, every heuristic (its answer re-checked and valued by the
problem's independent verifier) and the exact solve (verified value, proven bound,
status) run once; rows go to ``NAME.csv`` as runs end (resumable: a row already there
for the same run, written by the same code, is not run again; other rows stay), then
``NAME.md`` and, with matplotlib, ``NAME_gap.png`` and ``NAME_time.png`` are rebuilt
from the whole CSV.  The per-problem work lives in ``milp_partition/<problem>/gap.py``
(:mod:`milp_partition.sweep.registry`).  Exit status 0 when at least one run answered (error rows are rows of the
table), 1 when every run failed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from milp_partition.cli import flags
from milp_partition.cli.exit_codes import EXIT_ERROR, EXIT_OK
from milp_partition.cli.output import check_not_an_input
from milp_partition.errors import InputError
from milp_partition.io.atomic import write_atomic
from milp_partition.sweep.charts import write_charts
from milp_partition.sweep.executors import EXECUTORS, ExecutorSettings, Progress, run_jobs
from milp_partition.sweep.grid import parse_grid
from milp_partition.sweep.jobs import BOUND, EXACT, GapJob, append_row, code_fingerprint, compact, file_sha, read_rows
from milp_partition.sweep.markdown import render_markdown
from milp_partition.sweep.registry import gap_module, gap_problems


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``gap`` command."""
    p = subparsers.add_parser(
        "gap",
        help="run each heuristic and the exact solver over instances and a settings grid; write a gap table and charts",
        description="Heuristics against the exact solver: verified values, proven bounds, gaps, times, written to "
        "OUTPUT_DIR/NAME.csv, NAME.md and charts.  Runs already in the CSV (same code) are skipped (resume).",
    )
    p.add_argument("instances", nargs="+", type=Path, help="instance files (files of another problem are skipped)")
    p.add_argument("--problem", choices=["auto", *gap_problems()], default="auto", help="which problem (default auto)")
    p.add_argument("--heuristics", help="comma-separated heuristic names (default: all of each problem)")
    g = p.add_argument_group("settings grid (comma-separated; an axis a problem lacks is ignored for it)")
    g.add_argument("--devices", help="accelerator counts, e.g. 4,8,16 (pipeline; strategy layers files; tables run at their p)")
    g.add_argument("--memory", help="memory per accelerator, e.g. 8GiB,16GiB (pipeline; strategy limit)")
    g.add_argument(
        "--microbatches",
        "--micro-batches",
        dest="micro_batches",
        help="micro-batches per batch, e.g. 4,8 (joint; --micro-batches is its old name)",
    )
    g.add_argument("--bandwidth", help="bandwidth from each device to the outside, e.g. 25GiB/s (joint)")
    g.add_argument("--memory-model", help="memory models, e.g. static,1f1b (pipeline), static,liveness (strategy, placement)")
    p.add_argument("--link-contention", action="store_true", help="placement: serialize transfers per device port")
    p.add_argument(
        "--time-limit", type=flags.positive_seconds, default=60.0, help="exact solver time limit per run in seconds (default 60)"
    )
    p.add_argument("--threads", type=flags.threads, default=2, help="solver threads (default 2)")
    p.add_argument("--seed", type=flags.seed, default=0, help="solver seed (default 0)")
    p.add_argument("--no-exact", action="store_true", help="skip the exact solve (placement: report the cheap bounds)")
    p.add_argument("--jobs", type=flags.ranged_int(1, MAX_JOBS), default=1, help="local worker processes (default 1)")
    p.add_argument("--executor", choices=EXECUTORS, default="local", help="local processes (default) or a Ray cluster")
    p.add_argument("--address", help="Ray cluster address, e.g. ray://head:10001 or auto (default: start a local Ray)")
    p.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help=f"where NAME.csv and NAME.md go (default {DEFAULT_OUTPUT_DIR}/, which git ignores; the committed tables in "
        "results/ are written by benchmarks/gap_bench.py)",
    )
    p.add_argument("--name", type=_file_stem, default="gap", help="file name stem, no folder (default gap)")
    p.add_argument("--no-charts", action="store_true", help="do not draw the charts")
    p.add_argument("--note", default="", help="a line of text to put under the report's title (e.g. which script ran it)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=run_gap_command)


#: Where the tables go by default: a scratch folder (git ignores it), not the committed results/.
DEFAULT_OUTPUT_DIR = Path("scratch")
#: Most local worker processes.
MAX_JOBS = 256


def _file_stem(text: str) -> str:
    """``--name``: a plain file-name stem (``../x`` or ``a/b`` would write outside the output folder)."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,100}", text) or ".." in text:
        raise argparse.ArgumentTypeError(
            f"must be a plain file name stem (letters, digits, '_', '-', '.', no folder and no '..'), got {text!r}"
        )
    return text


def _problem_of(path: Path, wanted: str) -> tuple[str | None, str]:
    """The problem of ``path`` (``None`` and the reason when it is none of the wanted ones)."""
    if not path.exists():
        raise InputError("no such file", source=str(path))
    names = gap_problems() if wanted == "auto" else [wanted]
    reasons = []
    for name in names:
        why = gap_module(name).recognize(path)
        if why is None:
            return name, ""
        reasons.append(why)
    return None, reasons[-1]


def _heuristics(text: str | None, problems: list[str]) -> dict[str, list[str]]:
    per = {name: list(gap_module(name).HEURISTICS) for name in problems}
    if text is None:
        return per
    names = [x.strip() for x in text.split(",") if x.strip()]
    known = {h for hs in per.values() for h in hs}
    for n in names:
        if n not in known:
            listing = "; ".join(f"{p}: {', '.join(hs)}" for p, hs in per.items())
            raise InputError(f"unknown heuristic {n!r}; known: {listing}", where="--heuristics")
    return {p: [h for h in hs if h in names] for p, hs in per.items()}


def build_jobs(args: argparse.Namespace, code: str) -> tuple[list[GapJob], list[str]]:
    """Every run of the sweep (bad input fails here, before any run) and the warnings for skipped files."""
    if args.time_limit <= 0 or args.threads < 1 or args.jobs < 1:
        raise InputError("--time-limit must be positive, --threads and --jobs at least 1", where="gap options")
    grid = parse_grid(args.devices, args.memory, args.micro_batches, args.memory_model, args.bandwidth)
    warnings: list[str] = []
    files: list[tuple[Path, str]] = []
    for path in args.instances:
        problem, why = _problem_of(path, args.problem)
        if problem is None:
            warnings.append(f"warning: skipping {path}: {why}")
        else:
            files.append((path, problem))
    per = _heuristics(args.heuristics, list(dict.fromkeys(p for _, p in files)))
    jobs: list[GapJob] = []
    for path, problem in files:
        module = gap_module(problem)
        options = (("link_contention", "1" if args.link_contention else "0"),) if problem == "placement" else ()
        sha = file_sha(path)
        points = grid.points(dict(module.AXES))
        if hasattr(module, "applicable"):
            points = [pt for pt in points if module.applicable(path, pt)]
            if not points:
                warnings.append(f"warning: skipping {path}: no grid point applies to it")
        final = [] if args.no_exact and problem != "placement" else [BOUND if args.no_exact else EXACT]
        for point in points:
            module.check(path, point, dict(options))
            for method in [*per[problem], *final]:
                jobs.append(
                    GapJob(problem, str(path), path.stem, sha, point, method, options,
                           args.time_limit, args.threads, args.seed, code)
                )  # fmt: skip
    return jobs, warnings


def _command(args: argparse.Namespace) -> str:
    parts = ["milp-partition gap", *map(str, args.instances)]
    for flag in ("problem", "heuristics", "devices", "memory", "micro_batches", "memory_model", "bandwidth"):
        value = getattr(args, flag)
        if value is not None and not (flag == "problem" and value == "auto"):
            parts.append(f"--{'microbatches' if flag == 'micro_batches' else flag.replace('_', '-')} {value}")
    parts.append(f"--time-limit {args.time_limit:g} --threads {args.threads} --jobs {args.jobs} --executor {args.executor}")
    parts += [f"--{f.replace('_', '-')}" for f in ("no_exact", "link_contention") if getattr(args, f)]
    return " ".join(parts)


def run_gap_command(args: argparse.Namespace) -> int:
    """Handler of ``milp-partition gap``; returns the exit code."""
    code = code_fingerprint()
    jobs, warnings = build_jobs(args, code)
    for w in warnings:
        print(w, file=sys.stderr)
    out_dir: Path = args.output_dir
    csv_path = out_dir / f"{args.name}.csv"
    written = [csv_path, out_dir / f"{args.name}.md", *(out_dir / f"{args.name}_{c}.png" for c in ("gap", "time"))]
    for path in written:  # an instance among the files the sweep writes would be replaced
        check_not_an_input(path, list(args.instances), "--output-dir")
    out_dir.mkdir(parents=True, exist_ok=True)
    done = {
        (r["problem"], r["instance"], r["sha"], r["point"], r["method"], r["options"])
        for r in read_rows(csv_path)
        if r["code"] == code
    }
    todo = [j for j in jobs if j.key not in done]
    skipped = len(jobs) - len(todo)
    if skipped and not args.quiet:
        print(f"resuming: {skipped} run(s) already in {csv_path}", file=sys.stderr)
    progress = Progress(len(todo), enabled=not args.quiet)
    settings = ExecutorSettings(args.executor, args.jobs, args.address)
    failed = 0
    first_error = ""
    try:
        for row in run_jobs(todo, settings, progress):
            append_row(csv_path, row)
            if row["status"] == "error":
                failed += 1
                first_error = first_error or row["message"]
    finally:
        progress.close()
    rows = compact(csv_path) if csv_path.exists() else []
    charts: list[str] = []
    if not args.no_charts and rows:
        try:
            charts = write_charts(rows, out_dir, args.name)
        except ImportError:  # matplotlib is an optional extra
            print("warning: no charts: install matplotlib (pip install 'milp-partition[plot]')", file=sys.stderr)
    md_path = out_dir / f"{args.name}.md"
    write_atomic(md_path, render_markdown(rows, _command(args), code, charts, args.note), what="--output-dir")
    print(f"{len(todo)} run(s), {skipped} skipped, {failed} failed; wrote {csv_path} and {md_path}")
    if todo and failed == len(todo):  # nothing was measured: a table of errors is no answer
        print(f"error: every run of the sweep failed; the first: {first_error}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
