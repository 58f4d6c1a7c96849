"""What the benchmark scripts share to draw their charts from their own CSV (matplotlib, the ``plot`` extra).

Each script keeps its rows in a CSV beside its Markdown; with ``--plot-only`` it reads
them back (:func:`read_csv`, numbers as numbers) and re-renders the Markdown and the
chart without running anything.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib's pyplot on the non-interactive Agg back-end (``SystemExit`` naming the extra when it is missing)."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("the charts need matplotlib: pip install 'milp-partition[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def csv_value(text: str) -> Any:
    """A CSV cell back as the number, bool or ``None`` (empty) it was written from; other text as it is."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_csv(path: Path) -> list[dict[str, Any]]:
    """The rows of a CSV a benchmark wrote, values parsed by :func:`csv_value`; ``SystemExit`` when it is missing."""
    if not path.is_file():
        raise SystemExit(f"{path}: no such CSV; run the benchmark without --plot-only first")
    with path.open(newline="") as fh:
        return [{k: csv_value(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def replot_note(csv_names: str, plot_only: bool, kept: str | None = None) -> list[str]:
    """The report's lines saying it was re-rendered by ``--plot-only`` (none after a real run).

    ``kept``: what the report took from its previous version because the CSV lacks it (``None``: nothing).
    """
    if not plot_only:
        return []
    return [f"Re-rendered from {csv_names} by `--plot-only` (nothing ran" + (f"; {kept}" if kept else "") + ").", ""]


def save(fig: Any, path: Path) -> str:
    """Save ``fig`` as ``path`` (PNG, 110 dpi), close it, and return the file name for the Markdown."""
    plt = pyplot()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def grouped_bars(
    ax: Any,
    groups: list[str],
    series: list[tuple[str, list[float | None], list[bool]]],
    *,
    log: bool = True,
) -> None:
    """One group of bars per entry of ``groups``, one bar per series ``(label, values, proven)``.

    A ``None`` value draws no bar; a bar whose ``proven`` is false is pale and hatched
    (the run ended at its limit without a proof).  Every bar's ``gid`` is ``"label|group"``.
    """
    plt = pyplot()
    cmap = plt.get_cmap("tab10")
    width = 0.8 / max(1, len(series))
    for j, (label, values, proven) in enumerate(series):
        first = True
        for i, (value, ok) in enumerate(zip(values, proven)):
            if value is None:
                continue
            x = i + (j - (len(series) - 1) / 2) * width
            (bar,) = ax.bar(x, value, width=width, color=cmap(j % 10), hatch=None if ok else "//", edgecolor="white",
                            alpha=1.0 if ok else 0.5, label=label if first else None)  # fmt: skip
            bar.set_gid(f"{label}|{groups[i]}")
            first = False
    if log:
        ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)


def from_report(path: Path, pattern: str) -> re.Match[str] | None:
    """The first match of ``pattern`` (multi-line) in the report ``path`` a previous run wrote; ``None`` when either is missing.

    For ``--plot-only`` on a CSV written before it carried the run's settings (machine, limits,
    ...): nothing else holds them, so they are read back from the report being re-rendered.
    """
    if not path.is_file():
        return None
    return re.search(pattern, path.read_text(), re.MULTILINE)
