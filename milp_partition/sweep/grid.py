"""The settings grid of a sweep: devices x memory x micro-batches x memory model x bandwidth.

Each problem uses the axes it has (:attr:`GapProblem.axes`); the others are dropped
from its points, and points that then coincide are run once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from milp_partition.errors import InputError
from milp_partition.units import parse_bytes, parse_rate

#: Grid axes in the order they appear in a point's text.
AXES: tuple[str, ...] = ("devices", "memory", "micro_batches", "memory_model", "bandwidth")


@dataclass(frozen=True)
class Grid:
    """Values of each axis (an empty tuple: the axis is not swept; the instance's own value holds)."""

    devices: tuple[int, ...] = ()
    memory: tuple[str, ...] = ()
    micro_batches: tuple[int, ...] = ()
    memory_model: tuple[str, ...] = ()
    bandwidth: tuple[str, ...] = ()

    def points(self, axes: dict[str, tuple[str, ...] | None]) -> list[tuple[tuple[str, str], ...]]:
        """The distinct points for a problem whose axes are ``axes`` (name -> allowed values or ``None`` = any).

        A memory model the problem does not know is dropped from its points; when none of
        the swept models applies, the problem runs with its default model.
        """
        values: list[list[tuple[str, str]]] = []
        for name in AXES:
            if name not in axes:
                continue
            raw = [str(v) for v in getattr(self, name)]
            allowed = axes[name]
            if allowed is not None:
                raw = [v for v in raw if v in allowed]
            if raw:
                values.append([(name, v) for v in raw])
        return [tuple(p) for p in itertools.product(*values)] if values else [()]


def parse_grid(
    devices: str | None,
    memory: str | None,
    micro_batches: str | None,
    memory_model: str | None,
    bandwidth: str | None = None,
) -> Grid:
    """A grid from the comma-separated command-line values (``None``: axis not swept)."""

    def split(text: str | None) -> list[str]:
        return [x.strip() for x in (text or "").split(",") if x.strip()]

    try:
        devs = tuple(int(x) for x in split(devices))
        mbs = tuple(int(x) for x in split(micro_batches))
    except ValueError:
        raise InputError("--devices and --micro-batches take comma-separated integers, e.g. 4,8,16", where="gap grid") from None
    if any(d < 1 for d in devs) or any(m < 1 for m in mbs):
        raise InputError("--devices and --micro-batches must be at least 1", where="gap grid")
    mems = tuple(split(memory))
    for m in mems:
        parse_bytes(m, "--memory")
    rates = tuple(split(bandwidth))
    for r in rates:
        parse_rate(r, "--bandwidth")
    return Grid(devs, mems, mbs, tuple(split(memory_model)), rates)


def point_text(point: tuple[tuple[str, str], ...]) -> str:
    """``devices=4;memory=8GiB`` (``default`` for the empty point)."""
    return ";".join(f"{k}={v}" for k, v in point) or "default"


def point_dict(point: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(point)
