"""Charts of a sweep (matplotlib, the optional ``plot`` extra): gap per heuristic per instance; time against size.

Both functions return a :class:`matplotlib.figure.Figure` (tests read bars and labels
from it); :func:`write_charts` saves them next to the report.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from milp_partition.io.atomic import write_atomic
from milp_partition.sweep.jobs import BOUND, EXACT
from milp_partition.sweep.summary import groups


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def gap_figure(rows: list[dict[str, str]]) -> Any:
    """One panel per problem: grouped bars, one group per instance and point, one bar per heuristic (gap in %).

    A bar is drawn for every heuristic row with a verified value and a bound; its
    ``gid`` is ``"problem|instance label|method"``.  A heuristic row without a verified
    value (rejected by the verifier, or no answer) is marked by an ``x`` at 0 whose
    ``gid`` is ``"missing|problem|instance label|method"``: a missing bar is never a zero gap.
    """
    plt = _pyplot()
    gs = [g for g in groups(rows) if g.best_bound is not None]
    problems = list(dict.fromkeys(g.problem for g in gs)) or ["(no bounds)"]
    widest = max((sum(1 for g in gs if g.problem == p) for p in problems), default=1)
    fig, axes = plt.subplots(len(problems), 1, figsize=(max(11.0, 0.42 * widest + 3), 4.2 * len(problems)), squeeze=False)
    for ax, problem in zip(axes[:, 0], problems):
        pg = [g for g in gs if g.problem == problem]
        methods = list(dict.fromkeys(r["method"] for g in pg for r in g.rows if r["method"] not in (EXACT, BOUND)))
        width = 0.8 / max(1, len(methods))
        cmap = plt.get_cmap("tab10")
        for j, m in enumerate(methods):
            xs, hs, gids = [], [], []
            for i, g in enumerate(pg):
                r = next((r for r in g.rows if r["method"] == m), None)
                gap = g.gap(r) if r is not None else None
                x = i + (j - (len(methods) - 1) / 2) * width
                if gap is not None:
                    xs.append(x)
                    hs.append(100 * gap)
                    gids.append(f"{problem}|{g.label}|{m}")
                    if gap == 0:  # a bar of height 0 is not seen: a dash on the axis marks the heuristic that met it
                        (dash,) = ax.plot([x], [0], marker="_", markersize=9, mew=2.5, color=cmap(j % 10), linestyle="none")
                        dash.set_gid(f"zero|{problem}|{g.label}|{m}")
                elif r is not None:
                    (mark,) = ax.plot([x], [0], marker="x", color=cmap(j % 10), markersize=5, linestyle="none")
                    mark.set_gid(f"missing|{problem}|{g.label}|{m}")
            bars = ax.bar(xs, hs, width=width, label=m, color=cmap(j % 10))
            for bar, gid in zip(bars, gids):
                bar.set_gid(gid)
        ax.set_xticks(range(len(pg)))
        ax.set_xticklabels([_tick(g.instance, g.point) for g in pg], rotation=60, ha="right", fontsize=7)
        ax.set_xlim(-0.6, len(pg) - 0.4)
        ax.set_ylabel("gap to proven bound (%)")
        ax.set_title(f"{problem}: heuristic gap to the best proven bound (-: 0%, x: no verified answer)")
        ax.grid(axis="y", alpha=0.3)
        if methods:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def _tick(instance: str, point: str) -> str:
    """``bert24_inference 4/8GiB``: the instance and its point's values (axis names dropped)."""
    if point == "default":
        return instance
    return f"{instance} {'/'.join(x.split('=', 1)[1] for x in point.split(';'))}"


def time_figure(rows: list[dict[str, str]]) -> Any:
    """One panel per problem: seconds of each run against instance size (nodes or tasks), a series per method, log axes."""
    plt = _pyplot()
    problems = list(dict.fromkeys(r["problem"] for r in rows)) or ["(no runs)"]
    fig, axes = plt.subplots(1, len(problems), figsize=(6.5 * len(problems), 4), squeeze=False)
    for ax, problem in zip(axes[0], problems):
        pr = [r for r in rows if r["problem"] == problem and r["size"] and r["seconds"]]
        for m in dict.fromkeys(r["method"] for r in pr):
            pts = [(float(r["size"]), max(float(r["seconds"]), 1e-4)) for r in pr if r["method"] == m]
            ax.plot(
                [p[0] for p in pts], [p[1] for p in pts], marker="s" if m == EXACT else "o",
                linestyle="none", label=m, alpha=0.8,
            )  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("instance size (nodes / layers / tasks)")
        ax.set_ylabel("seconds")
        ax.set_title(f"{problem}: time against size")
        ax.grid(alpha=0.3)
        if pr:  # beside the panel, never over a point (it hid the exact solve's)
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def write_charts(rows: list[dict[str, str]], out_dir: Path, stem: str) -> list[str]:
    """Save ``STEM_gap.png`` and ``STEM_time.png`` in ``out_dir``; return their file names."""
    plt = _pyplot()
    names = []
    for suffix, make in (("gap", gap_figure), ("time", time_figure)):
        fig = make(rows)
        name = f"{stem}_{suffix}.png"
        image = io.BytesIO()
        fig.savefig(image, dpi=110, format="png")  # drawn in memory, then written atomically
        plt.close(fig)
        write_atomic(out_dir / name, image.getvalue(), what="--output-dir")
        names.append(name)
    return names
