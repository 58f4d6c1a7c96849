"""Stage chart of a joint plan: each stage's time per sample (bottleneck marked) and one device's memory against the limit.

Bars carry ``gid`` ``time:Q`` and ``memory:Q`` (``Q`` = stage number from 1); the
memory limit is a dashed line with ``gid`` ``limit``; each stage's tick label is
``stage Q`` over ``d x t`` (its data- and tensor-parallel degrees) over its number of nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from milp_partition.plots import pyplot
from milp_partition.units import parse_bytes

GIB = 2**30


def _limit(result: Mapping[str, Any], options: Mapping[str, str]) -> float | None:
    """Memory per device: ``--memory`` when given, else the result's instance's."""
    if options.get("memory"):
        return float(parse_bytes(options["memory"], "--memory"))
    value = (result.get("instance") or {}).get("memory_bytes")
    return float(value) if isinstance(value, (int, float)) else None


def figure(result: Mapping[str, Any], instance_path: str | None, options: Mapping[str, str]) -> Any:
    """Two panels over the stages in pipeline order: time per sample (bottleneck red), memory per device with the limit."""
    plt = pyplot()
    stages = list(result.get("stages") or [])
    times = [float(st.get("time_per_sample_s", 0.0)) for st in stages]
    memory = [float(st.get("memory_bytes", 0.0)) for st in stages]
    worst = max(times, default=0.0)
    labels = [
        f"stage {q + 1}\n{st['data_parallel']} x {st['tensor_parallel']}\n{_nodes(len(st.get('nodes') or []))}"
        for q, st in enumerate(stages)
    ]
    width = max(10.0, 0.5 * len(stages) + 4)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(width, 7.5), sharex=True)
    for q, t in enumerate(times):
        bottleneck = t == worst and worst > 0
        (bar,) = ax1.bar(q, t, color="tab:red" if bottleneck else "tab:blue")
        bar.set_gid(f"time:{q + 1}")
        ax1.text(q, t, f"{t:.4g}" + ("\nbottleneck" if bottleneck else ""), ha="center", va="bottom", fontsize=7)
    ax1.set_ylabel("time per sample (s)")
    ax1.set_ylim(0, worst * 1.25 if worst > 0 else 1)
    objective = result.get("objective")
    head = f"time per sample {objective:.6g} s" if isinstance(objective, (int, float)) else "no plan"
    devices = sum(int(st.get("devices", 0)) for st in stages)
    ax1.set_title(f"{head} ({result.get('status')}), {len(stages)} stages on {devices} devices; red: bottleneck")
    ax1.grid(axis="y", alpha=0.3)
    limit = _limit(result, options)
    for q, m in enumerate(memory):
        (bar,) = ax2.bar(q, m / GIB, color="tab:green")
        bar.set_gid(f"memory:{q + 1}")
    if limit is not None and stages:
        line = ax2.hlines(limit / GIB, -0.5, len(stages) - 0.5, colors="black", linestyles="--")
        line.set_gid("limit")
    ax2.set_ylabel("memory per device (GiB)")
    ax2.set_title(
        f"memory of one device of each stage (dashed: limit {limit / GIB:.4g} GiB)" if limit is not None else "memory per device"
    )
    ax2.grid(axis="y", alpha=0.3)
    ax2.set_xticks(range(len(stages)))
    ax2.set_xticklabels(labels, fontsize=8)
    ax2.set_xlabel("stage (pipeline order); data-parallel x tensor-parallel degree; nodes")
    source = str((result.get("instance") or {}).get("source") or "joint plan")
    fig.suptitle(source.rsplit("/", 1)[-1])
    fig.tight_layout()
    return fig


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"
