"""Gantt chart of a placement schedule: one lane per device, one per used device pair for transfers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from milp_partition.errors import InputError
from milp_partition.io.placement_instance import read_placement_instance
from milp_partition.placement.problem import PlacementSettings
from milp_partition.plots import pyplot


def figure(result: Mapping[str, Any], instance_path: str | None, options: Mapping[str, str]) -> Any:
    """The schedule of ``result`` (its ``assignment`` and ``starts``) on the instance at ``instance_path``.

    Task bars span ``[start, start + time on its device]``; a transfer (an edge between
    two devices with a positive transfer time) spans ``[end of its source, + comm]``
    (or from its recorded start under link contention) on the lane of its device pair.
    """
    if not instance_path:
        raise InputError(
            "a placement result holds no task times and this one names no instance file; give it with --instance FILE",
            where="plot",
        )
    settings = result.get("settings") or {}
    problem = read_placement_instance(
        instance_path,
        PlacementSettings(bool(settings.get("link_contention", False)), settings.get("memory_model", "static")),
    )
    assignment = result.get("assignment") or {}
    starts = result.get("starts") or {}
    missing = [t for t in problem.task_ids if t not in assignment or t not in starts]
    if missing:
        raise InputError(f"the result has no device or start for task {missing[0]!r}: is it of this instance?", where="plot")
    dev_index = {d: k for k, d in enumerate(problem.device_ids)}
    for t in problem.task_ids:
        if assignment[t] not in dev_index:
            raise InputError(f"task {t!r} is on device {assignment[t]!r}, which the instance does not have", where="plot")
    plt = pyplot()
    transfers = []
    end = {}
    for i, t in enumerate(problem.task_ids):
        k = dev_index[assignment[t]]
        end[t] = float(starts[t]) + float(problem.time[i, k])
    tstarts = result.get("transfer_starts") or {}
    for e in range(problem.num_edges):
        src, dst = problem.task_ids[int(problem.edge_source[e])], problem.task_ids[int(problem.edge_target[e])]
        a, b = dev_index[assignment[src]], dev_index[assignment[dst]]
        dur = float(problem.comm[e, a, b])
        if a != b and dur > 0:
            key = f"{src}->{dst}"
            transfers.append((key, a, b, float(tstarts.get(key, end[src])), dur))
    pairs = sorted({(a, b) for _, a, b, _, _ in transfers})
    lanes = list(problem.device_ids) + [f"{problem.device_ids[a]}→{problem.device_ids[b]}" for a, b in pairs]
    makespan = max([*end.values(), *(s + d for _, _, _, s, d in transfers)], default=0.0)
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.45 * len(lanes)))
    cmap = plt.get_cmap("tab20")
    for i, t in enumerate(problem.task_ids):
        k = dev_index[assignment[t]]
        dur = float(problem.time[i, k])
        if dur <= 0 or not math.isfinite(dur):
            continue
        (bar,) = ax.barh(k, dur, left=float(starts[t]), height=0.7, color=cmap(i % 20), edgecolor="black", linewidth=0.3)
        bar.set_gid(f"task:{t}")
        if makespan > 0 and dur > 0.04 * makespan:
            ax.text(float(starts[t]) + dur / 2, k, t, ha="center", va="center", fontsize=6, clip_on=True)
    for key, a, b, s, dur in transfers:
        lane = len(problem.device_ids) + pairs.index((a, b))
        (bar,) = ax.barh(lane, dur, left=s, height=0.5, color="lightgrey", edgecolor="dimgrey", hatch="//", linewidth=0.3)
        bar.set_gid(f"transfer:{key}")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({problem.time_unit})")
    value = result.get("objective")
    ax.set_title(
        f"{problem.name or 'placement'}: makespan {value:.6g} ({result.get('status')})" if value is not None else problem.name
    )
    ax.axvline(makespan, color="red", linewidth=0.8, linestyle="--")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
