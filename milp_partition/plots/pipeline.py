"""Stage chart of a pipeline plan: load of each device, and its memory against the limit."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from milp_partition.io import read_instance
from milp_partition.plots import pyplot
from milp_partition.units import parse_bytes


def _limits(result: Mapping[str, Any], instance_path: str | None, options: Mapping[str, str]) -> dict[str, float]:
    """Memory limit per device: ``--memory`` for every accelerator, else the instance's cluster (when it has one)."""
    devices = [d for d in result.get("memory_bytes") or {}]
    if options.get("memory"):
        cap = parse_bytes(options["memory"], "--memory")
        return {d: float(cap) for d in devices if not d.startswith("cpu")}
    if not instance_path:
        return {}

    cluster = read_instance(instance_path).cluster
    if cluster is None:
        return {}
    return {d.id: float(d.memory_bytes) for d in cluster.devices if d.memory_bytes is not None}


def figure(result: Mapping[str, Any], instance_path: str | None, options: Mapping[str, str]) -> Any:
    """Two panels: load per device (time per sample is the largest); memory per accelerator and its limit."""
    plt = pyplot()
    loads = dict(result.get("loads") or {})
    memory = dict(result.get("memory_bytes") or {})
    recorded = (result.get("instance") or {}).get("source")
    limits = _limits(result, instance_path or (recorded if recorded and Path(recorded).is_file() else None), options)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    names = list(loads)
    value = max(loads.values(), default=0.0)
    for i, d in enumerate(names):
        (bar,) = ax1.bar(i, loads[d], color="tab:red" if loads[d] == value and value > 0 else "tab:blue")
        bar.set_gid(f"load:{d}")
        ax1.text(i, loads[d], f"{loads[d]:.4g}", ha="center", va="bottom", fontsize=7)
    ax1.set_xticks(range(len(names)))
    ax1.set_xticklabels(names, rotation=30, ha="right")
    ax1.set_ylabel(f"load ({result.get('time_unit') or 'time'})")
    ax1.set_title(f"stage loads: time per sample {value:.6g} ({result.get('status')})")
    ax1.grid(axis="y", alpha=0.3)
    mnames = list(memory)
    scale = 2**30
    for i, d in enumerate(mnames):
        (bar,) = ax2.bar(i, memory[d] / scale, color="tab:green")
        bar.set_gid(f"memory:{d}")
        if d in limits:
            line = ax2.hlines(limits[d] / scale, i - 0.4, i + 0.4, colors="black", linestyles="--")
            line.set_gid(f"limit:{d}")
    ax2.set_xticks(range(len(mnames)))
    ax2.set_xticklabels(mnames, rotation=30, ha="right")
    ax2.set_ylabel("memory (GiB)")
    ax2.set_title("memory per accelerator (dashed: limit)" if limits else "memory per accelerator (no limit known)")
    ax2.grid(axis="y", alpha=0.3)
    fig.suptitle(str((result.get("instance") or {}).get("name") or "pipeline plan"))
    fig.tight_layout()
    return fig
