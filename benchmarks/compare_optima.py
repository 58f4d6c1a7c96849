"""Compare the optimum-bearing columns of the results tables between two commits.

Written for issue 41 ("every results table regenerated with the same optima"): for each table under ``results/``
that carries optima, it reads the file at the ``--before`` and at the ``--after`` revision (``git show REV:PATH``),
matches the rows on their key columns and, per method of a row (status, objective, bound), says whether

* a proven optimum is the same (relative difference at most ``--rel-tol``, 1e-9 by default),
* a proven optimum CHANGED (a potential bug: to investigate),
* a status changed (optimal <-> time-limited, infeasible <-> not),
* a time-limited row's incumbent or bound moved,

and checks, inside each row of both revisions, that no proven bound lies above a proven optimum of the same row
(a false proof) by more than ``--bound-tol`` (1e-6 relative: the solvers' own tolerances), and that no incumbent lies
below it. All the problems here minimise. Values without a status (heuristics, baselines, references) are compared
as plain values ("value changed" is reported, but is not a broken optimum); a column of verified plans without a
status (models.csv's old plan scored on the new cost model) is checked not to lie below the row's optimum; a status
without an objective (pase_end_to_end.csv) is compared as a status ("same statuses"). A table whose file is the
same at both revisions is reported as "not regenerated".

Run from the repository root::

    python benchmarks/compare_optima.py --before REV [--after HEAD] [--output results/optima_check.md]

It writes ``results/optima_check.md`` (and prints it).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Method:
    """One method's columns in a table row.

    Parameters
    ----------
    name : str
        Label in the report.
    value : str
        Column of the objective (incumbent or DP value).
    status : str or None
        Column of the solver status; None with ``exact`` or ``always_exact`` for DPs.
    bound : str or None
        Column of the proven lower bound.
    exact : str or None
        Column holding ``True`` when the value is proven exact (a DP's flag).
    always_exact : bool
        The value is an exact DP's optimum whenever it is present.
    problem : str
        The problem the method solves: bounds and incumbents are checked only against optima of the same problem
        (the chain DP's is the optimum over one topological order; a tied problem's is over tied blocks).
    """

    name: str
    value: str
    status: str | None = None
    bound: str | None = None
    exact: str | None = None
    always_exact: bool = False
    problem: str = "main"
    #: a Markdown cell holding this text marks its value as a proven optimum ("0.0067 (optimum (DP))")
    optimum_text: str | None = None
    #: the column is a proven lower bound alone (no incumbent)
    bound_only: bool = False
    #: the table states no status for this column, but every value in it is a verified plan's (``"feasible"``):
    #: checked not to lie below an optimum of the same problem
    feasible_only: bool = False
    #: the column is a status alone (no objective in the table): compared as a status, counted as "same status"
    status_only: bool = False


@dataclass(frozen=True)
class Table:
    """A results table: its file, an optional section (``# name`` line in the CSV), its key and methods."""

    path: str
    key: tuple[str, ...]
    methods: tuple[Method, ...]
    section: str | None = None
    markdown: bool = False
    #: (column, value, canonical value) for key cells that name the same run differently by its outcome
    aliases: tuple[tuple[str, str, str], ...] = ()

    def row_key(self, row: dict[str, str]) -> tuple[str, ...]:
        """The row's key cells, with aliases replaced by their canonical value."""
        alias = {(c, v): canon for c, v, canon in self.aliases}
        return tuple(alias.get((k, row.get(k, "")), row.get(k, "")) for k in self.key)

    @property
    def label(self) -> str:
        """Name in the report."""
        return self.path + (f" [{self.section}]" if self.section else "")


def _m(prefix: str, name: str | None = None) -> Method:
    """A method whose columns are ``PREFIX_status``, ``PREFIX_objective`` and ``PREFIX_bound``."""
    return Method(name or prefix, f"{prefix}_objective", f"{prefix}_status", f"{prefix}_bound")


SOLVED = Method("solve", "objective", "status", "bound")
#: the key of ``milp-partition gap``'s CSV rows
GAP_KEY = ("problem", "instance", "sha", "point", "method", "options")
#: placement_bench.py's bound columns (``bound_KIND``)
PLACEMENT_BOUNDS = ("critical_path", "device_path", "fractional_load", "transfer_flow", "decomposition", "main_line")

TABLES: tuple[Table, ...] = (
    Table(
        "results/joint.csv",
        ("case", "k", "memory_gib"),
        (
            SOLVED,
            Method("all-DP baseline", "all_dp"),
            Method("PipeDream-2BW baseline", "pipedream_2bw"),
            Method("Piper-style baseline (time-limited)", "piper_style"),
            Method("Piper (reference)", "piper"),
        ),
    ),
    Table(
        "results/galvatron.csv",
        ("part", "model", "gpus", "mem_gib", "global_batch"),
        (
            Method("ours", "ours_T_s", "status", "bound_s"),
            Method("theirs (sound T)", "theirs_T_s"),
            Method("Galvatron re-score of ours", "galv_sound_T_s"),
        ),
    ),
    Table(
        "results/pipeline.csv",
        ("instance",),
        (
            Method("chain DP", "chain_dp_value", exact="chain_dp_exact", problem="one topological order"),
            Method("ideal DP", "ideal_dp_value", exact="ideal_dp_exact"),
            _m("cpsat_cold"),
            _m("cpsat_warm"),
            _m("cbc_cold"),
            _m("cbc_warm"),
            Method("reference", "reference"),
        ),
    ),
    Table(
        "results/pipeline_wide.csv",
        ("instance",),
        (SOLVED, Method("chain DP (heuristic here)", "chain_dp_value")),
    ),
    Table(
        "results/strategy.csv",
        ("instance",),
        (
            Method("DP", "dp_value", always_exact=True),
            Method("reduce + DP", "reduce_dp_value", always_exact=True),
            _m("cpsat_original_cold"),
            _m("cpsat_reduced_cold"),
            _m("cpsat_reduced_warm"),
            _m("cbc_reduced_cold"),
            Method("PaSE optimum (reference)", "optimum_ref"),
        ),
    ),
    Table(
        "results/strategy_memory.csv",
        ("instance",),
        (_m("chain"), _m("cpsat"), _m("cbc"), Method("Lagrangian", "lagrangian_value")),
    ),
    Table(
        "results/strategy_generated.csv",
        ("instance",),
        (
            Method("DP", "dp_value_s", always_exact=True),
            Method("CP-SAT cold", "cpsat_value_s", "cpsat_status"),
        ),
        section="generated",
    ),
    Table(
        "results/strategy_generated.csv",
        ("instance", "memory_model", "solver"),
        (Method("solve", "objective_s", "status", "bound_s"),),
        section="memory",
    ),
    Table(
        "results/strategy_generated.csv",
        ("instance", "memory_limit"),
        (
            Method("exact", "exact_objective", "exact_status"),
            Method("tied problem", "tied_problem_objective", "tied_problem_status", problem="tied blocks"),
            Method("tied plan", "tied_objective"),
        ),
        section="ties",
    ),
    Table(
        "results/joint_milp.csv",
        ("part", "case", "method"),
        (SOLVED,),
        # the slot MILP's run is labelled by the solver that answered: "joint-wide" where the wide-graph chain proved
        # the optimum first
        aliases=(("method", "joint-wide", "joint-milp/cpsat"),),
    ),
    Table(
        "results/joint_bounds.md",
        ("case",),
        (
            Method("upper end", "upper end", optimum_text="(optimum (DP))"),
            Method("segment bound", "segment bound", bound_only=True),
            Method("stage bound", "stage bound", bound_only=True),
            Method("column bound", "column bound", bound_only=True),
        ),
        markdown=True,
    ),
    Table(
        "results/gap.csv",
        GAP_KEY,
        (Method("run", "value", "status", "bound"),),
    ),
    Table("results/highs_vs_cbc.csv", ("problem", "instance", "solver"), (SOLVED,)),
    Table(
        "results/placement.csv",
        ("file",),
        (
            Method("exact chain", "makespan", "status", "bound"),
            *(Method(f"{kind} bound", f"bound_{kind}", bound_only=True) for kind in PLACEMENT_BOUNDS),
            Method("reference best (plain CP-SAT, 300 s)", "reference_best"),
            Method("reference bound", "reference_bound", bound_only=True),
        ),
    ),
    Table("results/placement_gap.csv", GAP_KEY, (Method("run", "value", "status", "bound"),)),
    Table(
        "results/pase_end_to_end.csv",
        ("instance",),
        (
            Method("default solve", "default_status", status_only=True),
            Method("--solver none", "solver_none_status", status_only=True),
        ),
    ),
    Table(
        "results/models.csv",
        ("model",),
        (
            *(
                method
                for gpus in (4, 8)
                for method in (
                    Method(f"plan on {gpus} GPUs", f"plan{gpus}_optimum_ms", f"plan{gpus}_status", problem=f"{gpus}"),
                    Method(
                        f"plan on {gpus} GPUs, old cost model",
                        f"plan{gpus}_old_objective_ms",
                        f"plan{gpus}_old_status",
                        problem=f"{gpus} old",
                    ),
                    Method(
                        f"old plan scored on the new model ({gpus} GPUs)",
                        f"plan{gpus}_old_plan_on_new_ms",
                        feasible_only=True,
                        problem=f"{gpus}",
                    ),
                )
            ),
            Method("forward GFLOP", "forward_gflop"),
            Method("backward GFLOP", "backward_gflop"),
            Method("parameter MiB", "param_mib"),
            Method("nodes", "nodes"),
        ),
    ),
    Table(
        "results/plan_runs.csv",
        ("model", "plan"),
        (
            Method("planner objective (s)", "planner_step_s"),
            Method("planned memory (bytes)", "predicted_memory_bytes"),
        ),
    ),
    Table("results/deadlines.csv", ("case",), (SOLVED,)),
    Table("results/pipeline_scaling.csv", ("nodes",), (Method("solve", "objective", "status"),)),
    Table(
        "results/placement_scaling.csv",
        ("section", "instance", "heuristic"),
        (Method("makespan (verifier)", "makespan"),),
    ),
)


@dataclass
class Counts:
    """Per-table tallies."""

    rows: int = 0
    same_optima: int = 0
    same_statuses: int = 0
    changed_optima: int = 0
    status_changes: int = 0
    moved: int = 0
    values_changed: int = 0
    false_proofs: int = 0
    only_before: int = 0
    only_after: int = 0
    notes: list[str] = field(default_factory=list)


def git_show(rev: str, path: str) -> str | None:
    """The file at a revision, or None where it does not exist there."""
    proc = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def short(rev: str) -> str:
    """The abbreviated hash of a revision."""
    out = subprocess.run(["git", "rev-parse", "--short", rev], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"compare_optima.py: unknown revision {rev!r}")
    return out.stdout.strip()


def rev_name(rev: str) -> str:
    """``abbrev subject`` of a revision."""
    out = subprocess.run(["git", "log", "-1", "--format=%h (%s)", rev], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"compare_optima.py: unknown revision {rev!r}")
    subject = out.stdout.strip()
    return subject if len(subject) < 120 else subject[:117] + "...)"


def csv_rows(text: str, section: str | None) -> list[dict[str, str]]:
    """Rows of a CSV text; with ``section``, only the block after the line ``# SECTION``."""
    lines = text.splitlines()
    if section is not None:
        block: list[str] = []
        inside = False
        for line in lines:
            if line.startswith("# "):
                inside = line[2:].strip() == section
                continue
            if inside:
                block.append(line)
        lines = block
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def markdown_rows(text: str) -> list[dict[str, str]]:
    """Rows of the first Markdown table of a text; a repeated header name gets the next column's suffix."""
    table = [line for line in text.splitlines() if line.startswith("|")]
    if len(table) < 2:
        return []
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table]
    header: list[str] = []
    for name in cells[0]:
        header.append(name if name not in header else f"{name} ({len(header)})")
    return [dict(zip(header, row)) for row in cells[2:]]


def number(text: str | None) -> float | None:
    """The leading number of a cell ("0.0067 (optimum (DP))" -> 0.0067); None where there is none."""
    if text is None:
        return None
    token = text.strip().split(" ")[0] if text.strip() else ""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def state(row: dict[str, str], m: Method) -> tuple[str, float | None, float | None]:
    """(status, value, bound) of a method in a row; status is "optimal" for an exact DP's value."""
    if m.bound_only:
        return "bound", None, number(row.get(m.value))
    if m.status_only:
        return (row.get(m.value) or "").strip() or "-", None, None
    value = number(row.get(m.value))
    bound = number(row.get(m.bound)) if m.bound else None
    if m.optimum_text is not None:
        status = "optimal" if value is not None and m.optimum_text in (row.get(m.value) or "") else "value"
    elif m.status is not None:
        status = (row.get(m.status) or "").strip() or "-"
    elif m.exact is not None:
        status = "optimal" if (row.get(m.exact) or "").strip() == "True" and value is not None else "value"
    elif m.always_exact:
        status = "optimal" if value is not None else "-"
    elif m.feasible_only:
        status = "feasible" if value is not None else "-"
    else:
        status = "value"
    if status == "optimal" and bound is None:
        bound = value
    return status, value, bound


def close(a: float | None, b: float | None, tol: float) -> bool:
    """Both None, or relatively within ``tol``."""
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-300)


def fmt(x: float | None) -> str:
    """A value with ten significant digits, or "-"."""
    return "-" if x is None else f"{x:.10g}"


def check_row(label: str, row: dict[str, str], table: Table, bound_tol: float) -> list[str]:
    """False proofs inside one row: a bound above, or an incumbent below, a proven optimum of the same problem."""
    problems = []
    for problem in dict.fromkeys(m.problem for m in table.methods):
        states = [(m.name, *state(row, m)) for m in table.methods if m.problem == problem]
        optima = [(n, v) for n, s, v, _ in states if s == "optimal" and v is not None]
        if not optima:
            continue
        best_name, best = min(optima, key=lambda nv: nv[1])
        for name, status, value, bound in states:
            if status in ("value", "-"):
                continue
            if bound is not None and bound > best * (1 + bound_tol) + 1e-300:
                problems.append(f"{label}: {name}'s bound {fmt(bound)} is above {best_name}'s optimum {fmt(best)}")
            if status in ("optimal", "feasible") and value is not None and value < best * (1 - bound_tol):
                problems.append(f"{label}: {name}'s incumbent {fmt(value)} is below {best_name}'s optimum {fmt(best)}")
    return problems


def compare_table(table: Table, before: str, after: str, rel_tol: float, bound_tol: float) -> tuple[Counts, list[str]]:
    """Tallies and detail lines for one table."""
    counts = Counts()
    details: list[str] = []
    read = markdown_rows if table.markdown else (lambda text: csv_rows(text, table.section))
    rows_b = {table.row_key(r): r for r in read(before)}
    rows_a = {table.row_key(r): r for r in read(after)}
    for key in rows_b.keys() - rows_a.keys():
        counts.only_before += 1
        details.append(f"only before: {' / '.join(key)}")
    for key in rows_a.keys() - rows_b.keys():
        counts.only_after += 1
        details.append(f"only after: {' / '.join(key)}")
    for which, rows in (("before", rows_b), ("after", rows_a)):
        for key, row in rows.items():
            for problem in check_row(f"{which} {' / '.join(key)}", row, table, bound_tol):
                counts.false_proofs += 1
                details.append(f"**FALSE PROOF** {problem}")
    for key in sorted(rows_b.keys() & rows_a.keys()):
        counts.rows += 1
        label = " / ".join(key)
        for m in table.methods:
            sb, vb, bb = state(rows_b[key], m)
            sa, va, ba = state(rows_a[key], m)
            where = f"{label}, {m.name}"
            if sb == "value" and sa == "value":
                if not close(vb, va, rel_tol):
                    counts.values_changed += 1
                    details.append(f"value changed: {where}: {fmt(vb)} -> {fmt(va)}")
                continue
            if m.status_only and sb == sa:
                counts.same_statuses += 1
                continue
            if sb == "optimal" and sa == "optimal":
                if close(vb, va, rel_tol):
                    counts.same_optima += 1
                else:
                    counts.changed_optima += 1
                    details.append(f"**OPTIMUM CHANGED** {where}: {fmt(vb)} -> {fmt(va)}")
                continue
            if sb != sa:
                counts.status_changes += 1
                details.append(f"status changed: {where}: {sb} {fmt(vb)} (bound {fmt(bb)}) -> {sa} {fmt(va)} (bound {fmt(ba)})")
                continue
            if not (close(vb, va, rel_tol) and close(bb, ba, rel_tol)):
                counts.moved += 1
                details.append(
                    f"{sa} (time-limited or heuristic) moved: {where}: incumbent {fmt(vb)} -> {fmt(va)}, "
                    f"bound {fmt(bb)} -> {fmt(ba)}"
                )
    return counts, details


def report(before_rev: str, after_rev: str, rel_tol: float, bound_tol: float, note: str = "") -> tuple[str, int]:
    """The Markdown report and the number of changed optima plus false proofs."""
    before_rev, after_rev = short(before_rev), short(after_rev)
    head = [
        "# Optima before and after regenerating the results tables",
        "",
        f"Written by `benchmarks/compare_optima.py --before {before_rev} --after {after_rev}`: the optimum-bearing columns "
        "of each table at the two commits, row by row (rows matched on their key columns).",
        "",
        f"- before: {rev_name(before_rev)}",
        f"- after: {rev_name(after_rev)}",
        "",
        f"A proven optimum (status `optimal`, or an exact DP's value) is *the same* when the relative difference is at most "
        f"{rel_tol:g}. *Status changes* are optimal <-> time-limited or infeasible <-> not; *moved* is a time-limited "
        "(or heuristic) row's incumbent or bound that differs; *values changed* are baselines, heuristics and references "
        "without a status. *False proofs* are bounds above (or incumbents below) a proven optimum of the same row, in "
        f"either revision, beyond {bound_tol:g} relative. Every problem here minimises.",
        "",
        *([note, ""] if note else []),
        "| table | rows | same optima | CHANGED optima | status changes | moved | values changed | false proofs | "
        "only before / after | same statuses (no objective) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    body: list[str] = []
    bad = 0
    for table in TABLES:
        before = git_show(before_rev, table.path)
        after = git_show(after_rev, table.path)
        if before is None or after is None:
            head.append(f"| {table.label} | missing at {'before' if before is None else 'after'} | | | | | | | | |")
            continue
        if before == after:
            head.append(f"| {table.label} | not regenerated (file unchanged) | | | | | | | | |")
            continue
        c, details = compare_table(table, before, after, rel_tol, bound_tol)
        bad += c.changed_optima + c.false_proofs
        head.append(
            f"| {table.label} | {c.rows} | {c.same_optima} | {c.changed_optima} | {c.status_changes} | {c.moved} | "
            f"{c.values_changed} | {c.false_proofs} | {c.only_before} / {c.only_after} | {c.same_statuses} |"
        )
        if details:
            body += ["", f"## {table.label}", ""] + [f"- {d}" for d in details]
    verdict = (
        "**Every proven optimum of the regenerated tables is the same, and no bound lies above an optimum.**"
        if bad == 0
        else f"**{bad} changed optima or false proofs: see below.**"
    )
    return "\n".join([*head, "", verdict, *body, ""]), bad


def main(argv: list[str] | None = None) -> int:
    """Command line: write the report, exit 1 where an optimum changed or a bound is a false proof."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="revision of the committed tables before regenerating")
    ap.add_argument("--after", default="HEAD", help="revision with the regenerated tables (default HEAD)")
    ap.add_argument("--rel-tol", type=float, default=1e-9, help="relative tolerance for the same optimum")
    ap.add_argument("--bound-tol", type=float, default=1e-6, help="relative tolerance of a bound above an optimum")
    ap.add_argument("--output", type=Path, default=REPO / "results" / "optima_check.md")
    ap.add_argument("--note", default="", help="a paragraph on how the tables were regenerated (load, runs)")
    args = ap.parse_args(argv)
    text, bad = report(args.before, args.after, args.rel_tol, args.bound_tol, args.note)
    args.output.write_text(text)
    print(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
