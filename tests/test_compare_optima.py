"""The pure parts of ``benchmarks/compare_optima.py``: row matching, the verdicts, the false-proof check.

Small CSV texts stand for two revisions of a table; no git, no solving.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_optima.py"


@pytest.fixture(scope="module")
def co() -> Any:
    spec = importlib.util.spec_from_file_location("compare_optima", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["compare_optima"] = module
    spec.loader.exec_module(module)
    return module


HEADER = "case,k,status,objective,bound,base\n"


def _table(co: Any) -> Any:
    return co.Table(
        "results/x.csv", ("case", "k"), (co.Method("solve", "objective", "status", "bound"), co.Method("base", "base"))
    )


def test_same_optima_and_a_moved_time_limited_row(co: Any) -> None:
    before = HEADER + "a,2,optimal,1.5,1.5,2.0\nb,4,feasible,3.0,2.0,4.0\nc,8,infeasible,,,\n"
    after = HEADER + "c,8,infeasible,,,\na,2,optimal,1.5000000000001,1.4999999,2.0\nb,4,feasible,2.9,2.1,4.0\n"
    counts, details = co.compare_table(_table(co), before, after, 1e-9, 1e-6)
    assert (counts.rows, counts.same_optima, counts.changed_optima, counts.moved) == (3, 1, 0, 1)
    assert counts.false_proofs == 0 and counts.status_changes == 0
    assert details == ["feasible (time-limited or heuristic) moved: b / 4, solve: incumbent 3 -> 2.9, bound 2 -> 2.1"]


def test_a_changed_optimum_a_status_change_and_unmatched_rows(co: Any) -> None:
    before = HEADER + "a,2,optimal,1.5,1.5,2.0\nb,4,optimal,3.0,3.0,4.0\nd,1,optimal,1,1,1\n"
    after = HEADER + "a,2,optimal,1.6,1.6,2.5\nb,4,infeasible,,,4.0\ne,1,optimal,1,1,1\n"
    counts, details = co.compare_table(_table(co), before, after, 1e-9, 1e-6)
    assert counts.changed_optima == 1 and counts.status_changes == 1 and counts.values_changed == 1
    assert (counts.only_before, counts.only_after) == (1, 1)
    assert "**OPTIMUM CHANGED** a / 2, solve: 1.5 -> 1.6" in details
    assert "only before: d / 1" in details and "only after: e / 1" in details


def test_a_bound_above_an_optimum_of_the_same_problem_is_a_false_proof(co: Any) -> None:
    table = co.Table(
        "results/x.csv",
        ("case",),
        (
            co.Method("dp", "dp", always_exact=True),
            co.Method("milp", "m_obj", "m_status", "m_bound"),
            co.Method("restricted", "r_obj", "r_status", problem="other"),
        ),
    )
    text = "case,dp,m_obj,m_status,m_bound,r_obj,r_status\n"
    ok = text + "a,10,10.5,feasible,9.9,12,optimal\n"
    bad = text + "a,10,10.5,feasible,10.2,12,optimal\n"
    assert co.compare_table(table, ok, ok, 1e-9, 1e-6)[0].false_proofs == 0
    counts, details = co.compare_table(table, ok, bad, 1e-9, 1e-6)
    assert counts.false_proofs == 1
    assert details[0] == "**FALSE PROOF** after a: milp's bound 10.2 is above dp's optimum 10"
    below = text + "a,10,9.5,feasible,9,12,optimal\n"
    assert co.compare_table(table, below, below, 1e-9, 1e-6)[0].false_proofs == 2


def test_sections_markdown_and_numbers(co: Any) -> None:
    text = "# one\nx,y\n1,2\n# two\nx,y\n3,4\n5,6\n"
    assert co.csv_rows(text, "two") == [{"x": "3", "y": "4"}, {"x": "5", "y": "6"}]
    md = "title\n\n| case | bound | below | bound |\n|---|---|---|---|\n| a | 0.5 (DP) | 3% | not run |\n"
    rows = co.markdown_rows(md)
    assert rows == [{"case": "a", "bound": "0.5 (DP)", "below": "3%", "bound (3)": "not run"}]
    assert co.number("0.5 (DP)") == 0.5 and co.number("not run") is None and co.number("") is None


def test_aliases_match_a_run_labelled_by_its_outcome(co: Any) -> None:
    table = co.Table("results/x.csv", ("case", "method"), (co.Method("solve", "objective", "status", "bound"),),
                     aliases=(("method", "joint-wide", "joint-milp/cpsat"),))  # fmt: skip
    before = "case,method,status,objective,bound\nw,joint-wide,optimal,1.0,1.0\n"
    after = "case,method,status,objective,bound\nw,joint-milp/cpsat,feasible,1.1,0.9\n"
    counts, details = co.compare_table(table, before, after, 1e-9, 1e-6)
    assert (counts.rows, counts.status_changes, counts.only_before) == (1, 1, 0)
    assert details == ["status changed: w / joint-milp/cpsat, solve: optimal 1 (bound 1) -> feasible 1.1 (bound 0.9)"]


def test_markdown_optimum_cells_and_bound_columns(co: Any) -> None:
    table = co.Table(
        "results/x.md",
        ("case",),
        (co.Method("upper end", "upper end", optimum_text="(optimum (DP))"), co.Method("lb", "lb", bound_only=True)),
        markdown=True,
    )
    head = "| case | upper end | lb |\n|---|---|---|\n"
    before = head + "| a | 0.5 (optimum (DP)) | 0.4 |\n| b | 0.9 (orders' plan) | 0.7 |\n"
    after = head + "| a | 0.5 (optimum (DP)) | 0.45 |\n| b | 0.9 (orders' plan) | 0.95 |\n"
    counts, details = co.compare_table(table, before, after, 1e-9, 1e-6)
    assert (counts.same_optima, counts.moved, counts.false_proofs) == (1, 2, 0)
    assert "bound (time-limited or heuristic) moved: a, lb: incumbent - -> -, bound 0.4 -> 0.45" in details
    wrong = head + "| a | 0.5 (optimum (DP)) | 0.6 |\n"
    assert co.compare_table(table, before, wrong, 1e-9, 1e-6)[0].false_proofs == 1


def test_status_only_columns_and_feasible_only_plans(co: Any) -> None:
    table = co.Table(
        "results/x.csv",
        ("case",),
        (
            co.Method("solve", "status", status_only=True),
            co.Method("opt", "opt", "opt_status"),
            co.Method("old plan", "old", feasible_only=True),
        ),
    )
    head = "case,status,opt,opt_status,old\n"
    before = head + "a,optimal,2.0,optimal,2.5\nb,optimal,,,\n"
    after = head + "a,optimal,2.0,optimal,2.4\nb,feasible,,,\n"
    counts, details = co.compare_table(table, before, after, 1e-9, 1e-6)
    assert (counts.same_statuses, counts.same_optima, counts.status_changes, counts.moved) == (1, 1, 1, 1)
    assert "status changed: b, solve: optimal - (bound -) -> feasible - (bound -)" in details
    # a verified plan of the same problem below its proven optimum is a false proof; a missing one is not a plan
    below = head + "a,optimal,2.0,optimal,1.9\nb,optimal,,,\n"
    counts, details = co.compare_table(table, before, below, 1e-9, 1e-6)
    assert counts.false_proofs == 1
    assert "**FALSE PROOF** after a: old plan's incumbent 1.9 is below opt's optimum 2" in details


def test_every_listed_table_reads_its_committed_file(co: Any) -> None:
    """Each table's key and method columns exist in the committed results file (a renamed column would be missed)."""
    root = SCRIPT.parents[1]
    for table in co.TABLES:
        path = root / table.path
        if not path.exists():
            continue
        text = path.read_text()
        rows = co.markdown_rows(text) if table.markdown else co.csv_rows(text, table.section)
        assert rows, table.label
        columns = set(rows[0])
        named = {*table.key, *(c for m in table.methods for c in (m.value, m.status, m.bound, m.exact) if c)}
        assert named <= columns, (table.label, sorted(named - columns))
