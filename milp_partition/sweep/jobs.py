"""One run of a sweep (:class:`GapJob`), its CSV row, and the CSV file: append, resume, merge.

A row is keyed by problem, instance (file stem and content hash), settings point,
method and the exact solve's settings.  It also records ``code``, a hash of the
package's source: a row written by other code is *stale*; the sweep runs it again
(results come from the code as it is) and the newer row replaces it.  Rows of runs
that a sweep does not cover stay (a partial sweep merges into the file).
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError, MilpPartitionError
from milp_partition.io.atomic import write_atomic
from milp_partition.result import Result
from milp_partition.sweep.grid import point_text

#: The method name of the exact solve.
EXACT = "exact"
#: The method name of the cheap proven bounds (``--no-exact``).
BOUND = "bound"

CSV_FIELDS: tuple[str, ...] = (
    "problem",
    "instance",
    "sha",
    "point",
    "method",
    "options",
    "status",
    "value",
    "bound",
    "seconds",
    "size",
    "unit",
    "code",
    "message",
)


@dataclass(frozen=True)
class GapJob:
    """One run: a method (a heuristic, :data:`EXACT` or :data:`BOUND`) on one instance at one grid point.

    Attributes
    ----------
    problem
        Registry name of the problem (:mod:`milp_partition.sweep.registry`).
    path, instance, sha
        The instance file, its stem, and the first 12 hex digits of its SHA-1.
    point
        The grid point, ``(axis, value)`` pairs.
    method
        Heuristic name, ``exact`` or ``bound``.
    options
        Problem options outside the grid, ``(name, value)`` pairs (e.g. link contention).
    time_limit_s, threads, seed
        Of the exact solve (part of its key only).
    code
        Hash of the package source that the row is valid for.
    """

    problem: str
    path: str
    instance: str
    sha: str
    point: tuple[tuple[str, str], ...]
    method: str
    options: tuple[tuple[str, str], ...] = ()
    time_limit_s: float = 60.0
    threads: int = 2
    seed: int = 0
    code: str = ""

    @property
    def options_text(self) -> str:
        """Options, plus the solver settings for the exact solve (they change its answer)."""
        parts = [f"{k}={v}" for k, v in self.options]
        if self.method == EXACT:
            parts += [f"time_limit={self.time_limit_s:g}", f"threads={self.threads}", f"seed={self.seed}"]
        return ";".join(parts)

    @property
    def key(self) -> tuple[str, ...]:

        return (self.problem, self.instance, self.sha, point_text(self.point), self.method, self.options_text)

    def row(self, **fields: object) -> dict[str, str]:
        """A CSV row of this job with ``fields`` (numbers written exactly, ``None``/non-finite as empty)."""

        out = {
            "problem": self.problem,
            "instance": self.instance,
            "sha": self.sha,
            "point": point_text(self.point),
            "method": self.method,
            "options": self.options_text,
            "code": self.code,
        }
        for k, v in fields.items():
            out[k] = num(v) if isinstance(v, float) or v is None else str(v)
        return {k: out.get(k, "") for k in CSV_FIELDS}


def row_key(row: dict[str, str]) -> tuple[str, ...]:
    return (row["problem"], row["instance"], row["sha"], row["point"], row["method"], row["options"])


def num(x: float | None) -> str:
    """Exact text of a float (``repr``), empty for ``None`` and non-finite values."""
    return "" if x is None or not math.isfinite(x) else repr(float(x))


def file_sha(path: Path) -> str:
    """First 12 hex digits of the file's SHA-1; :class:`InputError` when it cannot be read."""
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()[:12]
    except OSError as exc:
        raise InputError(f"cannot read the instance: {exc.strerror or exc}", source=str(path)) from None


#: Package files that only present results (tables, charts, plots): they do not enter :func:`code_fingerprint`.
PRESENTATION: tuple[str, ...] = ("sweep/markdown.py", "sweep/charts.py", "cli/plot.py", "plots/")


def _package_dir(name: str) -> Path:
    """Where a package of ours lives (found, not imported): formulations/ and heuristics/ install from top-level folders."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, name
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def code_fingerprint() -> str:
    """Hash of the package's ``.py`` files (formulations and heuristics included, :data:`PRESENTATION` not): 12 hex digits."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha1()
    files = sorted(
        p
        for p in root.rglob("*.py")
        if "__pycache__" not in p.parts and not p.relative_to(root).as_posix().startswith(PRESENTATION)
    )
    for sub in ("formulations", "heuristics"):  # top-level folders in the source tree (package-dir), outside root there
        files += sorted(_package_dir(f"milp_partition.{sub}").glob("*.py"))
    for p in files:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a gap CSV (none when it does not exist); a file of another layout is an error."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is not None and tuple(reader.fieldnames) != CSV_FIELDS:
            raise InputError(
                f"this CSV has columns {', '.join(reader.fieldnames)}, not those of a gap sweep; "
                "give another --output-dir or --name (or remove the file)",
                source=str(path),
            )
        return [{k: r.get(k) or "" for k in CSV_FIELDS} for r in reader]


def append_row(path: Path, row: dict[str, str]) -> None:
    """Add one row (with the header when the file is new), written at once so an interruption keeps it.

    The file is rewritten whole through :func:`milp_partition.io.atomic.write_atomic` (a temporary file and a rename):
    a failed write (a full disk, ``ulimit -f``) leaves the rows before it as they were, never a cut row.
    """
    old = ""
    if path.exists():
        with path.open(newline="") as f:
            old = f.read()
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=CSV_FIELDS)
    if not old:
        w.writeheader()
    elif not old.endswith("\n"):
        text.write("\r\n")
    w.writerow({k: row.get(k, "") for k in CSV_FIELDS})
    write_atomic(path, old + text.getvalue(), what="--output-dir")


def latest_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """One row per key, the last written (a re-run replaces a stale row), in first-seen order."""
    last: dict[tuple[str, ...], dict[str, str]] = {}
    for r in rows:
        last[row_key(r)] = r
    order: dict[tuple[str, ...], None] = {}
    for r in rows:
        order.setdefault(row_key(r), None)
    return [last[k] for k in order]


def compact(path: Path) -> list[dict[str, str]]:
    """Rewrite the CSV with :func:`latest_rows` (atomically, keeping the file's permissions); return them."""
    rows = latest_rows(read_rows(path))
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=CSV_FIELDS)
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, text.getvalue(), "the gap table")  # the file's own permissions kept (a bare mkstemp gave 0600)
    return rows


def exact_row(job: GapJob, result: Result, base: dict[str, str]) -> dict[str, str]:
    """The CSV row of an exact solve: its status, verified value, proven bound, time and message.

    An interrupted solve (Ctrl-C, SIGTERM) has no row: its truncated answer is not the run's, and a resume runs it
    again; the interrupt goes on up (the sweep stops).
    """
    if result.stopped_by == "interrupt":
        raise KeyboardInterrupt
    return job.row(
        status=result.status,
        value=result.objective,
        bound=result.bound,
        seconds=f"{result.solve_seconds:.4g}",
        message=result.message,
        **base,
    )


#: How a heuristic's message starts when the time limit cut it short and it returned the best it had found: the row is
#: ``feasible`` and the gap table shows the message beside it (other feasible rows' messages stay in the CSV only).
STOPPED_AT_LIMIT = "stopped at the time limit"


def heuristic_row(
    job: GapJob,
    base: dict[str, str],
    heuristic: Callable[[], tuple[Any, str]],
    verify: Callable[[Any], tuple[bool, float, Sequence[str]]],
) -> dict[str, str]:
    """Run one heuristic (``() -> (solution or None, message)``) and score it with the problem's verifier.

    The row is ``failed`` (an error or no solution), ``rejected`` (the verifier refuses it) or
    ``feasible`` with the verifier's value (and the heuristic's message, e.g. that it stopped at the time limit); the
    time is the heuristic's alone.
    """
    t0 = time.perf_counter()
    try:
        solution, message = heuristic()
    except MilpPartitionError as exc:
        return job.row(status="failed", seconds=f"{time.perf_counter() - t0:.4g}", message=str(exc), **base)
    seconds = f"{time.perf_counter() - t0:.4g}"
    if solution is None:
        return job.row(status="failed", seconds=seconds, message=message, **base)
    feasible, value, violations = verify(solution)
    if not feasible:
        return job.row(status="rejected", seconds=seconds, message="verifier: " + "; ".join(violations[:3]), **base)
    return job.row(status="feasible", value=value, seconds=seconds, message=message, **base)
