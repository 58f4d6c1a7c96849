"""Text blocks shared by the reports of every problem (number formats, times, heuristics, warm start, devices)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from milp_partition.result import Result


def fmt(x: float | None, digits: int = 10) -> str:
    """``x`` with ``digits`` significant digits; ``-`` for none, NaN or infinity."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}"


def fmt_bytes(x: float | None) -> str:
    """A byte count in GiB, MiB, KiB or B."""
    if x is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(x) >= size:
            return f"{x / size:.2f} {unit}"
    return f"{x:.0f} B"


def gap_text(gap: float | None) -> str:
    """A relative gap in percent; below 1e-9 (rounding of the sums) it reads 0%."""
    if gap is None:
        return "-"
    return "0%" if gap < 1e-9 else f"{fmt(100 * gap, 3)}%"


def run_lines(result: Result, name_width: int = 9, digits: int = 10) -> list[str]:
    """The time line, one line per heuristic run, the warm start line and the claims the status policy discarded."""
    lines = [f"time       {result.solve_seconds:.2f} s total, {result.solver_seconds:.2f} s in {result.solver}"]
    for h in result.heuristics:
        lines.append(f"heuristic  {h.name:{name_width}s} {fmt(h.objective, digits)}  ({h.seconds:.3f} s) {h.message}")
    if result.warm_start:
        ws = result.warm_start
        lines.append(
            f"warm start from {ws.get('source')} ({fmt(ws.get('objective'))}); solver's first incumbent {fmt(ws.get('first_incumbent'))}"
        )
    lines.extend(f"discarded  {note}" for note in result.discarded)
    return lines


def device_counts(result: Result, devices: Iterable[str]) -> dict[str, int]:
    """How many nodes or tasks of ``result.assignment`` each device holds (0 for an unused one)."""
    counts = dict.fromkeys(devices, 0)
    for dev in result.assignment.values():
        counts[dev] = counts.get(dev, 0) + 1
    return counts


def unit_label(time_unit: str | None) -> str:
    """The word a report prints after a time: the unit, or ``units`` where the file gives none (``""`` or
    ``unitless``); ``solve`` and ``evaluate`` print the same word."""
    return time_unit if time_unit and time_unit != "unitless" else "units"


#: A plan whose memory is within this share of the limit gets a warning in its report.
MEMORY_MARGIN = 0.05


def memory_margin_lines(used: Mapping[str, float], limits: Mapping[str, float | None]) -> list[str]:
    """A ``warning`` line for each device (or stage) whose verified memory is within :data:`MEMORY_MARGIN` of its limit:
    the model counts no allocator overhead, fragmentation or CUDA context (``--memory-reserve`` keeps room for them)."""
    lines = []
    for name, x in used.items():
        limit = limits.get(name)
        if limit is not None and limit > 0 and x > (1 - MEMORY_MARGIN) * limit:
            lines.append(
                f"warning    {name} uses {fmt_bytes(x)} of {fmt_bytes(limit)} ({100 * x / limit:.1f}%): within "
                f"{100 * MEMORY_MARGIN:g}% of the limit, allocator overhead may not fit; --memory-reserve SIZE keeps room"
            )
    return lines


def node_label(node_id: str, name: str) -> str:
    """A node as a report names it: its name, with ``[id]`` after it where the name does not start with the id.

    The result's ``assignment`` and the Python API key nodes by id; a report that printed only names left a user
    looking up ``node1`` where the key is ``'1'`` (Tarnawski's files).  ``h.4 (26 ops)`` (id ``h.4``) stays as it is;
    ``node1`` (id ``1``) becomes ``node1 [1]``.
    """
    if not name or name == node_id:
        return node_id
    return name if name.startswith(node_id) else f"{name} [{node_id}]"


def names_span(names: list[str], width: int = 60) -> str:
    """The layers of a stage or device for a report: all of them when they fit ``width`` characters, else the range
    ``first .. last (N layers)`` (``embed .. head (43 layers)``).  No name is written twice (a three-layer stage gave
    ``l1, l2 .. l2, l3``)."""
    if not names:
        return "-"
    text = ", ".join(names)
    if len(text) <= width:
        return text
    return f"{names[0]} .. {names[-1]} ({len(names)} layers)"
