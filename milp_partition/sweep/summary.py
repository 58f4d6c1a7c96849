"""Gap arithmetic on sweep rows: groups (one instance at one point), best bound, gap of each row.

Gap = (value - best proven bound) / value, the bound being the largest proven one
in the group (the exact solve's, or the cheap bounds' with ``--no-exact``); excess =
value / best value found - 1.  Only verified values count (statuses ``feasible`` and
``optimal``).
"""

from __future__ import annotations

from dataclasses import dataclass

VALUED = ("feasible", "optimal")


@dataclass(frozen=True)
class Group:
    """The rows of one instance at one settings point."""

    problem: str
    instance: str
    sha: str
    point: str
    options: str
    rows: tuple[dict[str, str], ...]

    @property
    def label(self) -> str:
        return self.instance if self.point == "default" else f"{self.instance} [{self.point}]"

    @property
    def best_bound(self) -> float | None:
        bounds = [float(r["bound"]) for r in self.rows if r["bound"] and r["status"] != "error"]
        return max(bounds) if bounds else None

    @property
    def best_value(self) -> float | None:
        values = [float(r["value"]) for r in self.rows if r["value"] and r["status"] in VALUED]
        return min(values) if values else None

    def gap(self, row: dict[str, str]) -> float | None:
        """``(value - best bound) / value`` of a row, ``None`` without a value or bound."""
        bound = self.best_bound
        if not row["value"] or row["status"] not in VALUED or bound is None:
            return None
        value = float(row["value"])
        return 0.0 if value == 0 else max(0.0, (value - bound) / value)

    def excess(self, row: dict[str, str]) -> float | None:
        best = self.best_value
        if not row["value"] or row["status"] not in VALUED or not best:
            return None
        return float(row["value"]) / best - 1


def _base_options(options: str) -> str:
    """The options without the exact solve's settings (so heuristics and the exact row share a group)."""
    return ";".join(x for x in options.split(";") if x and not x.startswith(("time_limit=", "threads=", "seed=")))


def groups(rows: list[dict[str, str]]) -> list[Group]:
    """Rows grouped by problem, instance, content hash, point and options, in first-seen order."""
    out: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for r in rows:
        out.setdefault((r["problem"], r["instance"], r["sha"], r["point"], _base_options(r["options"])), []).append(r)
    return [Group(k[0], k[1], k[2], k[3], k[4], tuple(rs)) for k, rs in out.items()]
