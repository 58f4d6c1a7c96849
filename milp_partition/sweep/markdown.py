"""The Markdown report of a sweep: a summary per problem and heuristic, then a table per instance and point."""

from __future__ import annotations

import statistics

from milp_partition.sweep.jobs import EXACT, STOPPED_AT_LIMIT
from milp_partition.sweep.summary import Group, groups


def _fmt(x: str) -> str:
    return f"{float(x):.6g}" if x else ""


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.2%}"


def render_markdown(rows: list[dict[str, str]], command: str, code: str, charts: list[str], note: str = "") -> str:
    """The report of ``rows``; ``charts`` are image file names to embed; rows of other ``code`` are marked stale."""
    lines = [
        f"<!-- written by milp_partition/sweep/markdown.py (milp-partition gap), last command: {command} -->",
        "",
        "# Heuristics against the exact solvers",
        "",
        *([note, ""] if note else []),
        f"Code {code} (hash of the package source). Times are wall-clock seconds of each run alone: a heuristic's own "
        "time; the exact solve end to end (bounds, heuristics for its warm start, model, solver, verification).",
        "",
        "Gap = (value - best proven bound) / value; excess = value / best value found - 1. Values are the independent "
        "verifiers' (real units of the instance: time per sample, cost, makespan); bounds are proven (the exact solve's, "
        "or the cheap bounds with --no-exact). Status `rejected`: the verifier refused the heuristic's answer; `failed`: "
        "the heuristic gave none; `error`: the run raised or its worker died.",
        "",
    ]
    if any(r["code"] != code for r in rows):
        lines += ["Rows marked † were computed by other code than the current (run the sweep again to refresh them).", ""]
    for chart in charts:
        lines += [f"![{chart}]({chart})", ""]
    gs = groups(rows)
    for problem in dict.fromkeys(g.problem for g in gs):
        pg = [g for g in gs if g.problem == problem]
        lines += [f"## {problem}", "", "| method | runs | verified | mean gap | max gap | mean excess | median seconds |"]
        lines.append("|---|---|---|---|---|---|---|")
        methods = dict.fromkeys(r["method"] for g in pg for r in g.rows)
        for m in methods:
            rs = [(g, r) for g in pg for r in g.rows if r["method"] == m]
            gaps = [x for g, r in rs if (x := g.gap(r)) is not None]
            exc = [x for g, r in rs if (x := g.excess(r)) is not None]
            secs = [float(r["seconds"]) for _, r in rs if r["seconds"]]
            lines.append(
                f"| {m} | {len(rs)} | {sum(1 for g, r in rs if g.gap(r) is not None or r['value'])} | "
                f"{_pct(statistics.fmean(gaps)) if gaps else ''} | {_pct(max(gaps)) if gaps else ''} | "
                f"{_pct(statistics.fmean(exc)) if exc else ''} | {f'{statistics.median(secs):.4g}' if secs else ''} |"
            )
        lines.append("")
        for g in pg:
            lines += _group_table(g, code)
    return "\n".join(lines)


def _group_table(g: Group, code: str) -> list[str]:
    unit = next((r["unit"] for r in g.rows if r["unit"]), "")
    unit = unit if len(unit) <= 24 else unit.split(" ")[0]
    size = next((r["size"] for r in g.rows if r["size"]), "")
    exact_opts = next((r["options"] for r in g.rows if r["method"] == EXACT), g.options)
    lines = [
        f"### {g.problem}: {g.label} (sha {g.sha}, size {size}{', ' + exact_opts if exact_opts else ''})",
        "",
        f"| method | status | value{f' ({unit})' if unit else ''} | bound | gap to bound | excess over best | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in g.rows:
        shown = r["status"] in ("failed", "error", "rejected") or r["message"].startswith(STOPPED_AT_LIMIT)
        note = f" ({r['message'][:90]})" if shown else ""
        stale = " †" if r["code"] != code else ""
        lines.append(
            f"| {r['method']} | {r['status']}{stale}{note} | {_fmt(r['value'])} | {_fmt(r['bound'])} | {_pct(g.gap(r))} | "
            f"{_pct(g.excess(r))} | {r['seconds']} |"
        )
    lines.append("")
    return lines
